"""InstanceTypeProvider over HTTP against moto (DescribeInstanceTypes/Offerings, subnets)."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from karpenter_py.cloudprovider.aws.clients import AwsClients, is_aws_error
from karpenter_py.cloudprovider.aws.instancetype_math import builtin_aws_instance_types
from karpenter_py.cloudprovider.aws.instancetypes import InstanceTypeProvider
from karpenter_py.cloudprovider.aws.pricing import PricingProvider
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.labels import AWS_LABEL_TOPOLOGY_ZONE_ID, LABEL_TOPOLOGY_ZONE
from tests import factories
from tests.motofixture import REGION, ZONES, MotoServer, seed_network

log = logging.getLogger(__name__)
MOTO_TYPES = 1377  # hvm x86_64/arm64 types moto 5.2.5 describes


@pytest.fixture
async def aws1(aws_env: MotoServer) -> AsyncIterator[AwsClients]:
    """Clients without retries (moto's GetProducts 500 is not worth five attempts)."""
    async with AwsClients.open(REGION, endpoint_url=aws_env.endpoint, max_attempts=1) as clients:
        yield clients


async def subnet_status(clients: AwsClients) -> list[dict[str, str]]:
    """The status.subnets a resolved node class would have for the seeded network."""
    await seed_network(clients)
    subnets = (await clients.ec2.describe_subnets())["Subnets"]
    return [
        {"id": s["SubnetId"], "zone": s["AvailabilityZone"], "zoneID": s["AvailabilityZoneId"]}
        for s in subnets
        if s["AvailabilityZone"] in ZONES
    ]


def nodeclass(subnets: list[dict[str, str]], **spec: Any) -> EC2NodeClass:
    return factories.ec2nodeclass(status={"subnets": subnets}, **spec)


@pytest.fixture
async def loaded(
    aws1: AwsClients,
) -> tuple[InstanceTypeProvider, PricingProvider, list[dict[str, str]]]:
    subnets = await subnet_status(aws1)
    pricing = PricingProvider(aws1, isolated_vpc=True)
    provider = InstanceTypeProvider(aws1, pricing)
    await provider.refresh()
    return provider, pricing, subnets


def by_name(types: list[Any]) -> dict[str, Any]:
    return {it.name: it for it in types}


async def test_refresh_loads_moto_types_with_offerings_in_the_class_zones(aws1) -> None:
    subnets = await subnet_status(aws1)
    pricing = PricingProvider(aws1, isolated_vpc=True)
    provider = InstanceTypeProvider(aws1, pricing)
    start = time.monotonic()
    await provider.refresh()
    loaded_at = time.monotonic()
    types = provider.list(nodeclass(subnets))
    listed_at = time.monotonic()
    log.warning(
        "refresh %.2fs, first list %.3fs (%d types)",
        loaded_at - start,
        listed_at - loaded_at,
        len(types),
    )
    assert provider.loaded
    assert provider.seq_num == 1
    assert len(types) == MOTO_TYPES
    assert [it.name for it in types] == sorted(it.name for it in types)
    zone_ids = {s["zone"]: s["zoneID"] for s in subnets}
    assert len(set(zone_ids.values())) == len(ZONES)
    for it in types:
        for offering in it.offerings:
            assert offering.zone in ZONES
            assert offering.labels[AWS_LABEL_TOPOLOGY_ZONE_ID] == zone_ids[offering.zone]
    m5 = by_name(types)["m5.large"]
    assert [(o.zone, o.capacity_type) for o in m5.offerings] == [
        (z, ct) for z in ZONES for ct in ("on-demand", "spot")
    ]
    assert m5.requirements[LABEL_TOPOLOGY_ZONE] == set(ZONES)
    assert m5.requirements[AWS_LABEL_TOPOLOGY_ZONE_ID] == set(zone_ids.values())
    # moto offers us-west-2d too; the class has no subnet there
    offerings = await aws1.ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": ["m5.large"]}],
    )
    assert "us-west-2d" in {o["Location"] for o in offerings["InstanceTypeOfferings"]}
    assert provider.facts("m5.large") is not None
    assert provider.facts("m5.large").max_enis == 3  # type: ignore[union-attr]


async def test_m5_large_matches_the_builtin_catalog(loaded) -> None:
    provider, _, subnets = loaded
    m5 = by_name(provider.list(nodeclass(subnets)))["m5.large"]
    builtin = by_name(builtin_aws_instance_types())["m5.large"]
    assert (
        dict(m5.allocatable)
        == dict(builtin.allocatable)
        == {
            "cpu": 1930,
            "memory": 6903 * 2**20,
            "ephemeral-storage": 17 * 2**30,
            "pods": 29,
        }
    )
    assert m5.capacity == builtin.capacity
    assert m5.overhead == builtin.overhead
    # until a spot price is known, spot is priced at on-demand (bundled: $0.096/h)
    assert {(o.capacity_type, o.price, o.price_estimated) for o in m5.offerings} == {
        ("on-demand", 0.096, False),
        ("spot", 0.096, True),
    }


async def test_kubelet_and_block_device_overrides(loaded) -> None:
    provider, _, subnets = loaded
    nc = nodeclass(
        subnets,
        kubelet={"maxPods": 110, "systemReserved": {"memory": "200Mi"}},
        blockDeviceMappings=[
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi"}, "rootVolume": True}
        ],
    )
    m5 = by_name(provider.list(nc))["m5.large"]
    assert dict(m5.capacity)["pods"] == 110
    assert dict(m5.allocatable) == {
        "cpu": 1930,
        "memory": (6903 - 200) * 2**20,
        "ephemeral-storage": 89 * 2**30,  # 100Gi - 1Gi kube-reserved - 10 % eviction
        "pods": 110,
    }


async def test_list_is_cached_by_identity(loaded, aws1) -> None:
    provider, pricing, subnets = loaded
    nc = nodeclass(subnets)
    first = provider.list(nc)
    assert provider.list(nc) is first
    assert provider.list(nc.model_copy(deep=True)) is first  # equal content, same list
    assert provider.list(nodeclass(list(reversed(subnets)))) is first  # subnet order is moot
    # the class's zones change -> a new list
    two_zones = provider.list(nodeclass(subnets[:2]))
    assert two_zones is not first
    assert {o.zone for it in two_zones for o in it.offerings} == {s["zone"] for s in subnets[:2]}
    # kubelet settings change -> a new list
    assert provider.list(nodeclass(subnets, kubelet={"maxPods": 20})) is not first
    # same data again -> nothing changes
    await provider.refresh()
    assert provider.seq_num == 1
    assert provider.list(nc) is first
    # prices change (moto's spot history) -> a new list with the spot prices
    await pricing.refresh()
    assert pricing.seq_num == 1
    repriced = provider.list(nc)
    assert repriced is not first
    spot = [o for o in by_name(repriced)["m5.large"].offerings if o.capacity_type == "spot"]
    assert {(o.price, o.price_estimated) for o in spot} == {(0.00001, False)}
    assert provider.list(nc) is repriced


async def test_unpriced_type_has_unavailable_on_demand_offerings(loaded) -> None:
    provider, pricing, subnets = loaded
    await pricing.refresh()  # spot prices known for every type, no live on-demand prices
    types = provider.list(nodeclass(subnets))
    unpriced = [it for it in types if pricing.on_demand(it.name) is None and it.offerings]
    assert unpriced, "moto describes types the bundled price list lacks"
    for it in unpriced:
        for offering in it.offerings:
            assert offering.available is (offering.capacity_type == "spot")


async def test_refresh_failure_keeps_previous_data(loaded, aws1, monkeypatch) -> None:
    provider, _, subnets = loaded
    nc = nodeclass(subnets)
    before = provider.list(nc)

    def get_paginator(name: str) -> Any:
        raise ClientError({"Error": {"Code": "RequestLimitExceeded", "Message": "no"}}, name)

    monkeypatch.setattr(aws1.ec2, "get_paginator", get_paginator)
    await provider.refresh()  # logged, not raised: data was loaded before
    assert provider.seq_num == 1
    assert provider.list(nc) is before
    assert len(before) == MOTO_TYPES


async def test_first_refresh_failure_is_raised(aws_env) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    async with AwsClients.open(REGION, endpoint_url=closed, max_attempts=1) as clients:
        provider = InstanceTypeProvider(clients, PricingProvider(clients, isolated_vpc=True))
        with pytest.raises(Exception) as caught:  # botocore connection error
            await provider.refresh()
    assert is_aws_error(caught.value)
    assert not provider.loaded
    assert provider.list(nodeclass([])) == []
