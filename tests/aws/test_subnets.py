"""Subnet discovery against moto: terms ORed, fields ANDed, '*' = any value, ordered by free
IPs (then id)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.subnets import (
    DiscoveredSubnet,
    discover_subnets,
    subnet_filters,
)
from karpenter_py.model.api.ec2nodeclass import SubnetSelectorTerm

DISCOVERY = "karpenter.sh/discovery"


@dataclass
class Subnets:
    small: str  # /24 in us-west-2a: 251 free
    large: str  # /20 in us-west-2b: 4091 free
    medium: str  # /22 in us-west-2c: 1019 free, tagged differently
    other: str  # untagged /24


async def _subnet(aws: AwsClients, vpc: str, cidr: str, zone: str, tags: dict[str, str]) -> str:
    spec = [{"ResourceType": "subnet", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    out = await aws.ec2.create_subnet(
        VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=spec if tags else []
    )
    return str(out["Subnet"]["SubnetId"])


@pytest.fixture
async def subnets(aws: AwsClients) -> Subnets:
    vpc = (await aws.ec2.create_vpc(CidrBlock="10.0.0.0/16"))["Vpc"]["VpcId"]
    return Subnets(
        small=await _subnet(aws, vpc, "10.0.0.0/24", "us-west-2a", {DISCOVERY: "c1", "tier": "a"}),
        large=await _subnet(aws, vpc, "10.0.16.0/20", "us-west-2b", {DISCOVERY: "c1"}),
        medium=await _subnet(aws, vpc, "10.0.4.0/22", "us-west-2c", {DISCOVERY: "c2"}),
        other=await _subnet(aws, vpc, "10.0.1.0/24", "us-west-2a", {}),
    )


def term(**kw: object) -> SubnetSelectorTerm:
    return SubnetSelectorTerm.model_validate(kw)


async def ids(aws: AwsClients, *terms: SubnetSelectorTerm) -> list[str]:
    return [s.id for s in await discover_subnets(aws, terms)]


async def test_tags_order_by_free_ips(aws: AwsClients, subnets: Subnets) -> None:
    found = await discover_subnets(aws, [term(tags={DISCOVERY: "c1"})])
    assert [(s.id, s.zone, s.available_ips) for s in found] == [
        (subnets.large, "us-west-2b", 4091),
        (subnets.small, "us-west-2a", 251),
    ]
    assert all(s.zone_id.startswith("usw2-az") for s in found)
    assert found[0].status().model_dump(by_alias=True) == {
        "id": subnets.large,
        "zone": "us-west-2b",
        "zoneID": found[0].zone_id,
    }


async def test_any_value_and_or_and(aws: AwsClients, subnets: Subnets) -> None:
    assert await ids(aws, term(tags={DISCOVERY: "*"})) == [
        subnets.large,
        subnets.medium,
        subnets.small,
    ]
    # Fields of one term are ANDed.
    assert await ids(aws, term(tags={DISCOVERY: "c1", "tier": "a"})) == [subnets.small]
    # Terms are ORed, and a subnet matched twice appears once.
    assert await ids(
        aws, term(id=subnets.other), term(tags={DISCOVERY: "c2"}), term(id=subnets.medium)
    ) == [subnets.medium, subnets.other]


async def test_nothing_matches(aws: AwsClients, subnets: Subnets) -> None:
    assert await ids(aws, term(tags={DISCOVERY: "nope"})) == []


async def test_equal_free_ips_ordered_by_id(aws: AwsClients, subnets: Subnets) -> None:
    found = await ids(aws, term(id=subnets.other), term(id=subnets.small))
    assert found == sorted([subnets.other, subnets.small])


@pytest.mark.parametrize(
    ("fields", "filters"),
    [
        ({"id": "subnet-0a"}, [{"Name": "subnet-id", "Values": ["subnet-0a"]}]),
        (
            {"tags": {"b": "*", "a": "x"}},
            [{"Name": "tag:a", "Values": ["x"]}, {"Name": "tag-key", "Values": ["b"]}],
        ),
    ],
)
def test_filters(fields: dict[str, object], filters: list[dict[str, object]]) -> None:
    assert subnet_filters(term(**fields)) == filters


def test_status_entry() -> None:
    s = DiscoveredSubnet(id="subnet-1", zone="us-west-2a", zone_id="usw2-az1", available_ips=3)
    assert s.status().model_dump(by_alias=True) == {
        "id": "subnet-1",
        "zone": "us-west-2a",
        "zoneID": "usw2-az1",
    }
