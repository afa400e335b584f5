"""``selection.candidates``: which types and offerings a NodeClaim may launch on, in order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from karpenter_py.cloudprovider.selection import Candidate, candidates, with_offerings
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.instancetype import InstanceType, Offering, make_instance_type
from karpenter_py.model.labels import (
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from tests import factories

A, B = "us-west-2a", "us-west-2b"
OD, SPOT, RESERVED = "on-demand", "spot", "reserved"
RID = AWS_LABEL_CAPACITY_RESERVATION_ID
CPU_LABEL = "karpenter.k8s.aws/instance-cpu"
GI = 2**30


def itype(
    name: str,
    offerings: list[tuple[str, str, float] | tuple[str, str, float, bool]],
    *,
    cpu: int = 2,
    memory_gi: int = 4,
    arch: str = "amd64",
    reservations: Sequence[tuple[str, str, float]] = (),
) -> InstanceType:
    """``offerings`` as (zone, capacity type, price[, available]), then a ``reserved`` offering
    per (zone, reservation id, price) of ``reservations``; no overhead, so allocatable equals
    capacity."""
    return make_instance_type(
        name=name,
        requirements={LABEL_ARCH: arch, CPU_LABEL: str(cpu)},
        capacity={"cpu": cpu * 1000, "memory": memory_gi * GI, "pods": 110},
        offerings=[
            Offering(
                zone=o[0], capacity_type=o[1], price=o[2], available=o[3] if len(o) > 3 else True
            )
            for o in offerings
        ]
        + [
            Offering(zone=zone, capacity_type=RESERVED, price=price, labels={RID: rid})
            for zone, rid, price in reservations
        ],
    )


def claim(
    requirements: Sequence[tuple[str, str, list[str]]] = (),
    requests: dict[str, str] | None = None,
) -> NodeClaim:
    return factories.nodeclaim(
        "c",
        launched=False,
        node_class_ref={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
        requirements=[{"key": k, "operator": op, "values": v} for k, op, v in requirements],
        resources=requests,
    )


def summary(found: list[Candidate]) -> list[tuple[str, list[tuple[str, str]]]]:
    return [(c.instance_type.name, [(o.zone, o.capacity_type) for o in c.offerings]) for c in found]


CATALOG = [
    itype("m5.large", [(A, OD, 0.096), (B, OD, 0.096), (A, SPOT, 0.04)], cpu=2, memory_gi=8),
    itype("m5.xlarge", [(A, OD, 0.192), (B, SPOT, 0.08)], cpu=4, memory_gi=16),
    itype("c5.2xlarge", [(B, OD, 0.34)], cpu=8, memory_gi=16),
    itype("m6g.large", [(A, OD, 0.077)], cpu=2, memory_gi=8, arch="arm64"),
]

CASES: list[tuple[str, NodeClaim, list[tuple[str, list[tuple[str, str]]]]]] = [
    (
        "no requirements: every type, cheapest offering first",
        claim(),
        [
            ("m5.large", [(A, OD), (B, OD), (A, SPOT)]),
            ("m6g.large", [(A, OD)]),
            ("m5.xlarge", [(A, OD), (B, SPOT)]),
            ("c5.2xlarge", [(B, OD)]),
        ],
    ),
    (
        "instance type In",
        claim([(LABEL_INSTANCE_TYPE, "In", ["m5.xlarge", "c5.2xlarge", "absent.large"])]),
        [("m5.xlarge", [(A, OD), (B, SPOT)]), ("c5.2xlarge", [(B, OD)])],
    ),
    (
        "instance type NotIn",
        claim([(LABEL_INSTANCE_TYPE, "NotIn", ["m5.large", "m6g.large"])]),
        [("m5.xlarge", [(A, OD), (B, SPOT)]), ("c5.2xlarge", [(B, OD)])],
    ),
    (
        "zone filters offerings and drops types without one",
        claim([(LABEL_TOPOLOGY_ZONE, "In", [B])]),
        [("m5.xlarge", [(B, SPOT)]), ("m5.large", [(B, OD)]), ("c5.2xlarge", [(B, OD)])],
    ),
    (
        "capacity type filters offerings",
        claim([(LABEL_CAPACITY_TYPE, "In", [SPOT])]),
        [("m5.large", [(A, SPOT)]), ("m5.xlarge", [(B, SPOT)])],
    ),
    (
        "zone and capacity type together",
        claim([(LABEL_TOPOLOGY_ZONE, "In", [A]), (LABEL_CAPACITY_TYPE, "In", [OD])]),
        [("m6g.large", [(A, OD)]), ("m5.large", [(A, OD)]), ("m5.xlarge", [(A, OD)])],
    ),
    (
        "arch",
        claim([(LABEL_ARCH, "In", ["arm64"])]),
        [("m6g.large", [(A, OD)])],
    ),
    (
        "Gt on a numeric label is strict",
        claim([(CPU_LABEL, "Gt", ["4"])]),
        [("c5.2xlarge", [(B, OD)])],
    ),
    (
        "Lt on a numeric label is strict",
        claim([(CPU_LABEL, "Lt", ["4"])]),
        [("m5.large", [(A, OD), (B, OD), (A, SPOT)]), ("m6g.large", [(A, OD)])],
    ),
    (
        "Gt and Lt together bound a range",
        claim([(CPU_LABEL, "Gt", ["2"]), (CPU_LABEL, "Lt", ["8"])]),
        [("m5.xlarge", [(A, OD), (B, SPOT)])],
    ),
    (
        "a key no type defines (the nodepool label) does not filter",
        claim([(LABEL_NODEPOOL, "In", ["default"])]),
        [
            ("m5.large", [(A, OD), (B, OD), (A, SPOT)]),
            ("m6g.large", [(A, OD)]),
            ("m5.xlarge", [(A, OD), (B, SPOT)]),
            ("c5.2xlarge", [(B, OD)]),
        ],
    ),
    (
        "a zone nobody offers leaves nothing",
        claim([(LABEL_TOPOLOGY_ZONE, "In", ["us-west-2d"])]),
        [],
    ),
    (
        "requests must fit allocatable: cpu",
        claim(requests={"cpu": "3"}),
        [("m5.xlarge", [(A, OD), (B, SPOT)]), ("c5.2xlarge", [(B, OD)])],
    ),
    (
        "requests must fit allocatable: exactly full fits",
        claim(requests={"cpu": "8", "memory": "16Gi"}),
        [("c5.2xlarge", [(B, OD)])],
    ),
    (
        "requests must fit allocatable: memory over every type",
        claim(requests={"memory": "17Gi"}),
        [],
    ),
    (
        "a resource no type has (a GPU) fits none",
        claim(requests={"nvidia.com/gpu": "1"}),
        [],
    ),
]


@pytest.mark.parametrize(
    ("nodeclaim", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_requirements_and_resources(
    nodeclaim: NodeClaim, expected: list[tuple[str, list[tuple[str, str]]]]
) -> None:
    assert summary(candidates(nodeclaim, CATALOG)) == expected


UNAVAILABLE_CASES: list[
    tuple[str, set[tuple[str, str, str]], list[tuple[str, list[tuple[str, str]]]]]
] = [
    ("nothing marked", set(), summary(candidates(claim(), CATALOG))),
    (
        "one offering marked: the type keeps its others and its price rises",
        {("m5.large", A, SPOT)},
        [
            ("m6g.large", [(A, OD)]),
            ("m5.xlarge", [(A, OD), (B, SPOT)]),
            ("m5.large", [(A, OD), (B, OD)]),
            ("c5.2xlarge", [(B, OD)]),
        ],
    ),
    (
        "every offering of a type marked: the type is gone",
        {("m5.xlarge", A, OD), ("m5.xlarge", B, SPOT), ("c5.2xlarge", B, OD)},
        [("m5.large", [(A, OD), (B, OD), (A, SPOT)]), ("m6g.large", [(A, OD)])],
    ),
]


@pytest.mark.parametrize(
    ("marked", "expected"),
    [c[1:] for c in UNAVAILABLE_CASES],
    ids=[c[0] for c in UNAVAILABLE_CASES],
)
def test_unavailable_callback(
    marked: set[tuple[str, str, str]], expected: list[tuple[str, list[tuple[str, str]]]]
) -> None:
    asked: list[tuple[str, str, str]] = []

    def unavailable(name: str, zone: str, capacity_type: str) -> bool:
        asked.append((name, zone, capacity_type))
        return (name, zone, capacity_type) in marked

    assert summary(candidates(claim(), CATALOG, unavailable)) == expected
    # Asked once for every available offering, with (type, zone, capacity type).
    assert sorted(asked) == sorted(
        (it.name, o.zone, o.capacity_type) for it in CATALOG for o in it.offerings
    )


def test_unavailable_offerings_in_the_catalog_are_dropped_without_asking() -> None:
    types = [
        itype("m5.large", [(A, OD, 0.096, False), (B, OD, 0.1)]),
        itype("t3.large", [(A, OD, 0.08, False)]),
    ]
    asked: list[tuple[str, str, str]] = []

    def unavailable(name: str, zone: str, capacity_type: str) -> bool:
        asked.append((name, zone, capacity_type))
        return False

    assert summary(candidates(claim(), types, unavailable)) == [("m5.large", [(B, OD)])]
    assert asked == [("m5.large", B, OD)]


ORDER_CASES: list[tuple[str, list[InstanceType], list[tuple[str, float]]]] = [
    (
        "by the cheapest usable offering",
        [
            itype("b", [(A, OD, 0.3), (B, SPOT, 0.1)]),
            itype("a", [(A, OD, 0.2)]),
            itype("c", [(A, OD, 0.15)]),
        ],
        [("b", 0.1), ("c", 0.15), ("a", 0.2)],
    ),
    (
        "equal prices: by name",
        [
            itype("m5.xlarge", [(A, OD, 0.1)]),
            itype("c5.xlarge", [(B, OD, 0.1)]),
            itype("m5.large", [(A, OD, 0.1)]),
        ],
        [("c5.xlarge", 0.1), ("m5.large", 0.1), ("m5.xlarge", 0.1)],
    ),
]


@pytest.mark.parametrize(
    ("types", "expected"), [c[1:] for c in ORDER_CASES], ids=[c[0] for c in ORDER_CASES]
)
def test_cheapest_first_with_name_tie_break(
    types: list[InstanceType], expected: list[tuple[str, float]]
) -> None:
    assert [(c.instance_type.name, c.price) for c in candidates(claim(), types)] == expected


def test_the_price_counts_only_allowed_offerings() -> None:
    # Spot is cheaper for "a" but excluded, so "b" (cheaper on-demand) comes first.
    types = [itype("a", [(A, SPOT, 0.01), (A, OD, 0.5)]), itype("b", [(A, OD, 0.2)])]
    found = candidates(claim([(LABEL_CAPACITY_TYPE, "In", [OD])]), types)
    assert [(c.instance_type.name, c.price) for c in found] == [("b", 0.2), ("a", 0.5)]


def test_with_offerings_keeps_only_the_usable_offerings() -> None:
    (found,) = candidates(claim([(LABEL_TOPOLOGY_ZONE, "In", [B])]), [CATALOG[0]])
    narrowed = with_offerings(found)
    assert [(o.zone, o.capacity_type, o.price) for o in narrowed.offerings] == [(B, OD, 0.096)]
    assert (narrowed.name, narrowed.allocatable) == (CATALOG[0].name, CATALOG[0].allocatable)
    assert len(CATALOG[0].offerings) == 3  # the catalog's type is untouched


RESERVED_TYPE = itype(
    "p5.48xlarge", [(A, OD, 98.0)], reservations=[(A, "cr-a", 1e-5), (A, "cr-b", 1e-5)]
)


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        pytest.param(
            [(LABEL_CAPACITY_TYPE, "In", [RESERVED])], ["cr-a", "cr-b"], id="either reservation"
        ),
        pytest.param(
            [(LABEL_CAPACITY_TYPE, "In", [RESERVED]), (RID, "In", ["cr-b"])],
            ["cr-b"],
            id="the reservation the solver planned the claim into",
        ),
        pytest.param([(RID, "NotIn", ["cr-a"])], [None, "cr-b"], id="a full one left out"),
    ],
)
def test_offering_labels_pick_reserved_offerings(
    requirements: list[tuple[str, str, list[str]]], expected: list[str | None]
) -> None:
    (found,) = candidates(claim(requirements), [RESERVED_TYPE])
    assert [o.labels.get(RID) for o in found.offerings] == expected
