"""Fault injection on the local control plane (issue 17): scenarios x seeds, invariants after each.

One control plane (hack/cluster.py, kwok for kubelets) serves every run. A run starts from a
clean cluster (no workload, no NodeClaim, no kwok Node, the NodePool as created), starts
``karpenter-py controller`` as its own process (benchmarks/e2e.py's pieces), creates a Deployment
of 10-20 pods (unless the scenario draws its own) that select the run's NodePool (consolidation
off), injects the scenario's fault at a moment drawn from the
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
* ``apiserver-restart``: the kube-apiserver is stopped and started again at a seeded moment of
  the scale-up. Its watch cache restarts at etcd's revision, so the controller's informers
  resume their watches into genuine 410s and relist (``relists`` in the run's result).
* ``watch-cuts``: for a seeded stretch of the scale-up, every open watch stream is reset mid-
  stream four times, and half the watches opened meanwhile are answered with a 410 ``Expired``
  event (benchmarks/faultproxy.py): resumed watches and relists must lose nothing.
* ``inflight-limit``: for ``INFLIGHT_SECONDS`` the proxy admits at most 1-5 (seeded) of the
  controller's requests at once and answers 429 beyond, as an apiserver's max-requests-inflight
  does for a throttled ServiceAccount (``system:masters``, the controller's identity here, is
  never throttled by the real one).
* ``apf-throttle``: the controller runs as a ServiceAccount (cluster-admin by RBAC, but not in
  ``system:masters``), and for ``INFLIGHT_SECONDS`` from a seeded moment of the scale-up the
  apiserver's API Priority and Fairness puts its requests on a level of 3 seats that rejects the
  rest with 429 (benchmarks/apf.py); the faults are the apiserver's own rejection count.
* ``leader-kill``: two replicas with leader election on one Lease; at a seeded moment 0.5-6 s
  into the scale-up the one holding the Lease is SIGKILLed and a new standby started; a live
  replica (usually the old standby) must take over within ``TAKEOVER_BOUND`` (the 15 s lease and
  two jittered retries).
* ``bad-input``: during the scale-up, invalid NodePools and NodeClaims (refused by the CRDs' CEL
  rules, naming the field), a NodePool whose KWOKNodeClass is missing (its status says so, nothing
  launched) and pods no node can take, with 250 KB annotations and 63-character label values
  (Pending, reported unschedulable by Karpenter's event, no node bought); removed at teardown.
* ``drift-kill``: once the workload (under a PDB of maxUnavailable 1) has converged, a template
  label on the NodePool drifts every NodeClaim; the controller is SIGKILLed right after the first
  drift command's taint, its replacement's create or its candidate's delete (seed % 3), then
  restarted. Converged means every NodeClaim carries the new template and none is Drifted; the
  pods' availability is watched meanwhile and may never drop below what the PDB allows.
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
* ``aws-vanish`` (AWS world): 0-8 s after the first launch, 1-3 launched instances are
  terminated behind the controller's back (as a user or EC2 would), and their state-change
  notifications go to the interruption queue as EventBridge would send them; the fake kubelet
  deletes their Nodes as the cloud node controller does, and their pods must run elsewhere.
* ``hostile-messages`` (AWS world): once a NodeClaim has its instance, 1,000 malformed messages
  (bad JSON, 256 KB bodies, deep nesting, NUL characters, unknown instance IDs, some sent twice)
  go to the interruption queue with one real spot interruption warning for that instance
  among them; the queue drains and the NodeClaim is deleted (and replaced) within
  ``HOSTILE_LIMIT`` s, and the controller neither exits nor logs a traceback.

Where the controller talks through the fault proxy, its request rate while the fault lasts
(the window a scenario records in :attr:`Run.fault_window`) may not exceed
``MAX_API_CALLS_PER_MINUTE``: retries must back off, not storm.

An AWS-world scenario (``Scenario.world == "aws"``) runs the AWS provider against moto's server
in this process (benchmarks/awsworld.py: the tagged VPC, the EC2NodeClass, the fake kubelet that
turns moto's instances into Nodes); the controller reaches moto through the AWS fault proxy when
the scenario has an ``aws_policy``, and the invariants' instances are moto's pending and running
instances of the cluster, each named for the NodeClaim of its ``karpenter.sh/nodeclaim`` tag.

The JSON: ``{"runs", "violations", "scenarios": [{"name", "runs", "faults", "violations",
"converge_p50_s", "converge_p95_s"}], "results": [one entry per run, with what its scenario
measured]}``; a table is printed.

A scenario is an :data:`Inject` coroutine (it gets the :class:`Run`: the runner's client, the
controller it may kill and restart, the seeded generator, the fault proxy; it returns how many
faults it injected and returns once the fault is over), the controller's extra environment,
and the fault proxy's policy if the controller should talk through one; optionally a teardown
for what it created, how many controller replicas start before the workload, what else
convergence needs (``settled``) and its own workload. What the fault itself broke while it
lasted goes to ``Run.violations``. Add it to ``SCENARIOS``; the invariants are checked for
every scenario alike.
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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, Literal

if __package__ in (None, ""):  # run as a script: the repo root holds benchmarks/ and tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import hostile
from benchmarks.apf import (
    rejected_requests,
    remove_leftovers,
    service_account_token,
    tight_priority_level,
)
from benchmarks.awsworld import EC2NODECLASSES, ZONES, AwsWorld, aws_world
from benchmarks.e2e import (
    KWOKNODECLASS,
    LocalCluster,
    controller_env,
    deployment,
    free_port,
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
    ExpiringWatches,
    FaultProxy,
    Flaky,
    Outage,
    Policy,
    SlowRegistration,
    passthrough,
)
from benchmarks.interruption import spot_warning
from benchmarks.invariants import (
    Availability,
    Instance,
    Observed,
    Violation,
    available_pods,
    bounded_call_rate,
    call_rate,
    check,
    disrupted_taints,
    pdb_respected,
    pods_placed,
)
from karpenter_py.cloudprovider.kwok import KWOK_NODE_LABEL
from karpenter_py.kube import (
    KWOKNODECLASSES,
    NODEPOOLS,
    PODDISRUPTIONBUDGETS,
    InvalidError,
    PatchType,
)
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import load_config
from karpenter_py.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import (
    DEPLOYMENTS,
    LEASES,
    NAMESPACES,
    NODECLAIMS,
    NODES,
    PODS,
    Resource,
)
from karpenter_py.model.api.nodepool import CONDITION_NODE_CLASS_READY
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import AWS_LABEL_INSTANCE_CPU, LABEL_NODEPOOL, TAG_NODECLAIM
from tests.aws.fleetfaults import Offering as FleetOffering
from tests.aws.fleetfaults import insufficient_capacity
from tests.cluster.awskubelet import running_kubelet
from tests.cluster.harness import condition, events_for, is_true, pdb
from tests.unit.cloudprovider.aws.interruption_samples import state_change

write_kubeconfig: Any = importlib.import_module("cluster").write_kubeconfig  # hack/, via e2e

POOL = "chaos"
APP = "chaos"
NAMESPACE = "default"
SETTLE = 3.0  # seconds the converged state must hold (a late extra NodeClaim shows in that time)
POLL = 0.5
# After an apiserver restart kube-controller-manager's reflectors resumed up to a minute late,
# and its ReplicaSet controller then recreated, from its stale cache, pods the teardown had
# just deleted (the controller rightly launched for them): 60 s ran out in 2 of 7 such runs.
# Restarting the control plane's clients instead left a fresh kube-scheduler binding nothing.
TEARDOWN = 120.0
REPLICASETS = Resource("apps", "v1", "replicasets", True, "ReplicaSet")  # the runner's own use
APISERVER_AWAY = 120.0  # how long the runner keeps asking an apiserver that does not answer

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
    """The controller subprocesses over their lives, each logging to its own file. Usually one
    runs at a time (a restart follows a kill); a life started while another still runs (a
    leader-election standby) gets its own probe and metrics ports."""

    def __init__(self, env: dict[str, str], run_dir: Path) -> None:
        self.env = env
        self.run_dir = run_dir
        self.lives: list[subprocess.Popen[bytes]] = []
        self.envs: list[dict[str, str]] = []  # each life's environment (its ports)
        self.ended: set[int] = set()  # pids this runner killed or stopped
        self.killed_at: list[float] = []  # monotonic

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        return self.lives[-1]

    def running(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.lives if p.poll() is None]

    async def start(self) -> None:
        env = self.env
        if self.running():  # two processes cannot serve one port
            env = dict(env, HEALTH_PROBE_PORT=str(free_port()), METRICS_PORT=str(free_port()))
        self.envs.append(env)
        self.lives.append(await asyncio.to_thread(start_controller, env, self.log(len(self.lives))))

    def log(self, life: int) -> Path:
        return self.run_dir / f"controller-{life}.log"

    async def ready(self, limit: float = 60.0) -> None:
        """Wait for the last life's readiness (its caches synced; a standby is ready too)."""
        url = f"http://127.0.0.1:{self.envs[-1]['HEALTH_PROBE_PORT']}/readyz"
        start = time.monotonic()
        while time.monotonic() - start < limit:
            with contextlib.suppress(OSError):
                if await asyncio.to_thread(_status, url) == 200:
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited with {self.proc.returncode} at start")
            await asyncio.sleep(0.2)
        raise RuntimeError(f"controller not ready after {limit} s")

    def kill(self, proc: subprocess.Popen[bytes] | None = None) -> None:
        """SIGKILL ``proc`` (default: the last life)."""
        proc = proc or self.proc
        self.ended.add(proc.pid)
        self.killed_at.append(time.monotonic())
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    async def restart_after_kill(self, pause: float) -> None:
        self.kill()
        await asyncio.sleep(pause)
        await self.start()

    def stop(self) -> None:
        for proc in self.running():
            self.ended.add(proc.pid)
            stop_controller(proc)

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
            lines += self.log(i).read_text(errors="replace").splitlines(keepends=True)
        return lines


def _status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return int(answer.status)


# ----------------------------------------------------------------------------- scenarios
@dataclass
class Run:
    """What a scenario's fault may use: the client, the controller, the seeded generator, and
    the fault proxy the controller talks through (None: straight to the apiserver); in the AWS
    world, moto's world and the AWS fault proxy; the seed itself, where it reports the
    violations it checks itself and the numbers it measures."""

    client: KubeClient
    controller: Controller
    rng: random.Random
    proxy: FaultProxy | None = None
    aws: AwsWorld | None = None
    aws_proxy: AwsFaultProxy | None = None
    seed: int = 0
    cluster: Any = None  # hack/cluster.py's LocalCluster
    fault_window: tuple[float, float] | None = None  # monotonic; set by the scenario
    # What the scenario itself found wrong, and what it measured (both land in the result).
    violations: list[Violation] = field(default_factory=list)
    measured: dict[str, float] = field(default_factory=dict)
    # What a fault leaves in place until the run ends (closed after the invariants' check).
    until_end: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    async def during(self, seconds: float) -> None:
        """Record ``seconds`` from now as the fault's window and wait them out."""
        start = time.monotonic()
        self.fault_window = (start, start + seconds)
        await asyncio.sleep(seconds)


Inject = Callable[[Run], Awaitable[int]]  # injects the fault; returns how many were injected


async def kill_random(run: Run) -> int:
    await asyncio.sleep(run.rng.uniform(0.5, 6.0))
    await run.controller.restart_after_kill(run.rng.uniform(0.0, 1.0))
    return 1


async def kill_after_nodeclaims(run: Run) -> int:
    await first_created(run.client, NODECLAIMS)
    await run.controller.restart_after_kill(run.rng.uniform(0.0, 1.0))
    return 1


@contextlib.asynccontextmanager
async def policy_on(run: Run) -> AsyncIterator[None]:
    """The fault proxy's switchable policy on from a seeded moment 0-2 s into the scale-up to
    the end of the block, whose span becomes the run's fault window."""
    assert run.proxy is not None
    policy = run.proxy.policy
    assert isinstance(policy, Flaky | ExpiringWatches)
    await asyncio.sleep(run.rng.uniform(0.0, 2.0))
    policy.active = True
    start = time.monotonic()
    try:
        yield
    finally:
        policy.active = False
        run.fault_window = (start, time.monotonic())


async def api_faults(run: Run) -> int:
    """``API_FAULT_SECONDS`` of failing API requests."""
    assert run.proxy is not None
    async with policy_on(run):
        await asyncio.sleep(API_FAULT_SECONDS)
    return run.proxy.faults


async def apiserver_restart(run: Run) -> int:
    await asyncio.sleep(run.rng.uniform(0.5, 5.0))
    await asyncio.to_thread(run.cluster.restart_apiserver)
    return 1


async def watch_cuts(run: Run) -> int:
    """``WATCH_CUTS`` times, 1-3 s apart, every open watch reset; meanwhile watches expire."""
    assert run.proxy is not None
    async with policy_on(run):
        for _ in range(WATCH_CUTS):
            await asyncio.sleep(run.rng.uniform(1.0, 3.0))
            run.proxy.cut_watches()
    return run.proxy.faults


async def inflight_limit(run: Run) -> int:
    assert run.proxy is not None
    await asyncio.sleep(run.rng.uniform(0.0, 2.0))
    run.proxy.max_inflight = run.rng.randint(1, 5)
    await run.during(INFLIGHT_SECONDS)
    run.proxy.max_inflight = None
    return run.proxy.faults


async def apf_throttle(run: Run) -> int:
    """For ``INFLIGHT_SECONDS`` from a seeded moment, the apiserver's own APF gives the
    controller's ServiceAccount 3 seats and rejects the rest; returns the rejections."""
    assert run.proxy is not None
    cluster = run.cluster
    await asyncio.sleep(run.rng.uniform(0.0, 2.0))
    before = await rejected_requests(cluster.server, cluster.token, cluster.ssl_context())
    async with tight_priority_level(run.client):
        await run.during(INFLIGHT_SECONDS)
    after = await rejected_requests(cluster.server, cluster.token, cluster.ssl_context())
    return after - before


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
    ec2 = [t for t, call in run.aws_proxy.calls if call.service == "ec2"]
    rate = call_rate(ec2, (begin, end))
    print(f"[chaos] aws-faults: {rate:.0f} EC2 calls/min in the window", file=sys.stderr)
    run.violations += bounded_call_rate("ec2", ec2, (begin, end), EC2_CALLS_PER_MINUTE)
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


async def aws_vanish(run: Run) -> int:
    """Instances terminated behind the controller's back during the scale-up."""
    assert run.aws is not None
    await first_launched(run.client)
    await asyncio.sleep(run.rng.uniform(*VANISH_AFTER))
    launched = sorted(
        str(pid)
        for c in (await run.client.list(NODECLAIMS)).items
        if (pid := (c.get("status") or {}).get("providerID"))
    )
    gone = run.rng.sample(launched, min(len(launched), run.rng.randint(*VANISH_COUNT)))
    ids = [pid.rsplit("/", 1)[-1] for pid in gone]
    await run.aws.clients.ec2.terminate_instances(InstanceIds=ids)
    # EventBridge forwards EC2's state changes to the interruption queue (the getting-started
    # stack's rule); moto has no EventBridge, so the runner sends what it would. Without the
    # message an instance gone before its Node registered waits for the 15-minute registration
    # timeout, as upstream's does (its garbage collection only takes registered NodeClaims).
    entries = [
        {
            "Id": str(i),
            "MessageBody": json.dumps({**state_change(iid, "terminated"), "id": f"vanish-{iid}"}),
        }
        for i, iid in enumerate(ids)
    ]
    await run.aws.clients.sqs.send_message_batch(QueueUrl=run.aws.queue_url, Entries=entries)
    print(f"[chaos] aws-vanish: terminated {', '.join(ids)}", file=sys.stderr)
    return len(ids)


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
    await first_seen(client, resource, lambda _: True)


async def first_seen(
    client: KubeClient, resource: Resource, matches: Callable[[KubeObject], bool]
) -> None:
    """Return as soon as an object of ``resource`` is seen that ``matches`` (listed, or added or
    changed after the list)."""
    listed = await client.list(resource)
    if any(matches(obj) for obj in listed.items):
        return
    async with client.watch(resource, resource_version=listed.resource_version) as stream:
        async for event in stream:
            if event.type in ("ADDED", "MODIFIED") and matches(event.object):
                return


# ------------------------------------------------------------- leader-kill and bad-input
LEASE = "chaos-leader"
LEADER_ENV: Final = {
    "DISABLE_LEADER_ELECTION": "false",
    "LEADER_ELECTION_NAME": LEASE,
    "LEADER_ELECTION_NAMESPACE": NAMESPACE,
}
LEASE_DURATION = 15.0  # the elector's (controller-runtime's) default
RETRY_MAX = 2.0 * 2.2  # its acquire retry period, 2 s, at the most jitter (x 2.2)
# The standby sees the killed leader's last renewal at its next retry (at most RETRY_MAX after
# it), judges the lease from then, and takes it at its first retry after it ran out: the lease
# and two retries, plus a second for the requests.
TAKEOVER_BOUND = LEASE_DURATION + 2 * RETRY_MAX + 1.0
ANSWER_WITHIN = 20.0  # for the controller's answer to hostile input (a few provisioning rounds)


async def lease_holder(client: KubeClient) -> str:
    with contextlib.suppress(NotFoundError):
        lease = await client.get(LEASES, LEASE, namespace=NAMESPACE)
        return str((lease.get("spec") or {}).get("holderIdentity") or "")
    return ""


def identities(controller: Controller) -> dict[str, subprocess.Popen[bytes]]:
    """Each life's Lease identity (a uuid per process), from its elector's first log line."""
    found: dict[str, subprocess.Popen[bytes]] = {}
    for i, proc in enumerate(controller.lives):
        for line in controller.log(i).read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("controller") == "leader-election":
                    found[str(entry.get("identity"))] = proc
                    break
    return found


async def wait_holder(
    client: KubeClient, accept: Callable[[str], bool], limit: float
) -> tuple[str, float] | None:
    """(the first Lease holder ``accept`` takes, seconds until then), or None after ``limit``."""
    start = time.monotonic()
    while (waited := time.monotonic() - start) < limit:
        holder = await lease_holder(client)
        if accept(holder):
            return holder, waited
        await asyncio.sleep(0.1)
    return None


async def leader_kill(run: Run) -> int:
    """SIGKILL the replica holding the Lease at a seeded moment of the scale-up and start a new
    standby at once (as the killed pod comes back); a live replica must take the Lease within
    ``TAKEOVER_BOUND``.

    Usually the old standby wins, but not always: as in client-go, a candidate judges the lease
    from when it first saw the holder's last renewal, and the old standby, polling every 2-4.4 s,
    may see it up to 4.4 s after the kill, later than the new standby's first look; then the new
    one's lease runs out first. Which one won is measured (``new_standby_won``), not asserted.
    """
    c = run.controller
    await asyncio.sleep(run.rng.uniform(0.5, 6.0))
    held = await wait_holder(run.client, lambda h: h in identities(c), LEASE_DURATION + RETRY_MAX)
    if held is None:
        run.violations.append(Violation("no-leader", LEASE, "no replica of this run holds it"))
        return 0
    killed = identities(c)[held[0]]
    c.kill(killed)
    await c.start()  # the new standby
    taken = await wait_holder(run.client, lambda h: h not in ("", held[0]), TAKEOVER_BOUND)
    if taken is None:
        run.violations.append(Violation("no-takeover", LEASE, f"after {TAKEOVER_BOUND} s"))
    else:
        winner = identities(c).get(taken[0])
        if winner is None or winner.poll() is not None:
            run.violations.append(
                Violation("wrong-leader", LEASE, f"{taken[0]}: not a live replica")
            )
        run.measured["takeover_s"] = round(taken[1], 2)
        run.measured["new_standby_won"] = float(winner is c.proc)
    await c.ready()
    return 1


def _hostile_meta() -> dict[str, Any]:
    return {"name": hostile.NAMESPACE, "labels": {hostile.HOSTILE_LABEL: "true"}}


async def refused(client: KubeClient, refusal: hostile.Refusal) -> list[Violation]:
    """The apiserver refuses ``refusal``'s object and its answer names the field and the rule."""
    subject = f"{refusal.resource.kind} {refusal.name}"
    try:
        await client.create(refusal.resource, refusal.body)
    except InvalidError as e:
        causes = [(str(c.get("field")), str(c.get("message"))) for c in e.causes]
        if any(f == refusal.field and refusal.message in m for f, m in causes):
            return []
        return [Violation("refusal-unnamed", subject, f"{refusal.field} not in {causes}")]
    return [Violation("invalid-accepted", subject, f"{refusal.field}: {refusal.message}")]


async def unanswered(client: KubeClient) -> list[str]:
    """The hostile objects the controller has not answered yet: the pool without its class
    (its NodeClassReady must say NodeClassNotFound) and each hostile pod (still Pending, the
    scheduler's Unschedulable condition, and Karpenter's FailedScheduling event on it)."""
    left = []
    pool = await client.get(NODEPOOLS, hostile.MISSING_CLASS_POOL)
    ready = condition(pool, CONDITION_NODE_CLASS_READY) or {}
    if ready.get("reason") != "NodeClassNotFound" or hostile.MISSING_CLASS not in str(
        ready.get("message")
    ):
        left.append(f"NodePool {hostile.MISSING_CLASS_POOL}: {CONDITION_NODE_CLASS_READY} {ready}")
    for body in hostile.pods():
        meta = body["metadata"]
        pod = await client.get(PODS, meta["name"], namespace=meta["namespace"])
        events = await events_for(client, meta["name"], "FailedScheduling")
        if (
            (pod.get("status") or {}).get("phase") != "Pending"
            or pods_placed([pod]) != []  # not reported Unschedulable by the scheduler
            or not any(
                e.get("reportingComponent") == "karpenter"
                # this run's pod, not an earlier run's of the same name (events outlive it)
                and (e.get("involvedObject") or {}).get("uid") == pod["metadata"]["uid"]
                for e in events
            )
        ):
            left.append(f"Pod {meta['namespace']}/{meta['name']}: {pod.get('status')}")
    return left


async def bad_input(run: Run) -> int:
    """At a seeded moment of the scale-up: invalid NodePools and NodeClaims (refused, naming the
    field), a NodePool without its class and pods no node can take (answered, nothing bought;
    the empty-node invariant sees a node bought for them, as they are not the workload's)."""
    client = run.client
    await asyncio.sleep(run.rng.uniform(0.0, 2.0))
    with contextlib.suppress(AlreadyExistsError):
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": _hostile_meta()}
        )
    refusals = hostile.refusals()
    for refusal in refusals:
        run.violations += await refused(client, refusal)
    await client.create(NODEPOOLS, hostile.missing_class_pool())
    pods = hostile.pods()
    for pod in pods:
        await client.create(PODS, pod, namespace=pod["metadata"]["namespace"])
    start = time.monotonic()
    while left := await unanswered(client):
        if time.monotonic() - start > ANSWER_WITHIN:
            run.violations += [
                Violation("unanswered", what, f"after {ANSWER_WITHIN} s") for what in left
            ]
            break
        await asyncio.sleep(POLL)
    run.measured["answered_s"] = round(time.monotonic() - start, 2)
    bought = await client.list(
        NODECLAIMS, label_selector=f"{LABEL_NODEPOOL}={hostile.MISSING_CLASS_POOL}"
    )
    run.violations += [
        Violation("launched-for-hostile", str(c["metadata"]["name"]), hostile.MISSING_CLASS_POOL)
        for c in bought.items
    ]
    return len(refusals) + 1 + len(pods)


async def remove_hostile(client: KubeClient) -> None:
    """Delete what ``bad_input`` created (or was wrongly allowed to), and wait for the pods."""
    for body in hostile.pods():
        meta = body["metadata"]
        with contextlib.suppress(NotFoundError):
            await client.delete(PODS, meta["name"], namespace=meta["namespace"])
    for refusal in hostile.refusals():
        with contextlib.suppress(NotFoundError):
            await client.delete(refusal.resource, refusal.name)
    with contextlib.suppress(NotFoundError):
        await client.delete(NODEPOOLS, hostile.MISSING_CLASS_POOL)
    start = time.monotonic()
    while time.monotonic() - start < TEARDOWN:
        listed = await client.list(PODS, label_selector=f"{hostile.HOSTILE_LABEL}=true")
        if not listed.items:
            return
        await asyncio.sleep(POLL)
    raise RuntimeError(f"hostile pods left after {TEARDOWN} s")


# ----------------------------------------------------------------------------- drift-kill
GENERATION_LABEL = "chaos.karpenter-py/generation"  # a template label: it moves the pool's hash
PDB_MAX_UNAVAILABLE = 1
DRIFT_LIMIT = 120.0  # seconds the scenario waits for the workload, then for the drift to end


def drift_workload(rng: random.Random) -> Workload:
    """Two pods a node on 2 or 3 nodes: a drift command's replacement takes its candidate's pods
    in the simulation of the next one, which waits for it to initialize and so for the next
    disruption pass (10 s later), so a run's length is its nodes."""
    return Workload(rng.randint(4, 6), "1500m")


def _new_template(obj: KubeObject) -> bool:
    return GENERATION_LABEL in (obj["metadata"].get("labels") or {})


def _being_deleted(obj: KubeObject) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def _tainted(node: KubeObject) -> bool:
    return bool(disrupted_taints([node]))


# The visible steps of a disruption command (controllers/disruption/queue.py), each as what
# shows it: the candidate's taint, the replacement's create, the candidate's deletion.
DRIFT_STEPS: Sequence[tuple[str, Resource, Callable[[KubeObject], bool]]] = (
    ("tainted", NODES, _tainted),
    ("replacement-created", NODECLAIMS, _new_template),
    ("candidate-deleted", NODECLAIMS, _being_deleted),
)


def drifted_away(seen: Listed) -> bool:
    """Every NodeClaim made from the changed template, none Drifted, no Node left tainted."""
    return all(
        _new_template(c) and not is_true(c, "Drifted") for c in seen.nodeclaims
    ) and not disrupted_taints(seen.nodes)


async def until(client: KubeClient, done: Callable[[Listed], bool], limit: float) -> Listed | None:
    """The first listing that is ``done``, or None after ``limit`` seconds."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        seen = await listed(client)
        if done(seen):
            return seen
        await asyncio.sleep(POLL)
    return None


async def sample_availability(
    client: KubeClient, start: float, samples: list[Availability]
) -> None:
    """Until cancelled, after every change to the workload's pods: how many are available
    (list, then watch; a broken watch lists again)."""
    selector = f"app={APP}"
    while True:
        try:
            pods_listed = await client.list(PODS, namespace=NAMESPACE, label_selector=selector)
            pods = {p["metadata"]["name"]: p for p in pods_listed.items}
            _sample(samples, start, available_pods(pods.values()))
            async with client.watch(
                PODS,
                namespace=NAMESPACE,
                resource_version=pods_listed.resource_version,
                label_selector=selector,
            ) as stream:
                async for event in stream:
                    if event.type == "DELETED":
                        pods.pop(event.object["metadata"]["name"], None)
                    elif event.type in ("ADDED", "MODIFIED"):
                        pods[event.object["metadata"]["name"]] = event.object
                    _sample(samples, start, available_pods(pods.values()))
        except KubeError:
            await asyncio.sleep(POLL)


def _sample(samples: list[Availability], start: float, available: int) -> None:
    if not samples or samples[-1].available != available:
        samples.append(Availability(round(time.monotonic() - start, 2), available))


async def drift_kill(run: Run) -> int:
    """Drift every NodeClaim of the converged workload; SIGKILL the controller at the seed's
    step of the first drift command, restart it; watch the pods' availability until the drift
    is over."""
    client = run.client
    start = time.monotonic()
    replicas = int((await client.get(DEPLOYMENTS, APP, namespace=NAMESPACE))["spec"]["replicas"])
    budget = pdb(APP, {"app": APP}, max_unavailable=PDB_MAX_UNAVAILABLE)
    await client.create(PODDISRUPTIONBUDGETS, budget, namespace=NAMESPACE)
    if await until(client, lambda seen: converged(seen, replicas), DRIFT_LIMIT) is None:
        raise RuntimeError(f"the workload did not converge within {DRIFT_LIMIT} s")
    step, resource, matches = DRIFT_STEPS[run.seed % len(DRIFT_STEPS)]
    samples: list[Availability] = []
    async with asyncio.TaskGroup() as tg:
        sampler = tg.create_task(sample_availability(client, start, samples))
        template = {"metadata": {"labels": {GENERATION_LABEL: str(run.seed)}}}
        await client.patch(NODEPOOLS, POOL, {"spec": {"template": template}})
        try:
            async with asyncio.timeout(DRIFT_LIMIT):
                await first_seen(client, resource, matches)
        except TimeoutError:
            raise RuntimeError(f"no drift command got {step} within {DRIFT_LIMIT} s") from None
        await run.controller.restart_after_kill(run.rng.uniform(0.0, 1.0))
        print(f"[chaos] drift-kill seed {run.seed}: killed once {step}", file=sys.stderr)
        await until(
            client, lambda seen: converged(seen, replicas) and drifted_away(seen), DRIFT_LIMIT
        )
        sampler.cancel()
    run.violations += pdb_respected(samples, replicas - PDB_MAX_UNAVAILABLE)
    lowest = min((s.available for s in samples), default=None)
    print(
        f"[chaos] drift-kill seed {run.seed}: at least {lowest} of {replicas} pods available",
        file=sys.stderr,
    )
    return 1


@dataclass(frozen=True)
class Scenario:
    name: str
    inject: Inject
    env: Mapping[str, str] = field(default_factory=dict)
    # The fault proxy's policy for the run's generator; None: no proxy.
    policy: Callable[[random.Random], Policy] | None = None
    # Removes what ``inject`` created besides the workload (run after every run, failed or not).
    teardown: Callable[[KubeClient], Awaitable[None]] | None = None
    replicas: int = 1  # controller processes started before the workload (leader election on)
    # What convergence needs besides the pods and NodeClaims of :func:`converged`; None: nothing.
    settled: Callable[[Listed], bool] | None = None
    workload: Callable[[random.Random], Workload] = Workload.drawn
    world: World = "kwok"
    # The AWS fault proxy's policy (AWS world only); None: the controller talks to moto.
    aws_policy: Callable[[random.Random], AwsPolicy] | None = None
    # Seconds to converge at least (over ``--deadline``) for a fault that takes longer itself.
    deadline: float = 0.0
    # The controller runs as a ServiceAccount (benchmarks/apf.py), not as system:masters.
    service_account: bool = False


API_FAULT_SECONDS = 10.0
API_FAULT_RATE = 0.25
WATCH_CUTS = 4
WATCH_EXPIRY_RATE = 0.5
INFLIGHT_SECONDS = 15.0
# The controller's apiserver requests per minute while a fault lasts: about four times an
# unfaulted scale-up's (616-964 per minute over its first 15 s, 14-20 pods, measured through a
# passthrough proxy). Faulted runs measured 184-2,363 over 58 runs (watch-cuts the highest: every
# cut is a new watch per informer and each 410 a list, inside a window of 4-12 s); a retry loop
# without backoff, or the client's own ceiling (KUBE_CLIENT_QPS 200, i.e. 12,000 per minute),
# would pass it at once.
MAX_API_CALLS_PER_MINUTE = 4000.0
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
VANISH_AFTER = (0.0, 8.0)  # seconds after the first launch (seeded): mid-scale-up to settled
VANISH_COUNT = (1, 3)  # instances terminated behind the controller's back (seeded)

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
        Scenario("apiserver-restart", apiserver_restart),
        Scenario(
            "watch-cuts", watch_cuts, policy=lambda rng: ExpiringWatches(rng, WATCH_EXPIRY_RATE)
        ),
        Scenario("inflight-limit", inflight_limit, policy=lambda _: passthrough),
        # The apiserver's own APF (the proxy only counts the calls).
        Scenario(
            "apf-throttle",
            apf_throttle,
            policy=lambda _: passthrough,
            teardown=remove_leftovers,
            service_account=True,
        ),
        Scenario("leader-kill", leader_kill, LEADER_ENV, replicas=2),
        Scenario("bad-input", bad_input, teardown=remove_hostile),
        Scenario(
            "drift-kill",
            drift_kill,
            # New nodes stay nominated (out of disruption's reach) for twice this, at least 10 s.
            {"BATCH_MAX_DURATION": "5s"},
            settled=drifted_away,
            workload=drift_workload,
        ),
        Scenario(
            "aws-faults",
            aws_faults,
            world="aws",
            aws_policy=lambda rng: AwsFlaky(rng, AWS_FAULT_RATE),
        ),
        Scenario("aws-ice", aws_ice, world="aws"),
        Scenario("aws-outage", aws_outage, world="aws", aws_policy=lambda _: Outage()),
        Scenario("aws-vanish", aws_vanish, world="aws"),
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
    """The run's objects; while the apiserver is away (a scenario restarted it), ask again."""
    start = time.monotonic()
    while True:
        try:
            return await _listed(client, aws)
        except KubeError as e:
            if not e.transient or time.monotonic() - start > APISERVER_AWAY:
                raise
        await asyncio.sleep(POLL)


async def _listed(client: KubeClient, aws: AwsWorld | None) -> Listed:
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
    client: KubeClient,
    replicas: int,
    start: float,
    deadline: float,
    settled: Callable[[Listed], bool] | None = None,
    aws: AwsWorld | None = None,
) -> tuple[float | None, Listed]:
    """(seconds from ``start`` to the first moment of a converged state (and ``settled``, if
    given) that then held for ``SETTLE`` s with the same NodeClaims, or None at ``deadline``;
    the last listing)."""
    since: tuple[float, frozenset[str]] | None = None
    while True:
        now = time.monotonic()
        seen = await listed(client, aws)
        if not converged(seen, replicas) or (settled is not None and not settled(seen)):
            since = None
        elif since is None or since[1] != _claim_names(seen):
            since = (now, _claim_names(seen))
        elif now - since[0] >= SETTLE:
            return round(since[0] - start, 2), seen
        if now - start > deadline:
            return None, seen
        await asyncio.sleep(POLL)


async def remove_workload(client: KubeClient) -> int:
    """Delete the workload's Deployment, ReplicaSets and pods, each itself (orphaning what it
    owns); returns how many of them were still there. Left to the garbage collector, removal
    lagged a minute after an apiserver restart, and meanwhile a ReplicaSet it had not removed
    recreated the pods a drain evicted, for the next run to find."""
    found = 0
    with contextlib.suppress(NotFoundError):
        await client.delete(DEPLOYMENTS, APP, namespace=NAMESPACE, propagation_policy="Orphan")
        found += 1
    selector = f"app={APP}"
    for resource in (REPLICASETS, PODS):
        for obj in (
            await client.list(resource, namespace=NAMESPACE, label_selector=selector)
        ).items:
            found += 1
            if not obj["metadata"].get("deletionTimestamp"):
                with contextlib.suppress(NotFoundError):
                    await client.delete(
                        resource,
                        obj["metadata"]["name"],
                        namespace=NAMESPACE,
                        propagation_policy="Orphan",
                    )
    return found


async def clean(client: KubeClient, aws: AwsWorld | None = None) -> list[str]:
    """No workload (nor its PDB), no NodeClaim, no instance, the NodePool as
    :func:`chaos_nodepool` makes it. The controller (running) deletes the NodeClaims and their
    instances; what is still there after ``TEARDOWN`` s has its finalizers removed (a kwok Node
    deleted, a moto instance terminated) and is named in the answer."""
    with contextlib.suppress(NotFoundError):
        await client.delete(PODDISRUPTIONBUDGETS, APP, namespace=NAMESPACE)
    start = time.monotonic()
    while True:
        workload = await remove_workload(client)
        seen = await listed(client, aws)
        if not workload and not seen.nodeclaims and not seen.instances() and not seen.pods:
            await reset_nodepool(client, aws)
            return []
        if time.monotonic() - start > TEARDOWN:
            break
        # Every pass, not once: a NodeClaim launched for a pod before it went comes after.
        for claim in seen.nodeclaims:
            if not claim["metadata"].get("deletionTimestamp"):
                with contextlib.suppress(NotFoundError):
                    await client.delete(NODECLAIMS, claim["metadata"]["name"])
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
    else:
        for _, name in seen.instances():
            left.append(f"Node {name}")
            with contextlib.suppress(NotFoundError):
                await client.delete(NODES, name)
    await reset_nodepool(client, aws)
    return left


async def reset_nodepool(client: KubeClient, aws: AwsWorld | None = None) -> None:
    """The NodePool's spec back to :func:`chaos_nodepool`'s, undoing a scenario's edit (once no
    NodeClaim is left: earlier, the edit undone would drift them all again)."""
    spec = chaos_nodepool("kwok" if aws is None else "aws")["spec"]
    await client.patch(
        NODEPOOLS,
        POOL,
        [{"op": "replace", "path": "/spec", "value": spec}],
        patch_type=PatchType.JSON,
    )


async def aws_side(
    scenario: Scenario, world: AwsWorld | None, rng: random.Random
) -> tuple[AwsWorld | None, AwsFaultProxy | None, dict[str, str]]:
    """The run's AWS world (None in kwok's), its fault proxy if the scenario has a policy
    (started), and the controller's extra environment."""
    env = dict(scenario.env)
    if scenario.world != "aws":
        return None, None, env
    if world is None:
        raise ValueError(f"{scenario.name} needs the AWS world")
    env = {**world.controller_env(), **env}
    if scenario.aws_policy is None:
        return world, None, env
    aws_proxy = AwsFaultProxy(world.endpoint, scenario.aws_policy(rng))
    await aws_proxy.start()
    env["AWS_ENDPOINT_URL"] = aws_proxy.url
    return world, aws_proxy, env


async def apiserver_side(
    scenario: Scenario, cluster: Any, rng: random.Random, run_dir: Path, client: KubeClient
) -> tuple[FaultProxy | None, Path]:
    """The apiserver fault proxy if the scenario has a policy (started), and the kubeconfig
    the controller uses: the proxy's or the apiserver's, with the admin's token or the
    scenario's ServiceAccount's."""
    if scenario.policy is None and not scenario.service_account:
        return None, Path(cluster.kubeconfig_path)
    token = await service_account_token(client) if scenario.service_account else cluster.token
    proxy = None
    if scenario.policy is not None:
        proxy = FaultProxy(cluster.server, cluster.ssl_context(), scenario.policy(rng))
        await proxy.start()
    kubeconfig = run_dir / "kubeconfig"
    server = proxy.url if proxy is not None else cluster.server
    write_kubeconfig(kubeconfig, server, cluster.ca_file.read_bytes(), token, "chaos")
    return proxy, kubeconfig


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
    load = scenario.workload(rng)
    aws, aws_proxy, env = await aws_side(scenario, world, rng)
    proxy, kubeconfig = await apiserver_side(scenario, cluster, rng, run_dir, client)
    controller = Controller(controller_env(kubeconfig, env), run_dir)
    stack = contextlib.AsyncExitStack()
    run = Run(
        client,
        controller,
        rng,
        proxy,
        aws,
        aws_proxy,
        seed=seed,
        cluster=cluster,
        until_end=stack,
    )
    violations: list[Violation] = []
    faults = 0
    took: float | None = None
    seen = Listed([], [], [])
    start = time.monotonic()
    try:
        for _ in range(scenario.replicas):
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
        if proxy is not None and run.fault_window is not None:
            violations += bounded_call_rate(
                "apiserver", proxy.received, run.fault_window, MAX_API_CALLS_PER_MINUTE
            )
        took, seen = await wait_converged(
            client, load.replicas, start, deadline, scenario.settled, aws
        )
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
        if scenario.teardown is not None:
            try:
                await scenario.teardown(client)
            except Exception as e:
                violations.append(Violation("teardown-error", scenario.name, repr(e)))
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
        "relists": sum("relisting" in line for line in controller.log_lines()),
        "api_calls_per_minute": (
            None
            if proxy is None or run.fault_window is None
            else round(call_rate(proxy.received, run.fault_window), 1)
        ),
        "violations": [str(v) for v in violations],
        **run.measured,
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
