"""End-to-end scale-out benchmark: upstream's kind+kwok "Basic" case on the local control plane.

500 pods of 0.9 CPU / 3,100 Mi and 500 of 3.5 CPU / 28 Gi (performance-anchors.md §2.1), a
NodePool like upstream's perf pool (linux, on-demand, under 32 vCPU, kwok catalog), and the real
``karpenter-py controller`` in a subprocess. Measured from the moment the Deployments exist:

* ``seconds_to_first_nodeclaims``: until the first NodeClaims exist (the controller's own share:
  batch window + solve + writes);
* ``seconds_to_nodeclaims``: until the NodeClaim count reaches its final value (later rounds add
  claims when the kube-scheduler binds pods differently from the plan);
* ``seconds_to_running``: until every pod is Running (adds ReplicaSet pod creation, kwok nodes,
  kube-scheduler binding, kwok pod status);
* ``rss_p95_mb`` / ``cpu_avg_cores``: the controller process, sampled from /proc every 0.5 s.

    python benchmarks/e2e.py --out benchmarks/results/e2e.json [--pods-per-deployment 500]

``--scale-in``: upstream's Basic scale-in. After the scale-out above (every pod Running), both
Deployments go down to ``--scale-in-pods-per-deployment`` (default 350: 700 pods in all), and every
few seconds the cluster's hourly cost is summed: each Node of the NodePool priced at its
instance type, zone and capacity type (the labels the kwok provider gives it) in the catalog the
controller uses (``INSTANCE_TYPES_FILE_PATH`` or the built-in kwok one), plus each NodeClaim
without a Node yet (its own labels, else the cheapest offering its requirements allow). The
target is what ``karpenter-py plan`` prices a fresh cluster for the remaining pods (the plan code
run in-process on the same NodePool, Deployments and catalog). Consolidated = cost within 10 % of
that target with every remaining pod Running; the run gives up after ``--scale-in-limit`` (300 s).
RSS and CPU are those of the scale-in phase.

    python benchmarks/e2e.py --scale-in --out benchmarks/results/e2e-scale-in.json

``--cloud-provider aws``: the same scale-out with the AWS provider against moto's server
(benchmarks/awsworld.py: moto in this process over HTTP, an EC2NodeClass selecting the tagged
VPC, a NodePool of on-demand linux types under 32 vCPU, and the fake kubelet registering a Node
for each instance moto launches). Adds ``create_fleet_calls`` (CreateFleet calls the controller
made, counted from moto's fleets: batching shows as fewer calls than NodeClaims).

    python benchmarks/e2e.py --cloud-provider aws --out benchmarks/results/e2e-aws.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # run as a script: the repo root holds benchmarks/ and tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.awsworld import EC2NODECLASSES, AwsWorld, aws_world
from karpenter_py.cli.manifests import load_manifests
from karpenter_py.cli.offline import build_cluster
from karpenter_py.cli.plan import solve_input as plan_solve_input
from karpenter_py.cloudprovider.kwok import KWOK_NODE_LABEL
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import load_config
from karpenter_py.kube.errors import AlreadyExistsError
from karpenter_py.kube.resources import DEPLOYMENTS, NODECLAIMS, NODES, PODS, Resource
from karpenter_py.manager.app import kwok_instance_types
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.scheduler import solve
from tests.cluster.awskubelet import running_kubelet

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack"))
LocalCluster: Any = importlib.import_module(
    "cluster"
).LocalCluster  # hack/cluster.py, not a package

CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
KWOKNODECLASSES = Resource(
    "karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", False, "KWOKNodeClass"
)
NODEPOOLS = Resource("karpenter.sh", "v1", "nodepools", False, "NodePool")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def nodepool(cloud_provider: str = "kwok") -> dict[str, Any]:
    if cloud_provider == "aws":
        return aws_nodepool()
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {
                            "key": "karpenter.kwok.sh/instance-cpu",
                            "operator": "Lt",
                            "values": ["32"],
                        },
                    ],
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "30s",
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


def aws_nodepool() -> dict[str, Any]:
    """Upstream's perf pool on the AWS provider: linux, on-demand, under 32 vCPU."""
    reqs = [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["32"]},
    ]
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {"nodeClassRef": ref, "requirements": reqs}},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "30s",
            },
        },
    }


def deployment(name: str, replicas: int, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }


class ProcSampler:
    """RSS and CPU time of one process, from /proc (no extra dependency)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rss: list[float] = []
        self.cpu: list[tuple[float, float]] = []  # (wall, cpu seconds)

    def sample(self) -> None:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            statm = Path(f"/proc/{self.pid}/statm").read_text().split()
        except OSError:
            return
        self.cpu.append((time.monotonic(), (int(stat[11]) + int(stat[12])) / CLK_TCK))
        self.rss.append(int(statm[1]) * PAGE / 2**20)

    def p95_rss(self) -> float:
        values = sorted(self.rss)
        return values[int(0.95 * (len(values) - 1))] if values else 0.0

    def avg_cores(self, since: float, until: float) -> float:
        window = [c for c in self.cpu if since <= c[0] <= until]
        if len(window) < 2:
            return 0.0
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def install_crds(client: KubeClient) -> None:
    for f in sorted((REPO / "manifests" / "crds").glob("*.yaml")):
        with contextlib.suppress(AlreadyExistsError):
            await client.create(CRDS, yaml.safe_load(f.read_text()))
    for _ in range(60):
        crds = (await client.list(CRDS)).items
        if sum(1 for c in crds if _established(c)) >= 4:
            break
        await asyncio.sleep(0.5)


async def setup(client: KubeClient) -> None:
    await install_crds(client)
    await client.create(
        KWOKNODECLASSES,
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": "default"},
        },
    )
    await client.create(NODEPOOLS, nodepool())


async def measure(
    client: KubeClient, sampler: ProcSampler, total: int, replicas: int, limit: float
) -> dict[str, Any]:
    start = time.monotonic()
    await client.create(DEPLOYMENTS, deployment("small", replicas, "900m", "3100Mi"))
    await client.create(DEPLOYMENTS, deployment("large", replicas, "3500m", "28Gi"))
    counts: list[tuple[float, int]] = []
    running_at = None
    while time.monotonic() - start < limit:
        sampler.sample()
        ncs = (await client.list(NODECLAIMS)).items
        counts.append((time.monotonic() - start, len(ncs)))
        pods = (await client.list(PODS, namespace="default")).items
        running = sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")
        if running >= total:
            running_at = time.monotonic() - start
            break
        await asyncio.sleep(0.5)
    final = counts[-1][1] if counts else 0
    to_nodeclaims = next((t for t, n in counts if n == final), None)
    # The first round's NodeClaims: the controller's own share (batch window + solve + writes).
    first_round = next((t for t, n in counts if n > 0), None)
    nodes = (await client.list(NODES, label_selector="karpenter.sh/nodepool")).items
    return {
        "pods": total,
        "seconds_to_running": None if running_at is None else round(running_at, 2),
        "seconds_to_nodeclaims": None if to_nodeclaims is None else round(to_nodeclaims, 2),
        "seconds_to_first_nodeclaims": None if first_round is None else round(first_round, 2),
        "nodeclaims": final,
        "nodes": len(nodes),
        "rss_p95_mb": round(sampler.p95_rss(), 1),
        "cpu_avg_cores": round(sampler.avg_cores(0, float("inf")), 3),
    }


# ----------------------------------------------------------------------------- --scale-in
KWOKNODECLASS = {
    "apiVersion": "karpenter.kwok.sh/v1alpha1",
    "kind": "KWOKNodeClass",
    "metadata": {"name": "default"},
}
DEPLOYMENTS_SHAPES = (("small", "900m", "3100Mi"), ("large", "3500m", "28Gi"))
PriceKey = tuple[str, str, str]  # instance type, zone, capacity type


def controller_catalog() -> list[InstanceType]:
    """The instance types the controller subprocess loads (same environment variable)."""
    return kwok_instance_types(os.environ.get("INSTANCE_TYPES_FILE_PATH", ""))


def plan_price(replicas: int, catalog: Sequence[InstanceType]) -> tuple[float, int]:
    """What ``karpenter-py plan`` prices a fresh cluster for the Deployments at ``replicas``
    each, on the benchmark's NodePool: (hourly cost, NodeClaims)."""
    docs = [
        nodepool(),
        KWOKNODECLASS,
        *(deployment(name, replicas, cpu, mem) for name, cpu, mem in DEPLOYMENTS_SHAPES),
    ]
    with tempfile.TemporaryDirectory(prefix="karpy-plan-") as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        manifests = load_manifests([str(path)])
    now = datetime.now(UTC)
    snapshot = build_cluster(manifests.cluster, now)[0].snapshot(now)
    plan = solve(plan_solve_input(snapshot, catalog), namespace_labels=snapshot.namespace_labels)
    if plan.errors:
        raise RuntimeError(f"plan left {len(plan.errors)} pods unschedulable: {plan.errors[0]}")
    return plan.hourly_cost, len(plan.new_node_claims)


def price_table(catalog: Sequence[InstanceType]) -> dict[PriceKey, float]:
    return {(it.name, o.zone, o.capacity_type): o.price for it in catalog for o in it.offerings}


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _claim_estimate(claim: Mapping[str, Any], prices: Mapping[PriceKey, float]) -> float | None:
    """A NodeClaim not launched yet: the cheapest offering its requirements allow (what the kwok
    provider will pick), or None when it names nothing priceable."""
    allowed: dict[str, set[str]] = {}
    for req in (claim.get("spec") or {}).get("requirements") or []:
        if req.get("operator") == "In":
            allowed[req["key"]] = set(req.get("values") or [])
    types = allowed.get(LABEL_INSTANCE_TYPE)
    zones = allowed.get(LABEL_TOPOLOGY_ZONE)
    capacity_types = allowed.get(LABEL_CAPACITY_TYPE)
    candidates = [
        price
        for (name, zone, ct), price in prices.items()
        if (types is None or name in types)
        and (zones is None or zone in zones)
        and (capacity_types is None or ct in capacity_types)
    ]
    return min(candidates) if candidates and types is not None else None


def _labelled_price(labels: Mapping[str, str], prices: Mapping[PriceKey, float]) -> float | None:
    key = (
        labels.get(LABEL_INSTANCE_TYPE, ""),
        labels.get(LABEL_TOPOLOGY_ZONE, ""),
        labels.get(LABEL_CAPACITY_TYPE, ""),
    )
    return prices.get(key)


async def cluster_cost(client: KubeClient, prices: Mapping[PriceKey, float]) -> dict[str, Any]:
    """The NodePool's hourly cost now: its Nodes, plus the NodeClaims that have no Node yet."""
    nodes = (await client.list(NODES, label_selector=LABEL_NODEPOOL)).items
    claims = (await client.list(NODECLAIMS)).items
    hourly = 0.0
    unpriced = 0
    node_names = set()
    for node in nodes:
        labels = _labels(node)
        if labels.get(KWOK_NODE_LABEL) != "fake":
            continue
        node_names.add(node["metadata"]["name"])
        price = _labelled_price(labels, prices)
        if price is None:
            unpriced += 1
        else:
            hourly += price
    in_flight = 0
    for claim in claims:
        name = claim["metadata"]["name"]
        if name in node_names or (claim.get("status") or {}).get("nodeName") in node_names:
            continue
        in_flight += 1
        price = _labelled_price(_labels(claim), prices)
        if price is None:
            price = _claim_estimate(claim, prices)
        if price is None:
            unpriced += 1
        else:
            hourly += price
    return {
        "hourly": hourly,
        "nodes": len(node_names),
        "in_flight": in_flight,
        "unpriced": unpriced,
    }


async def _running(client: KubeClient) -> tuple[int, int]:
    pods = (await client.list(PODS, namespace="default")).items
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    running = sum(1 for p in live if (p.get("status") or {}).get("phase") == "Running")
    return running, len(live)


async def _sample_forever(sampler: ProcSampler, every: float = 0.5) -> None:
    while True:
        sampler.sample()
        await asyncio.sleep(every)


async def scale_in(
    client: KubeClient,
    pid: int,
    replicas: int,
    *,
    limit: float,
    every: float,
    tolerance: float = 0.10,
) -> dict[str, Any]:
    catalog = controller_catalog()
    prices = price_table(catalog)
    target, target_claims = plan_price(replicas, catalog)
    total = replicas * len(DEPLOYMENTS_SHAPES)
    before = await cluster_cost(client, prices)
    sampler = ProcSampler(pid)
    sampling = asyncio.create_task(_sample_forever(sampler))
    start = time.monotonic()
    try:
        for name, _, _ in DEPLOYMENTS_SHAPES:
            await client.patch(
                DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace="default"
            )
        series: list[list[float]] = []
        consolidated_at: float | None = None
        cost: dict[str, Any] = before
        running = live = 0
        while True:
            now = time.monotonic() - start
            cost = await cluster_cost(client, prices)
            running, live = await _running(client)
            series.append([round(now, 1), round(cost["hourly"], 4)])
            print(
                f"[scale-in] t={now:6.1f}s ${cost['hourly']:.3f}/h (plan ${target:.3f}/h) "
                f"nodes={cost['nodes']} in-flight={cost['in_flight']} running={running}/{live}",
                file=sys.stderr,
                flush=True,
            )
            settled = running == total and live == total and cost["unpriced"] == 0
            if settled and cost["hourly"] <= target * (1 + tolerance):
                consolidated_at = now
                break
            if now >= limit:
                break
            await asyncio.sleep(every)
        until = time.monotonic()
    finally:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
    return {
        "pods": total,
        "seconds_to_consolidated": None if consolidated_at is None else round(consolidated_at, 1),
        "cost_ratio_to_plan": round(cost["hourly"] / target, 3) if target else None,
        "cost_over_time": series,
        "rss_p95_mb": round(sampler.p95_rss(), 1),
        "cpu_avg_cores": round(sampler.avg_cores(start, until), 3),
        "plan_hourly": round(target, 4),
        "plan_nodeclaims": target_claims,
        "hourly_before": round(before["hourly"], 4),
        "hourly_after": round(cost["hourly"], 4),
        "nodes_before": before["nodes"],
        "nodes_after": cost["nodes"],
        "pods_running_after": running,
        "limit_seconds": limit,
        "tolerance": tolerance,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def controller_env(kubeconfig: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The controller subprocess's environment: single replica, free ports, info logs."""
    return dict(
        os.environ,
        KUBECONFIG=str(kubeconfig),
        DISABLE_LEADER_ELECTION="true",
        HEALTH_PROBE_PORT=str(free_port()),
        METRICS_PORT=str(free_port()),
        LOG_LEVEL="info",
        **extra,
    )


def stop_controller(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def start_controller(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "karpenter_py", "controller"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def wait_nodeclass_ready(
    client: KubeClient, name: str = "default", limit: float = 120.0
) -> None:
    start = time.monotonic()
    nc: dict[str, Any] = {}
    while time.monotonic() - start < limit:
        nc = await client.get(EC2NODECLASSES, name)
        conditions = (nc.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"EC2NodeClass {name} not Ready after {limit} s: {nc.get('status')}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.cloud_provider == "aws":
        async with aws_world() as world:
            return await _run(args, world)
    return await _run(args, None)


async def _run(args: argparse.Namespace, world: AwsWorld | None) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="karpy-e2e-"))
    fast = ["--kube-api-qps=500", "--kube-api-burst=1000"]
    cluster = LocalCluster(
        state_dir=state,
        controller_manager_args=[*fast, "--concurrent-replicaset-syncs=10"],
        scheduler_args=fast,
    )
    cluster.start()
    proc = None
    try:
        config = load_config(str(cluster.kubeconfig_path))
        async with KubeClient(config) as client, contextlib.AsyncExitStack() as stack:
            if world is None:
                await setup(client)
            else:
                await install_crds(client)
                await client.create(EC2NODECLASSES, world.nodeclass())
                await client.create(NODEPOOLS, aws_nodepool())
            env = controller_env(
                cluster.kubeconfig_path, world.controller_env() if world is not None else {}
            )
            proc = await asyncio.to_thread(start_controller, env, state / "controller.log")
            sampler = ProcSampler(proc.pid)
            if world is not None:
                await wait_nodeclass_ready(client)
                await world.load_types(client)
                await stack.enter_async_context(running_kubelet(world.kubelet(client)))
            await asyncio.sleep(2.0)  # informers list and sync
            result = await measure(
                client,
                sampler,
                2 * args.pods_per_deployment,
                args.pods_per_deployment,
                args.timeout,
            )
            if args.scale_in:
                if result["seconds_to_running"] is None:
                    raise RuntimeError(f"scale-out did not finish: {result}")
                scale_out = result
                result = await scale_in(
                    client,
                    proc.pid,
                    args.scale_in_pods_per_deployment,
                    limit=args.scale_in_limit,
                    every=args.scale_in_every,
                )
                result["scale_out"] = scale_out
            if world is not None:
                result["cloud_provider"] = "aws"
                result["create_fleet_calls"] = await world.create_fleet_calls()
                result["instances"] = len(await world.instances("pending", "running"))
            result["controller_log"] = str(state / "controller.log")
            return result
    finally:
        if proc is not None:
            stop_controller(proc)
        cluster.stop()
        if not args.keep:
            shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods-per-deployment", type=int, default=500)
    parser.add_argument("--cloud-provider", choices=("kwok", "aws"), default="kwok")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--keep", action="store_true", help="keep the cluster state dir and controller log"
    )
    parser.add_argument(
        "--scale-in",
        action="store_true",
        help="after the scale-out, scale in and time consolidation",
    )
    parser.add_argument("--scale-in-pods-per-deployment", type=int, default=350)
    parser.add_argument(
        "--scale-in-limit", type=float, default=300.0, help="give up consolidating after this"
    )
    parser.add_argument("--scale-in-every", type=float, default=3.0, help="cost sampling period")
    args = parser.parse_args(argv)
    if args.scale_in and args.cloud_provider == "aws":
        parser.error("--scale-in runs on the kwok provider only")
    if args.scale_in and args.scale_in_pods_per_deployment > args.pods_per_deployment:
        parser.error("--scale-in-pods-per-deployment must not exceed --pods-per-deployment")
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.scale_in:
        return 0 if result["seconds_to_consolidated"] is not None else 1
    return 0 if result["seconds_to_running"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
