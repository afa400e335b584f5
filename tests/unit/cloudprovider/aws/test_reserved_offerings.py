"""Reserved offerings (ReservedCapacity gate): one per selected reservation of a type, priced
near zero in on-demand order, available only while the reservation has room, is active and its
zone is one of the class's (pure)."""

from __future__ import annotations

import pytest

from karpenter_py.cloudprovider.aws.instance import choose_capacity_type, reserved_targets
from karpenter_py.cloudprovider.aws.instancetype_math import NodeKnobs
from karpenter_py.cloudprovider.aws.instancetypes import offerings_for, resolve_instance_types
from karpenter_py.model.api.ec2nodeclass import CapacityReservation
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
    AWS_LABEL_CAPACITY_RESERVATION_TYPE,
    AWS_LABEL_TOPOLOGY_ZONE_ID,
    LABEL_CAPACITY_TYPE,
)
from karpenter_py.scheduling.requirements import Req, Requirements
from tests import factories
from tests.unit.cloudprovider.aws.test_catalog import facts
from tests.unit.cloudprovider.aws.test_instancetype_knobs import Prices

A, B, C = "us-west-2a", "us-west-2b", "us-west-2c"
ZONES = [(A, "usw2-az1"), (B, "")]
PRICES = Prices({"m5.large": 0.096}, {("m5.large", A): 0.035, ("m5.large", B): 0.04})
M5 = facts(zones=(A, B, C))


def m5(reservations: list[tuple[CapacityReservation, int]] | None = None) -> InstanceType:
    """m5.large for a class with subnets in ZONES and these reservations (room each)."""
    [it] = resolve_instance_types(
        [M5],
        dict(ZONES),
        region="us-west-2",
        knobs=NodeKnobs(),
        pricing=PRICES,
        reservations=reservations or [],
    )
    return it


def test_reserved_offering_labels_and_price_order() -> None:
    cr = factories.capacity_reservation("cr-1", zone=A)
    offerings = offerings_for(M5, ZONES, PRICES, [(cr, 3)])
    got = [(o.zone, o.capacity_type, o.price, o.available) for o in offerings]
    assert got == [
        (A, "on-demand", 0.096, True),
        (A, "spot", 0.035, True),
        (B, "on-demand", 0.096, True),
        (B, "spot", 0.04, True),
        (A, "reserved", 0.096 / 10_000_000, True),
    ]
    reserved = offerings[-1]
    assert dict(reserved.labels) == {
        AWS_LABEL_CAPACITY_RESERVATION_ID: "cr-1",
        AWS_LABEL_CAPACITY_RESERVATION_TYPE: "default",
        AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: "false",
        AWS_LABEL_TOPOLOGY_ZONE_ID: "usw2-az1",
    }
    assert reserved.reservation_capacity == 3
    # reserved < spot < on-demand, as upstream prices them
    by_type = {o.capacity_type: o.price for o in offerings if o.zone == A}
    assert by_type["reserved"] < by_type["spot"] < by_type["on-demand"]


@pytest.mark.parametrize(
    ("reservation", "room", "available"),
    [
        (factories.capacity_reservation(zone=A), 1, True),
        (factories.capacity_reservation(zone=A), 0, False),  # used up
        (factories.capacity_reservation(zone=A, state="expiring"), 5, False),  # block ending
        (factories.capacity_reservation(zone=C), 5, False),  # no subnet of the class there
    ],
)
def test_reserved_offering_availability(reservation, room, available) -> None:
    [offering] = [
        o
        for o in offerings_for(M5, ZONES, PRICES, [(reservation, room)])
        if o.capacity_type == "reserved"
    ]
    assert (offering.available, offering.reservation_capacity) == (available, room)


def test_other_types_reservations_and_unpriced_types() -> None:
    other = factories.capacity_reservation(instance_type="m5.xlarge", zone=A)
    assert [o.capacity_type for o in offerings_for(M5, ZONES, PRICES, [(other, 2)])] == [
        "on-demand",
        "spot",
        "on-demand",
        "spot",
    ]
    # no on-demand price known: the reservation is still offered, at 0 (upstream)
    block = factories.capacity_reservation(zone=A, reservation_type="capacity-block")
    [reserved] = [
        o
        for o in offerings_for(M5, ZONES, Prices({}, {}), [(block, 2)])
        if o.capacity_type == "reserved"
    ]
    assert (reserved.price, reserved.available) == (0.0, True)
    assert reserved.labels[AWS_LABEL_CAPACITY_RESERVATION_TYPE] == "capacity-block"


def test_type_requirements_allow_reserved_only_with_a_reservation() -> None:
    cr = factories.capacity_reservation(zone=A)
    assert m5([(cr, 1)]).requirements[LABEL_CAPACITY_TYPE] == {"on-demand", "spot", "reserved"}
    assert m5().requirements[LABEL_CAPACITY_TYPE] == {"on-demand", "spot"}


@pytest.mark.parametrize(
    ("allowed", "room", "expected"),
    [
        (("reserved", "spot", "on-demand"), 1, "reserved"),
        (("reserved", "spot", "on-demand"), 0, "spot"),  # used up: spot, then on-demand
        (("reserved", "on-demand"), 0, "on-demand"),
        (("spot", "on-demand"), 1, "spot"),  # the NodeClaim does not allow reserved
    ],
)
def test_launch_capacity_type(allowed, room, expected) -> None:
    cr = factories.capacity_reservation(zone=A)
    it = m5([(cr, room)])
    reqs = Requirements({LABEL_CAPACITY_TYPE: Req.in_(LABEL_CAPACITY_TYPE, allowed)})
    assert choose_capacity_type(reqs, [it], [A, B]) == expected


def test_reserved_targets_take_the_roomiest_reservation_and_prefer_default_ones() -> None:
    reservations = [
        (factories.capacity_reservation("cr-small", zone=A), 1),
        (factories.capacity_reservation("cr-big", zone=A), 4),
        (factories.capacity_reservation("cr-block", zone=B, reservation_type="capacity-block"), 9),
    ]
    it = m5(reservations)
    targets, capacity_type = reserved_targets([it], [A, B])
    assert {k: o.labels[AWS_LABEL_CAPACITY_RESERVATION_ID] for k, o in targets.items()} == {
        ("m5.large", A): "cr-big"
    }
    assert capacity_type == "on-demand"
    # only Capacity Blocks in reach: they launch as capacity-block
    targets, capacity_type = reserved_targets([it], [B])
    assert {k: o.labels[AWS_LABEL_CAPACITY_RESERVATION_ID] for k, o in targets.items()} == {
        ("m5.large", B): "cr-block"
    }
    assert capacity_type == "capacity-block"
