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

Where the controller talks through the fault proxy, its request rate while the fault lasts
(the window a scenario records in :attr:`Run.fault_window`) may not exceed
``MAX_API_CALLS_PER_MINUTE``: retries must back off, not storm.

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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo root holds benchmarks/ and tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.e2e import (
    KWOKNODECLASS,
    LocalCluster,
    controller_env,
    deployment,
    install_crds,
    start_controller,
    stop_controller,
)
from benchmarks.faultproxy import (
    ExpiringWatches,
    FaultProxy,
    Flaky,
    Policy,
    SlowRegistration,
    passthrough,
)
from benchmarks.invariants import (
    Instance,
    Observed,
    Violation,
    bounded_call_rate,
    call_rate,
    check,
)
from karpenter_py.cloudprovider.kwok import KWOK_NODE_LABEL
from karpenter_py.kube import KWOKNODECLASSES, NODEPOOLS, PatchType
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import load_config
from karpenter_py.kube.errors import KubeError, NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import DEPLOYMENTS, NODECLAIMS, NODES, PODS, Resource
from karpenter_py.model.labels import LABEL_NODEPOOL
from tests.cluster.harness import is_true

write_kubeconfig: Any = importlib.import_module("cluster").write_kubeconfig  # hack/, via e2e

POOL = "chaos"
APP = "chaos"
NAMESPACE = "default"
SETTLE = 3.0  # seconds the converged state must hold (a late extra NodeClaim shows in that time)
POLL = 0.5
TEARDOWN = 60.0
APISERVER_AWAY = 120.0  # how long the runner keeps asking an apiserver that does not answer


def chaos_nodepool() -> dict[str, Any]:
    """Small kwok types (under 5 vCPU, so a run buys several nodes), consolidation off: a node
    left empty was bought for nobody, not on its way out."""
    reqs = [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": ["5"]},
    ]
    ref = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": POOL},
        "spec": {
            "template": {"spec": {"nodeClassRef": ref, "requirements": reqs}},
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
    the fault proxy the controller talks through (None: straight to the apiserver)."""

    client: KubeClient
    controller: Controller
    rng: random.Random
    proxy: FaultProxy | None = None
    cluster: Any = None  # hack/cluster.py's LocalCluster
    fault_window: tuple[float, float] | None = None  # monotonic; set by the scenario

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


async def held_registrations(run: Run) -> int:
    """The proxy holds every registration for the whole run: counted once the run is over,
    so the count is of the registrations the first pods waited on."""
    assert run.proxy is not None
    await first_created(run.client, NODECLAIMS)
    await asyncio.sleep(REGISTRATION_DELAY + 2 * POLL)
    return run.proxy.faults


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


API_FAULT_SECONDS = 10.0
API_FAULT_RATE = 0.25
WATCH_CUTS = 4
WATCH_EXPIRY_RATE = 0.5
INFLIGHT_SECONDS = 15.0
# The controller's apiserver requests per minute while a fault lasts: about three times an
# unfaulted scale-up's (616-964 per minute over its first 15 s, 14-20 pods, measured through a
# passthrough proxy). Faulted runs measured 268-2,128 (watch-cuts the highest: every cut is a
# new watch per informer, and each 410 a list); a retry loop without backoff, or the client's
# own ceiling (KUBE_CLIENT_QPS 200, i.e. 12,000 per minute), would pass it at once.
MAX_API_CALLS_PER_MINUTE = 3000.0
REGISTRATION_DELAY = 3.0  # longer than the batch idle window (1 s): a round sees bare Nodes

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
    )
}


# ----------------------------------------------------------------------------- one run
@dataclass
class Listed:
    nodeclaims: list[KubeObject]
    nodes: list[KubeObject]
    pods: list[KubeObject]

    def instances(self) -> list[Instance]:
        """The kwok provider's instances: its Nodes (labelled ``kwok.x-k8s.io/node=fake``), each
        named for its NodeClaim. Bare Nodes too, which the provider's own ``list`` (it selects
        ``karpenter.sh/nodepool``) does not see until they register."""
        return [
            Instance(str(n["spec"].get("providerID", "")), str(n["metadata"]["name"]))
            for n in self.nodes
            if (n["metadata"].get("labels") or {}).get(KWOK_NODE_LABEL) == "fake"
        ]


async def listed(client: KubeClient) -> Listed:
    """The run's objects; while the apiserver is away (a scenario restarted it), ask again."""
    start = time.monotonic()
    while True:
        try:
            return await _listed(client)
        except KubeError as e:
            if not e.transient or time.monotonic() - start > APISERVER_AWAY:
                raise
        await asyncio.sleep(POLL)


async def _listed(client: KubeClient) -> Listed:
    return Listed(
        list((await client.list(NODECLAIMS)).items),
        list((await client.list(NODES)).items),
        list((await client.list(PODS, namespace=NAMESPACE, label_selector=f"app={APP}")).items),
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
    client: KubeClient, replicas: int, start: float, deadline: float
) -> tuple[float | None, Listed]:
    """(seconds from ``start`` to the first moment of a converged state that then held for
    ``SETTLE`` s with the same NodeClaims, or None at ``deadline``; the last listing)."""
    since: tuple[float, frozenset[str]] | None = None
    while True:
        now = time.monotonic()
        seen = await listed(client)
        if not converged(seen, replicas):
            since = None
        elif since is None or since[1] != _claim_names(seen):
            since = (now, _claim_names(seen))
        elif now - since[0] >= SETTLE:
            return round(since[0] - start, 2), seen
        if now - start > deadline:
            return None, seen
        await asyncio.sleep(POLL)


async def clean(client: KubeClient) -> list[str]:
    """No workload, no NodeClaim, no kwok Node. The controller (running) deletes the NodeClaims
    and their instances; what is still there after ``TEARDOWN`` s has its finalizers removed
    and is named in the answer."""
    with contextlib.suppress(NotFoundError):
        await client.delete(DEPLOYMENTS, APP, namespace=NAMESPACE)
    for claim in (await client.list(NODECLAIMS)).items:
        with contextlib.suppress(NotFoundError):
            await client.delete(NODECLAIMS, claim["metadata"]["name"])
    start = time.monotonic()
    while True:
        seen = await listed(client)
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
) -> dict[str, Any]:
    rng = random.Random(f"{scenario.name}/{seed}")
    load = Workload.drawn(rng)
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
    controller = Controller(controller_env(kubeconfig, dict(scenario.env)), run_dir)
    violations: list[Violation] = []
    faults = 0
    took: float | None = None
    seen = Listed([], [], [])
    run: Run | None = None
    start = time.monotonic()
    try:
        await controller.start()
        await controller.ready()
        # A run starts from a clean cluster: whatever a failed run before it left is gone.
        violations += [
            Violation("dirty-start", what, "left by a run before") for what in await clean(client)
        ]
        start = time.monotonic()
        await client.create(DEPLOYMENTS, load.body(), namespace=NAMESPACE)
        run = Run(client, controller, rng, proxy, cluster)
        faults = await scenario.inject(run)
        if proxy is not None and run.fault_window is not None:
            violations += bounded_call_rate(
                "apiserver", proxy.received, run.fault_window, MAX_API_CALLS_PER_MINUTE
            )
        took, seen = await wait_converged(client, load.replicas, start, deadline)
        if took is None:
            violations.append(Violation("not-converged", scenario.name, f"after {deadline} s"))
        observed = Observed(
            seen.nodeclaims, seen.nodes, seen.pods, seen.instances(), controller.log_lines()
        )
        grace = timedelta(seconds=deadline)
        violations += check(observed, datetime.now(UTC), finalizer_grace=grace)
        left = await clean(client)
        violations += [Violation("teardown-stuck", what, f"after {TEARDOWN} s") for what in left]
    except Exception as e:  # a broken run is one result, not the end of the matrix
        violations.append(Violation("run-error", scenario.name, repr(e)))
    finally:
        controller.stop()
        if proxy is not None:
            await proxy.stop()
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
            if proxy is None or run is None or run.fault_window is None
            else round(call_rate(proxy.received, run.fault_window), 1)
        ),
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


async def matrix(names: Sequence[str], seeds: int, deadline: float, keep: bool) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="karpy-chaos-"))
    cluster = LocalCluster(state_dir=state)
    cluster.start()
    results = []
    try:
        async with KubeClient(load_config(str(cluster.kubeconfig_path)), qps=500, burst=1000) as c:
            await install_crds(c)
            await c.create(KWOKNODECLASSES, KWOKNODECLASS)
            await c.create(NODEPOOLS, chaos_nodepool())
            for name in names:
                for seed in range(seeds):
                    run_dir = state / f"{name}-{seed}"
                    run_dir.mkdir()
                    result = await one_run(c, cluster, SCENARIOS[name], seed, deadline, run_dir)
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
