"""Consolidation-decision benchmark: multi-node over 100 candidates, single-node over 500 nodes.

Pure: no API server, no controller. Clusters are built in ``state.cluster.Cluster`` from
``tests.factories`` (NodePool, Node, NodeClaim, Pod), with the built-in 1,340-type AWS catalog as
the NodePool's instance types. The NodePool: ``consolidateAfter: 0s``, one budget of ``nodes:
100%``, requirements capacity-type on-demand, arch amd64, os linux (the 925 amd64/linux types
with on-demand offerings stay in play). The nodeclass is ready and every kind synced. Every node
has a NodeClaim with Launched, Registered, Initialized and Consolidatable True, the usual labels
(nodepool, instance-type, zone us-east-1a..c, capacity-type, registered, initialized, arch, os)
and its catalog type's allocatable. Pods are Running, owned by a ReplicaSet, bound with a seeded
RNG. ``now`` is one hour after every creation and condition time.

Timed, on the real decision code (``controllers.disruption.decide``). The public entry points
``next_command``/``evaluate`` run emptiness and drift first; here the methods are called
directly on a fresh ``PassContext(facts, timer)``, so only the method is timed; building the
context (candidates, the Simulator's solver input) is reported apart as ``setup_seconds``.
Time limits are raised to an hour so the whole search is measured.

* **multi-node** (``multi_node_seconds``): ``MULTI_NODE.compute_command(ctx)`` with
  ``search="extended"`` (the default: upstream's prefix binary search, then our greedy subset
  search) on a 100-node cluster of m5/c5/r5 large..4xlarge nodes, each 20-60 % utilised (the
  scenario where consolidation finds work), so all 100 nodes are candidates; also with
  ``search="upstream"``, on the variants below, and on a 500-node cluster (100 of 500
  candidates, ``multi_node_big``).
* **single-node** (``single_node_seconds``): ``SINGLE_NODE.compute_command(ctx)`` on a 500-node cluster
  built so that the pass must try every candidate and finds nothing, its worst case: every node
  runs the cheapest catalog type (among the pool's) that holds its pods, and no pod fits in the
  room any other node has left (every pod asks for at least 1 CPU, every node has less than 1
  CPU free). The node types are computed from the catalog, not listed: types no strictly
  cheaper compatible type dominates in CPU, memory and pods (t3a, m5a, r5a, c6a sizes), i.e. a
  cluster Karpenter itself would have launched. An independent check (plain arithmetic, not the
  solver) confirms both properties for every node before timing; the run fails unless the pass
  returns no command after exactly 500 simulations.

One ``IndexCache`` is shared across passes and warmed before timing, as the controller shares
the provisioner's (its cold build is ``index_build_seconds``). Each case is repeated
(``--repeats``, a fresh ``PassContext`` each time) and the median reported.

**Saving**: on ``--clusters`` seeded 100-node clusters of the multi-node kind, every command
disruption would take in order, with ``search="upstream"`` and ``search="extended"``; the hourly
saving is the sum of the commands' savings, and the cost after is checked against the cluster
the commands leave (``apply_command``), and a lost pod fails the run. Variants: ``open`` (the
NodePool above), ``capped`` (types up to 32 vCPUs, so 100 nodes cannot become one) and ``zonal``
(20 % of pods select their node's zone, as pods with zonal volumes are bound to it). The
headline ``saving_*`` keys add up all three variants' clusters.

    python benchmarks/consolidation.py --out benchmarks/results/consolidation.json
    python benchmarks/consolidation.py --repeats 1 --skip-savings --profile
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests.factories (benchmarks run as a script)

from karpenter_py.cloudprovider.aws.instancetype_math import builtin_aws_instance_types  # noqa: E402
from karpenter_py.controllers.disruption.candidates import hourly_price  # noqa: E402
from karpenter_py.controllers.disruption.context import PassContext  # noqa: E402
from karpenter_py.controllers.disruption.decide import (  # noqa: E402
    Facts,
    Search,
    apply_command,
    evaluate,
)
from karpenter_py.controllers.disruption.multinode import MULTI_NODE  # noqa: E402
from karpenter_py.controllers.disruption.singlenode import SINGLE_NODE  # noqa: E402
from karpenter_py.controllers.disruption.types import Command, Method  # noqa: E402
from karpenter_py.model.api.nodepool import NodePool  # noqa: E402
from karpenter_py.model.instancetype import InstanceType  # noqa: E402
from karpenter_py.model.labels import (  # noqa: E402
    LABEL_CAPACITY_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.instances import IndexCache  # noqa: E402
from karpenter_py.state.cluster import KINDS, Cluster  # noqa: E402
from karpenter_py.state.snapshot import Snapshot  # noqa: E402
from tests import factories  # noqa: E402

POOL = "default"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
T0 = datetime(2026, 1, 1, tzinfo=UTC)  # factories.T0: creation and condition times
NOW = T0 + timedelta(hours=1)
GiB = 2**30
MiB = 2**20

# The multi-node clusters: m5/c5/r5, smaller sizes more common.
FAMILIES = ("m5", "c5", "r5")
SIZES = (("large", 4), ("xlarge", 4), ("2xlarge", 2), ("4xlarge", 1))
POD_CPU_M = (100, 250, 500, 1000)
UTIL = (0.20, 0.60)
# The single-node cluster: every pod asks for at least this much CPU, every node has less free.
FULL_POD_CPU_M = (1000, 1500, 2000)


# ----------------------------------------------------------------------------- the catalog
@dataclass(frozen=True, slots=True)
class Catalog:
    types: list[InstanceType]
    by_name: dict[str, InstanceType]
    compatible: list[InstanceType]  # amd64, linux, on-demand in every benchmark zone

    @staticmethod
    def load() -> Catalog:
        types = builtin_aws_instance_types()
        compatible = [
            it
            for it in types
            if "amd64" in it.requirements.get(ARCH, ())
            and "linux" in it.requirements.get(OS, ())
            and all(_od_price(it, z) is not None for z in ZONES)
        ]
        return Catalog(types, {it.name: it for it in types}, compatible)


def _od_price(it: InstanceType, zone: str) -> float | None:
    for o in it.offerings:
        if o.zone == zone and o.capacity_type == "on-demand" and o.available:
            return o.price
    return None


def _min_od_price(it: InstanceType) -> float:
    """The cheapest available on-demand offering in any zone (a replacement may go anywhere)."""
    return min(
        (o.price for o in it.offerings if o.capacity_type == "on-demand" and o.available),
        default=float("inf"),
    )


def _fits(it: InstanceType, cpu: int, mem: int, pods: int) -> bool:
    a = it.allocatable
    return a.get("cpu", 0) >= cpu and a.get("memory", 0) >= mem and a.get("pods", 0) >= pods


def cheapest_for_shape(cat: Catalog, max_vcpu: int = 16) -> list[InstanceType]:
    """Compatible types that no strictly cheaper compatible type dominates (CPU, memory, pods),
    with 2..max_vcpu vCPUs, at least 1.9 CPUs allocatable and 1.5-8.5 GiB per vCPU."""
    out = []
    for it in cat.compatible:
        a = it.allocatable
        vcpu = it.capacity.get("cpu", 0) // 1000
        if (
            not 2 <= vcpu <= max_vcpu
            or not 1.5 * GiB * vcpu <= a.get("memory", 0) <= 8.5 * GiB * vcpu
        ):
            continue
        if a.get("cpu", 0) < 1900:
            continue
        price = _od_price(it, ZONES[0]) or 0.0
        if any(
            _min_od_price(u) < price - 1e-12 and _fits(u, a["cpu"], a["memory"], a["pods"])
            for u in cat.compatible
        ):
            continue
        out.append(it)
    return sorted(out, key=lambda it: it.name)


# ----------------------------------------------------------------------------- clusters
@dataclass(slots=True)
class Built:
    cluster: Cluster
    node_types: dict[str, str] = field(default_factory=dict)  # node -> instance type
    pods: int = 0

    def snapshot(self) -> Snapshot:
        return self.cluster.snapshot(NOW)


def _nodepool(max_vcpu: int | None = None) -> NodePool:
    requirements: list[dict[str, Any]] = [
        {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": ARCH, "operator": "In", "values": ["amd64"]},
        {"key": OS, "operator": "In", "values": ["linux"]},
    ]
    if max_vcpu is not None:
        requirements.append({"key": INSTANCE_CPU, "operator": "Lt", "values": [str(max_vcpu + 1)]})
    return factories.nodepool(
        POOL,
        requirements=requirements,
        disruption={
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "0s",
            "budgets": [{"nodes": "100%"}],
        },
    )


def _empty_cluster(max_vcpu: int | None = None) -> Cluster:
    cluster = Cluster()
    cluster.upsert_nodepool(_nodepool(max_vcpu))
    cluster.upsert_nodeclass(factories.KWOK_NODECLASS_KEY, True)
    for kind in KINDS:
        cluster.mark_synced(kind)
    return cluster


CONDITIONS = [
    {"type": t, "status": "True", "lastTransitionTime": factories.T0, "reason": t}
    for t in ("Launched", "Registered", "Initialized", "Consolidatable")
]


def _add_node(built: Built, name: str, it: InstanceType, zone: str) -> None:
    labels = factories.node_labels(POOL, it.name, zone=zone, capacity_type="on-demand")
    labels |= {ARCH: "amd64", OS: "linux"}
    alloc = {
        k: (f"{v}m" if k == "cpu" else str(v))
        for k, v in it.allocatable.items()
        if k in ("cpu", "memory", "pods", "ephemeral-storage")
    }
    built.cluster.upsert_node(factories.node(name, labels=labels, allocatable=alloc))
    claim_labels = {k: v for k, v in labels.items() if k != LABEL_NODEPOOL}
    built.cluster.upsert_nodeclaim(
        factories.nodeclaim(name, pool=POOL, labels=claim_labels, conditions=list(CONDITIONS))
    )
    built.node_types[name] = it.name


def _add_pod(built: Built, node: str, cpu_m: int, mem: int, zone: str | None = None) -> None:
    built.pods += 1
    pod = factories.pod(
        f"p{built.pods:06d}", node_name=node, cpu=f"{cpu_m}m", memory=f"{max(1, mem // MiB)}Mi"
    )
    if zone is not None:
        pod = replace(pod, node_selector={LABEL_TOPOLOGY_ZONE: zone})
    built.cluster.upsert_pod(pod)


def underutilized_cluster(
    cat: Catalog, nodes: int, seed: int, max_vcpu: int | None = None, zonal: float = 0.0
) -> Built:
    """m5/c5/r5 nodes, each filled to a random 20-60 % of its CPU and memory; ``max_vcpu`` caps
    the size of the types the NodePool may launch; a ``zonal`` share of the pods select their
    node's zone (as pods with a zonal volume are bound to it)."""
    rng = random.Random(seed)
    built = Built(_empty_cluster(max_vcpu))
    names = [f"{f}.{s}" for f in FAMILIES for s, _ in SIZES]
    weights = [w for _ in FAMILIES for _, w in SIZES]
    for i in range(nodes):
        it = cat.by_name[rng.choices(names, weights)[0]]
        name = f"node-{i:04d}"
        _add_node(built, name, it, ZONES[i % len(ZONES)])
        a = it.allocatable
        ratio = a["memory"] / a["cpu"]  # bytes per milli-CPU of this family
        target = rng.uniform(*UTIL)
        cpu = mem = 0
        while True:
            c = rng.choice(POD_CPU_M)
            m = int(c * ratio * rng.uniform(0.6, 1.4))
            if cpu and (cpu + c > target * a["cpu"] or mem + m > target * a["memory"]):
                break
            zone = ZONES[i % len(ZONES)] if zonal and rng.random() < zonal else None
            _add_pod(built, name, c, m, zone)
            cpu, mem = cpu + c, mem + m
    return built


def _fill(
    rng: random.Random, cat: Catalog, it: InstanceType, attempts: int = 50
) -> tuple[list[int], list[int]] | None:
    """Pods (CPU millis, memory bytes) for a node of ``it``: 1-2 CPU each until less than 1 CPU
    is left, 90-97 % of its memory, and too big for any strictly cheaper type; None when the
    draws keep fitting a cheaper type (the type is cheapest only when nearly full)."""
    a = it.allocatable
    for _ in range(attempts):
        cpus: list[int] = []
        while True:
            fitting = [c for c in FULL_POD_CPU_M if sum(cpus) + c <= a["cpu"]]
            if not fitting:
                break
            cpus.append(rng.choice(fitting))
        total_mem = int(a["memory"] * rng.uniform(0.90, 0.97))
        cuts = sorted(rng.random() for _ in range(len(cpus) - 1))
        shares = [hi - lo for lo, hi in zip([0.0, *cuts], [*cuts, 1.0], strict=True)]
        mems = [max(MiB, int(total_mem * s)) for s in shares]
        if not _cheaper_type_fits(cat, it, sum(cpus), sum(mems), len(cpus)):
            return cpus, mems
    return None


def full_cluster(cat: Catalog, nodes: int, seed: int) -> Built:
    """Nodes on cheapest-for-shape types, full enough that no single-node consolidation exists:
    each node's pods outgrow every strictly cheaper type and fit nowhere else."""
    rng = random.Random(seed)
    shapes = [it for it in cheapest_for_shape(cat) if _fill(random.Random(0), cat, it)]
    if not shapes:
        raise RuntimeError("the catalog has no cheapest-for-shape type to build nodes from")
    built = Built(_empty_cluster())
    for i in range(nodes):
        while True:
            it = rng.choice(shapes)
            filled = _fill(rng, cat, it)
            if filled is not None:
                break
        name = f"node-{i:04d}"
        _add_node(built, name, it, ZONES[i % len(ZONES)])
        for c, m in zip(*filled, strict=True):
            _add_pod(built, name, c, m)
    return built


def _cheaper_type_fits(cat: Catalog, it: InstanceType, cpu: int, mem: int, pods: int) -> bool:
    price = _od_price(it, ZONES[0]) or 0.0
    return any(
        _min_od_price(u) < price - 1e-12 and _fits(u, cpu, mem, pods) for u in cat.compatible
    )


def check_full(cat: Catalog, built: Built) -> None:
    """Independent of the solver: no pod fits in another node's free room, and no node's pods
    fit on a strictly cheaper compatible type. Raises otherwise."""
    snap = built.snapshot()
    free_cpu: dict[str, int] = {}
    need: dict[str, tuple[int, int, int]] = {}
    min_pod_cpu = 10**18
    for n in snap.nodes:
        pods = snap.pods_by_node.get(n.name, ())
        cpu = sum(p.requests.get("cpu", 0) for p in pods)
        mem = sum(p.requests.get("memory", 0) for p in pods)
        free_cpu[n.name] = cat.by_name[built.node_types[n.name]].allocatable["cpu"] - cpu
        need[n.name] = (cpu, mem, len(pods))
        min_pod_cpu = min([min_pod_cpu, *(p.requests.get("cpu", 0) for p in pods)])
    for name, free in free_cpu.items():
        if free >= min_pod_cpu:
            raise RuntimeError(
                f"{name} has {free}m CPU free: a {min_pod_cpu}m pod could move there"
            )
        cpu, mem, count = need[name]
        it = cat.by_name[built.node_types[name]]
        if _cheaper_type_fits(cat, it, cpu, mem, count):
            raise RuntimeError(f"{name} ({it.name}) fits on a cheaper type")


# ----------------------------------------------------------------------------- timing
def facts(snap: Snapshot, cat: Catalog, search: Search, indexes: IndexCache | None) -> Facts:
    return Facts(
        snapshot=snap,
        instance_types={POOL: cat.types},
        now=NOW,
        search=search,
        indexes=indexes,
        multi_node_timeout=3600.0,  # measure the whole search, not upstream's 1 min cut-off
        single_node_timeout=3600.0,
    )


@dataclass(slots=True)
class Timing:
    setup: list[float] = field(default_factory=list)
    method: list[float] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    command: Command | None = None
    eligible: int = 0


def time_method(
    f: Facts,
    method: Method,
    repeats: int,
    profiler: cProfile.Profile | None = None,
) -> Timing:
    t = Timing()
    for i in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        p = PassContext(f, time.perf_counter)
        t1 = time.perf_counter()
        if profiler is not None and i == 0:
            profiler.enable()
        command = method.compute_command(p)
        t2 = time.perf_counter()
        if profiler is not None and i == 0:
            profiler.disable()
        t.setup.append(t1 - t0)
        t.method.append(t2 - t1)
        t.runs.append(p.sim.runs)
        t.command = command
        t.eligible = p.eligible.get(method, 0)
    return t


def warm_index(f: Facts) -> float:
    """Build the pool's instance-type index once (what the provisioner's cache already holds)."""
    gc.collect()
    t0 = time.perf_counter()
    PassContext(f, time.perf_counter).sim.run([])
    return time.perf_counter() - t0


def _describe(c: Command | None) -> str:
    if c is None:
        return "no command"
    return f"{c.method.name}: {c.explanation}"


# ----------------------------------------------------------------------------- savings
def cluster_cost(snap: Snapshot, cat: Catalog) -> float:
    return sum(hourly_price(n, {POOL: cat.types}) for n in snap.nodes)


def _live_pods(snap: Snapshot) -> int:
    names = {n.name for n in snap.nodes}
    return sum(len(pods) for name, pods in snap.pods_by_node.items() if name in names)


def saving_case(cat: Catalog, built: Built, search: Search, indexes: IndexCache) -> dict[str, Any]:
    """One cluster, one search: every command ``evaluate`` finds, replayed to check the cost
    after and that no pod is lost."""
    snap = built.snapshot()
    f = facts(snap, cat, search, indexes)
    gc.collect()
    t0 = time.perf_counter()
    commands = list(evaluate(f).commands)
    seconds = time.perf_counter() - t0
    saving = sum(c.savings for c in commands)
    before = cluster_cost(snap, cat)
    after = snap
    for i, c in enumerate(commands):
        after = apply_command(after, c, tag=str(i))
    by_method: dict[str, int] = {}
    for c in commands:
        by_method[c.method.name] = by_method.get(c.method.name, 0) + 1
    names = [n.name for n in after.nodes]
    return {
        "nodes_before": len(snap.nodes),
        "nodes_after": len(after.nodes),
        "duplicate_node_names_after": len(names) - len(set(names)),
        "pods_before": _live_pods(snap),
        "pods_after": _live_pods(after),
        "cost_before_hourly": round(before, 4),
        "cost_after_hourly": round(cluster_cost(after, cat), 4),
        "saving_hourly": round(saving, 4),
        "commands": len(commands),
        "commands_by_method": by_method,
        "seconds": round(seconds, 3),
    }


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    max_vcpu: int | None = None
    zonal: float = 0.0

    def describe(self) -> str:
        parts = ["on-demand/amd64/linux"]
        if self.max_vcpu is not None:
            parts.append(f"types <= {self.max_vcpu} vCPU")
        if self.zonal:
            parts.append(f"{self.zonal:.0%} of pods select their node's zone")
        return ", ".join(parts)


def savings(
    v: Variant, cat: Catalog, nodes: int, seeds: Sequence[int], indexes: IndexCache
) -> tuple[dict[str, Any], list[str]]:
    """Both searches on each seeded cluster; totals over the clusters."""
    print(f"saving, {v.name} ({v.describe()}):")
    rows = []
    problems = []
    for seed in seeds:
        built = underutilized_cluster(cat, nodes, seed, v.max_vcpu, v.zonal)
        row: dict[str, Any] = {"seed": seed}
        for mode in ("evaluate",):
            for search in ("upstream", "extended"):
                r = row[f"{mode}_{search}"] = saving_case(cat, built, search, indexes)
                lost = r["pods_before"] - r["pods_after"]
                print(
                    f"  seed {seed} {mode:>12} {search:>8}: ${r['cost_before_hourly']:.4f}/h -> "
                    f"${r['cost_after_hourly']:.4f}/h ({r['nodes_before']} -> "
                    f"{r['nodes_after']} nodes), saves ${r['saving_hourly']:.4f}/h in "
                    f"{r['commands']} command(s) [{r['seconds']:.1f}s]"
                    + (f"  PODS LOST: {lost} of {r['pods_before']}" if lost else "")
                )
                off = r["cost_before_hourly"] - r["saving_hourly"] - r["cost_after_hourly"]
                if abs(off) > 1e-3:
                    problems.append(f"{v.name} seed {seed} {mode} {search}: cost off by {off}")
                if lost:
                    problems.append(f"{v.name} seed {seed} {search}: {lost} pods lost")
        rows.append(row)
    out: dict[str, Any] = {"description": v.describe()}
    before = sum(r["evaluate_upstream"]["cost_before_hourly"] for r in rows)
    out["cost_before_hourly"] = round(before, 4)
    for mode in ("evaluate",):
        up = sum(r[f"{mode}_upstream"]["saving_hourly"] for r in rows)
        ours = sum(r[f"{mode}_extended"]["saving_hourly"] for r in rows)
        lost = sum(
            r[f"{mode}_{s}"]["pods_before"] - r[f"{mode}_{s}"]["pods_after"]
            for r in rows
            for s in ("upstream", "extended")
        )
        better = sum(
            r[f"{mode}_extended"]["saving_hourly"] > r[f"{mode}_upstream"]["saving_hourly"] + 1e-6
            for r in rows
        )
        worse = sum(
            r[f"{mode}_extended"]["saving_hourly"] < r[f"{mode}_upstream"]["saving_hourly"] - 1e-6
            for r in rows
        )
        out[mode] = {
            "saving_upstream_style_hourly": round(up, 4),
            "saving_hourly": round(ours, 4),
            "cost_after_upstream_style_hourly": round(before - up, 4),
            "cost_after_hourly": round(before - ours, 4),
            "clusters_ours_better": better,
            "clusters_ours_worse": worse,
            "pods_lost": lost,
        }
        print(
            f"  total {mode:>12}, {len(rows)} clusters: ${before:.4f}/h before; upstream-style "
            f"saves ${up:.4f}/h ({100 * up / before:.1f} %), ours ${ours:.4f}/h "
            f"({100 * ours / before:.1f} %); ours better on {better}, worse on {worse}"
            + (f"; {lost} pods lost" if lost else "")
        )
    out["clusters"] = rows
    return out, problems


# ----------------------------------------------------------------------------- main
def _med(xs: Sequence[float]) -> float:
    return round(statistics.median(xs), 4)


def _print_profile(profiler: cProfile.Profile, title: str, top: int) -> None:
    print(f"\n--- profile: {title} (first repeat, method only) ---")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top // 2)


def multi_case(
    label: str,
    cat: Catalog,
    built: Built,
    indexes: IndexCache,
    repeats: int,
    profile: bool,
) -> dict[str, Any]:
    """Time multi-node consolidation with both searches on one cluster."""
    snap = built.snapshot()
    index_s = warm_index(facts(snap, cat, "extended", indexes))
    out: dict[str, Any] = {"nodes": len(snap.nodes), "pods": built.pods}
    for search in ("extended", "upstream"):
        prof = cProfile.Profile() if profile else None
        r = time_method(facts(snap, cat, search, indexes), MULTI_NODE, repeats, prof)
        considered = min(r.eligible, 100)
        print(
            f"multi-node {label} ({search}): {considered} of {r.eligible} candidates, "
            f"{len(snap.nodes)} nodes, {built.pods} pods: {_med(r.method):.3f}s median of "
            f"{repeats} (min {min(r.method):.3f}s), {r.runs[0]} simulations, setup "
            f"{_med(r.setup):.3f}s; {_describe(r.command)}"
        )
        if prof is not None:
            _print_profile(prof, f"multi-node {label} {search}", 30)
        out[search] = {
            "seconds": _med(r.method),
            "seconds_all": [round(x, 4) for x in r.method],
            "setup_seconds": _med(r.setup),
            "simulations": r.runs[0],
            "candidates": considered,
            "command": _describe(r.command),
        }
    out["index_build_seconds"] = round(index_s, 4)
    return out


def single_case(
    cat: Catalog, nodes: int, seed: int, indexes: IndexCache, repeats: int, profile: bool
) -> tuple[dict[str, Any], list[str]]:
    full = full_cluster(cat, nodes, seed)
    check_full(cat, full)
    types_used = sorted(set(full.node_types.values()))
    snap = full.snapshot()
    warm_index(facts(snap, cat, "extended", indexes))
    prof = cProfile.Profile() if profile else None
    r = time_method(facts(snap, cat, "extended", indexes), SINGLE_NODE, repeats, prof)
    print(
        f"single-node: {r.eligible} candidates, {full.pods} pods (types "
        f"{', '.join(types_used)}): {_med(r.method):.3f}s median of {repeats} "
        f"(min {min(r.method):.3f}s), {r.runs[0]} simulations "
        f"({1000 * _med(r.method) / max(1, r.runs[0]):.1f} ms each), "
        f"setup {_med(r.setup):.3f}s; {_describe(r.command)}"
    )
    if prof is not None:
        _print_profile(prof, "single-node", 30)
    problems = []
    if r.command is not None or r.runs[0] != nodes:
        problems.append(
            f"single-node pass was meant to try all {nodes} candidates and find nothing; "
            f"it ran {r.runs[0]} simulations: {_describe(r.command)}"
        )
    return {
        "seconds": _med(r.method),
        "seconds_all": [round(x, 4) for x in r.method],
        "setup_seconds": _med(r.setup),
        "candidates": r.eligible,
        "nodes": nodes,
        "pods": full.pods,
        "simulations": r.runs[0],
        "types": types_used,
    }, problems


VARIANTS = (
    Variant("open"),
    Variant("capped", max_vcpu=32),
    Variant("zonal", zonal=0.2),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100, help="multi-node cluster size")
    parser.add_argument(
        "--big-nodes", type=int, default=500, help="also time multi-node on this many (0: skip)"
    )
    parser.add_argument("--single-nodes", type=int, default=500, help="single-node cluster size")
    parser.add_argument(
        "--variants",
        default=",".join(v.name for v in VARIANTS),
        help="cluster variants for multi-node timing and the saving (open is the headline)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats (median reported)")
    parser.add_argument("--clusters", type=int, default=5, help="seeded clusters for the saving")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--cpu", type=int, help="pin the process to this CPU")
    parser.add_argument("--profile", action="store_true", help="cProfile each timed method")
    parser.add_argument("--skip-savings", action="store_true", help="timings only")
    parser.add_argument("--out", type=Path, help="write results as JSON here")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    wanted = set(args.variants.split(","))
    variants = [v for v in VARIANTS if v.name in wanted or v.name == "open"]

    t0 = time.perf_counter()
    cat = Catalog.load()
    print(
        f"catalog: {len(cat.types)} types ({len(cat.compatible)} amd64/linux on-demand in "
        f"{', '.join(ZONES)}), built in {time.perf_counter() - t0:.2f}s; "
        f"CPUs allowed: {sorted(os.sched_getaffinity(0))}; python {sys.version.split()[0]}"
    )
    indexes = IndexCache()
    out: dict[str, Any] = {
        "instance_types": len(cat.types),
        "repeats": args.repeats,
        "seed": args.seed,
        "cpus": sorted(os.sched_getaffinity(0)),
    }
    problems: list[str] = []

    for v in variants:
        built = underutilized_cluster(cat, args.nodes, args.seed, v.max_vcpu, v.zonal)
        case = multi_case(v.name, cat, built, indexes, args.repeats, args.profile)
        case["description"] = v.describe()
        out[f"multi_node_{v.name}"] = case
        if v.name == "open":
            if case["extended"]["candidates"] != min(args.nodes, 100):
                problems.append(f"multi-node considered {case['extended']['candidates']}")
            out["multi_node_seconds"] = case["extended"]["seconds"]
            out["multi_node_upstream_seconds"] = case["upstream"]["seconds"]
    if args.big_nodes:
        out["multi_node_big"] = multi_case(
            f"open-{args.big_nodes}",
            cat,
            underutilized_cluster(cat, args.big_nodes, args.seed),
            indexes,
            args.repeats,
            args.profile,
        )

    single, why = single_case(
        cat, args.single_nodes, args.seed, indexes, args.repeats, args.profile
    )
    problems += why
    out |= {"single_node_seconds": single["seconds"], "single_node": single}

    if not args.skip_savings:
        seeds = [args.seed + k for k in range(args.clusters)]
        for v in variants:
            result, why = savings(v, cat, args.nodes, seeds, indexes)
            problems += why
            out[f"saving_{v.name}"] = result
            # The headline figures add up every variant's clusters (open, capped, zonal).
            for key in ("saving_upstream_style_hourly", "saving_hourly"):
                out[key] = round(out.get(key, 0.0) + result["evaluate"][key], 4)

    m, s1 = out["multi_node_seconds"], out["single_node_seconds"]
    print(
        f"targets (one core): multi-node {m:.3f}s {'<' if m < 5 else '>='} 5s "
        f"({'met' if m < 5 else 'MISSED'}), single-node {s1:.3f}s {'<' if s1 < 10 else '>='} 10s "
        f"({'met' if s1 < 10 else 'MISSED'})"
    )
    out["targets_met"] = {"multi_node": m < 5, "single_node": s1 < 10}
    out["problems"] = problems
    for p in problems:
        print(f"FAIL: {p}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
