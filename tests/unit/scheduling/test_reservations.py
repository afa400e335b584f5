"""A reservation's room within one solve: at most that many new NodeClaims are planned into it;
the others price and launch outside it, and a claim that narrows away from it gives it back."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.model.core import SelectorRequirement
from karpenter_py.model.labels import AWS_LABEL_CAPACITY_RESERVATION_ID
from karpenter_py.scheduling.plan import NewNodeClaim, Plan
from tests.unit.scheduling._helpers import (
    CAPACITY_TYPE,
    ZONE,
    errors,
    itype,
    pod,
    pool,
    req_values,
    run,
)

RID = AWS_LABEL_CAPACITY_RESERVATION_ID
# Each pod (3 of 4 cpu) needs a node of its own.
BIG_POD_CPU = "3"
RESERVED = ("reserved", ("reserved",))
ON_DEMAND = ("on-demand", ("on-demand",))


def big(*reservations: tuple[str, str, int]) -> Any:
    return itype("big", 4, 8, capacity_types=("on-demand",), reservations=reservations)


def reserving_pool(*capacity_types: str) -> Any:
    return pool(requirements=[SelectorRequirement(CAPACITY_TYPE, "In", capacity_types)])


def in_zone(name: str, zone: str, cpu: str = BIG_POD_CPU) -> Any:
    return pod(name, cpu=cpu, nodeSelector={ZONE: zone})


def summary(
    nc: NewNodeClaim,
) -> tuple[str, str | None, tuple[str, ...] | None, tuple[str, ...] | None]:
    """(capacity-type label, reservation-id label, capacity-type In values, reservation-id In
    values) of a planned NodeClaim."""
    return (
        nc.labels[CAPACITY_TYPE],
        nc.labels.get(RID),
        req_values(nc, CAPACITY_TYPE),
        req_values(nc, RID),
    )


def summaries(
    plan: Plan,
) -> list[tuple[str, str | None, tuple[str, ...] | None, tuple[str, ...] | None]]:
    return sorted((summary(nc) for nc in plan.new_node_claims), key=repr)


def reserved_in(rid: str) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    return ("reserved", rid, ("reserved",), (rid,))


OUTSIDE = ("on-demand", None, ("on-demand",), None)


@pytest.mark.parametrize(
    ("reservations", "pods", "expected"),
    [
        pytest.param(
            [("cr-a", "zone-a", 2)],
            [pod(f"p{i}", cpu=BIG_POD_CPU) for i in range(5)],
            sorted([OUTSIDE] * 3 + [reserved_in("cr-a")] * 2, key=repr),
            id="room 2, five pods: two reserved, three on-demand",
        ),
        pytest.param(
            [("cr-a", "zone-a", 0)],
            [pod(f"p{i}", cpu=BIG_POD_CPU) for i in range(5)],
            [OUTSIDE] * 5,
            id="room 0: none reserved",
        ),
        pytest.param(
            [("cr-a", "zone-a", 5)],
            [pod(f"p{i}", cpu=BIG_POD_CPU) for i in range(5)],
            [reserved_in("cr-a")] * 5,
            id="room 5, five pods: all reserved",
        ),
        pytest.param(
            [("cr-a", "zone-a", 2), ("cr-b", "zone-b", 1)],
            [in_zone(f"a{i}", "zone-a") for i in range(3)]
            + [in_zone(f"b{i}", "zone-b") for i in range(3)],
            sorted([OUTSIDE] * 3 + [reserved_in("cr-a")] * 2 + [reserved_in("cr-b")], key=repr),
            id="two reservations, each counted on its own",
        ),
    ],
)
def test_a_reservation_backs_at_most_its_room_of_new_nodeclaims(
    reservations: list[tuple[str, str, int]], pods: list[Any], expected: list[Any]
) -> None:
    plan = run(pods, pools=[reserving_pool("reserved", "on-demand")], types=[big(*reservations)])
    assert errors(plan) == {}
    assert summaries(plan) == expected


def test_claims_that_cannot_get_the_reservation_are_priced_outside_it() -> None:
    plan = run(
        [pod(f"p{i}", cpu=BIG_POD_CPU) for i in range(3)],
        pools=[reserving_pool("reserved", "on-demand")],
        types=[big(("cr-a", "zone-a", 1))],
    )
    assert sorted(nc.offering.price for nc in plan.new_node_claims) == [2e-08, 0.2, 0.2]


def test_a_reserved_only_pool_plans_no_more_nodeclaims_than_the_room() -> None:
    plan = run(
        [pod(f"p{i}", cpu=BIG_POD_CPU) for i in range(4)],
        pools=[reserving_pool("reserved")],
        types=[big(("cr-a", "zone-a", 2))],
    )
    assert summaries(plan) == [reserved_in("cr-a")] * 2
    full = 'nodepool "default": every remaining instance type needs a capacity reservation that is full'
    assert errors(plan) == {"p2": full, "p3": full}


def test_a_claim_that_narrows_away_from_a_reservation_gives_its_room_back() -> None:
    # p-any takes the one room (its claim could still launch in zone-a); p-b joins that claim
    # and pins it to zone-b, so the room is free again for p-a's claim in zone-a.
    plan = run(
        [pod("p-any", cpu="2"), in_zone("p-b", "zone-b", cpu="2"), in_zone("p-a", "zone-a", "1")],
        pools=[reserving_pool("reserved", "on-demand")],
        types=[big(("cr-a", "zone-a", 1))],
    )
    assert errors(plan) == {}
    by_pods = {tuple(sorted(p.name for p in nc.pods)): summary(nc) for nc in plan.new_node_claims}
    assert by_pods == {("p-any", "p-b"): OUTSIDE, ("p-a",): reserved_in("cr-a")}
