"""InstanceTypeProvider.refresh / list bookkeeping against a scripted EC2 client (no HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import gzip
import importlib.util
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.instancetypes import InstanceTypeProvider
from karpenter_py.cloudprovider.aws.pricing import PricingProvider
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from tests import factories


@pytest.fixture(scope="module")
def records() -> dict[str, Any]:
    spec = importlib.util.find_spec("moto")
    assert spec is not None
    assert spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    with gzip.open(root / "ec2/resources/instance_types.json.gz", "rt") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


class Paginator:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self._pages = pages

    def paginate(self, **params: Any) -> AsyncIterator[dict[str, Any]]:
        async def pages() -> AsyncIterator[dict[str, Any]]:
            for page in self._pages:
                yield page

        return pages()


class ScriptedEC2:
    """Answers the two describe calls with whatever the test put in ``types`` / ``offerings``."""

    def __init__(self) -> None:
        self.types: list[list[dict[str, Any]]] = []  # pages
        self.offerings: list[dict[str, str]] = []
        self.calls: list[str] = []
        # when set: the pages of the n-th describe_instance_types call (the last one repeats)
        self.types_by_call: list[list[list[dict[str, Any]]]] = []

    def get_paginator(self, operation: str) -> Paginator:
        self.calls.append(operation)
        if operation == "describe_instance_types":
            pages = self.types
            if self.types_by_call:
                n = self.calls.count(operation) - 1
                pages = self.types_by_call[min(n, len(self.types_by_call) - 1)]
            return Paginator([{"InstanceTypes": page} for page in pages])
        if operation == "describe_instance_type_offerings":
            return Paginator([{"InstanceTypeOfferings": self.offerings}])
        raise AssertionError(f"unexpected call {operation}")


def offering(name: str, zone: str) -> dict[str, str]:
    return {"InstanceType": name, "LocationType": "availability-zone", "Location": zone}


def make(ec2: ScriptedEC2, **options: Any) -> InstanceTypeProvider:
    clients = AwsClients(
        region="us-west-2",
        endpoint_url=None,
        ec2=ec2,
        ssm=None,
        iam=None,
        sqs=None,
        eks=None,
        pricing=None,
    )
    pricing = PricingProvider(clients, isolated_vpc=True, fallback={"m5.large": 0.096})
    return InstanceTypeProvider(clients, pricing, **options)


def nodeclass(zones: list[str]) -> EC2NodeClass:
    subnets = [{"id": f"subnet-{i}", "zone": z} for i, z in enumerate(zones)]
    return factories.ec2nodeclass(role="r", selector={"a": "b"}, status={"subnets": subnets})


async def test_pages_filters_and_malformed_records(records) -> None:
    ec2 = ScriptedEC2()
    broken = {k: v for k, v in records["c5.large"].items() if k != "VCpuInfo"}
    paravirtual = {**records["m4.large"], "SupportedVirtualizationTypes": ["paravirtual"]}
    ec2.types = [
        [records["m5.large"], records["mac1.metal"]],  # mac: x86_64_mac, not discovered
        [broken, records["c6g.xlarge"], paravirtual],
    ]
    ec2.offerings = [offering("m5.large", "us-west-2a"), offering("c6g.xlarge", "us-west-2b")]
    provider = make(ec2)
    await provider.refresh()
    types = provider.list(nodeclass(["us-west-2a", "us-west-2b"]))
    assert [it.name for it in types] == ["c6g.xlarge", "m5.large"]
    assert provider.facts("c5.large") is None
    assert [(o.zone, o.capacity_type, o.available) for o in types[1].offerings] == [
        ("us-west-2a", "on-demand", True),
        ("us-west-2a", "spot", True),
    ]
    # c6g.xlarge has no price at all here: offerings exist but are unavailable
    assert [(o.zone, o.available) for o in types[0].offerings] == [
        ("us-west-2b", False),
        ("us-west-2b", False),
    ]


async def test_seq_num_moves_only_when_data_changes(records) -> None:
    ec2 = ScriptedEC2()
    ec2.types = [[records["m5.large"]]]
    ec2.offerings = [offering("m5.large", "us-west-2a")]
    provider = make(ec2)
    await provider.refresh()
    nc = nodeclass(["us-west-2a", "us-west-2b"])
    first = provider.list(nc)
    await provider.refresh()
    assert provider.seq_num == 1
    assert provider.list(nc) is first
    ec2.offerings = [*ec2.offerings, offering("m5.large", "us-west-2b")]
    await provider.refresh()
    assert provider.seq_num == 2
    second = provider.list(nc)
    assert second is not first
    assert {o.zone for o in second[0].offerings} == {"us-west-2a", "us-west-2b"}
    changed = copy.deepcopy(records["m5.large"])
    changed["MemoryInfo"]["SizeInMiB"] = 16384
    ec2.types = [[changed]]
    await provider.refresh()
    assert provider.seq_num == 3
    assert provider.list(nc)[0].capacity["memory"] > second[0].capacity["memory"]


async def test_nothing_discovered_is_a_failed_first_load(records) -> None:
    ec2 = ScriptedEC2()
    ec2.types = [[records["mac1.metal"]]]
    provider = make(ec2)
    with pytest.raises(ValueError, match="no hvm"):
        await provider.refresh()
    assert not provider.loaded
    ec2.types = [[records["m5.large"]]]
    await provider.refresh()
    assert provider.seq_num == 1
    ec2.types = [[records["mac1.metal"]]]
    await provider.refresh()  # loaded before: logged, data kept
    assert provider.facts("m5.large") is not None


async def test_run_retries_until_loaded_then_keeps_refreshing(records) -> None:
    ec2 = ScriptedEC2()
    # the first three loads find nothing (a failed first load), later ones find m5.large
    ec2.types_by_call = [[[records["mac1.metal"]]]] * 3 + [[[records["m5.large"]]]]
    provider = make(
        ec2,
        refresh_interval=datetime.timedelta(milliseconds=30),
        retry_interval=datetime.timedelta(milliseconds=10),
    )
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(0.5):
            await provider.run()  # runs forever; errors never escape it
    assert provider.loaded
    assert provider.seq_num == 1
    describes = ec2.calls.count("describe_instance_types")
    assert describes >= 5  # three failures, the first success, then periodic refreshes
