"""The kube-scheduler replay's scoring and choices, worked out by hand (benchmarks/schedsim.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from benchmarks.schedsim import (
    KubeScheduler,
    SimNode,
    balanced_allocation,
    creation_order,
    feasible_to_find,
    least_allocated,
    normalize_spread,
    spread_raw,
)
from karpenter_py.model.core import Pod
from tests import factories
from tests.unit.scheduling._helpers import GI, itype

M16 = {"cpu": 15900, "memory": 137428467712}  # the kwok m-16x's allocatable


@pytest.mark.parametrize(
    ("requested", "allocatable", "expected"),
    [
        # cpu (15900-3500)*100//15900 = 77, memory (137428467712-30064771072)*100//... = 78
        ({"cpu": 3500, "memory": 28 * GI}, M16, 77),
        ({"cpu": 0, "memory": 0}, M16, 100),
        ({"cpu": 15900, "memory": 137428467712}, M16, 0),
        # over on cpu: that resource scores 0; memory (16-4)/16 = 75; mean 37
        ({"cpu": 5000, "memory": 4 * GI}, {"cpu": 4000, "memory": 16 * GI}, 37),
        # no memory allocatable: cpu alone
        ({"cpu": 1000, "memory": GI}, {"cpu": 4000}, 75),
        ({"cpu": 1000}, {}, 0),
    ],
)
def test_least_allocated(requested, allocatable, expected):
    assert least_allocated(requested, allocatable) == expected


@pytest.mark.parametrize(
    ("requested", "allocatable", "expected"),
    [
        ({"cpu": 2000, "memory": 8 * GI}, {"cpu": 4000, "memory": 16 * GI}, 100),
        # fractions 0.5 and 0.25: std 0.125, 87.5 truncated
        ({"cpu": 2000, "memory": 4 * GI}, {"cpu": 4000, "memory": 16 * GI}, 87),
        # cpu capped at 1, memory 0: std 0.5
        ({"cpu": 6000, "memory": 0}, {"cpu": 4000, "memory": 16 * GI}, 50),
        # one resource: no std
        ({"cpu": 1000}, {"cpu": 4000}, 100),
        # 3500/15900 = 0.2201, 28 GiB/m-16x = 0.2187: std 0.0007, 99.93 truncated
        ({"cpu": 3500, "memory": 28 * GI}, M16, 99),
    ],
)
def test_balanced_allocation(requested, allocatable, expected):
    assert balanced_allocation(requested, allocatable) == expected


@pytest.mark.parametrize(
    ("counts", "domains", "skews", "expected"),
    [
        # system defaults on an empty node of 10 candidates in one zone: 0 + 2, 0 + 4
        ((0, 0), (10, 1), (3, 5), 6),
        # 2 pods of the Deployment on the node (2 * ln 12 = 4.97), 7 in its zone (7 * ln 3 = 7.69)
        ((2, 7), (10, 1), (3, 5), 19),
        ((1,), (0,), (1,), 1),
    ],
)
def test_spread_raw(counts, domains, skews, expected):
    assert spread_raw(counts, domains, skews) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([6, 6, 6], [100, 100, 100]),
        ([0, 0], [100, 100]),
        # 100 * (19 + 6 - s) / 19
        ([6, 19, 12], [100, 31, 68]),
        ([], []),
    ],
)
def test_normalize_spread(raw, expected):
    assert normalize_spread(raw) == expected


@pytest.mark.parametrize(
    ("nodes", "percent", "expected"),
    [
        (50, 10, 50),  # fewer than 100: every node
        (141, 10, 100),  # at least 100
        (2000, 10, 200),
        (1000, 0, 420),  # adaptive: 50 - 1000/125 = 42 %
        (10000, 0, 500),  # adaptive, at its 5 % floor
        (700, 100, 700),
    ],
)
def test_feasible_to_find(nodes, percent, expected):
    assert feasible_to_find(nodes, percent) == expected


def _node(name: str, cpu: float, mem_gi: float, zone: str = "zone-a") -> SimNode:
    return SimNode(name, itype(f"t-{name}", cpu, mem_gi), zone, 1.0)


def _pod(name: str, cpu: str, memory: str, app: str = "web") -> Pod:
    return factories.pod(name, cpu=cpu, memory=memory, labels={"app": app}, pending=True)


def _bound(node: SimNode, pods: Sequence[Pod]) -> SimNode:
    for p in pods:
        node.bind(p)
    return node


def _scheduler(nodes: Sequence[SimNode], *, system_spread: bool = True) -> KubeScheduler:
    scheduler = KubeScheduler(seed=1, score_percent=10, system_spread=system_spread)
    scheduler.register(nodes)
    for node in nodes:
        scheduler.zone_apps[node.zone].update(node.apps)
    return scheduler


@pytest.mark.parametrize(
    ("nodes", "pod", "system_spread", "expected"),
    [
        # small 4/16: LA 75 + BA 100; big 16/64: LA 93 + BA 100: the least allocated wins
        ([("small", 4, 16, 0), ("big", 16, 64, 0)], ("p", "1", "4Gi"), True, "big"),
        # the big node already runs 6 pods of 1 cpu / 4 Gi of the Deployment: LA 56 + BA 100 +
        # spread 2 * 61 (raw round(6 ln 4 + 2 + 6 ln 3 + 4) = 21 against the small node's 13:
        # int(100 * (21 + 13 - 21) / 21)) = 278; the small one 175 + 2 * 100 = 375
        ([("small", 4, 16, 0), ("big", 16, 64, 6)], ("p", "1", "4Gi"), True, "small"),
        # without the spread score the big node's 156 still loses to 175
        ([("small", 4, 16, 0), ("big", 16, 64, 6)], ("p", "1", "4Gi"), False, "small"),
        # the big node is full: the pod fits the small node alone
        ([("small", 4, 16, 0), ("big", 16, 64, 16)], ("p", "1", "4Gi"), True, "small"),
        # it fits nowhere: it stays pending
        ([("small", 4, 16, 0), ("big", 16, 64, 0)], ("p", "20", "4Gi"), True, None),
    ],
)
def test_scheduler_picks(nodes, pod, system_spread, expected):
    built = [
        _bound(
            _node(name, cpu, mem),
            [_pod(f"{name}-{k}", "1", "4Gi") for k in range(running)],
        )
        for name, cpu, mem, running in nodes
    ]
    scheduler = _scheduler(built, system_spread=system_spread)
    chosen = scheduler.schedule(_pod(*pod))
    assert (chosen.name if chosen else None) == expected


def test_scheduler_scores_at_most_its_share_and_moves_on():
    """150 nodes at percentageOfNodesToScore 10: 100 feasible nodes are scored, the next pod's
    search starts after them; among equal nodes the tie goes to one of those scored."""
    nodes = [_node(f"n{k:03d}", 4, 16) for k in range(150)]
    scheduler = _scheduler(nodes, system_spread=False)
    first = scheduler.schedule(_pod("a", "1", "1Gi"))
    assert first is not None
    assert nodes.index(first) < 100
    assert scheduler.next_start == 100
    second = scheduler.schedule(_pod("b", "1", "1Gi"))
    assert second is not None
    assert nodes.index(second) >= 100 or nodes.index(second) < 50
    assert scheduler.next_start == 50


def test_run_keeps_what_fits_nowhere_in_order():
    scheduler = _scheduler([_node("only", 2, 8)], system_spread=False)
    pods = [_pod("a", "1", "1Gi"), _pod("b", "1500m", "1Gi"), _pod("c", "1", "1Gi")]
    left = scheduler.run(pods)
    assert [p.name for p in left] == ["b"]
    assert [p.name for p in scheduler.order[0].pods] == ["a", "c"]


def test_creation_order_interleaves_deployments_by_progress():
    pods = [
        *(_pod(f"small-{k}", "1", "1Gi", app="small") for k in range(4)),
        *(_pod(f"large-{k}", "2", "2Gi", app="large") for k in range(2)),
    ]
    assert [p.name for p in creation_order(pods)] == [
        "small-0",
        "large-0",
        "small-1",
        "small-2",
        "large-1",
        "small-3",
    ]
