"""Many-NodePools benchmark (issue 16, section 3): upstream's performance suite creates 500.

Each NodePool is a different requirement set over the built-in 1,340-type AWS catalog (instance
category, generation and CPU bounds, capacity type, architecture, zones, crossed in a fixed
shuffled order), with its own template label (``team``) and, for every tenth pool, a
``dedicated`` taint. Most pools use the default EC2NodeClass; every tenth one with a bigger root
volume and every 25th one on AL2 (each class its own catalog, ``builtin_aws_catalog(knobs)``,
shared by the pools that use it, as the AWS provider shares it). Two DaemonSets run on the
nodes (one everywhere, one on amd64 only).

1,000 pending pods of mixed sizes: most ask for nothing in particular, a fifth select a team's
pools by label (and tolerate the ``dedicated`` taint of the pool they were written for), some ask
for arm64.

A round is what the provisioner does (``state.cluster.Cluster`` -> snapshot ->
``fromstate.solve_input`` -> ``solve`` with the round's ``IndexCache``): ``cold`` with a fresh
cache (every pool's instance-type index built), ``warm`` the next round with the same cache.
``index_mb`` is what the cache holds after the cold round (tracemalloc, in a separate run: the
indexes and the memos the solve filled in); the catalogs themselves are ``catalog_mb`` (built
once per NodeClass, before the round). The same is measured at 10 and 50 pools to show growth.

    python benchmarks/nodepools.py --out benchmarks/results/nodepools.json [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import json
import pstats
import random
import sys
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests.factories (benchmarks run as a script)

from karpenter_py.cloudprovider.aws.instancetype_math import (  # noqa: E402
    NodeKnobs,
    builtin_aws_catalog,
)
from karpenter_py.model.core import Pod  # noqa: E402
from karpenter_py.model.instancetype import InstanceType  # noqa: E402
from karpenter_py.model.labels import (  # noqa: E402
    AWS_LABEL_INSTANCE_CATEGORY,
    AWS_LABEL_INSTANCE_CPU,
    AWS_LABEL_INSTANCE_GENERATION,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.fromstate import solve_input  # noqa: E402
from karpenter_py.scheduling.inputs import SolveOptions  # noqa: E402
from karpenter_py.scheduling.instances import IndexCache  # noqa: E402
from karpenter_py.scheduling.plan import Plan  # noqa: E402
from karpenter_py.scheduling.scheduler import solve  # noqa: E402
from karpenter_py.state.cluster import KINDS, Cluster  # noqa: E402
from tests import factories  # noqa: E402

NOW = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=1)
MB = 2**20
SIZES = (10, 50, 500)
TEAMS = 20
EC2 = ("karpenter.k8s.aws", "EC2NodeClass")
# NodeClass name -> the knobs its catalog is built with.
NODECLASSES: Mapping[str, NodeKnobs] = {
    "default": NodeKnobs(),
    "large-disk": NodeKnobs(ephemeral_storage=100 * 2**30),
    "al2": NodeKnobs(ami_family="AL2"),
}
CATEGORIES = (("c",), ("m",), ("r",), ("c", "m"), ("m", "r"), ("c", "m", "r"))
GENERATION_ABOVE = (None, "4", "5", "6")
CPU_BELOW = (None, "9", "17", "33", "65")
CAPACITY_TYPES = (("on-demand",), ("spot",), ("on-demand", "spot"))
ARCHES = (("amd64",), ("arm64",), ("amd64", "arm64"))
ZONE_SETS = (
    None,
    ("us-east-1a",),
    ("us-east-1a", "us-east-1b"),
    ("us-east-1b", "us-east-1c"),
)
CPU = ("100m", "250m", "500m", "1", "2", "4")
MEMORY = ("128Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")


def _req(key: str, operator: str, values: Sequence[str]) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def requirement_sets(count: int) -> list[list[dict[str, Any]]]:
    """``count`` different requirement sets (the same first ones for any count)."""
    combos = list(
        itertools.product(
            CATEGORIES, GENERATION_ABOVE, CPU_BELOW, CAPACITY_TYPES, ARCHES, ZONE_SETS
        )
    )
    random.Random(16).shuffle(combos)
    if count > len(combos):
        raise ValueError(f"at most {len(combos)} distinct requirement sets, asked for {count}")
    out = []
    for category, generation, cpu, capacity, arch, zones in combos[:count]:
        reqs = [
            _req(AWS_LABEL_INSTANCE_CATEGORY, "In", category),
            _req(LABEL_CAPACITY_TYPE, "In", capacity),
            _req(LABEL_ARCH, "In", arch),
        ]
        if generation is not None:
            reqs.append(_req(AWS_LABEL_INSTANCE_GENERATION, "Gt", (generation,)))
        if cpu is not None:
            reqs.append(_req(AWS_LABEL_INSTANCE_CPU, "Lt", (cpu,)))
        if zones is not None:
            reqs.append(_req(LABEL_TOPOLOGY_ZONE, "In", zones))
        out.append(reqs)
    return out


def _nodeclass(i: int) -> str:
    if i % 25 == 0:
        return "al2"
    return "large-disk" if i % 10 == 0 else "default"


def _dedicated(i: int) -> bool:
    return i % 10 == 5


def _team(i: int) -> str:
    return f"team-{i % TEAMS}"


def build_cluster(pools: int, pods: int) -> tuple[Cluster, dict[str, Sequence[InstanceType]]]:
    """The cluster and each pool's instance types (its NodeClass's catalog)."""
    cluster = Cluster()
    types: dict[str, Sequence[InstanceType]] = {}
    for i, reqs in enumerate(requirement_sets(pools)):
        name = f"pool-{i:03d}"
        nodeclass = _nodeclass(i)
        taints = [{"key": "dedicated", "value": _team(i), "effect": "NoSchedule"}]
        cluster.upsert_nodepool(
            factories.nodepool(
                name,
                requirements=reqs,
                labels={"team": _team(i)},
                taints=taints if _dedicated(i) else None,
                node_class_ref={"group": EC2[0], "kind": EC2[1], "name": nodeclass},
            )
        )
        types[name] = builtin_aws_catalog(NODECLASSES[nodeclass])
    for nodeclass in NODECLASSES:
        cluster.upsert_nodeclass((*EC2, nodeclass), True)
    cluster.upsert_daemonset(
        "kube-system/node-agent",
        factories.daemonset_pod("node-agent", namespace="kube-system", cpu="100m", memory="128Mi"),
    )
    cluster.upsert_daemonset(
        "kube-system/amd64-agent",
        factories.daemonset_pod(
            "amd64-agent",
            namespace="kube-system",
            cpu="50m",
            memory="64Mi",
            nodeSelector={LABEL_ARCH: "amd64"},
        ),
    )
    for pod in pending_pods(pods, pools):
        cluster.upsert_pod(pod)
    for kind in KINDS:
        cluster.mark_synced(kind)
    return cluster, types


def pending_pods(count: int, pools: int) -> list[Pod]:
    """Mixed sizes; every fifth pod selects the team of one pool (tolerating its taint when it
    has one), every seventh other one asks for arm64."""
    rng = random.Random(42)
    out = []
    for n in range(count):
        spec: dict[str, Any] = {}
        if n % 5 == 0:
            target = n // 5 * 7 % pools
            spec["nodeSelector"] = {"team": _team(target)}
            if _dedicated(target):
                spec["tolerations"] = [
                    {
                        "key": "dedicated",
                        "operator": "Equal",
                        "value": _team(target),
                        "effect": "NoSchedule",
                    }
                ]
        elif n % 7 == 0:
            spec["nodeSelector"] = {LABEL_ARCH: "arm64"}
        out.append(
            factories.pod(
                f"pod-{n:05d}",
                cpu=CPU[rng.randrange(len(CPU))],
                memory=MEMORY[rng.randrange(len(MEMORY))],
                pending=True,
                **spec,
            )
        )
    return out


def one_round(
    cluster: Cluster, types: Mapping[str, Sequence[InstanceType]], cache: IndexCache
) -> Plan:
    """A provisioning round's pure part, as the provisioner runs it."""
    snapshot = cluster.snapshot(NOW)
    inp = solve_input(snapshot, instance_types=types, options=SolveOptions())
    return solve(inp, namespace_labels=snapshot.namespace_labels, indexes=cache)


def distinct_requirement_sets(cluster: Cluster) -> int:
    """NodePools that differ in what they ask of instance types (requirements), whatever else
    (name, labels, taints, NodeClass) they differ in."""
    return len({repr(np.spec.template.spec.requirements) for np in cluster.nodepools.values()})


def decisions(plan: Plan) -> list[tuple[object, ...]]:
    """What a plan decided, comparable across rounds and runs: each NodeClaim's pool, cheapest
    type and offering, options and pods; and each unplaced pod with why."""
    claims = [
        (
            c.node_pool,
            c.instance_type.name,
            c.offering.zone,
            c.offering.capacity_type,
            tuple(it.name for it in c.instance_types),
            tuple(p.key for p in c.pods),
        )
        for c in plan.new_node_claims
    ]
    return [*claims, *((e.pod.key, e.reason) for e in plan.errors)]


def tables(cluster: Cluster, types: Mapping[str, Sequence[InstanceType]], cache: IndexCache) -> int:
    """How many instance-type tables the pools' indexes share among them."""
    inp = solve_input(cluster.snapshot(NOW), instance_types=types, options=SolveOptions())
    return len({id(cache.get(p, types[p.name], inp.daemonsets).table) for p in inp.pools})


@dataclass(frozen=True, slots=True)
class Timed:
    seconds: float
    plan: Plan


def _timed(
    cluster: Cluster,
    types: Mapping[str, Sequence[InstanceType]],
    cache: IndexCache,
    profiler: cProfile.Profile | None,
) -> Timed:
    gc.collect()
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    plan = one_round(cluster, types, cache)
    seconds = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
    return Timed(seconds, plan)


def index_memory(cluster: Cluster, types: Mapping[str, Sequence[InstanceType]]) -> float:
    """MB a fresh cache holds after one cold round (its indexes and the memos the round filled)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = IndexCache(size=len(cluster.nodepools) + 1)
        plan = one_round(cluster, types, cache)
        del plan
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del cache
    return held / MB


def catalog_memory() -> float:
    """MB the NodeClasses' catalogs take, the facts they are built from included (measured as
    they are first built: call it before anything else builds them)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        catalogs = [builtin_aws_catalog(knobs) for knobs in NODECLASSES.values()]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del catalogs
    return held / MB


def run(pools: int, pods: int, profile: bool = False, memory: bool = True) -> dict[str, Any]:
    cluster, types = build_cluster(pools, pods)
    profiler = cProfile.Profile() if profile else None
    # The provisioner's cache, sized so that every pool's index stays between rounds.
    cache = IndexCache(size=max(64, pools))
    cold = _timed(cluster, types, cache, profiler)
    warm = _timed(cluster, types, cache, None)
    if decisions(warm.plan) != decisions(cold.plan):
        raise RuntimeError("the warm round decided differently from the cold one")
    index_mb = index_memory(cluster, types) if memory else None
    out: dict[str, Any] = {
        "pools": pools,
        "distinct_requirement_sets": distinct_requirement_sets(cluster),
        "catalogs": len({id(t) for t in types.values()}),
        "tables": tables(cluster, types, cache),
        "pods": pods,
        "round_seconds": {"cold": round(cold.seconds, 3), "warm": round(warm.seconds, 3)},
        "index_mb": None if index_mb is None else round(index_mb, 1),
        "index_mb_per_pool": None if index_mb is None else round(index_mb / pools, 3),
        "nodeclaims": len(cold.plan.new_node_claims),
        "unplaced": len(cold.plan.errors),
        "errors": [f"{e.pod.key}: {e.reason}"[:300] for e in cold.plan.errors[:3]],
        "hourly_cost": round(cold.plan.hourly_cost, 4),
    }
    if profiler is not None:
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pools",
        type=int,
        action="append",
        help=f"NodePool count (repeatable); default: {', '.join(map(str, SIZES))}",
    )
    parser.add_argument("--pods", type=int, default=1000, help="pending pods per round")
    parser.add_argument("--out", type=Path, help="write results as JSON here")
    parser.add_argument("--profile", action="store_true", help="cProfile the cold rounds")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    args = parser.parse_args(argv)
    sizes = args.pools or list(SIZES)
    catalog_mb = None if args.no_memory else round(catalog_memory(), 1)
    results = [run(n, args.pods, args.profile, not args.no_memory) for n in sizes]
    print(f"catalogs: {catalog_mb} MB for {len(NODECLASSES)} NodeClasses")
    print(
        f"{'pools':>6} {'sets':>5} {'tables':>6} {'pods':>5} {'cold s':>8} {'warm s':>8} {'index MB':>9} "
        f"{'MB/pool':>8} {'claims':>6} {'unplaced':>8}"
    )
    failed = False
    for r in results:
        print(
            f"{r['pools']:>6} {r['distinct_requirement_sets']:>5} {r['tables']:>6} {r['pods']:>5} "
            f"{r['round_seconds']['cold']:>8.3f} {r['round_seconds']['warm']:>8.3f} "
            f"{r['index_mb']!s:>9} {r['index_mb_per_pool']!s:>8} {r['nodeclaims']:>6} "
            f"{r['unplaced']:>8}"
        )
        failed = failed or bool(r["unplaced"])
        for reason in r["errors"]:
            print(f"{'':>8}unplaced: {reason}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = results[-1] | {"catalog_mb": catalog_mb, "growth": results}
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
