"""CreateFleet against moto: launches, batching, insufficient capacity, missing templates."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC

import pytest

from benchmarks.faultproxy import AwsCall, AwsFaultProxy, Fault
from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.instance import InstanceProvider
from karpenter_py.cloudprovider.aws.launchtemplates import LaunchTemplateProvider
from karpenter_py.cloudprovider.errors import CreateError, InsufficientCapacityError
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.instancetype import InstanceType
from tests.aws.fleetfaults import insufficient_capacity
from tests.aws.launchsupport import (
    CLUSTER_INFO,
    ec2nodeclass,
    instance_type,
    launch_tags,
    nodeclaim,
)
from tests.motofixture import REGION, MotoServer, Network, seed_network

A, B, C = "us-west-2a", "us-west-2b", "us-west-2c"


@dataclass(slots=True)
class Env:
    aws: AwsClients
    net: Network
    nodeclass: EC2NodeClass
    templates: LaunchTemplateProvider
    instances: InstanceProvider


async def _amd64_ami(aws: AwsClients) -> str:
    # One of moto's stock images (filtered: listing all ~1,300 takes seconds).
    images = await aws.ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*x86_64*"]}]
    )
    return str(images["Images"][0]["ImageId"])


@pytest.fixture
async def env(aws: AwsClients) -> Env:
    net = await seed_network(aws)
    nc = ec2nodeclass(
        subnets=[(z, net.subnets[z]) for z in (A, B, C)],
        security_groups=(net.security_group_id,),
        amis=[(await _amd64_ami(aws), "amd64")],
        tags={"team": "a"},
    )
    templates = LaunchTemplateProvider(aws, CLUSTER_INFO)
    return Env(aws, net, nc, templates, InstanceProvider(aws, CLUSTER_INFO, templates))


def _types() -> list[InstanceType]:
    return [
        instance_type(
            "t3.small", [(B, "on-demand", 0.02), (A, "on-demand", 0.021), (B, "spot", 0.006)]
        ),
        instance_type("m5.large", [(A, "on-demand", 0.096), (A, "spot", 0.015)]),
    ]


async def test_on_demand_launch(env: Env) -> None:
    claim = nodeclaim(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]
    )
    tags = {**launch_tags(claim.name), "team": "a"}
    inst = await env.instances.create(env.nodeclass, claim, _types(), tags)
    assert env.instances.create_fleet_calls == 1
    # moto launches the first override: the cheapest offering (t3.small in B).
    assert (inst.instance_type, inst.zone, inst.subnet_id) == ("t3.small", B, env.net.subnets[B])
    assert inst.capacity_type == "on-demand"
    assert inst.image_id == env.nodeclass.status.amis[0].id
    assert inst.state in ("pending", "running")
    assert inst.launch_time.tzinfo is not None
    assert inst.launch_time.utcoffset() == UTC.utcoffset(None)
    assert inst.provider_id == f"aws:///{B}/{inst.id}"
    assert inst.private_dns_name
    assert dict(inst.tags) == tags  # shared tags at launch + per-claim tags by CreateTags
    described = await env.instances.get(inst.id)
    assert described.tags == inst.tags


async def test_spot_launch_when_allowed(env: Env) -> None:
    claim = nodeclaim()
    inst = await env.instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))
    assert (inst.capacity_type, inst.instance_type, inst.zone) == ("spot", "t3.small", B)


async def test_zone_requirement_limits_overrides(env: Env) -> None:
    claim = nodeclaim(
        requirements=[
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [A]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ]
    )
    inst = await env.instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))
    assert (inst.instance_type, inst.zone) == ("t3.small", A)


async def test_equal_requests_share_one_create_fleet(env: Env) -> None:
    claims = [nodeclaim(f"default-{i}") for i in range(5)]
    async with asyncio.TaskGroup() as tg:
        tasks = [
            tg.create_task(env.instances.create(env.nodeclass, c, _types(), launch_tags(c.name)))
            for c in claims
        ]
    launched = [t.result() for t in tasks]
    assert env.instances.create_fleet_calls == 1
    assert len({i.id for i in launched}) == 5
    for claim, inst in zip(claims, launched, strict=True):
        described = await env.instances.get(inst.id)
        assert described.tags["karpenter.sh/nodeclaim"] == claim.name
        assert described.tags["Name"] == f"default/{claim.name}"


async def test_insufficient_capacity_names_failed_offerings(env: Env) -> None:
    claim = nodeclaim()
    failing = [("t3.small", B, "spot"), ("m5.large", A, "spot")]
    with (
        insufficient_capacity(*failing) as faults,
        pytest.raises(InsufficientCapacityError) as err,
    ):
        await env.instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))
    assert err.value.offerings == (("t3.small", B, "spot"), ("m5.large", A, "spot"))
    assert len(faults.requests) == 1
    assert env.instances.create_fleet_calls == 1
    assert await env.instances.list() == []


async def test_partial_capacity_launches_what_is_left(env: Env) -> None:
    seen: list[tuple[tuple[str, str, str], ...]] = []
    instances = InstanceProvider(env.aws, CLUSTER_INFO, env.templates, on_unavailable=seen.append)
    claim = nodeclaim(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]
    )
    with insufficient_capacity(("t3.small", B, "on-demand")):
        inst = await instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))
    assert (inst.instance_type, inst.zone) == ("t3.small", A)
    assert seen == [(("t3.small", B, "on-demand"),)]  # reported although a launch succeeded


async def test_other_fleet_error_is_create_error(env: Env) -> None:
    claim = nodeclaim()
    offerings = [("t3.small", B, "spot"), ("m5.large", A, "spot")]
    with (
        insufficient_capacity(*offerings, code="UnauthorizedOperation"),
        pytest.raises(CreateError, match="UnauthorizedOperation"),
    ):
        await env.instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))


async def test_missing_launch_template_is_recreated_once(env: Env) -> None:
    claim = nodeclaim("first")
    await env.instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))
    assert env.templates.create_calls == 1
    # Someone deletes the template behind the (still warm) cache.
    listed = await env.aws.ec2.describe_launch_templates()
    for t in listed["LaunchTemplates"]:
        await env.aws.ec2.delete_launch_template(LaunchTemplateId=t["LaunchTemplateId"])
    claim = nodeclaim("second")
    inst = await env.instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))
    assert inst.instance_type == "t3.small"
    assert env.templates.create_calls == 2
    assert env.instances.create_fleet_calls == 3  # first, the not-found one, the retry


async def test_no_subnet_in_allowed_zone(env: Env) -> None:
    claim = nodeclaim(
        requirements=[
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2d"]}
        ]
    )
    with pytest.raises(CreateError, match="no subnet"):
        await env.instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))
    assert env.instances.create_fleet_calls == 0


async def test_bad_user_data_is_create_error(env: Env) -> None:
    nc = ec2nodeclass(
        subnets=[(A, env.net.subnets[A])],
        amis=[(env.nodeclass.status.amis[0].id, "amd64")],
        family="Bottlerocket",
        userData="[settings",  # TOML that does not parse
    )
    claim = nodeclaim()
    with pytest.raises(CreateError, match="not valid TOML") as err:
        await env.instances.create(nc, claim, _types(), launch_tags(claim.name))
    assert err.value.reason == "InvalidUserData"
    assert env.instances.create_fleet_calls == 0


async def test_windows_user_data_unsupported(env: Env) -> None:
    nc = ec2nodeclass(
        subnets=[(A, env.net.subnets[A])],
        amis=[(env.nodeclass.status.amis[0].id, "amd64")],
        family="Windows2022",
    )
    claim = nodeclaim()
    with pytest.raises(CreateError, match="Windows2022") as err:
        await env.instances.create(nc, claim, _types(), launch_tags(claim.name))
    assert err.value.reason == "InvalidUserData"


async def test_a_create_fleet_whose_answer_was_lost_launches_once(
    env: Env, aws_env: MotoServer
) -> None:
    """botocore retries the call with the same ClientToken; EC2 (and the moto server the tests
    run, tests/aws/motofleet.py) answers the retry with the first launch's instances."""
    lost: list[AwsCall] = []

    def lose_the_first_fleet(call: AwsCall) -> Fault | None:
        if call.action != "CreateFleet" or lost:
            return None
        lost.append(call)
        return Fault("lost")

    proxy = AwsFaultProxy(aws_env.endpoint, lose_the_first_fleet)
    await proxy.start()
    try:
        async with AwsClients.open(REGION, endpoint_url=proxy.url) as clients:
            templates = LaunchTemplateProvider(clients, CLUSTER_INFO)
            instances = InstanceProvider(clients, CLUSTER_INFO, templates)
            claim = nodeclaim()
            inst = await instances.create(env.nodeclass, claim, _types(), launch_tags(claim.name))
    finally:
        await proxy.stop()
    assert proxy.faults == 1
    assert [i.id for i in await env.instances.list()] == [inst.id]
