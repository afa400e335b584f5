"""Scheduling-simulation benchmark, ported from upstream's scheduling_benchmark_test.go.

One NodePool with unlimited limits, 400 fake instance types (``fake.InstanceTypes(400)``), an
empty cluster, and the diverse pod mix of upstream's current benchmark: five equal fifths
(generic; zone spread; hostname spread; zone self-affinity; hostname anti-affinity, which needs a
node per pod) with requests drawn from a seed-42 RNG, reseeded per size so every size sees the same
draws whatever ran before. The preference cases use 4,000 identical pods with a satisfiable zone
node preference, an unsatisfiable weight-10 zone anti-affinity preference and a satisfiable weight-1
hostname anti-affinity preference, solved with PREFERENCE_POLICY Respect and Ignore.

Only ``solve`` is timed (pods are built before). The run fails when any pod is left unplaced or
when a diverse run has fewer than pods/5 nodes (upstream's 2024 breakage went unnoticed because
nothing checked this).

    python benchmarks/scheduling.py --pods 5000 --out result.json
    python benchmarks/scheduling.py --all --out results.json
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Literal

from karpenter_py.model.core import Pod, pod_from_dict
from karpenter_py.model.fakecatalog import fake_instance_types
from karpenter_py.scheduling.inputs import SolveInput, SolveOptions, pool_template
from karpenter_py.scheduling.scheduler import solve

SIZES = (1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000)
CPU = ("100m", "250m", "500m", "1", "1500m")
MEMORY = ("100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
LABEL_VALUES = "abcdefg"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


class _Pods:
    def __init__(self, seed: int = 42) -> None:
        self.rng = random.Random(seed)
        self.n = 0

    def _value(self) -> str:
        return LABEL_VALUES[self.rng.randrange(len(LABEL_VALUES))]

    def _pod(self, labels: dict[str, str], spec: dict[str, Any]) -> Pod:
        self.n += 1
        resources = {
            "requests": {
                "cpu": CPU[self.rng.randrange(len(CPU))],
                "memory": MEMORY[self.rng.randrange(len(MEMORY))],
            }
        }
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

    def preferences(self) -> Pod:
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
                                    "values": ["test-zone-1", "test-zone-2"],
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


def preference_pods(count: int) -> list[Pod]:
    gen = _Pods()
    return [gen.preferences() for _ in range(count)]


def run_case(
    name: str,
    pods: list[Pod],
    *,
    policy: Literal["Respect", "Ignore"] = "Respect",
    diverse: bool = True,
) -> dict[str, Any]:
    pool = pool_template(name="default", limits={"cpu": "10000000", "memory": "10000000Gi"})
    types = fake_instance_types(400)
    inp = SolveInput(
        pods=pods,
        pools=[pool],
        instance_types={"default": types},
        options=SolveOptions(preference_policy=policy),
    )
    gc.collect()
    start = time.perf_counter()
    plan = solve(inp)
    seconds = time.perf_counter() - start
    nodes = len(plan.new_node_claims)
    placed = plan.placed_pods()
    result = {
        "case": name,
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
    args = parser.parse_args(argv)
    sizes = list(SIZES) if args.all else (args.pods or [5000])
    results = [run_case(f"diverse-{n}", diverse_pods(n)) for n in sizes]
    if args.all or args.preferences:
        policies: tuple[Literal["Respect", "Ignore"], ...] = ("Respect", "Ignore")
        for policy in policies:
            results.append(
                run_case(
                    f"preferences-{policy.lower()}-4000",
                    preference_pods(4000),
                    policy=policy,
                    diverse=False,
                )
            )
    failed = False
    for r in results:
        print(
            f"{r['case']:>28}: {r['pods']:>6} pods {r['seconds']:>9.3f}s {r['pods_per_sec']:>9} pods/s "
            f"{r['nodes']:>5} nodes  unplaced={r['unplaced']}  ${r['hourly_cost']}/h"
        )
        for p in r["problems"]:
            print(f"{'':>30}FAIL: {p}")
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
