"""PricingProvider over HTTP: moto for EC2 spot prices (its GetProducts answers 500), and a
stand-in GetProducts endpoint (tests/aws/pricingseed.py) for the on-demand parse path."""

from __future__ import annotations

import asyncio
import datetime
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.pricing import PricingProvider, bundled_on_demand_prices
from tests.aws.calls import count_loads
from tests.aws.pricingseed import price_list_server, with_pricing_endpoint
from tests.motofixture import REGION, ZONES, MotoServer


@pytest.fixture
async def aws1(aws_env: MotoServer) -> AsyncIterator[AwsClients]:
    """Clients without retries: moto's GetProducts 500 would otherwise be retried 5 times."""
    async with AwsClients.open(REGION, endpoint_url=aws_env.endpoint, max_attempts=1) as clients:
        yield clients


def closed_endpoint() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def failing_paginator(operation_name: str) -> Any:
    def get_paginator(name: str) -> Any:
        raise ClientError(
            {"Error": {"Code": "RequestLimitExceeded", "Message": "slow down"}}, operation_name
        )

    return get_paginator


async def test_on_demand_falls_back_to_bundled_prices_when_get_products_fails(aws1) -> None:
    prices = PricingProvider(aws1, isolated_vpc=False)
    assert prices.on_demand("m5.large") == 0.096  # bundled before any refresh
    assert prices.spot("m5.large", "us-west-2a") is None
    await prices.refresh()  # moto: GetProducts -> HTTP 500; must not raise
    assert not prices.on_demand_live
    assert prices.on_demand("m5.large") == 0.096
    assert prices.on_demand("c6g.xlarge") == bundled_on_demand_prices()["c6g.xlarge"]
    # spot still refreshed from moto's history (moto prices everything at 0.00001)
    assert prices.spot_live
    assert prices.spot("m5.large", "us-west-2a") == 0.00001
    assert prices.seq_num == 1


async def test_isolated_vpc_never_asks_the_pricing_api(aws1, monkeypatch) -> None:
    calls: list[str] = []

    def get_paginator(name: str) -> Any:
        calls.append(name)
        raise AssertionError("the Pricing API must not be called in an isolated VPC")

    monkeypatch.setattr(aws1.pricing, "get_paginator", get_paginator)
    prices = PricingProvider(aws1, isolated_vpc=True, fallback={"m5.large": 0.1})
    await prices.refresh()
    assert calls == []
    assert prices.on_demand("m5.large") == 0.1
    assert prices.on_demand("c6g.xlarge") is None  # only the given fallback
    assert prices.spot("m5.large", "us-west-2b") == 0.00001


async def test_spot_prices_from_moto_history(aws1) -> None:
    prices = PricingProvider(aws1, isolated_vpc=True)
    await prices.refresh()
    offerings = await aws1.ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": ["m5.large", "c6g.xlarge"]}],
    )
    zones = {(o["InstanceType"], o["Location"]) for o in offerings["InstanceTypeOfferings"]}
    assert {("m5.large", z) for z in ZONES} <= zones
    for name, zone in zones:
        assert prices.spot(name, zone) == 0.00001
    assert prices.spot("m5.large", "eu-west-1a") is None
    seq = prices.seq_num
    await prices.refresh()  # same prices again: callers' caches stay valid
    assert prices.seq_num == seq == 1


async def test_concurrent_refreshes_share_one_spot_price_load(aws1) -> None:
    loads = count_loads(aws1.ec2, "DescribeSpotPriceHistory")
    prices = PricingProvider(aws1, isolated_vpc=True)
    async with asyncio.TaskGroup() as tg:
        for _ in range(4):
            tg.create_task(prices.refresh())
    assert loads == {"DescribeSpotPriceHistory": 1}
    assert (prices.spot("m5.large", "us-west-2a"), prices.seq_num) == (0.00001, 1)


async def test_spot_failure_keeps_previous_prices(aws1, monkeypatch) -> None:
    prices = PricingProvider(aws1, isolated_vpc=True)
    await prices.refresh()
    monkeypatch.setattr(aws1.ec2, "get_paginator", failing_paginator("DescribeSpotPriceHistory"))
    await prices.refresh()
    assert prices.spot("m5.large", "us-west-2a") == 0.00001
    assert prices.seq_num == 1


async def test_unreachable_endpoint_keeps_fallback_and_does_not_raise(aws_env) -> None:
    closed = closed_endpoint()
    async with AwsClients.open(REGION, endpoint_url=closed, max_attempts=1) as clients:
        prices = PricingProvider(clients, isolated_vpc=False)
        await prices.refresh()
    assert prices.on_demand("m5.large") == 0.096
    assert prices.spot("m5.large", "us-west-2a") is None
    assert prices.seq_num == 0


async def test_on_demand_from_get_products_over_http(aws1) -> None:
    with price_list_server() as server:
        server.seed({"m5.large": 0.0965, "c6g.xlarge": 0.137, "t3.micro": 0.0105})
        server.seed(
            {"m5.metal": 4.608, "m5.large": 9.99},  # the shared-tenancy price wins
            product_family="Compute Instance (bare metal)",
            tenancy="Dedicated",
        )
        async with with_pricing_endpoint(aws1, server.endpoint) as clients:
            prices = PricingProvider(clients, isolated_vpc=False)
            await prices.refresh()
    assert prices.on_demand_live
    assert prices.on_demand("m5.large") == 0.0965
    assert prices.on_demand("c6g.xlarge") == 0.137
    assert prices.on_demand("t3.micro") == 0.0105
    assert prices.on_demand("m5.metal") == 4.608
    # the live list replaces the bundled one (as upstream): unlisted types have no price
    assert prices.on_demand("r5.large") is None
    assert prices.seq_num == 2  # on-demand changed, then spot
    # two queries, each paginated (page size 2) through NextToken
    assert [r.get("NextToken") for r in server.requests] == [None, "2", None]
    filters = [{f["Field"]: f["Value"] for f in r["Filters"]} for r in server.requests]
    assert all(r["ServiceCode"] == "AmazonEC2" for r in server.requests)
    assert filters[0] == {
        "regionCode": "us-west-2",
        "productFamily": "Compute Instance",
        "tenancy": "Shared",
        "operatingSystem": "Linux",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    assert filters[2]["productFamily"] == "Compute Instance (bare metal)"
    assert filters[2]["tenancy"] == "Dedicated"


async def test_empty_or_failing_get_products_keeps_previous_prices(aws1) -> None:
    with price_list_server() as server:
        async with with_pricing_endpoint(aws1, server.endpoint) as clients:
            prices = PricingProvider(clients, isolated_vpc=False)
            await prices.refresh()  # empty answer: nothing to replace the fallback with
            assert not prices.on_demand_live
            assert prices.on_demand("m5.large") == 0.096
            server.seed({"m5.large": 0.2})
            await prices.refresh()
            assert prices.on_demand("m5.large") == 0.2
            seq = prices.seq_num
            server.status = 503
            await prices.refresh()
            assert prices.on_demand("m5.large") == 0.2
            assert prices.seq_num == seq


async def test_run_refreshes_periodically(aws1, monkeypatch) -> None:
    # every spot call fails fast, so the loop's pace is the refresh interval
    monkeypatch.setattr(aws1.ec2, "get_paginator", failing_paginator("DescribeSpotPriceHistory"))
    prices = PricingProvider(
        aws1, isolated_vpc=True, refresh_interval=datetime.timedelta(milliseconds=20)
    )
    refreshes = 0
    original = prices.refresh

    async def counting() -> None:
        nonlocal refreshes
        refreshes += 1
        await original()

    prices.refresh = counting  # type: ignore[method-assign]
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await prices.run()  # never returns; failures never escape it
    assert refreshes >= 3
    assert prices.on_demand("m5.large") == 0.096
