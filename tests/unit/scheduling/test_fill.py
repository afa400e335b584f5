"""Filling existing capacity as a whole (scheduling.fill) and the solver's use of it: pods placed
on NodeClaims in flight by the most valuable fill per node when first fit would leave some."""

from __future__ import annotations

import pytest

from karpenter_py.model.core import Pod
from karpenter_py.scheduling.fill import Bin, first_fit_worth, plan_fill, worth
from karpenter_py.scheduling.inputs import ExistingNode
from karpenter_py.scheduling.instances import PoolIndex
from tests.unit.scheduling._helpers import GI, by_pod, existing, itype, make_node, pod, pool, run

# Vectors of (cpu in tenths, memory in Gi): a large pod, a small one.
LARGE = (35, 28)
SMALL = (10, 3)
CPU_BIN = (160, 56)  # sized for small pods: memory runs out after two large ones
MEM_BIN = (160, 128)
BOTH = frozenset({0, 1})


@pytest.mark.parametrize(
    ("counts", "bins", "expected_first_fit", "expected"),
    [
        # First fit: two large on the first bin (its memory gone), two large and nine small on
        # the second: 4 * 0.7 + 9 * 0.1. The fill: sixteen small on the first (worth 1.6, as
        # much as one large and nine small), four large and one small on the second.
        ((4, 17), [Bin(CPU_BIN, BOTH), Bin(MEM_BIN, BOTH)], 3.7, [[0, 16], [4, 1]]),
        # First fit places every pod: nothing to gain.
        ((4, 5), [Bin(CPU_BIN, BOTH), Bin(MEM_BIN, BOTH)], 3.3, None),
        # The first bin takes small pods only: first fit puts the large ones on the second and
        # does as well as can be.
        ((4, 17), [Bin(CPU_BIN, frozenset({1})), Bin(MEM_BIN, BOTH)], 4.5, None),
        # More pods than room: first fit places six large and two small (4.4); the fill takes
        # the most valuable fill of each bin in turn (1.6, then 3.0).
        ((8, 20), [Bin(CPU_BIN, BOTH), Bin(MEM_BIN, BOTH)], 4.4, [[0, 16], [4, 2]]),
    ],
)
def test_plan_fill(counts, bins, expected_first_fit, expected):
    value = [0.7, 0.1]
    assert first_fit_worth(counts, [LARGE, SMALL], value, bins) == pytest.approx(expected_first_fit)
    assert plan_fill(counts, [LARGE, SMALL], value, bins) == expected


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        # 1.6 $/h for 16 cpu and 64 Gi: 0.1 per cpu, 0.025 per Gi; the dearer resource counts
        ({"cpu": 3500, "memory": 28 * GI}, 0.7),
        ({"cpu": 1000, "memory": 3 * GI}, 0.1),
        ({"cpu": 0, "memory": 0}, 0.0),
    ],
)
def test_worth_at_the_pools_cheapest_rates(requests, expected):
    idx = PoolIndex(pool(), [itype("t", 16, 64, price=1.6, capacity_types=("on-demand",))], ())
    assert worth(requests, [idx], {}) == pytest.approx(expected)


def test_worth_without_a_pool_is_the_largest_share_of_the_room():
    room = {"cpu": 10000, "memory": 60 * GI}
    assert worth({"cpu": 1000, "memory": 3 * GI}, [], room) == pytest.approx(0.1)


def _pods(large: int, small: int) -> list[Pod]:
    return [pod(f"l-{k:02d}", "3500m", "28Gi") for k in range(large)] + [
        pod(f"s-{k:02d}", "1", "3Gi") for k in range(small)
    ]


def _capacity(*, initialized: bool) -> list[ExistingNode]:
    """A node sized for small pods and one for large ones, in flight unless ``initialized``."""
    return [
        existing(
            make_node("a-cpu", "16", "56Gi"),
            pool_name="default",
            initialized=initialized,
            in_flight=not initialized,
        ),
        existing(
            make_node("b-mem", "16", "128Gi"),
            pool_name="default",
            initialized=initialized,
            in_flight=not initialized,
        ),
    ]


TYPES = [itype("t", 16, 64, price=1.6, capacity_types=("on-demand",))]


@pytest.mark.parametrize(
    ("large", "small", "initialized", "expected_existing", "expected_new"),
    [
        # In flight, pods outnumbering first fit's reach: filled as a whole, nothing bought.
        (
            4,
            17,
            False,
            {
                "a-cpu": [f"s-{k:02d}" for k in range(16)],
                "b-mem": ["l-00", "l-01", "l-02", "l-03", "s-16"],
            },
            [],
        ),
        # First fit places them all: its placements, unchanged.
        (
            4,
            5,
            False,
            {
                "a-cpu": ["l-00", "l-01"],
                "b-mem": ["l-02", "l-03", "s-00", "s-01", "s-02", "s-03", "s-04"],
            },
            [],
        ),
        # Every node initialised: first fit as before, and a node for the eight it leaves.
        (
            4,
            17,
            True,
            {
                "a-cpu": ["l-00", "l-01"],
                "b-mem": ["l-02", "l-03", *(f"s-{k:02d}" for k in range(9))],
            },
            [[f"s-{k:02d}" for k in range(9, 17)]],
        ),
    ],
)
def test_solver_fills_capacity_in_flight_as_a_whole(
    large, small, initialized, expected_existing, expected_new
):
    plan = run(_pods(large, small), types=TYPES, existing=_capacity(initialized=initialized))
    placed = {p.node_name: sorted(x.name for x in p.pods) for p in plan.existing}
    assert placed == expected_existing
    assert [sorted(x.name for x in nc.pods) for nc in plan.new_node_claims] == expected_new
    assert plan.errors == ()


def test_pods_in_a_topology_group_are_placed_first_fit():
    """Hostname-spread small pods: where each goes matters to its group, so the fill leaves
    them to the loop, which places them first fit (nine beside the large pods, eight on a new
    node), as it did before the fill."""
    spread = [
        {
            "maxSkew": 20,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "s"}},
        }
    ]
    pods = [pod(f"l-{k:02d}", "3500m", "28Gi") for k in range(4)] + [
        pod(f"s-{k:02d}", "1", "3Gi", labels={"app": "s"}, topologySpreadConstraints=spread)
        for k in range(17)
    ]
    plan = run(pods, types=TYPES, existing=_capacity(initialized=False))
    assert by_pod(plan) == {
        "l-00": "node/a-cpu",
        "l-01": "node/a-cpu",
        "l-02": "node/b-mem",
        "l-03": "node/b-mem",
        **{f"s-{k:02d}": "node/b-mem" for k in range(9)},
        **{f"s-{k:02d}": "claim-0" for k in range(9, 17)},
    }
