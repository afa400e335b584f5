"""Reserved capacity against moto over HTTP (reservations seeded by tests/aws/motoreservations):
selector terms resolve to status entries, a NodeClaim that allows ``reserved`` launches into the
reservation and carries its labels, a used-up reservation falls back to on-demand / spot, the
NodeClaims of an expiring Capacity Block are deleted, and with the ReservedCapacity gate off none
of it happens."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.aws.capacityreservations import CapacityReservationProvider
from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.controllers.nodeclaim.reservationexpiry import CapacityBlockExpiration
from karpenter_py.controllers.nodeclaim.reservationlabels import ReservationCapacityType
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.manager.aws import AwsStack, open_aws
from karpenter_py.manager.settings import load_settings
from karpenter_py.model.api.ec2nodeclass import CapacityReservationSelectorTerm
from karpenter_py.model.labels import (
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
    AWS_LABEL_CAPACITY_RESERVATION_TYPE,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.aws.launchsupport import nodeclaim as launch_nodeclaim
from tests.aws.motoreservations import (
    available_count,
    capacity_reservations,
    end_reservation,
    seed_capacity_reservation,
)
from tests.aws.test_provider import _moto_ami, nodeclass_dict, nodepool
from tests.motofixture import CLUSTER, MotoServer, Network, seed_network
from tests.unit.fakes import FakeKube, deps, wire

A, B = "us-west-2a", "us-west-2b"
OTHER_OWNER = "210987654321"
NOW = datetime.datetime(2026, 6, 1, 12, 0, tzinfo=datetime.UTC)


@pytest.fixture
def seeded(aws_env: MotoServer) -> Iterator[None]:
    with capacity_reservations():
        seed_capacity_reservation(
            "cr-0aaa", instance_type="m5.large", zone=B, available=2, tags={"app": "foo"}
        )
        seed_capacity_reservation(
            "cr-0bbb",
            instance_type="m5.xlarge",
            zone=A,
            available=1,
            owner_id=OTHER_OWNER,
            match_criteria="open",
            tags={"app": "bar"},
        )
        seed_capacity_reservation(
            "cr-0ccc",
            instance_type="m5.large",
            zone=B,
            available=3,
            state="cancelled",
            tags={"app": "foo"},
        )
        # EC2 has not flipped it to expired yet, but its end has passed
        seed_capacity_reservation(
            "cr-0ddd",
            instance_type="m5.large",
            zone=A,
            available=1,
            end=NOW - datetime.timedelta(minutes=1),
            tags={"team": "x"},
        )
        # a Capacity Block 30 minutes from its end: expiring
        seed_capacity_reservation(
            "cr-0eee",
            instance_type="p5.48xlarge",
            zone=A,
            available=1,
            reservation_type="capacity-block",
            end=NOW + datetime.timedelta(minutes=30),
            tags={"app": "ml"},
            interruptible=True,
        )
        yield


@pytest.mark.parametrize(
    ("terms", "ids"),
    [
        ([{"id": "cr-0aaa"}], ["cr-0aaa"]),
        ([{"tags": {"app": "foo"}}], ["cr-0aaa"]),  # the cancelled one is not active
        ([{"tags": {"app": "*"}}], ["cr-0aaa", "cr-0bbb", "cr-0eee"]),
        ([{"tags": {"app": "*"}, "ownerID": OTHER_OWNER}], ["cr-0bbb"]),
        ([{"instanceMatchCriteria": "open"}], ["cr-0bbb"]),
        ([{"tags": {"team": "x"}}], []),  # ended
        ([{"id": "cr-0123missing"}], []),
        ([{"id": "cr-0aaa"}, {"tags": {"app": "foo"}}], ["cr-0aaa"]),
    ],
)
async def test_selector_terms_resolve(
    aws: AwsClients, seeded: None, terms: list[dict[str, Any]], ids: list[str]
) -> None:
    provider = CapacityReservationProvider(aws, FakeClock(NOW))
    parsed = [CapacityReservationSelectorTerm.model_validate(t) for t in terms]
    assert [r.id for r in await provider.resolve(parsed)] == ids


async def test_status_entries_and_counts(aws: AwsClients, seeded: None) -> None:
    provider = CapacityReservationProvider(aws, FakeClock(NOW))
    found = await provider.resolve(
        [CapacityReservationSelectorTerm.model_validate({"tags": {"app": "*"}})]
    )
    assert [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in found] == [
        {
            "id": "cr-0aaa",
            "availabilityZone": B,
            "instanceType": "m5.large",
            "ownerID": "123456789012",
            "instanceMatchCriteria": "targeted",
            "reservationType": "default",
            "state": "active",
        },
        {
            "id": "cr-0bbb",
            "availabilityZone": A,
            "instanceType": "m5.xlarge",
            "ownerID": OTHER_OWNER,
            "instanceMatchCriteria": "open",
            "reservationType": "default",
            "state": "active",
        },
        {
            "id": "cr-0eee",
            "availabilityZone": A,
            "instanceType": "p5.48xlarge",
            "ownerID": "123456789012",
            "instanceMatchCriteria": "targeted",
            "reservationType": "capacity-block",
            "interruptible": True,
            "state": "expiring",
            "endTime": "2026-06-01T12:30:00Z",
        },
    ]
    assert provider.counts(["cr-0aaa", "cr-0bbb", "cr-0eee"]) == (
        ("cr-0aaa", 2),
        ("cr-0bbb", 1),
        ("cr-0eee", 1),
    )


# ---------------------------------------------------------------- launching into a reservation

RESERVED_OR_ON_DEMAND = ("reserved", "on-demand")


def _claim(name: str, capacity_types: tuple[str, ...] = RESERVED_OR_ON_DEMAND):
    return launch_nodeclaim(
        name,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)},
        ],
    )


async def _open(aws_env: MotoServer, gates: str) -> AsyncIterator[AwsStack]:
    settings = load_settings(
        [],
        {
            "CLOUD_PROVIDER": "aws",
            "CLUSTER_NAME": CLUSTER,
            "CLUSTER_ENDPOINT": "https://ABC.gr7.us-west-2.eks.amazonaws.com",
            "FEATURE_GATES": gates,
        },
    )
    async with open_aws(settings, endpoint_url=aws_env.endpoint) as stack:
        yield stack


async def _use_reservation(aws: AwsClients, stack: AwsStack, net: Network, ami: str) -> None:
    """The status controller's part: resolve the class's terms into its status."""
    terms = [{"id": "cr-0aaa"}]
    found = []
    if stack.reservations is not None:
        found = await stack.reservations.resolve(
            [CapacityReservationSelectorTerm.model_validate(t) for t in terms]
        )
    body = await nodeclass_dict(aws, net, ami, capacityReservationSelectorTerms=terms)
    body["status"]["capacityReservations"] = [
        r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in found
    ]
    stack.nodeclasses.upsert(body)


@pytest.fixture
async def gate_on(aws_env: MotoServer, aws: AwsClients, seeded: None) -> AsyncIterator[AwsStack]:
    net = await seed_network(aws)
    async for stack in _open(aws_env, "ReservedCapacity=true"):
        await _use_reservation(aws, stack, net, await _moto_ami(aws))
        yield stack


async def _instance(aws: AwsClients, provider_id: str) -> dict[str, Any]:
    resp = await aws.ec2.describe_instances(InstanceIds=[provider_id.rsplit("/", 1)[1]])
    return dict(resp["Reservations"][0]["Instances"][0])


async def test_a_nodeclaim_launches_into_the_reservation_with_its_labels(
    aws: AwsClients, gate_on: AwsStack
) -> None:
    [m5] = [
        t for t in await gate_on.provider.get_instance_types(nodepool()) if t.name == "m5.large"
    ]
    reserved = [o for o in m5.offerings if o.capacity_type == "reserved"]
    assert [(o.zone, o.available, o.reservation_capacity) for o in reserved] == [(B, True, 2)]
    launched = await gate_on.provider.create(_claim("default-r1"))
    labels = launched.metadata.labels
    assert (
        labels[LABEL_CAPACITY_TYPE],
        labels[AWS_LABEL_CAPACITY_RESERVATION_ID],
        labels[AWS_LABEL_CAPACITY_RESERVATION_TYPE],
        labels[AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE],
        labels[LABEL_TOPOLOGY_ZONE],
    ) == ("reserved", "cr-0aaa", "default", "false", B)
    instance = await _instance(aws, launched.status.provider_id)
    assert instance["CapacityReservationId"] == "cr-0aaa"
    assert available_count("cr-0aaa") == 1  # EC2 counts the instance in the reservation
    assert gate_on.reservations is not None
    assert gate_on.reservations.available("cr-0aaa") == 1  # and so does Karpenter until resync


@pytest.mark.parametrize(
    ("capacity_types", "fallback"),
    [(RESERVED_OR_ON_DEMAND, "on-demand"), (("reserved", "spot", "on-demand"), "spot")],
)
async def test_a_used_up_reservation_falls_back(
    aws: AwsClients, gate_on: AwsStack, capacity_types: tuple[str, ...], fallback: str
) -> None:
    first = await gate_on.provider.create(_claim("default-r1", capacity_types))
    second = await gate_on.provider.create(_claim("default-r2", capacity_types))
    assert [c.metadata.labels[LABEL_CAPACITY_TYPE] for c in (first, second)] == [
        "reserved",
        "reserved",
    ]
    assert available_count("cr-0aaa") == 0
    # used up: the offering goes away (no describe needed: Karpenter counted the launches)
    third = await gate_on.provider.create(_claim("default-r3", capacity_types))
    assert third.metadata.labels[LABEL_CAPACITY_TYPE] == fallback
    assert AWS_LABEL_CAPACITY_RESERVATION_ID not in third.metadata.labels
    assert "CapacityReservationId" not in await _instance(aws, third.status.provider_id)
    # a NodeClaim that allows only reserved capacity finds nothing to launch
    with pytest.raises(Exception, match="no instance type of nodeclaim default-r4"):
        await gate_on.provider.create(_claim("default-r4", ("reserved",)))


async def test_gate_off_offers_and_launches_no_reserved_capacity(
    aws_env: MotoServer, aws: AwsClients, seeded: None
) -> None:
    net = await seed_network(aws)
    async for stack in _open(aws_env, "ReservedCapacity=false"):
        assert stack.reservations is None
        await _use_reservation(aws, stack, net, await _moto_ami(aws))
        [m5] = [
            t for t in await stack.provider.get_instance_types(nodepool()) if t.name == "m5.large"
        ]
        assert {o.capacity_type for o in m5.offerings} == {"on-demand", "spot"}
        launched = await stack.provider.create(_claim("default-off"))
        assert launched.metadata.labels[LABEL_CAPACITY_TYPE] == "on-demand"
        assert available_count("cr-0aaa") == 2


# ---------------------------------------------------------------- capacity block expiration


async def test_nodeclaims_of_an_expiring_capacity_block_are_deleted(aws: AwsClients) -> None:
    with capacity_reservations():
        seed_capacity_reservation(
            "cr-0b10c",
            instance_type="p5.48xlarge",
            zone=A,
            available=0,
            total=2,
            reservation_type="capacity-block",
            end=NOW + datetime.timedelta(minutes=39),
        )
        seed_capacity_reservation(
            "cr-0b10d",
            instance_type="p5.48xlarge",
            zone=A,
            available=0,
            total=1,
            reservation_type="capacity-block",
            end=NOW + datetime.timedelta(hours=3),
        )
        seed_capacity_reservation("cr-0d0d", instance_type="m5.large", zone=A, available=0)
        cluster, client = Cluster(), FakeKube()
        claims = {
            "block-1": "cr-0b10c",
            "block-2": "cr-0b10c",
            "later-block": "cr-0b10d",
            "odcr": "cr-0d0d",
            "on-demand": None,
        }
        for name, rid in claims.items():
            labels = {AWS_LABEL_CAPACITY_RESERVATION_ID: rid} if rid else {}
            nc = factories.nodeclaim(name, uid=f"uid-{name}", labels=labels)
            cluster.upsert_nodeclaim(nc)
            client.put(NODECLAIMS, wire(nc))
        sweep = CapacityBlockExpiration(
            deps(client=client, cluster=cluster),
            CapacityReservationProvider(aws, FakeClock(NOW)),
        )
        assert await sweep.sweep() == ["block-1", "block-2"]
        deleted = [(c.name, c.uid) for c in client.calls_of("delete", NODECLAIMS)]
        assert deleted == [("block-1", "uid-block-1"), ("block-2", "uid-block-2")]


# ---------------------------------------------------------------- leaving a reservation


async def test_a_nodeclaim_whose_reservation_ended_is_relabelled_on_demand(
    aws: AwsClients, gate_on: AwsStack
) -> None:
    launched = await gate_on.provider.create(_claim("default-r1"))
    kept = await gate_on.provider.create(_claim("default-r2"))
    cluster, client = Cluster(), FakeKube()
    for nc in (launched, kept):
        cluster.upsert_nodeclaim(nc)
        client.put(NODECLAIMS, wire(nc))
    sweep = ReservationCapacityType(deps(client=client, cluster=cluster, cloud=gate_on.provider))
    assert await sweep.sweep() == []  # both still in the reservation
    end_reservation("cr-0aaa")
    assert await sweep.sweep() == ["default-r1", "default-r2"]
    patches = [(c.name, c.body) for c in client.calls_of("patch", NODECLAIMS)]
    demoted = {
        "metadata": {
            "labels": {
                LABEL_CAPACITY_TYPE: "on-demand",
                AWS_LABEL_CAPACITY_RESERVATION_ID: None,
                AWS_LABEL_CAPACITY_RESERVATION_TYPE: None,
                AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: None,
            }
        }
    }
    assert patches == [("default-r1", demoted), ("default-r2", demoted)]
