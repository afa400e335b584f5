"""The early-first-round cost benchmark: the creation order it assumes, and its exact numbers for
the largest split (the solver is deterministic; a change in them is a change in packing)."""

from __future__ import annotations

import pytest

from benchmarks.firstround import SecondRound, Split, basic_world, creation_order, run_split
from karpenter_py.model.catalog import kwok_catalog
from tests import factories
from tests.virtualtime import run_virtual


def test_creation_order_interleaves_slow_start_batches() -> None:
    pods = [factories.pod(f"a-{i}") for i in range(5)] + [factories.pod(f"b-{i}") for i in range(4)]
    order = [p.name for p in creation_order(pods, ["a", "b"])]
    assert order == ["a-0", "b-0", "a-1", "a-2", "b-1", "b-2", "a-3", "a-4", "b-3"]


def test_the_basic_world_has_the_e2e_pods_in_creation_order() -> None:
    cluster, pods = basic_world()
    assert [p.name for p in pods[:6]] == [
        "small-0",
        "large-0",
        "small-1",
        "small-2",
        "large-1",
        "large-2",
    ]
    assert (len(pods), len({p.key for p in pods})) == (1000, 1000)
    assert list(cluster.nodepools) == ["default"]


@pytest.mark.parametrize(
    ("first", "second_round", "hold", "expected"),
    [
        (0, "pending", True, Split(0, 74.0935, 141, 0, 0.0, 141, 1.0, 1.0)),
        # Placed anew, the second round fills the capacity in flight as a whole
        # (scheduling.fill) and ends where holding does; upstream's largest-first placement on
        # the first node with room was 1.2 % dearer (74.9763/h, 146 nodes) before that fill.
        (200, "pending", False, Split(200, 74.1107, 143, 26, 12.3276, 117, 0.9851, 0.9062)),
        # Held, the rest pack around them: 0.02 % dearer, two more (smaller) nodes.
        (200, "pending", True, Split(200, 74.1107, 143, 26, 12.3276, 117, 0.9851, 0.9062)),
    ],
)
def test_an_early_first_round_of_200_costs_what_one_round_costs_when_its_pods_are_held(
    first: int, second_round: SecondRound, hold: bool, expected: Split
) -> None:
    async def split() -> Split:
        return await run_split(first, kwok_catalog(), second_round=second_round, hold=hold)

    assert run_virtual(split) == expected
