"""Instances against moto: get, list, delete and tag round trips."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code
from karpenter_py.cloudprovider.aws.instance import Instance, InstanceProvider
from karpenter_py.cloudprovider.aws.instancebatch import InstanceBatcher
from karpenter_py.cloudprovider.aws.launchtemplates import LaunchTemplateProvider
from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from tests.aws.launchsupport import (
    CLUSTER_INFO,
    ec2nodeclass,
    instance_type,
    launch_tags,
    nodeclaim,
)
from tests.motofixture import seed_network

A = "us-west-2a"
Launch = Callable[[str], Awaitable[Instance]]


@pytest.fixture
async def provider(aws: AwsClients) -> InstanceProvider:
    return InstanceProvider(aws, CLUSTER_INFO, LaunchTemplateProvider(aws, CLUSTER_INFO))


@pytest.fixture
async def launch(aws: AwsClients, provider: InstanceProvider) -> Launch:
    """Launch one on-demand m5.large for a NodeClaim name through ``provider``."""
    net = await seed_network(aws)
    images = await aws.ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*x86_64*"]}]
    )
    nc = ec2nodeclass(
        subnets=[(A, net.subnets[A])],
        security_groups=(net.security_group_id,),
        amis=[(images["Images"][0]["ImageId"], "amd64")],
    )
    types = [instance_type("m5.large", [(A, "on-demand", 0.096)])]

    async def go(name: str) -> Instance:
        return await provider.create(nc, nodeclaim(name), types, launch_tags(name))

    return go


async def test_get_round_trip(provider: InstanceProvider, launch: Launch) -> None:
    inst = await launch("a")
    got = await provider.get(inst.id)
    assert (got.id, got.instance_type, got.zone, got.capacity_type) == (
        inst.id,
        "m5.large",
        A,
        "on-demand",
    )
    assert got.provider_id == f"aws:///{A}/{inst.id}"


async def test_list_only_this_clusters_karpenter_instances(
    aws: AwsClients, provider: InstanceProvider, launch: Launch
) -> None:
    a = await launch("a")
    b = await launch("b")
    images = await aws.ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*x86_64*"]}]
    )
    image = images["Images"][0]["ImageId"]
    # Not Karpenter's (no nodepool tag) and another cluster's: both left out.
    for tags in (
        {"eks:eks-cluster-name": "test-cluster"},
        {"eks:eks-cluster-name": "other", "karpenter.sh/nodepool": "default"},
    ):
        await aws.ec2.run_instances(
            ImageId=image,
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ],
        )
    listed = await provider.list()
    assert sorted(i.id for i in listed) == sorted([a.id, b.id])
    await provider.delete(a.id)
    assert [i.id for i in await provider.list()] == [b.id]


async def test_delete_then_gone(provider: InstanceProvider, launch: Launch) -> None:
    inst = await launch("a")
    await provider.delete(inst.id)
    with pytest.raises(NodeClaimNotFoundError):
        await provider.get(inst.id)
    with pytest.raises(NodeClaimNotFoundError):
        await provider.delete(inst.id)


async def test_unknown_ids_are_not_found(aws: AwsClients, provider: InstanceProvider) -> None:
    with pytest.raises(NodeClaimNotFoundError):
        await provider.delete("i-0123456789abcdef0")
    with pytest.raises(NodeClaimNotFoundError):
        await provider.get("i-0123456789abcdef0")


async def test_tag_round_trip(provider: InstanceProvider, launch: Launch) -> None:
    inst = await launch("a")
    await provider.tag(inst.id, {"karpenter.k8s.aws/tagged": "true", "Name": "node-1"})
    got = await provider.get(inst.id)
    assert got.tags["karpenter.k8s.aws/tagged"] == "true"
    assert got.tags["Name"] == "node-1"
    assert got.tags["karpenter.sh/nodeclaim"] == "a"


UNKNOWN = "i-0123456789abcdef0"


class RecordingEC2:
    """The moto EC2 client, with the IDs of every DescribeInstances and TerminateInstances."""

    def __init__(self, ec2: Any) -> None:
        self._ec2 = ec2
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    async def describe_instances(self, **kw: Any) -> Any:
        self.calls.append(("describe", tuple(sorted(kw["InstanceIds"]))))
        return await self._ec2.describe_instances(**kw)

    async def terminate_instances(self, **kw: Any) -> Any:
        self.calls.append(("terminate", tuple(sorted(kw["InstanceIds"]))))
        return await self._ec2.terminate_instances(**kw)


async def each(*calls: Awaitable[Any]) -> list[Any]:
    """Run ``calls`` concurrently; each one's result or its exception."""

    async def one(call: Awaitable[Any]) -> Any:
        try:
            return await call
        except Exception as exc:
            return exc

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(one(c)) for c in calls]
    return [t.result() for t in tasks]


async def test_concurrent_deletes_share_one_describe_and_one_terminate(
    provider: InstanceProvider, launch: Launch
) -> None:
    ids = [(await launch(n)).id for n in ("a", "b", "c")]
    describes, terminates = provider.batch.describe_calls, provider.batch.terminate_calls
    assert await each(*(provider.delete(i) for i in ids)) == [None, None, None]
    assert provider.batch.describe_calls - describes == 1
    assert provider.batch.terminate_calls - terminates == 1
    assert await provider.list() == []


async def test_one_unknown_id_in_a_terminate_batch_fails_only_its_own_caller(
    aws: AwsClients, launch: Launch
) -> None:
    a, b = (await launch("a")).id, (await launch("b")).id
    ec2 = RecordingEC2(aws.ec2)
    batcher = InstanceBatcher(ec2)
    results = await each(batcher.terminate(a), batcher.terminate(UNKNOWN), batcher.terminate(b))
    assert (results[0], results[2]) == (None, None)
    assert error_code(results[1]) == "InvalidInstanceID.NotFound"
    # EC2 refuses the whole batch for the unknown ID; each is then asked alone.
    assert ec2.calls[0] == ("terminate", tuple(sorted((a, b, UNKNOWN))))
    assert sorted(ec2.calls[1:]) == sorted(
        [("terminate", (a,)), ("terminate", (b,)), ("terminate", (UNKNOWN,))]
    )
    states = await aws.ec2.describe_instances(InstanceIds=[a, b])
    assert {
        i["InstanceId"]: i["State"]["Name"] for r in states["Reservations"] for i in r["Instances"]
    } == {a: "terminated", b: "terminated"}


async def test_one_unknown_id_in_a_describe_batch_fails_only_its_own_caller(
    aws: AwsClients, launch: Launch
) -> None:
    a = (await launch("a")).id
    ec2 = RecordingEC2(aws.ec2)
    batcher = InstanceBatcher(ec2)
    found, missing = await each(batcher.describe(a), batcher.describe(UNKNOWN))
    assert found["InstanceId"] == a
    assert error_code(missing) == "InvalidInstanceID.NotFound"
    assert ec2.calls[0] == ("describe", tuple(sorted((a, UNKNOWN))))
    assert sorted(ec2.calls[1:]) == sorted([("describe", (a,)), ("describe", (UNKNOWN,))])
