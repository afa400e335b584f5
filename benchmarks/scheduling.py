"""Scheduling-simulation benchmark, ported from upstream's scheduling_benchmark_test.go.

One NodePool with unlimited limits, 400 fake instance types (``fake.InstanceTypes(400)``), an
empty cluster, and the diverse pod mix of upstream's current benchmark: five equal fifths
(generic; zone spread; hostname spread; zone self-affinity; hostname anti-affinity, which needs a
node per pod) with requests drawn from a seed-42 RNG, reseeded per size so every size sees the same
draws whatever ran before. The preference cases are upstream's: 4,000 identical pods (requests
drawn once: 100m CPU / 4096Mi, what upstream's seed-42 RNG gives) with a satisfiable weight-1
node preference for zone test-zone-1, an unsatisfiable weight-10 zone anti-affinity preference and
a satisfiable weight-1 hostname anti-affinity preference, solved with PREFERENCE_POLICY Respect
and Ignore. The ``preferences-perpod-*`` cases are our earlier variant, kept for comparison:
requests drawn per pod and the node preference zone In [test-zone-1, test-zone-2].

Only ``solve`` is timed (pods are built before). The run fails when any pod is left unplaced or
when a diverse run has fewer than pods/5 nodes (upstream's 2024 breakage went unnoticed because
nothing checked this).

    python benchmarks/scheduling.py --pods 5000 --out result.json
    python benchmarks/scheduling.py --all --out results.json

``--warm-round`` times instead one provisioning round as the controller runs it
(``Provisioner.provision()``: cluster snapshot, instance types from the kwok provider, solve input,
``RoundRunner.solve``, NodeClaim write, nominations) over the built-in 1,340-type AWS catalog, with
in-memory fakes for the API. ``cold_ms`` is the first one-pod round (it builds the pool's
instance-type index); ``warm_ms`` the median of the later one-pod rounds, each with one new pending
pod, in a steady-state cluster: the previous rounds' NodeClaims were launched by the kwok provider,
their Nodes registered (Ready, unregistered taint gone) and their pods bound and Running, so the
cluster grows by one node per round and every round snapshots all of it. ``--warm-mode reset``
instead deletes the previous pod and NodeClaim before each round (every round is the same work).

    python benchmarks/scheduling.py --warm-round --out warm.json [--rounds 20] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import itertools
import json
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.aws.instancetype_math import builtin_aws_instance_types
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.controllers.provisioning.provisioner import Provisioner, RoundResult
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod, node_from_dict, pod_from_dict
from karpenter_py.model.fakecatalog import fake_instance_types
from karpenter_py.model.labels import TAINT_UNREGISTERED_KEY
from karpenter_py.scheduling.inputs import SolveInput, SolveOptions, pool_template
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.state.cluster import KINDS, Cluster

SIZES = (1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000)
CPU = ("100m", "250m", "500m", "1", "1500m")
MEMORY = ("100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
LABEL_VALUES = "abcdefg"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


class _Pods:
    def __init__(self, seed: int = 42, requests: dict[str, str] | None = None) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        # Fixed requests for every pod (upstream's preference cases draw them once); else per pod.
        self.requests = requests

    def _value(self) -> str:
        return LABEL_VALUES[self.rng.randrange(len(LABEL_VALUES))]

    def _pod(self, labels: dict[str, str], spec: dict[str, Any]) -> Pod:
        self.n += 1
        requests = self.requests or {
            "cpu": CPU[self.rng.randrange(len(CPU))],
            "memory": MEMORY[self.rng.randrange(len(MEMORY))],
        }
        resources = {"requests": dict(requests)}
        body = {
            "metadata": {
                "name": f"pod-{self.n}",
                "namespace": "default",
                "uid": f"uid-{self.n:06d}",
                "labels": labels,
            },
            "spec": {
                "containers": [{"name": "app", "image": "pause", "resources": resources}],
                **spec,
            },
        }
        return pod_from_dict(body)

    def generic(self) -> Pod:
        return self._pod({"my-label": self._value()}, {})

    def spread(self, key: str) -> Pod:
        tsc = {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"my-label": self._value()}},
        }
        return self._pod({"my-label": self._value()}, {"topologySpreadConstraints": [tsc]})

    def self_affinity(self, key: str) -> Pod:
        labels = {"my-affinity": self._value()}
        term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}
        return self._pod(
            labels,
            {
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
                }
            },
        )

    def anti_affinity(self, key: str) -> Pod:
        labels = {"app": "nginx"}
        term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}
        return self._pod(
            labels,
            {
                "affinity": {
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
                }
            },
        )

    def preferences(self, zones: tuple[str, ...]) -> Pod:
        labels = {"app": "nginx"}
        affinity = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": ZONE,
                                    "operator": "In",
                                    "values": list(zones),
                                }
                            ]
                        },
                    }
                ]
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": dict(labels)},
                            "topologyKey": ZONE,
                        },
                    },
                    {
                        "weight": 1,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": dict(labels)},
                            "topologyKey": HOSTNAME,
                        },
                    },
                ]
            },
        }
        return self._pod(labels, {"affinity": affinity})


def diverse_pods(count: int) -> list[Pod]:
    gen = _Pods()
    fifth = count // 5
    pods = [gen.generic() for _ in range(fifth)]
    pods += [gen.spread(ZONE) for _ in range(fifth)]
    pods += [gen.spread(HOSTNAME) for _ in range(fifth)]
    pods += [gen.self_affinity(ZONE) for _ in range(fifth)]
    pods += [gen.anti_affinity(HOSTNAME) for _ in range(fifth)]
    pods += [gen.generic() for _ in range(count - len(pods))]
    return pods


# Upstream's preference pods share one draw of requests: with Go's seed 42 it is 100m / 4096Mi.
PREFERENCE_REQUESTS = {"cpu": "100m", "memory": "4096Mi"}


def preference_pods(count: int) -> list[Pod]:
    """Upstream's preference case: identical pods preferring zone test-zone-1."""
    gen = _Pods(requests=PREFERENCE_REQUESTS)
    return [gen.preferences(("test-zone-1",)) for _ in range(count)]


def preference_pods_per_pod(count: int) -> list[Pod]:
    """Our earlier variant: requests drawn per pod, preferring test-zone-1 or test-zone-2."""
    gen = _Pods()
    return [gen.preferences(("test-zone-1", "test-zone-2")) for _ in range(count)]


def run_case(
    name: str,
    pods: list[Pod],
    *,
    policy: Literal["Respect", "Ignore"] = "Respect",
    diverse: bool = True,
    repack: bool = True,
) -> dict[str, Any]:
    pool = pool_template(name="default", limits={"cpu": "10000000", "memory": "10000000Gi"})
    types = fake_instance_types(400)
    inp = SolveInput(
        pods=pods,
        pools=[pool],
        instance_types={"default": types},
        options=SolveOptions(preference_policy=policy, repack=repack),
    )
    gc.collect()
    start = time.perf_counter()
    plan = solve(inp)
    seconds = time.perf_counter() - start
    nodes = len(plan.new_node_claims)
    placed = plan.placed_pods()
    result = {
        "case": name,
        "repack": repack,
        "pods": len(pods),
        "seconds": round(seconds, 4),
        "pods_per_sec": round(len(pods) / seconds, 1) if seconds else None,
        "nodes": nodes,
        "placed": placed,
        "unplaced": len(plan.errors),
        "hourly_cost": round(plan.hourly_cost, 4),
    }
    problems = []
    if plan.errors:
        problems.append(
            f"{len(plan.errors)} pods unplaced, e.g. {plan.errors[0].pod.key}: {plan.errors[0].reason}"
        )
    if placed != len(pods):
        problems.append(f"placed {placed} of {len(pods)} pods")
    if diverse and nodes < len(pods) // 5:
        problems.append(
            f"only {nodes} nodes for {len(pods)} pods; the anti-affinity fifth alone needs {len(pods) // 5}"
        )
    result["problems"] = problems
    return result


# ----------------------------------------------------------------------------- --warm-round
NODECLASS = ("karpenter.kwok.sh", "KWOKNodeClass", "default")
Raw = dict[str, Any]


class _NodeAPI:
    """The kwok provider's API port over a dict (it only needs to write and read Nodes)."""

    def __init__(self) -> None:
        self.nodes: dict[str, Raw] = {}

    async def create_node(self, body: Raw) -> Raw:
        self.nodes[body["metadata"]["name"]] = body
        return body

    async def get_node(self, name: str) -> Raw | None:
        return self.nodes.get(name)

    async def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)

    async def list_nodes(self, label_selector: str) -> list[Raw]:
        return list(self.nodes.values())

    async def get_nodeclass(self, name: str) -> Raw | None:
        return None


class _Writer:
    """The NodeClaim writer: names and UIDs as generateName and the API server would give."""

    def __init__(self) -> None:
        self.ids = itertools.count()

    async def create_nodeclaim(self, body: Raw) -> Raw:
        n = next(self.ids)
        meta = body["metadata"]
        return {
            **body,
            "metadata": {**meta, "name": f"{meta['generateName']}{n:05d}", "uid": f"nc-{n}"},
        }


def _warm_nodepool() -> NodePool:
    # No requirements: every one of the 1,340 types and both capacity types stay in play.
    return NodePool.model_validate(
        {
            "metadata": {"name": "default", "uid": "np-default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": NODECLASS[0],
                            "kind": NODECLASS[1],
                            "name": NODECLASS[2],
                        },
                        "requirements": [],
                    }
                }
            },
        }
    )


def _warm_pod(i: int, node: str = "") -> Pod:
    spec: Raw = {
        "containers": [
            {
                "name": "app",
                "image": "pause",
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
            }
        ]
    }
    status: Raw = {
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    }
    if node:
        spec["nodeName"] = node
        status = {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
        }
    return pod_from_dict(
        {
            "metadata": {"name": f"web-{i}", "namespace": "default", "uid": f"pod-{i:05d}"},
            "spec": spec,
            "status": status,
        }
    )


async def _settle(
    cluster: Cluster,
    cloud: KwokCloudProvider,
    api: _NodeAPI,
    result: RoundResult,
    pod: Pod,
    i: int,
) -> None:
    """What happens between rounds in a live cluster: the round's NodeClaims launch, their Nodes
    register, and the kube-scheduler binds the pod where it was nominated."""
    target = ""
    for name in result.created:
        launched = await cloud.create(cluster.nodeclaims[name])
        launched.status.node_name = name
        cluster.upsert_nodeclaim(launched)
        body = api.nodes[name]
        body["spec"]["taints"] = [
            t for t in body["spec"]["taints"] if t["key"] != TAINT_UNREGISTERED_KEY
        ]
        body["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        body["metadata"]["labels"] |= {
            "karpenter.sh/registered": "true",
            "karpenter.sh/initialized": "true",
        }
        cluster.upsert_node(node_from_dict(body))
        target = name
    if not target:  # placed on capacity that already exists: bind it to a node with room
        target = _node_with_room(cluster, pod)
    cluster.upsert_pod(_warm_pod(i, node=target))


def _node_with_room(cluster: Cluster, pod: Pod) -> str:
    for node in cluster.nodes.values():
        used: dict[str, int] = {}
        for p in cluster.pods_on(node.name):
            for k, v in p.requests.items():
                used[k] = used.get(k, 0) + v
        if all(used.get(k, 0) + v <= node.allocatable.get(k, 0) for k, v in pod.requests.items()):
            return node.name
    raise RuntimeError(f"the round placed {pod.key} on existing capacity, but no node has room")


async def _warm_round(rounds: int, mode: str, profile: bool) -> dict[str, Any]:
    started = time.perf_counter()
    types = builtin_aws_instance_types()
    catalog_ms = (time.perf_counter() - started) * 1000
    cluster = Cluster()
    cluster.upsert_nodepool(_warm_nodepool())
    cluster.upsert_nodeclass(NODECLASS, True)
    for kind in KINDS:
        cluster.mark_synced(kind)
    api = _NodeAPI()
    cloud = KwokCloudProvider(api, types)
    prov = Provisioner(
        RoundRunner(cluster=cluster, writer=_Writer(), cloud=cloud, clock=FakeClock()),
        Batcher(idle=1.0, max_window=10.0),
    )
    profiler = cProfile.Profile() if profile else None
    times: list[float] = []
    solves: list[float] = []
    created = existing = 0
    cold: RoundResult | None = None
    for i in range(rounds + 1):
        pod = _warm_pod(i)
        cluster.upsert_pod(pod)
        gc.collect()
        if profiler is not None and i > 0:
            profiler.enable()
        t0 = time.perf_counter()
        result = await prov.provision()
        elapsed = time.perf_counter() - t0
        if profiler is not None:
            profiler.disable()
        if result.pods != 1 or result.errors or len(result.decided) != 1:
            raise RuntimeError(f"round {i} did not place its one pod: {result}")
        if i == 0:
            cold = result
        else:
            times.append(elapsed)
            solves.append(result.solve_seconds)
            created += len(result.created)
            existing += result.placed_on_existing
        if mode == "reset":
            cluster.delete_pod(pod.key)
            for name in result.created:
                cluster.delete_nodeclaim(name)
        else:
            await _settle(cluster, cloud, api, result, pod, i)
    assert cold is not None
    out: dict[str, Any] = {
        "cold_ms": round(cold.seconds * 1000, 2),
        "warm_ms": round(statistics.median(times) * 1000, 2),
        "warm_p90_ms": round(sorted(times)[int(0.9 * (len(times) - 1))] * 1000, 2),
        "warm_min_ms": round(min(times) * 1000, 2),
        "warm_solve_ms": round(statistics.median(solves) * 1000, 2),
        "cold_solve_ms": round(cold.solve_seconds * 1000, 2),
        "catalog_build_ms": round(catalog_ms, 1),
        "instance_types": len(types),
        "rounds": rounds,
        "mode": mode,
        "warm_rounds_new_nodeclaim": created,
        "warm_rounds_on_existing": existing,
        "nodes_at_end": len(cluster.nodes),
        "index_cache": {"hits": prov.round.indexes.hits, "misses": prov.round.indexes.misses},
    }
    if profiler is not None:
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)
    return out


def warm_round(rounds: int = 20, mode: str = "steady", profile: bool = False) -> dict[str, Any]:
    return asyncio.run(_warm_round(rounds, mode, profile))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pods", type=int, action="append", help="pod count (repeatable); default: 5000"
    )
    parser.add_argument(
        "--all", action="store_true", help="every upstream size plus the preference cases"
    )
    parser.add_argument(
        "--preferences", action="store_true", help="also run the 4,000-pod preference cases"
    )
    parser.add_argument("--out", type=Path, help="write results as JSON here")
    parser.add_argument(
        "--greedy", action="store_true", help="solve without the packing step (repack=False)"
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run every case greedy and packed, side by side",
    )
    parser.add_argument(
        "--warm-round",
        action="store_true",
        help="time one-pod provisioning rounds on the 1,340-type AWS catalog, cold and warm",
    )
    parser.add_argument("--rounds", type=int, default=20, help="warm rounds (--warm-round)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="solve each case this many times and keep the fastest (a busy machine's noise)",
    )
    parser.add_argument(
        "--warm-mode",
        choices=("steady", "reset"),
        default="steady",
        help="steady: earlier claims launch and their pods run; reset: each round starts empty",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the warm rounds")
    args = parser.parse_args(argv)
    if args.warm_round:
        warm = warm_round(args.rounds, args.warm_mode, args.profile)
        print(
            f"warm-round ({warm['mode']}, {warm['instance_types']} types): "
            f"cold {warm['cold_ms']} ms, warm {warm['warm_ms']} ms "
            f"(median of {warm['rounds']}; p90 {warm['warm_p90_ms']} ms; "
            f"solve {warm['warm_solve_ms']} ms)"
        )
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(warm, indent=2) + "\n")
        return 0
    sizes = list(SIZES) if args.all else (args.pods or [5000])
    # --compare: each case greedy (repack=False) then packed, one after the other, so the two
    # are measured side by side on the same machine state.
    modes = (False, True) if args.compare else (not args.greedy,)

    def fastest(name: str, pods: list[Pod], **kw: Any) -> dict[str, Any]:
        runs = [run_case(name, pods, **kw) for _ in range(max(1, args.repeat))]
        return min(runs, key=lambda r: float(r["seconds"]))

    results = [
        fastest(f"diverse-{n}", diverse_pods(n), repack=mode) for n in sizes for mode in modes
    ]
    if args.all or args.preferences:
        policies: tuple[Literal["Respect", "Ignore"], ...] = ("Respect", "Ignore")
        variants = (
            ("preferences", preference_pods),
            ("preferences-perpod", preference_pods_per_pod),
        )
        for prefix, make in variants:
            for policy in policies:
                pods = make(4000)
                for mode in modes:
                    results.append(
                        fastest(
                            f"{prefix}-{policy.lower()}-4000",
                            pods,
                            policy=policy,
                            diverse=False,
                            repack=mode,
                        )
                    )
    failed = False
    for r in results:
        print(
            f"{r['case']:>31}{'' if r['repack'] else ' (greedy)':>9}: {r['pods']:>6} pods "
            f"{r['seconds']:>9.3f}s {r['pods_per_sec']:>9} pods/s "
            f"{r['nodes']:>5} nodes  unplaced={r['unplaced']}  ${r['hourly_cost']}/h"
        )
        for p in r["problems"]:
            print(f"{'':>33}FAIL: {p}")
            failed = True
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload: Any = results[0] if len(results) == 1 else results
        if len(results) == 1:
            payload = {
                k: results[0][k] for k in ("pods", "seconds", "pods_per_sec", "nodes", "unplaced")
            } | {"case": results[0]["case"], "hourly_cost": results[0]["hourly_cost"]}
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
