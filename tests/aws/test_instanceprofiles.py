"""Instance profiles against moto: create, reuse, role swap, a given profile, deletion of only
what Karpenter created."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.instanceprofiles import (
    InstanceProfileNotFoundError,
    InstanceProfiles,
    profile_name,
    role_name,
)
from tests.aws.nodeclasses import ec2nodeclass
from tests.motofixture import CLUSTER, REGION

UID = "6f1c1a52-0000-4000-8000-000000000001"


@pytest.fixture
async def profiles(aws: AwsClients) -> InstanceProfiles:
    for role in ("role-a", "role-b"):
        await aws.iam.create_role(RoleName=role, AssumeRolePolicyDocument="{}")
    return InstanceProfiles(aws, CLUSTER, FakeClock())


async def get(aws: AwsClients, name: str) -> dict[str, Any]:
    out: dict[str, Any] = (await aws.iam.get_instance_profile(InstanceProfileName=name))[
        "InstanceProfile"
    ]
    return out


async def count(aws: AwsClients) -> int:
    return len((await aws.iam.list_instance_profiles())["InstanceProfiles"])


def test_name_is_cluster_and_stable_hash() -> None:
    nc = ec2nodeclass(uid=UID)
    number = int.from_bytes(hashlib.sha256(f"{REGION}/{UID}".encode()).digest()[:8], "big")
    assert profile_name(CLUSTER, REGION, nc) == f"{CLUSTER}_{number}"
    assert profile_name(CLUSTER, REGION, ec2nodeclass(uid=UID)) == profile_name(CLUSTER, REGION, nc)
    assert profile_name(CLUSTER, "eu-west-1", nc) != profile_name(CLUSTER, REGION, nc)
    assert role_name("arn:aws:iam::123456789012:role/path/Node") == "Node"
    assert role_name("Node") == "Node"


async def test_create_then_reuse(aws: AwsClients, profiles: InstanceProfiles) -> None:
    nc = ec2nodeclass(role="role-a", tags={"team": "x"})
    name = await profiles.ensure(nc)
    assert name == profile_name(CLUSTER, REGION, nc)
    profile = await get(aws, name)
    assert profile["Path"] == f"/karpenter/{REGION}/{CLUSTER}/{UID}/"
    assert [r["RoleName"] for r in profile["Roles"]] == ["role-a"]
    assert {t["Key"]: t["Value"] for t in profile["Tags"]} == {
        "team": "x",
        "eks:eks-cluster-name": CLUSTER,
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "karpenter.sh/managed-by": CLUSTER,
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "topology.kubernetes.io/region": REGION,
    }
    # A fresh provider (no existence cache) finds and keeps the same profile.
    again = InstanceProfiles(aws, CLUSTER, FakeClock())
    assert await again.ensure(nc) == name
    assert await count(aws) == 1
    assert [r["RoleName"] for r in (await get(aws, name))["Roles"]] == ["role-a"]


async def test_role_swap_keeps_one_role(aws: AwsClients, profiles: InstanceProfiles) -> None:
    name = await profiles.ensure(ec2nodeclass(role="role-a"))
    assert await profiles.ensure(ec2nodeclass(role="role-b")) == name
    assert [r["RoleName"] for r in (await get(aws, name))["Roles"]] == ["role-b"]
    assert await count(aws) == 1


async def test_missing_role(aws: AwsClients, profiles: InstanceProfiles) -> None:
    with pytest.raises(InstanceProfileNotFoundError, match="role 'nope' not found"):
        await profiles.ensure(ec2nodeclass(role="nope"))


async def test_given_profile_used_as_is(aws: AwsClients, profiles: InstanceProfiles) -> None:
    await aws.iam.create_instance_profile(InstanceProfileName="mine")
    nc = ec2nodeclass(role=None, instance_profile="mine")
    assert await profiles.ensure(nc) == "mine"
    assert await profiles.delete(nc) is False
    assert (await get(aws, "mine"))["InstanceProfileName"] == "mine"
    with pytest.raises(InstanceProfileNotFoundError, match="instance profile 'gone' not found"):
        await profiles.ensure(ec2nodeclass(role=None, instance_profile="gone"))


async def test_delete_removes_role_and_profile(aws: AwsClients, profiles: InstanceProfiles) -> None:
    nc = ec2nodeclass(role="role-a")
    name = await profiles.ensure(nc)
    assert await profiles.delete(nc) is True
    assert await count(aws) == 0
    assert await profiles.delete(nc) is False  # already gone
    # The role itself stays: it belongs to the user.
    assert (await aws.iam.get_role(RoleName="role-a"))["Role"]["RoleName"] == "role-a"
    # After deletion, ensure creates it again (the existence cache was dropped).
    assert await profiles.ensure(nc) == name
    assert await count(aws) == 1


async def test_profile_made_for_role_deleted_after_switch_to_given_profile(
    aws: AwsClients, profiles: InstanceProfiles
) -> None:
    await aws.iam.create_instance_profile(InstanceProfileName="mine")
    await profiles.ensure(ec2nodeclass(role="role-a"))
    assert await profiles.delete(ec2nodeclass(role=None, instance_profile="mine")) is True
    names = [
        p["InstanceProfileName"]
        for p in (await aws.iam.list_instance_profiles())["InstanceProfiles"]
    ]
    assert names == ["mine"]


async def test_untagged_profile_of_same_name_is_not_deleted(
    aws: AwsClients, profiles: InstanceProfiles
) -> None:
    nc = ec2nodeclass(role="role-a")
    name = profile_name(CLUSTER, REGION, nc)
    await aws.iam.create_instance_profile(InstanceProfileName=name)
    assert await profiles.delete(nc) is False
    assert await count(aws) == 1
