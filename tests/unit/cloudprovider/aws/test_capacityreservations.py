"""Capacity reservation selection and status entries (pure): the DescribeCapacityReservations
parameters each selector term becomes, and which records become which status entries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.cloudprovider.aws.capacityreservations import (
    Query,
    queries_for,
    reservation_status,
)
from karpenter_py.model.api.ec2nodeclass import CapacityReservationSelectorTerm

ACTIVE = {"Name": "state", "Values": ["active"]}
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def terms(*raw: dict[str, Any]) -> list[CapacityReservationSelectorTerm]:
    return [CapacityReservationSelectorTerm.model_validate(t) for t in raw]


@pytest.mark.parametrize(
    ("raw", "params"),
    [
        (
            [{"id": "cr-1"}],
            [{"CapacityReservationIds": ["cr-1"], "Filters": [ACTIVE]}],
        ),
        (
            [{"tags": {"app": "foo", "team": "*"}, "ownerID": "123456789012"}],
            [
                {
                    "Filters": [
                        ACTIVE,
                        {"Name": "owner-id", "Values": ["123456789012"]},
                        {"Name": "tag:app", "Values": ["foo"]},
                        {"Name": "tag-key", "Values": ["team"]},
                    ],
                    "MaxResults": 1000,
                }
            ],
        ),
        (
            [{"instanceMatchCriteria": "open"}],
            [
                {
                    "Filters": [ACTIVE, {"Name": "instance-match-criteria", "Values": ["open"]}],
                    "MaxResults": 1000,
                }
            ],
        ),
        # equal terms ask once
        (
            [{"id": "cr-1"}, {"id": "cr-1"}],
            [{"CapacityReservationIds": ["cr-1"], "Filters": [ACTIVE]}],
        ),
    ],
)
def test_describe_parameters_per_term(
    raw: list[dict[str, Any]], params: list[dict[str, Any]]
) -> None:
    assert [q.params() for q in queries_for(terms(*raw))] == params


def test_query_of_an_id_term_ignores_nothing_else() -> None:
    assert queries_for(terms({"id": "cr-1"}, {"tags": {"a": "b"}})) == [
        Query(id="cr-1"),
        Query(tags=(("a", "b"),)),
    ]


def record(**over: Any) -> dict[str, Any]:
    base = {
        "CapacityReservationId": "cr-1",
        "AvailabilityZone": "us-west-2a",
        "InstanceType": "p5.48xlarge",
        "OwnerId": "123456789012",
        "InstanceMatchCriteria": "targeted",
        "AvailableInstanceCount": 1,
    }
    return {**base, **over}


BLOCK = "capacity-block"
STATUS: list[tuple[str, dict[str, Any], tuple[str, str, bool] | None]] = [
    ("plain ODCR", record(), ("default", "active", False)),
    ("unlimited capacity block", record(ReservationType=BLOCK), (BLOCK, "active", False)),
    (
        "block 41 min from its end",
        record(ReservationType=BLOCK, EndDate=NOW + timedelta(minutes=41)),
        (BLOCK, "active", False),
    ),
    (
        "block 40 min from its end: expiring",
        record(ReservationType=BLOCK, EndDate=NOW + timedelta(minutes=40)),
        (BLOCK, "expiring", False),
    ),
    (
        "ODCR 5 min from its end stays active (only blocks expire early)",
        record(EndDate=NOW + timedelta(minutes=5)),
        ("default", "active", False),
    ),
    ("interruptible", record(Interruptible=True), ("default", "active", True)),
    ("ended", record(EndDate=NOW), None),
    ("unknown match criteria", record(InstanceMatchCriteria="future"), None),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in STATUS], ids=[c[0] for c in STATUS])
def test_reservation_status(raw: dict[str, Any], expected: tuple[str, str, bool] | None) -> None:
    got = reservation_status(raw, NOW)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert (got.reservation_type, got.state, got.interruptible) == expected
    assert (got.id, got.availability_zone, got.instance_type) == (
        "cr-1",
        "us-west-2a",
        "p5.48xlarge",
    )
