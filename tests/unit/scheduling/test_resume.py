"""The solver's resume points (``_Solver.resume``) only skip slots that could not take the pod:
on random clusters with spreads, pod affinity and anti-affinity and full nodes, every plan equals
the plan of a solver that scans every existing node from the first for every pod."""

from __future__ import annotations

import random
from typing import Any

import pytest

from karpenter_py.scheduling import scheduler
from tests.unit.scheduling._helpers import by_pod, errors, existing, make_node, pod, run, spread

ZONES = ("a", "b", "c")
APPS = ("a0", "a1", "a2")
ZONE_OR_HOST = ("topology.kubernetes.io/zone", "kubernetes.io/hostname")


class _Forgetful(dict[object, int]):
    """A resume table that never remembers: every scan starts at the first slot."""

    def __setitem__(self, key: object, value: int) -> None:
        return None


def _world(seed: int) -> tuple[list[Any], list[Any]]:
    rng = random.Random(seed)
    nodes = []
    for n in range(rng.randint(20, 80)):
        zone = rng.choice(ZONES)
        labels = {"topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": f"n{n:03d}"}
        held = [
            pod(
                f"held-{n}-{k}", cpu=f"{rng.choice((250, 500, 1000))}m", labels={"app": f"a{k % 3}"}
            )
            for k in range(rng.randint(0, 6))
        ]
        nodes.append(existing(make_node(f"n{n:03d}", cpu="4", mem="8Gi", labels=labels), held))
    pending = []
    for k in range(rng.randint(30, 120)):
        app = rng.choice(APPS)
        spec: dict[str, Any] = {}
        kind = rng.randrange(5)
        if kind == 1:
            key = rng.choice(ZONE_OR_HOST)
            spec["topologySpreadConstraints"] = [
                spread(
                    key,
                    {"app": app},
                    skew=rng.choice((1, 2)),
                    when=rng.choice(("DoNotSchedule", "ScheduleAnyway")),
                )
            ]
        elif kind == 2:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": app}},
                        }
                    ]
                }
            }
        elif kind == 3:
            spec["affinity"] = {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": rng.choice(ZONE_OR_HOST),
                            "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                        }
                    ]
                }
            }
        cpu = f"{rng.choice((100, 250, 500, 1000, 2000))}m"
        pending.append(pod(f"p{k:03d}", cpu=cpu, labels={"app": app}, **spec))
    return pending, nodes


@pytest.mark.parametrize("seed", range(40))
def test_resuming_places_every_pod_where_a_full_scan_would(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    pending, nodes = _world(seed)
    resumed = run(pending, existing=nodes)
    original = scheduler._Solver.__init__

    def forgetful(self: scheduler._Solver, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.resume = _Forgetful()

    monkeypatch.setattr(scheduler._Solver, "__init__", forgetful)
    scanned = run(pending, existing=nodes)
    assert by_pod(resumed) == by_pod(scanned)
    assert errors(resumed) == errors(scanned)
    assert [repr(nc.requirements) for nc in resumed.new_node_claims] == [
        repr(nc.requirements) for nc in scanned.new_node_claims
    ]
    assert len(by_pod(resumed)) + len(errors(resumed)) == len(pending)
