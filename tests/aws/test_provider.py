"""AwsCloudProvider from the real parts (``open_aws``) against moto over HTTP."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from karpenter_py.cloudprovider.aws import userdata
from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.drift import EC2NODECLASS_HASH_VERSION, ec2nodeclass_hash
from karpenter_py.cloudprovider.aws.provider import AwsCloudProvider
from karpenter_py.cloudprovider.errors import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpenter_py.manager.aws import AwsStack, open_aws
from karpenter_py.manager.settings import load_settings
from karpenter_py.model.api import convert
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.labels import (
    AWS_ANNOTATION_EC2NODECLASS_HASH,
    AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION,
    AWS_LABEL_TOPOLOGY_ZONE_ID,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.model.quantity import format_resources
from tests import factories
from tests.aws.calls import count_loads
from tests.aws.fleetfaults import insufficient_capacity
from tests.aws.launchsupport import converted_nodepool
from tests.aws.launchsupport import nodeclaim as launch_nodeclaim
from tests.aws.nodeclasses import ec2nodeclass
from tests.motofixture import CLUSTER, REGION, ZONES, MotoServer, Network, seed_network

B = "us-west-2b"
MOTO_TYPES = 1377  # hvm x86_64/arm64 types moto 5.2.5 describes (as tests/aws/test_instancetypes)
M5_LARGE_CAPACITY = {"cpu": "2", "ephemeral-storage": "20Gi", "memory": "7577Mi", "pods": "29"}
M5_LARGE_ALLOCATABLE = {
    "cpu": "1930m",
    "ephemeral-storage": "17Gi",
    "memory": "6903Mi",
    "pods": "29",
}
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Ready",
    "message": "",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}
NOT_READY = {**READY, "status": "False", "reason": "SubnetsNotReady"}
Open = Callable[[], AbstractAsyncContextManager[AwsStack]]


@dataclass(slots=True)
class World:
    aws: AwsClients
    net: Network
    ami: str
    stack: AwsStack
    open: Open  # another stack on the same moto (a restarted process)

    @property
    def provider(self) -> AwsCloudProvider:
        return self.stack.provider


async def _subnet_status(aws: AwsClients, net: Network) -> list[dict[str, str]]:
    subnets = (await aws.ec2.describe_subnets(SubnetIds=list(net.subnets.values())))["Subnets"]
    by_zone = {s["AvailabilityZone"]: s for s in subnets}
    return [
        {"id": by_zone[z]["SubnetId"], "zone": z, "zoneID": by_zone[z]["AvailabilityZoneId"]}
        for z in ZONES
    ]


async def nodeclass_dict(
    world_aws: AwsClients,
    net: Network,
    ami: str,
    *,
    name: str = "default",
    condition: dict[str, str] | None = READY,
    **spec: Any,
) -> dict[str, Any]:
    """An EC2NodeClass as the informer delivers it, status written by the status controller."""
    body = ec2nodeclass(name, **spec).model_dump(by_alias=True, mode="json", exclude_none=True)
    body["status"] = {
        "subnets": await _subnet_status(world_aws, net),
        "securityGroups": [{"id": net.security_group_id, "name": f"{CLUSTER}-nodes"}],
        "amis": [
            {
                "id": ami,
                "name": "al2023",
                "requirements": [{"key": LABEL_ARCH, "operator": "In", "values": ["amd64"]}],
            }
        ],
        "instanceProfile": f"{CLUSTER}_profile",
        "conditions": [condition] if condition is not None else [],
    }
    return body


def nodepool(nodeclass: str = "default") -> NodePool:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass}
    return factories.nodepool(node_class_ref=ref)


def nodeclaim(
    name: str = "default-abcde",
    *,
    types: tuple[str, ...] = ("m5.large",),
    zone: str = B,
    capacity_type: str = "on-demand",
    nodeclass: str = "default",
) -> NodeClaim:
    return launch_nodeclaim(
        name,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": list(types)},
            {"key": LABEL_TOPOLOGY_ZONE, "operator": "In", "values": [zone]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
        ],
        nodeclass=nodeclass,
    )


async def _moto_ami(aws: AwsClients) -> str:
    images = await aws.ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*x86_64*"]}]
    )
    return str(images["Images"][0]["ImageId"])


@pytest.fixture
async def world(aws_env: MotoServer, aws: AwsClients) -> AsyncIterator[World]:
    net = await seed_network(aws)
    ami = await _moto_ami(aws)
    settings = load_settings(
        [],
        {
            "CLOUD_PROVIDER": "aws",
            "CLUSTER_NAME": CLUSTER,
            "CLUSTER_ENDPOINT": "https://ABC.gr7.us-west-2.eks.amazonaws.com",
        },
    )

    def reopen() -> AbstractAsyncContextManager[AwsStack]:
        return open_aws(settings, endpoint_url=aws_env.endpoint)

    async with reopen() as stack:
        stack.nodeclasses.upsert(await nodeclass_dict(aws, net, ami))
        yield World(aws, net, ami, stack, reopen)


async def _instances_of(aws: AwsClients, claim: str) -> list[dict[str, Any]]:
    """Live instances tagged for ``claim``, straight from EC2."""
    resp = await aws.ec2.describe_instances(
        Filters=[
            {"Name": "tag:karpenter.sh/nodeclaim", "Values": [claim]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    )
    return [i for r in resp["Reservations"] for i in r["Instances"]]


# ---------------------------------------------------------------- NodeClassStore


async def test_nodeclass_store_upsert_replace_delete(world: World) -> None:
    store = world.stack.nodeclasses
    other = await nodeclass_dict(world.aws, world.net, world.ami, name="other")
    store.upsert(other)
    assert store.get("other") is not None
    assert store.get("default") is not None
    store.delete(other)
    assert store.get("other") is None
    store.replace([other])
    assert (store.get("default"), store.get("other") is not None) == (None, True)
    store.upsert({"metadata": {"name": "broken"}, "spec": {"role": 3}})  # unreadable: skipped
    assert store.get("broken") is None


# ---------------------------------------------------------------- get_instance_types


async def test_instance_types_for_missing_or_not_ready_class_are_empty(world: World) -> None:
    store = world.stack.nodeclasses
    for name, condition in (("unready", NOT_READY), ("unresolved", None)):
        store.upsert(
            await nodeclass_dict(world.aws, world.net, world.ami, name=name, condition=condition)
        )
    for name in ("missing", "unready", "unresolved"):
        assert await world.provider.get_instance_types(nodepool(name)) == []
    assert not world.stack.instance_types.loaded  # nothing was loaded for them


async def test_instance_types_for_a_ready_class_are_the_moto_catalog(world: World) -> None:
    types = await world.provider.get_instance_types(nodepool())
    assert world.stack.instance_types.loaded
    assert len(types) == MOTO_TYPES
    m5 = next(t for t in types if t.name == "m5.large")
    assert [(o.zone, o.capacity_type) for o in m5.offerings] == [
        (z, ct) for z in ZONES for ct in ("on-demand", "spot")
    ]
    zone_ids = {s["zone"]: s["zoneID"] for s in await _subnet_status(world.aws, world.net)}
    assert {o.labels[AWS_LABEL_TOPOLOGY_ZONE_ID] for o in m5.offerings} == set(zone_ids.values())


async def test_concurrent_callers_at_start_share_one_catalogue_load(world: World) -> None:
    """Five launches in flight and a scheduling round, all before the first load: the
    instance-type catalogue is described once (it was once per caller)."""
    loads = count_loads(
        world.stack.clients.ec2, "DescribeInstanceTypes", "DescribeInstanceTypeOfferings"
    )
    claims = [nodeclaim(f"default-{i}") for i in range(5)]
    async with asyncio.TaskGroup() as tg:
        launches = [tg.create_task(world.provider.create(c)) for c in claims]
        listed = tg.create_task(world.provider.get_instance_types(nodepool()))
    assert loads == {"DescribeInstanceTypes": 1, "DescribeInstanceTypeOfferings": 1}
    assert len(listed.result()) == MOTO_TYPES
    assert [t.result().metadata.labels[LABEL_INSTANCE_TYPE] for t in launches] == ["m5.large"] * 5


async def test_a_cancelled_first_caller_leaves_the_catalogue_to_the_others(world: World) -> None:
    """The first caller leads the load and is cancelled mid-way (its launch was abandoned): the
    callers waiting on it get the catalogue from a second load, not a CancelledError."""
    began = asyncio.Event()
    loads = count_loads(world.stack.clients.ec2, "DescribeInstanceTypes", on_load=began.set)
    async with asyncio.TaskGroup() as tg:
        first = tg.create_task(world.provider.get_instance_types(nodepool()))
        await began.wait()
        waiting = [tg.create_task(world.provider.get_instance_types(nodepool())) for _ in range(3)]
        await asyncio.sleep(0)
        first.cancel()
    assert first.cancelled()
    assert [len(w.result()) for w in waiting] == [MOTO_TYPES] * 3
    assert loads == {"DescribeInstanceTypes": 2}


# ---------------------------------------------------------------- create


@pytest.mark.parametrize("capacity_type", ["on-demand", "spot"])
async def test_create_returns_the_launched_nodeclaim(world: World, capacity_type: str) -> None:
    claim = nodeclaim(capacity_type=capacity_type)
    out = await world.provider.create(claim)
    (raw,) = await _instances_of(world.aws, claim.name)
    zone_id = {s["zone"]: s["zoneID"] for s in await _subnet_status(world.aws, world.net)}[B]
    assert out.status.provider_id == f"aws:///{B}/{raw['InstanceId']}"
    assert out.status.image_id == world.ami == raw["ImageId"]
    assert raw["Placement"]["AvailabilityZone"] == B
    assert raw["SubnetId"] == world.net.subnets[B]
    labels = out.metadata.labels
    assert {
        k: labels.get(k)
        for k in (
            LABEL_INSTANCE_TYPE,
            LABEL_TOPOLOGY_ZONE,
            LABEL_TOPOLOGY_REGION,
            LABEL_CAPACITY_TYPE,
            LABEL_ARCH,
            LABEL_NODEPOOL,
            AWS_LABEL_TOPOLOGY_ZONE_ID,
            "kubernetes.io/os",
            "karpenter.k8s.aws/instance-family",
            "karpenter.k8s.aws/instance-size",
        )
    } == {
        LABEL_INSTANCE_TYPE: "m5.large",
        LABEL_TOPOLOGY_ZONE: B,
        LABEL_TOPOLOGY_REGION: REGION,
        LABEL_CAPACITY_TYPE: capacity_type,
        LABEL_ARCH: "amd64",
        LABEL_NODEPOOL: "default",
        AWS_LABEL_TOPOLOGY_ZONE_ID: zone_id,
        "kubernetes.io/os": "linux",
        "karpenter.k8s.aws/instance-family": "m5",
        "karpenter.k8s.aws/instance-size": "large",
    }
    assert out.status.capacity == M5_LARGE_CAPACITY
    assert out.status.allocatable == M5_LARGE_ALLOCATABLE
    nodeclass = world.stack.nodeclasses.get("default")
    assert nodeclass is not None
    assert out.metadata.annotations == {
        AWS_ANNOTATION_EC2NODECLASS_HASH: ec2nodeclass_hash(nodeclass),
        AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION: EC2NODECLASS_HASH_VERSION,
    }
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert {k: v for k, v in tags.items() if k != "Name"} == {
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "eks:eks-cluster-name": CLUSTER,
        "karpenter.sh/nodepool": "default",
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "karpenter.sh/nodeclaim": claim.name,
    }
    assert claim.status.provider_id == ""  # the input is not mutated


async def test_create_puts_the_class_tags_on_instance_and_volumes(world: World) -> None:
    world.stack.nodeclasses.upsert(
        await nodeclass_dict(
            world.aws, world.net, world.ami, tags={"team": "a", "Name": "custom-name"}
        )
    )
    out = await world.provider.create(nodeclaim())
    (raw,) = await _instances_of(world.aws, out.name)
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert (tags["team"], tags["Name"], tags["karpenter.sh/nodepool"]) == (
        "a",
        "custom-name",
        "default",
    )
    # The tagging controller's Name does not replace the one the user chose.
    await world.provider.tag_instance(
        out.status.provider_id, {"Name": "ip-10-0-16-5.us-west-2.compute.internal", "x": "y"}
    )
    (raw,) = await _instances_of(world.aws, out.name)
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert (tags["Name"], tags["x"]) == ("custom-name", "y")


async def test_create_twice_adopts_the_first_instance(world: World) -> None:
    claim = nodeclaim()
    first = await world.provider.create(claim)
    again = await world.provider.create(claim)
    # A restarted process (fresh caches, no memory of the launch) adopts it as well.
    async with world.open() as restarted:
        restarted.nodeclasses.upsert(await nodeclass_dict(world.aws, world.net, world.ami))
        after_restart = await restarted.provider.create(claim)
        assert restarted.instances.create_fleet_calls == 0
    assert first.status.provider_id == again.status.provider_id == after_restart.status.provider_id
    assert again.status.image_id == after_restart.status.image_id == world.ami
    assert again.status.allocatable == after_restart.status.allocatable == M5_LARGE_ALLOCATABLE
    assert after_restart.metadata.annotations == first.metadata.annotations
    assert after_restart.metadata.labels == first.metadata.labels
    assert world.stack.instances.create_fleet_calls == 1
    assert len(await _instances_of(world.aws, claim.name)) == 1


async def test_create_after_the_instance_is_gone_launches_again(world: World) -> None:
    claim = nodeclaim()
    first = await world.provider.create(claim)
    await world.provider.delete(first)
    second = await world.provider.create(claim)
    assert second.status.provider_id != first.status.provider_id
    assert world.stack.instances.create_fleet_calls == 2
    assert len(await _instances_of(world.aws, claim.name)) == 1


async def test_create_refuses_a_class_that_is_not_ready(world: World) -> None:
    world.stack.nodeclasses.upsert(
        await nodeclass_dict(world.aws, world.net, world.ami, name="unready", condition=NOT_READY)
    )
    for name in ("unready", "missing"):
        with pytest.raises(NodeClassNotReadyError, match=name):
            await world.provider.create(nodeclaim(nodeclass=name))
    assert world.stack.instances.create_fleet_calls == 0


async def test_create_without_a_candidate_is_insufficient_capacity(world: World) -> None:
    with pytest.raises(InsufficientCapacityError):
        await world.provider.create(nodeclaim(types=("x9.nonexistent",)))
    with pytest.raises(InsufficientCapacityError):
        await world.provider.create(nodeclaim(zone="us-west-2d"))  # no subnet, no offering there
    world.stack.offerings.mark_unavailable("m5.large", B, "on-demand")
    with pytest.raises(InsufficientCapacityError):
        await world.provider.create(nodeclaim())
    assert world.stack.instances.create_fleet_calls == 0
    assert await world.provider.list() == []


async def test_unavailable_offering_moves_the_launch_to_the_next_type(world: World) -> None:
    world.stack.offerings.mark_all(
        ("m5.large", z, ct) for z in ZONES for ct in ("on-demand", "spot")
    )
    out = await world.provider.create(nodeclaim(types=("m5.large", "m5.xlarge")))
    assert out.metadata.labels[LABEL_INSTANCE_TYPE] == "m5.xlarge"


# ---------------------------------------------------------------- get / list / delete


async def test_get_list_delete_round_trip(world: World) -> None:
    a = await world.provider.create(nodeclaim("default-aaaaa"))
    b = await world.provider.create(nodeclaim("default-bbbbb", zone="us-west-2a"))
    got = await world.provider.get(a.status.provider_id)
    assert (got.name, got.status.provider_id, got.status.image_id) == (
        "default-aaaaa",
        a.status.provider_id,
        world.ami,
    )
    assert got.spec.node_class_ref.name == "default"
    listed = {nc.name: nc for nc in await world.provider.list()}
    assert sorted(listed) == ["default-aaaaa", "default-bbbbb"]
    assert listed["default-bbbbb"].status.provider_id == b.status.provider_id
    assert {
        k: listed["default-bbbbb"].metadata.labels[k]
        for k in (LABEL_NODEPOOL, LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE, LABEL_CAPACITY_TYPE)
    } == {
        LABEL_NODEPOOL: "default",
        LABEL_INSTANCE_TYPE: "m5.large",
        LABEL_TOPOLOGY_ZONE: "us-west-2a",
        LABEL_CAPACITY_TYPE: "on-demand",
    }
    assert listed["default-bbbbb"].metadata.creation_timestamp is not None

    await world.provider.delete(a)
    with pytest.raises(NodeClaimNotFoundError):
        await world.provider.get(a.status.provider_id)
    with pytest.raises(NodeClaimNotFoundError):
        await world.provider.delete(a)
    assert [nc.name for nc in await world.provider.list()] == ["default-bbbbb"]


async def test_delete_without_provider_id_finds_the_instance_by_name(world: World) -> None:
    await world.provider.create(nodeclaim("default-aaaaa"))
    # The status write of the launch was lost: the NodeClaim has no provider ID.
    await world.provider.delete(nodeclaim("default-aaaaa"))
    assert await _instances_of(world.aws, "default-aaaaa") == []
    with pytest.raises(NodeClaimNotFoundError):
        await world.provider.delete(nodeclaim("default-aaaaa"))
    with pytest.raises(NodeClaimNotFoundError):
        await world.provider.delete(nodeclaim("never-launched"))


@pytest.mark.parametrize(
    "provider_id",
    ["", "kwok://node-1", "aws:///us-west-2a/", "aws:///us-west-2a/i-0123456789abcdef0"],
)
async def test_get_of_a_bad_or_unknown_provider_id_is_not_found(
    world: World, provider_id: str
) -> None:
    with pytest.raises(NodeClaimNotFoundError):
        await world.provider.get(provider_id)


# ---------------------------------------------------------------- drift


@pytest.mark.parametrize("capacity_type", ["on-demand", "spot"])
async def test_fleet_instances_carry_the_class_security_groups(
    world: World, capacity_type: str
) -> None:
    """Right after launch the instance has its launch template's groups (moto made to do so by
    tests/aws/motofleet.py, as EC2 does), so a fresh NodeClaim is not drifted."""
    out = await world.provider.create(nodeclaim(capacity_type=capacity_type))
    (raw,) = await _instances_of(world.aws, out.name)
    assert [g["GroupId"] for g in raw["SecurityGroups"]] == [world.net.security_group_id]
    assert await world.provider.is_drifted(out) == ""


async def test_drift_right_after_launch_then_ami_drift(world: World) -> None:
    out = await world.provider.create(nodeclaim())
    assert await world.provider.is_drifted(out) == ""
    # A new AMI resolved for the class: the instance's is no longer in status.amis.
    moved = await nodeclass_dict(world.aws, world.net, world.ami)
    moved["status"]["amis"][0]["id"] = "ami-0123456789abcdef0"
    world.stack.nodeclasses.upsert(moved)
    assert await world.provider.is_drifted(out) == "AMIDrift"


async def test_drift_of_static_fields_subnets_and_security_groups(world: World) -> None:
    out = await world.provider.create(nodeclaim())
    store = world.stack.nodeclasses
    base = await nodeclass_dict(world.aws, world.net, world.ami)

    store.upsert(await nodeclass_dict(world.aws, world.net, world.ami, userData="echo hi"))
    assert await world.provider.is_drifted(out) == "NodeClassDrift"

    no_b = {**base, "status": {**base["status"]}}
    no_b["status"]["subnets"] = [s for s in base["status"]["subnets"] if s["zone"] != B]
    store.upsert(no_b)
    assert await world.provider.is_drifted(out) == "SubnetDrift"

    extra_sg = {**base, "status": {**base["status"]}}
    extra_sg["status"]["securityGroups"] = [*base["status"]["securityGroups"], {"id": "sg-extra"}]
    store.upsert(extra_sg)
    assert await world.provider.is_drifted(out) == "SecurityGroupDrift"

    store.upsert(base)
    assert await world.provider.is_drifted(out) == ""


async def test_no_drift_without_class_provider_id_or_instance(world: World) -> None:
    out = await world.provider.create(nodeclaim())
    assert await world.provider.is_drifted(nodeclaim()) == ""  # no provider ID yet
    await world.provider.delete(out)
    assert await world.provider.is_drifted(out) == ""  # gone: garbage collection's business
    world.stack.nodeclasses.delete({"metadata": {"name": "default"}})
    assert await world.provider.is_drifted(out) == ""


# ---------------------------------------------------------------- tagging and ICE sink


async def test_tag_instance_writes_tags(world: World) -> None:
    out = await world.provider.create(nodeclaim())
    await world.provider.tag_instance(
        out.status.provider_id, {"Name": "ip-10-0-16-5.us-west-2.compute.internal", "x": "y"}
    )
    (raw,) = await _instances_of(world.aws, out.name)
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert (tags["Name"], tags["x"], tags["karpenter.sh/nodeclaim"]) == (
        "ip-10-0-16-5.us-west-2.compute.internal",
        "y",
        out.name,
    )
    with pytest.raises(NodeClaimNotFoundError):
        await world.provider.tag_instance("not-an-aws-id", {"a": "b"})
    await world.provider.delete(out)
    with pytest.raises(NodeClaimNotFoundError):
        await world.provider.tag_instance(out.status.provider_id, {"a": "b"})


async def test_offerings_failed_marks_the_cache_it_was_built_with(world: World) -> None:
    assert world.provider.offerings is world.stack.offerings
    world.provider.offerings_failed((("m5.large", B, "spot"),))
    assert set(world.stack.offerings.entries()) == {("m5.large", B, "spot")}


async def test_fleet_capacity_errors_reach_the_offerings_cache(world: World) -> None:
    """The InstanceProvider's sink, as open_aws wires it, ends in the provider's cache."""
    with insufficient_capacity(("m5.large", B, "on-demand")):
        out = await world.provider.create(nodeclaim(types=("m5.large", "m5.xlarge")))
    assert out.metadata.labels[LABEL_INSTANCE_TYPE] == "m5.xlarge"
    assert set(world.stack.offerings.entries()) == {("m5.large", B, "on-demand")}


# ---------------------------------------------------------------- v1beta1 kubelet compatibility

COMPAT_KUBELET = {"maxPods": 20, "clusterDNS": ["10.0.1.100"]}


async def test_instance_types_of_a_converted_pool_use_its_kubelet(world: World) -> None:
    pool = converted_nodepool(COMPAT_KUBELET)
    types = {t.name: t for t in await world.provider.get_instance_types(pool)}
    assert format_resources(types["m5.large"].capacity) == {**M5_LARGE_CAPACITY, "pods": "20"}
    assert format_resources(types["m5.large"].allocatable) == {
        **M5_LARGE_ALLOCATABLE,
        "pods": "20",
    }
    # The class's own settings (none) still serve pools without the annotation.
    plain = {t.name: t for t in await world.provider.get_instance_types(nodepool())}
    assert format_resources(plain["m5.large"].allocatable) == M5_LARGE_ALLOCATABLE
    broken = nodepool()
    broken.metadata.annotations[convert.KUBELET_ANNOTATION] = '{"maxPods":"many"}'
    assert await world.provider.get_instance_types(broken) == []


async def test_launch_of_a_converted_pool_claim_has_its_kubelet_in_user_data(
    world: World,
) -> None:
    pool = converted_nodepool(COMPAT_KUBELET)
    claim = nodeclaim()
    claim.metadata.annotations[convert.KUBELET_ANNOTATION] = pool.metadata.annotations[
        convert.KUBELET_ANNOTATION
    ]
    out = await world.provider.create(claim)
    assert out.status.allocatable == {**M5_LARGE_ALLOCATABLE, "pods": "20"}
    templates = (
        await world.aws.ec2.describe_launch_templates(
            Filters=[{"Name": "tag:karpenter.k8s.aws/ec2nodeclass", "Values": ["default"]}]
        )
    )["LaunchTemplates"]
    (name,) = [t["LaunchTemplateName"] for t in templates]
    version = (
        await world.aws.ec2.describe_launch_template_versions(
            LaunchTemplateName=name, Versions=["$Latest"]
        )
    )["LaunchTemplateVersions"][0]
    text = base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()
    (part,) = [
        p for p in userdata.parse_mime(text) if p.content_type == userdata.NODECONFIG_CONTENT_TYPE
    ]
    assert yaml.safe_load(part.body)["spec"]["kubelet"]["config"] == COMPAT_KUBELET


async def test_launch_with_an_unreadable_kubelet_annotation_fails(world: World) -> None:
    claim = nodeclaim()
    claim.metadata.annotations[convert.KUBELET_ANNOTATION] = "{maxPods: 20}"
    with pytest.raises(CreateError) as err:
        await world.provider.create(claim)
    assert str(err.value) == (
        f"nodeclaim {claim.name}: annotation {convert.KUBELET_ANNOTATION} is not valid JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    assert await _instances_of(world.aws, claim.name) == []
