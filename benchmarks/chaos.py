"""Fault injection on the local control plane (issue 17): scenarios x seeds, invariants after each.

One control plane (hack/cluster.py, kwok for kubelets) serves every run. A run starts from a
clean cluster (no workload, no NodeClaim, no kwok Node), starts ``karpenter-py controller`` as
its own process (benchmarks/e2e.py's pieces), creates a Deployment of 10-20 pods that select the
run's NodePool (consolidation off), injects the scenario's fault at a moment drawn from the
seed, waits for convergence (every pod Running, every NodeClaim Initialized, unchanged for
``SETTLE`` seconds) within ``--deadline``, checks the invariants of benchmarks/invariants.py
and tears down through the controller (the NodeClaims deleted, their finalizers run).

    python benchmarks/chaos.py --scenarios kill-random,bare-nodes --seeds 5 --out chaos.json

Scenarios:

* ``kill-random``: SIGKILL the controller at a seeded moment 0.5-6 s into the scale-up, restart.
* ``kill-after-nodeclaims``: SIGKILL it as soon as its first NodeClaim is seen, restart.
* ``bare-nodes``: every Node registers without Karpenter's labels (``KWOK_BARE_NODES``) and the
  controller's registration writes (its label sync) wait 3 s in the fault proxy; no extra node
  may be bought meanwhile (issue 17, fault 1).
* ``api-faults``: for 10 s from a seeded moment of the scale-up, a quarter of the controller's
  API requests answer 429, 500 or 503 or lose their connection (benchmarks/faultproxy.py); no
  ERROR traceback may be logged for them (issue 17, fault 2).
* ``aws-faults`` (AWS world): for 15 s from a seeded moment of the scale-up, 30 % of the
  controller's AWS calls are throttled (``RequestLimitExceeded``) or answer 500/503, and a
  CreateFleet, CreateTags or TerminateInstances may take effect with its answer lost; the
  controller's EC2 calls per minute meanwhile stay under ``EC2_CALLS_PER_MINUTE``.
* ``aws-ice`` (AWS world): a seeded half of the cheapest on-demand offerings of the pool's
  types has no capacity for the whole run (moto's CreateFleet answers
  ``InsufficientInstanceCapacity`` for them, tests/aws/fleetfaults.py), and every offering has
  none for a seeded 3-6 s window of the scale-up; the pods land on other offerings.
* ``aws-outage`` (AWS world): for 20 s from a seeded moment of the scale-up, every AWS call's
  connection is reset.
* ``hostile-messages`` (AWS world): once a NodeClaim has its instance, 1,000 malformed messages
  (bad JSON, 256 KB bodies, deep nesting, NUL characters, unknown instance IDs, some sent twice)
  go to the interruption queue with one real spot interruption warning for that instance
  among them; the queue drains and the NodeClaim is deleted (and replaced) within
  ``HOSTILE_LIMIT`` s, and the controller neither exits nor logs a traceback.

An AWS-world scenario (``Scenario.world == "aws"``) runs the AWS provider against moto's server
in this process (benchmarks/awsworld.py: the tagged VPC, the EC2NodeClass, the fake kubelet that
turns moto's instances into Nodes); the controller reaches moto through the AWS fault proxy when
the scenario has an ``aws_policy``, and the invariants' instances are moto's pending and running
instances of the cluster, each named for the NodeClaim of its ``karpenter.sh/nodeclaim`` tag.

The JSON: ``{"runs", "violations", "scenarios": [{"name", "runs", "faults", "violations",
"converge_p50_s", "converge_p95_s"}], "results": [one entry per run]}``; a table is printed.

A scenario is an :data:`Inject` coroutine (it gets the :class:`Run`: the runner's client, the
controller it may kill and restart, the seeded generator, the fault proxy; it returns how many
faults it injected and returns once the fault is over), the controller's extra environment,
and the fault proxy's policy if the controller should talk through one. Add it to
``SCENARIOS``; the invariants are checked for every scenario alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

if __package__ in (None, ""):  # run as a script: the repo root holds benchmarks/ and tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.awsworld import EC2NODECLASSES, ZONES, AwsWorld, aws_world
from benchmarks.e2e import (
    KWOKNODECLASS,
    LocalCluster,
    controller_env,
    deployment,
    install_crds,
    nodepool,
    start_controller,
    stop_controller,
    wait_nodeclass_ready,
)
from benchmarks.faultproxy import (
    AwsFaultProxy,
    AwsFlaky,
    AwsPolicy,
    FaultProxy,
    Flaky,
    Outage,
    Policy,
    SlowRegistration,
)
from benchmarks.interruption import spot_warning
from benchmarks.invariants import Instance, Observed, Violation, call_rate, check
from karpenter_py.cloudprovider.kwok import KWOK_NODE_LABEL
from karpenter_py.kube import KWOKNODECLASSES, NODEPOOLS, PatchType
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import load_config
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import DEPLOYMENTS, NODECLAIMS, NODES, PODS, Resource
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import AWS_LABEL_INSTANCE_CPU, LABEL_NODEPOOL, TAG_NODECLAIM
from tests.aws.fleetfaults import Offering as FleetOffering
from tests.aws.fleetfaults import insufficient_capacity
from tests.cluster.awskubelet import running_kubelet
from tests.cluster.harness import is_true

write_kubeconfig: Any = importlib.import_module("cluster").write_kubeconfig  # hack/, via e2e

POOL = "chaos"
APP = "chaos"
NAMESPACE = "default"
SETTLE = 3.0  # seconds the converged state must hold (a late extra NodeClaim shows in that time)
POLL = 0.5
TEARDOWN = 60.0

World = Literal["kwok", "aws"]


def chaos_nodepool(world: World = "kwok") -> dict[str, Any]:
    """benchmarks/e2e.py's pool for the world's provider with small types (under 5 vCPU, so a
    run buys several nodes) and consolidation off: a node left empty was bought for nobody, not
    on its way out."""
    template = nodepool(world)["spec"]["template"]
    for req in template["spec"]["requirements"]:
        if req["key"].endswith("/instance-cpu"):
            req["values"] = ["5"]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": POOL},
        "spec": {
            "template": template,
            "disruption": {"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]},
        },
    }


@dataclass(frozen=True)
class Workload:
    replicas: int
    cpu: str

    @staticmethod
    def drawn(rng: random.Random) -> Workload:
        return Workload(rng.randint(10, 20), rng.choice(("500m", "1", "1500m")))

    def body(self) -> dict[str, Any]:
        """The Deployment; its pods select the NodePool, as the pods of issue 17's fault 1."""
        body = deployment(APP, self.replicas, self.cpu, "512Mi")
        body["spec"]["template"]["spec"]["nodeSelector"] = {LABEL_NODEPOOL: POOL}
        return body


# ----------------------------------------------------------------------------- the controller
class Controller:
    """The controller subprocess over its lives (each restart logs to its own file)."""

    def __init__(self, env: dict[str, str], run_dir: Path) -> None:
        self.env = env
        self.run_dir = run_dir
        self.lives: list[subprocess.Popen[bytes]] = []
        self.ended: set[int] = set()  # pids this runner killed or stopped
        self.killed_at: list[float] = []  # monotonic

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        return self.lives[-1]

    async def start(self) -> None:
        log = self.run_dir / f"controller-{len(self.lives)}.log"
        self.lives.append(await asyncio.to_thread(start_controller, self.env, log))

    async def ready(self, limit: float = 60.0) -> None:
        url = f"http://127.0.0.1:{self.env['HEALTH_PROBE_PORT']}/readyz"
        start = time.monotonic()
        while time.monotonic() - start < limit:
            with contextlib.suppress(OSError):
                if await asyncio.to_thread(_status, url) == 200:
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited with {self.proc.returncode} at start")
            await asyncio.sleep(0.2)
        raise RuntimeError(f"controller not ready after {limit} s")

    def kill(self) -> None:
        self.ended.add(self.proc.pid)
        self.killed_at.append(time.monotonic())
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    async def restart_after_kill(self, pause: float) -> None:
        self.kill()
        await asyncio.sleep(pause)
        await self.start()

    def stop(self) -> None:
        if self.lives and self.proc.poll() is None:
            self.ended.add(self.proc.pid)
            stop_controller(self.proc)

    def crashes(self) -> list[Violation]:
        """Lives that ended by themselves (not killed by the runner, not stopped at the end)."""
        return [
            Violation("controller-exited", f"life {i}", f"exit code {p.returncode}")
            for i, p in enumerate(self.lives)
            if p.returncode is not None and p.pid not in self.ended
        ]

    def log_lines(self) -> list[str]:
        lines: list[str] = []
        for i in range(len(self.lives)):
            path = self.run_dir / f"controller-{i}.log"
            lines += path.read_text(errors="replace").splitlines(keepends=True)
        return lines


def _status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return int(answer.status)


# ----------------------------------------------------------------------------- scenarios
@dataclass
class Run:
    """What a scenario's fault may use: the client, the controller, the seeded generator, and
    the fault proxy the controller talks through (None: straight to the apiserver); in the AWS
    world, moto's world and the AWS fault proxy. A scenario may add the violations only it can
    see (the run reports them with the invariants')."""

    client: KubeClient
    controller: Controller
    rng: random.Random
    proxy: FaultProxy | None = None
    aws: AwsWorld | None = None
    aws_proxy: AwsFaultProxy | None = None
    violations: list[Violation] = field(default_factory=list)
    # What a fault leaves in place until the run ends (closed after the invariants' check).
    until_end: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)


Inject = Callable[[Run], Awaitable[int]]  # injects the fault; returns how many were injected


async def kill_random(run: Run) -> int:
    await asyncio.sleep(run.rng.uniform(0.5, 6.0))
    await run.controller.restart_after_kill(run.rng.uniform(0.0, 1.0))
    return 1


async def kill_after_nodeclaims(run: Run) -> int:
    await first_created(run.client, NODECLAIMS)
    await run.controller.restart_after_kill(run.rng.uniform(0.0, 1.0))
    return 1


async def api_faults(run: Run) -> int:
    """From a seeded moment of the scale-up, ``API_FAULT_SECONDS`` of failing API requests."""
    assert run.proxy is not None
    assert isinstance(run.proxy.policy, Flaky)
    await asyncio.sleep(run.rng.uniform(0.0, 2.0))
    run.proxy.policy.active = True
    await asyncio.sleep(API_FAULT_SECONDS)
    run.proxy.policy.active = False
    return run.proxy.faults


async def held_registrations(run: Run) -> int:
    """The proxy holds every registration for the whole run: counted once the run is over,
    so the count is of the registrations the first pods waited on."""
    assert run.proxy is not None
    await first_created(run.client, NODECLAIMS)
    await asyncio.sleep(REGISTRATION_DELAY + 2 * POLL)
    return run.proxy.faults


# ----------------------------------------------------------------------------- AWS scenarios
async def aws_faults(run: Run) -> int:
    """From a seeded moment of the scale-up, ``AWS_FAULT_SECONDS`` of failing AWS calls; the
    controller's EC2 call rate over them is checked against ``EC2_CALLS_PER_MINUTE``."""
    assert run.aws_proxy is not None
    assert isinstance(run.aws_proxy.policy, AwsFlaky)
    begin, end = await aws_window(run, run.aws_proxy.policy, AWS_FAULT_SECONDS)
    ec2 = sum(1 for t, call in run.aws_proxy.calls if begin <= t < end and call.service == "ec2")
    rate = ec2 * 60.0 / (end - begin)
    print(f"[chaos] aws-faults: {ec2} EC2 calls in the window, {rate:.0f}/min", file=sys.stderr)
    run.violations += call_rate("ec2", ec2, end - begin, EC2_CALLS_PER_MINUTE)
    return run.aws_proxy.faults


async def aws_outage(run: Run) -> int:
    assert run.aws_proxy is not None
    assert isinstance(run.aws_proxy.policy, Outage)
    await aws_window(run, run.aws_proxy.policy, AWS_OUTAGE_SECONDS)
    return run.aws_proxy.faults


async def aws_ice(run: Run) -> int:
    """Some offerings without capacity for the whole run, every one for a seeded window."""
    assert run.aws is not None
    some, everything = ice_offerings(run.aws.types.values(), run.rng)
    faults = run.until_end.enter_context(insufficient_capacity(*some))
    await scale_up_moment(run)
    faults.failing |= everything
    await asyncio.sleep(run.rng.uniform(*ICE_WINDOW))
    faults.failing -= everything - some
    return len(faults.requests)  # the CreateFleet calls made under the fault so far


def ice_offerings(
    types: Iterable[InstanceType], rng: random.Random
) -> tuple[set[FleetOffering], set[FleetOffering]]:
    """(a seeded half of the ``2 * ICE_SOME`` cheapest on-demand offerings of the types under 5
    vCPU, which the chaos pool buys first; every on-demand offering)."""
    everything: dict[FleetOffering, float] = {}
    small: list[tuple[float, FleetOffering]] = []
    for it in types:
        cpus = it.requirements.get(AWS_LABEL_INSTANCE_CPU, frozenset({"0"}))
        for o in it.offerings:
            if o.capacity_type != "on-demand":
                continue
            key = (it.name, o.zone, o.capacity_type)
            everything[key] = o.price
            if all(int(c) < 5 for c in cpus):
                small.append((o.price, key))
    cheapest = [key for _, key in sorted(small)[: 2 * ICE_SOME]]
    return set(rng.sample(cheapest, min(ICE_SOME, len(cheapest)))), set(everything)


async def hostile_messages(run: Run) -> int:
    """One real spot interruption warning among ``HOSTILE_MESSAGES - 1`` malformed messages."""
    assert run.aws is not None
    claim, provider_id = await first_launched(run.client)
    zone, instance_id = provider_id.removeprefix("aws:///").split("/")
    bodies = hostile_bodies(run.rng, spot_warning(instance_id, zone), HOSTILE_MESSAGES)
    sqs, queue = run.aws.clients.sqs, run.aws.queue_url
    for batch in sqs_batches(bodies):
        entries = [{"Id": str(i), "MessageBody": b} for i, b in enumerate(batch)]
        await sqs.send_message_batch(QueueUrl=queue, Entries=entries)
    start = time.monotonic()
    depth, handled = -1, False
    while time.monotonic() - start < HOSTILE_LIMIT:
        attrs = await sqs.get_queue_attributes(
            QueueUrl=queue,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )
        depth = sum(int(v) for v in attrs["Attributes"].values())
        claims = (await run.client.list(NODECLAIMS)).items
        handled = all(
            c["metadata"]["name"] != claim or c["metadata"].get("deletionTimestamp") for c in claims
        )
        if depth == 0 and handled:
            return len(bodies) - 1
        await asyncio.sleep(POLL)
    if depth:
        run.violations.append(Violation("queue-not-drained", queue, f"{depth} messages left"))
    if not handled:
        detail = f"not deleted {HOSTILE_LIMIT} s after its spot interruption warning"
        run.violations.append(Violation("interruption-not-handled", claim, detail))
    return len(bodies) - 1


async def first_launched(client: KubeClient) -> tuple[str, str]:
    """(name, provider ID) of the first NodeClaim whose instance is launched."""
    while True:
        for c in (await client.list(NODECLAIMS)).items:
            if pid := (c.get("status") or {}).get("providerID"):
                return str(c["metadata"]["name"]), str(pid)
        await asyncio.sleep(POLL)


SPOT_WARNING = "EC2 Spot Instance Interruption Warning"


def _bad_json(rng: random.Random) -> str:
    head = json.dumps({"detail-type": SPOT_WARNING, "detail": {"instance-id": "x"}})
    return head[: rng.randrange(1, len(head) - 1)]  # cut short: never valid JSON


def _huge(rng: random.Random) -> str:
    head = json.dumps({"detail-type": SPOT_WARNING, "source": "aws.ec2", "detail": {"pad": ""}})
    return head.replace('"pad": ""', '"pad": "' + "x" * (SQS_MAX_BODY - len(head) - 8) + '"')


def _deep(rng: random.Random) -> str:
    depth = rng.choice((1_000, 10_000, 100_000))
    return "[" * depth + "]" * depth


def _nul(rng: random.Random) -> str:
    detail = {"instance-id": "i-\u0000" + "0" * rng.randrange(16), "instance-action": "\u0000"}
    return json.dumps({"detail-type": SPOT_WARNING + "\u0000", "detail": detail})


def _unknown_instance(rng: random.Random) -> str:
    return spot_warning(f"i-{rng.getrandbits(64):016x}", rng.choice(ZONES))


# Malformed message makers and their weights (256 KB bodies rarer: 13 MB of them already).
HOSTILE_KINDS: tuple[tuple[Callable[[random.Random], str], int], ...] = (
    (_bad_json, 5),
    (_huge, 1),
    (_deep, 2),
    (_nul, 5),
    (_unknown_instance, 5),
)


def hostile_bodies(rng: random.Random, real: str, count: int) -> list[str]:
    """``count`` bodies: ``count - 1`` malformed ones (a tenth of them sent again right after)
    with ``real`` at a seeded place."""
    makers, weights = zip(*HOSTILE_KINDS, strict=True)
    bodies: list[str] = []
    while len(bodies) < count - 1:
        body = rng.choices(makers, weights)[0](rng)
        bodies.append(body)
        if len(bodies) < count - 1 and rng.random() < 0.1:
            bodies.append(body)
    bodies.insert(rng.randrange(len(bodies) + 1), real)
    return bodies


def sqs_batches(bodies: Sequence[str]) -> list[list[str]]:
    """``bodies`` in order, in SendMessageBatch batches: at most 10, at most 256 KB together."""
    batches: list[list[str]] = []
    size = 0
    for body in bodies:
        n = len(body.encode())
        if not batches or len(batches[-1]) == 10 or size + n > SQS_MAX_BODY:
            batches.append([])
            size = 0
        batches[-1].append(body)
        size += n
    return batches


async def aws_window(run: Run, policy: AwsFlaky | Outage, seconds: float) -> tuple[float, float]:
    """Turn ``policy`` on for ``seconds`` from a seeded moment of the scale-up; (begin, end)."""
    await scale_up_moment(run)
    begin = time.monotonic()
    policy.active = True
    await asyncio.sleep(seconds)
    policy.active = False
    return begin, time.monotonic()


async def scale_up_moment(run: Run) -> None:
    """Return at a seeded moment 0-2 s after the first NodeClaim: in the AWS world the first
    launch comes seconds after the Deployment (the class's catalog, the batch windows), so a
    window drawn from the Deployment's creation could end before any launch."""
    await first_created(run.client, NODECLAIMS)
    await asyncio.sleep(run.rng.uniform(0.0, 2.0))


def cloud_instance(raw: Mapping[str, Any]) -> Instance:
    """A moto instance as the invariants see it: its provider ID and its NodeClaim tag."""
    zone = raw["Placement"]["AvailabilityZone"]
    tags = {t["Key"]: t["Value"] for t in raw.get("Tags") or []}
    return Instance(f"aws:///{zone}/{raw['InstanceId']}", tags.get(TAG_NODECLAIM, ""))


async def first_created(client: KubeClient, resource: Resource) -> None:
    """Return as soon as one object of ``resource`` exists."""
    listed = await client.list(resource)
    if listed.items:
        return
    async with client.watch(resource, resource_version=listed.resource_version) as stream:
        async for event in stream:
            if event.type == "ADDED":
                return


@dataclass(frozen=True)
class Scenario:
    name: str
    inject: Inject
    env: Mapping[str, str] = field(default_factory=dict)
    # The fault proxy's policy for the run's generator; None: no proxy.
    policy: Callable[[random.Random], Policy] | None = None
    world: World = "kwok"
    # The AWS fault proxy's policy (AWS world only); None: the controller talks to moto.
    aws_policy: Callable[[random.Random], AwsPolicy] | None = None
    # Seconds to converge at least (over ``--deadline``) for a fault that takes longer itself.
    deadline: float = 0.0


API_FAULT_SECONDS = 10.0
API_FAULT_RATE = 0.25
REGISTRATION_DELAY = 3.0  # longer than the batch idle window (1 s): a round sees bare Nodes
AWS_FAULT_SECONDS = 15.0
AWS_FAULT_RATE = 0.3
AWS_OUTAGE_SECONDS = 20.0
# Without faults (aws-faults' window at rate 0, 5 seeds) the controller made 60-240 EC2 calls per
# minute over the window, the most for a 20-node workload (the largest a seed draws); with the
# faults, 80-480 (the same 20 nodes: 30 % failures retried, lost answers looked up again). The
# bound is 2.5 times the most without faults: a controller that relaunched on a lost answer or
# retried without backing off would pass it.
EC2_CALLS_PER_MINUTE = 600.0
ICE_SOME = 6
HOSTILE_MESSAGES = 1_000
HOSTILE_LIMIT = 45.0  # seconds for the queue to drain and the interruption to be handled
SQS_MAX_BODY = 256 * 1024
ICE_WINDOW = (3.0, 6.0)  # seconds every offering has no capacity (seeded)

SCENARIOS: Mapping[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("kill-random", kill_random),
        Scenario("kill-after-nodeclaims", kill_after_nodeclaims),
        Scenario(
            "bare-nodes",
            held_registrations,
            {"KWOK_BARE_NODES": "true"},
            lambda _: SlowRegistration(REGISTRATION_DELAY),
        ),
        Scenario("api-faults", api_faults, policy=lambda rng: Flaky(rng, API_FAULT_RATE)),
        Scenario(
            "aws-faults",
            aws_faults,
            world="aws",
            aws_policy=lambda rng: AwsFlaky(rng, AWS_FAULT_RATE),
        ),
        Scenario("aws-ice", aws_ice, world="aws"),
        Scenario("aws-outage", aws_outage, world="aws", aws_policy=lambda _: Outage()),
        # Sending 1,000 messages (13 MB) to moto and the controller reading them through
        # take about 40 s before the interruption is handled.
        Scenario("hostile-messages", hostile_messages, world="aws", deadline=120.0),
    )
}


# ----------------------------------------------------------------------------- one run
@dataclass
class Listed:
    nodeclaims: list[KubeObject]
    nodes: list[KubeObject]
    pods: list[KubeObject]
    cloud: list[Instance] | None = None  # the AWS world's instances (moto's answer)

    def instances(self) -> list[Instance]:
        """The AWS world's instances; else the kwok provider's: its Nodes (labelled
        ``kwok.x-k8s.io/node=fake``), each named for its NodeClaim. Bare Nodes too, which the
        provider's own ``list`` (it selects ``karpenter.sh/nodepool``) does not see until they
        register."""
        if self.cloud is not None:
            return self.cloud
        return [
            Instance(str(n["spec"].get("providerID", "")), str(n["metadata"]["name"]))
            for n in self.nodes
            if (n["metadata"].get("labels") or {}).get(KWOK_NODE_LABEL) == "fake"
        ]


async def listed(client: KubeClient, aws: AwsWorld | None = None) -> Listed:
    cloud = None
    if aws is not None:
        cloud = [cloud_instance(i) for i in await aws.instances("pending", "running")]
    return Listed(
        list((await client.list(NODECLAIMS)).items),
        list((await client.list(NODES)).items),
        list((await client.list(PODS, namespace=NAMESPACE, label_selector=f"app={APP}")).items),
        cloud,
    )


def converged(seen: Listed, replicas: int) -> bool:
    """Every pod of the workload Running, every NodeClaim Initialized, nothing being deleted."""
    running = [
        p
        for p in seen.pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]
    return (
        len(running) == replicas
        and len(seen.pods) == replicas
        and all(
            is_true(c, "Initialized") and not c["metadata"].get("deletionTimestamp")
            for c in seen.nodeclaims
        )
    )


def _claim_names(seen: Listed) -> frozenset[str]:
    return frozenset(str(c["metadata"]["name"]) for c in seen.nodeclaims)


async def wait_converged(
    client: KubeClient, replicas: int, start: float, deadline: float, aws: AwsWorld | None = None
) -> tuple[float | None, Listed]:
    """(seconds from ``start`` to the first moment of a converged state that then held for
    ``SETTLE`` s with the same NodeClaims, or None at ``deadline``; the last listing)."""
    since: tuple[float, frozenset[str]] | None = None
    while True:
        now = time.monotonic()
        seen = await listed(client, aws)
        if not converged(seen, replicas):
            since = None
        elif since is None or since[1] != _claim_names(seen):
            since = (now, _claim_names(seen))
        elif now - since[0] >= SETTLE:
            return round(since[0] - start, 2), seen
        if now - start > deadline:
            return None, seen
        await asyncio.sleep(POLL)


async def clean(client: KubeClient, aws: AwsWorld | None = None) -> list[str]:
    """No workload, no NodeClaim, no instance. The controller (running) deletes the NodeClaims
    and their instances; what is still there after ``TEARDOWN`` s has its finalizers removed
    (a kwok Node deleted, a moto instance terminated) and is named in the answer."""
    with contextlib.suppress(NotFoundError):
        await client.delete(DEPLOYMENTS, APP, namespace=NAMESPACE)
    for claim in (await client.list(NODECLAIMS)).items:
        with contextlib.suppress(NotFoundError):
            await client.delete(NODECLAIMS, claim["metadata"]["name"])
    start = time.monotonic()
    while True:
        seen = await listed(client, aws)
        if not seen.nodeclaims and not seen.instances() and not seen.pods:
            return []
        if time.monotonic() - start > TEARDOWN:
            break
        await asyncio.sleep(POLL)
    left = [f"NodeClaim {c['metadata']['name']}" for c in seen.nodeclaims]
    for claim in seen.nodeclaims:
        with contextlib.suppress(NotFoundError):
            await client.patch(
                NODECLAIMS,
                claim["metadata"]["name"],
                {"metadata": {"finalizers": None}},
                patch_type=PatchType.MERGE,
            )
    if aws is not None:
        ids = [pid.rsplit("/", 1)[-1] for pid, _ in seen.instances()]
        left += [f"instance {i}" for i in ids]
        if ids:
            await aws.clients.ec2.terminate_instances(InstanceIds=ids)
        return left
    for _, name in seen.instances():
        left.append(f"Node {name}")
        with contextlib.suppress(NotFoundError):
            await client.delete(NODES, name)
    return left


async def one_run(
    client: KubeClient,
    cluster: Any,
    scenario: Scenario,
    seed: int,
    deadline: float,
    run_dir: Path,
    world: AwsWorld | None = None,
) -> dict[str, Any]:
    rng = random.Random(f"{scenario.name}/{seed}")
    load = Workload.drawn(rng)
    aws = world if scenario.world == "aws" else None
    if scenario.world == "aws" and aws is None:
        raise ValueError(f"{scenario.name} needs the AWS world")
    env = dict(scenario.env)
    aws_proxy = None
    if aws is not None:
        env = {**aws.controller_env(), **env}
        if scenario.aws_policy is not None:
            aws_proxy = AwsFaultProxy(aws.endpoint, scenario.aws_policy(rng))
            await aws_proxy.start()
            env["AWS_ENDPOINT_URL"] = aws_proxy.url
    proxy = None
    if scenario.policy is not None:
        proxy = FaultProxy(cluster.server, cluster.ssl_context(), scenario.policy(rng))
        await proxy.start()
        kubeconfig = run_dir / "kubeconfig"
        write_kubeconfig(
            kubeconfig, proxy.url, cluster.ca_file.read_bytes(), cluster.token, "chaos"
        )
    else:
        kubeconfig = cluster.kubeconfig_path
    controller = Controller(controller_env(kubeconfig, env), run_dir)
    stack = contextlib.AsyncExitStack()
    run = Run(client, controller, rng, proxy, aws, aws_proxy, until_end=stack)
    violations: list[Violation] = []
    faults = 0
    took: float | None = None
    seen = Listed([], [], [])
    start = time.monotonic()
    try:
        await controller.start()
        await controller.ready()
        if aws is not None:
            await wait_nodeclass_ready(client)
            if not aws.types:
                await aws.load_types(client)
            await stack.enter_async_context(running_kubelet(aws.kubelet(client)))
        # A run starts from a clean cluster: whatever a failed run before it left is gone.
        violations += [
            Violation("dirty-start", what, "left by a run before")
            for what in await clean(client, aws)
        ]
        start = time.monotonic()
        await client.create(DEPLOYMENTS, load.body(), namespace=NAMESPACE)
        faults = await scenario.inject(run)
        violations += run.violations
        took, seen = await wait_converged(client, load.replicas, start, deadline, aws)
        if took is None:
            violations.append(Violation("not-converged", scenario.name, f"after {deadline} s"))
        observed = Observed(
            seen.nodeclaims, seen.nodes, seen.pods, seen.instances(), controller.log_lines()
        )
        grace = timedelta(seconds=deadline)
        violations += check(observed, datetime.now(UTC), finalizer_grace=grace)
        left = await clean(client, aws)
        violations += [Violation("teardown-stuck", what, f"after {TEARDOWN} s") for what in left]
    except Exception as e:  # a broken run is one result, not the end of the matrix
        violations.append(Violation("run-error", scenario.name, repr(e)))
    finally:
        await stack.aclose()
        controller.stop()
        for each in (proxy, aws_proxy):
            if each is not None:
                await each.stop()
    violations += controller.crashes()
    for v in violations:
        print(f"[chaos] {scenario.name} seed {seed}: {v}", file=sys.stderr, flush=True)
    return {
        "scenario": scenario.name,
        "seed": seed,
        "pods": load.replicas,
        "cpu": load.cpu,
        "faults": faults,
        "converge_s": took,
        "nodeclaims": len(seen.nodeclaims),
        "controller_lives": len(controller.lives),
        "killed_at_s": [round(t - start, 2) for t in controller.killed_at],
        "violations": [str(v) for v in violations],
    }


# ----------------------------------------------------------------------------- the matrix
def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least the first
    return ordered[int(rank) - 1]


def summarize(names: Sequence[str], results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    scenarios = []
    for name in names:
        runs = [r for r in results if r["scenario"] == name]
        times = [r["converge_s"] for r in runs if r["converge_s"] is not None]
        scenarios.append(
            {
                "name": name,
                "runs": len(runs),
                "faults": sum(r["faults"] for r in runs),
                "violations": sum(len(r["violations"]) for r in runs),
                "converge_p50_s": percentile(times, 50),
                "converge_p95_s": percentile(times, 95),
            }
        )
    return {
        "runs": len(results),
        "violations": sum(s["violations"] for s in scenarios),
        "scenarios": scenarios,
        "results": list(results),
    }


def table(summary: Mapping[str, Any]) -> str:
    def secs(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    rows = [("scenario", "runs", "faults", "violations", "p50 s", "p95 s")]
    rows += [
        (
            s["name"],
            str(s["runs"]),
            str(s["faults"]),
            str(s["violations"]),
            secs(s["converge_p50_s"]),
            secs(s["converge_p95_s"]),
        )
        for s in summary["scenarios"]
    ]
    rows.append(("total", str(summary["runs"]), "", str(summary["violations"]), "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


async def pool_for(client: KubeClient, world: World) -> None:
    """The run's NodePool for ``world`` (its class reference is immutable: a new pool). No
    controller holds it: the pool has no finalizer, and the runs leave no NodeClaim."""
    with contextlib.suppress(NotFoundError):
        await client.delete(NODEPOOLS, POOL)
    while True:
        try:
            await client.get(NODEPOOLS, POOL)
        except NotFoundError:
            break
        await asyncio.sleep(POLL)
    await client.create(NODEPOOLS, chaos_nodepool(world))


async def matrix(names: Sequence[str], seeds: int, deadline: float, keep: bool) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="karpy-chaos-"))
    cluster = LocalCluster(state_dir=state)
    cluster.start()
    results = []
    try:
        async with (
            KubeClient(load_config(str(cluster.kubeconfig_path)), qps=500, burst=1000) as c,
            contextlib.AsyncExitStack() as stack,
        ):
            await install_crds(c)
            world = None
            if any(SCENARIOS[name].world == "aws" for name in names):
                world = await stack.enter_async_context(aws_world())
                await c.create(EC2NODECLASSES, world.nodeclass())
            await c.create(KWOKNODECLASSES, KWOKNODECLASS)
            for name in names:
                await pool_for(c, SCENARIOS[name].world)
                for seed in range(seeds):
                    run_dir = state / f"{name}-{seed}"
                    run_dir.mkdir()
                    scenario = SCENARIOS[name]
                    limit = max(deadline, scenario.deadline)
                    result = await one_run(c, cluster, scenario, seed, limit, run_dir, world)
                    print(f"[chaos] {json.dumps(result)}", file=sys.stderr, flush=True)
                    results.append(result)
    finally:
        cluster.stop()
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
        else:
            print(f"[chaos] logs kept in {state}", file=sys.stderr)
    return summarize(names, results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated")
    parser.add_argument("--seeds", type=int, default=20, help="runs per scenario")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds to converge")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the controller logs")
    args = parser.parse_args(argv)
    names = [n for n in args.scenarios.split(",") if n]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {unknown} (known: {', '.join(SCENARIOS)})")
    summary = asyncio.run(matrix(names, args.seeds, args.deadline, args.keep))
    print(table(summary))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if summary["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
