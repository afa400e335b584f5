"""NodeClassResolver against moto: a getting-started EC2NodeClass resolves whole (with the
DryRun authorization checks), each missing part is its own failure, and cleanup deletes the
class's launch templates and instance profile."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.nodeclass import Failure, NodeClassResolver
from karpenter_py.model.labels import AWS_ANNOTATION_UBUNTU_COMPATIBILITY, AWS_TAG_CLUSTER
from tests.aws.amiseed import seed_al2023, seed_image
from tests.aws.calls import count_loads
from tests.aws.nodeclasses import ec2nodeclass
from tests.motofixture import CLUSTER, Network, seed_network

K8S = "1.31"
ROLE = "KarpenterNodeRole-test"


async def version() -> str:
    return K8S


@pytest.fixture
async def network(aws: AwsClients) -> Network:
    await aws.iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
    return await seed_network(aws)


@pytest.fixture
def resolver(aws: AwsClients) -> NodeClassResolver:
    return NodeClassResolver(aws, CLUSTER, kubernetes_version=version, clock=FakeClock())


async def test_resolves_getting_started_class(
    aws: AwsClients, network: Network, resolver: NodeClassResolver
) -> None:
    amd = seed_image("amd", created=datetime(2025, 2, 1, tzinfo=UTC))
    arm = seed_image("arm", arch="arm64", created=datetime(2025, 1, 1, tzinfo=UTC))
    seed_al2023(K8S, {"x86_64": amd, "arm64": arm})
    nc = ec2nodeclass(role=ROLE)
    resolved = await resolver.resolve(nc)
    assert resolved.failures == {}
    assert [s.id for s in resolved.subnets] == sorted(network.subnets.values())
    assert {s.zone for s in resolved.subnets} == set(network.subnets)
    assert [g.id for g in resolved.security_groups] == [network.security_group_id]
    assert [a.id for a in resolved.amis] == [amd, arm]
    assert resolved.instance_profile.startswith(f"{CLUSTER}_")
    profile = await aws.iam.get_instance_profile(InstanceProfileName=resolved.instance_profile)
    assert [r["RoleName"] for r in profile["InstanceProfile"]["Roles"]] == [ROLE]


async def test_classes_with_one_selector_resolved_together_share_its_look_ups(
    aws: AwsClients, network: Network, resolver: NodeClassResolver
) -> None:
    seed_al2023(K8S, {"x86_64": seed_image("amd")})
    loads = count_loads(aws.ec2, "DescribeSubnets", "DescribeSecurityGroups", "DescribeImages")
    # Each class its own uid, as the apiserver gives: the uid names its instance profile, and
    # three classes sharing one raced to attach the role (LimitExceeded in a CI run).
    classes = [
        ec2nodeclass(name, role=ROLE, uid=f"6f1c1a52-0000-4000-8000-00000000000{k}")
        for k, name in enumerate(("a", "b", "c"))
    ]
    async with asyncio.TaskGroup() as tg:
        resolving = [tg.create_task(resolver.resolve(nc)) for nc in classes]
    assert loads == {"DescribeSubnets": 1, "DescribeSecurityGroups": 1, "DescribeImages": 1}
    assert [r.result().failures for r in resolving] == [{}, {}, {}]
    assert [[s.id for s in r.result().subnets] for r in resolving] == [
        sorted(network.subnets.values())
    ] * 3


async def test_each_missing_part_fails_on_its_own(
    aws: AwsClients, network: Network, resolver: NodeClassResolver
) -> None:
    nc = ec2nodeclass(role="no-such-role", discovery="elsewhere")
    resolved = await resolver.resolve(nc)
    assert resolved.failures == {
        "SubnetsReady": Failure("SubnetsNotFound", "SubnetSelector did not match any Subnets"),
        "SecurityGroupsReady": Failure(
            "SecurityGroupsNotFound", "SecurityGroupSelector did not match any SecurityGroups"
        ),
        "AMIsReady": Failure("AMINotFound", "AMISelector did not match any AMIs"),
        "InstanceProfileReady": Failure("InstanceProfileNotFound", "role 'no-such-role' not found"),
        "ValidationSucceeded": Failure(
            "DependenciesNotReady",
            "validation waits for AMIsReady, InstanceProfileReady, SecurityGroupsReady, "
            "SubnetsReady",
        ),
    }
    assert resolved.subnets == []
    assert resolved.amis == []


async def test_unpinned_ubuntu_class_is_not_ready(
    aws: AwsClients, network: Network, resolver: NodeClassResolver
) -> None:
    seed_al2023(K8S, {"x86_64": seed_image("amd")})
    nc = ec2nodeclass(role=ROLE)
    nc.metadata.annotations[AWS_ANNOTATION_UBUNTU_COMPATIBILITY] = "amiFamily,incompatible"
    resolved = await resolver.resolve(nc)
    assert resolved.failures["AMIsReady"] == Failure(
        "AMINotFound",
        "converted from a v1beta1 Ubuntu EC2NodeClass without amiSelectorTerms; v1 selects no "
        "Ubuntu AMI by itself: set amiSelectorTerms to Ubuntu's EKS AMIs",
    )
    assert sorted(resolved.failures) == ["AMIsReady", "ValidationSucceeded"]
    assert resolved.amis == []


async def test_al2_on_133_is_refused(network: Network, aws: AwsClients) -> None:
    async def v133() -> str:
        return "1.33"

    resolver = NodeClassResolver(aws, CLUSTER, kubernetes_version=v133, clock=FakeClock())
    resolved = await resolver.resolve(ec2nodeclass(role=ROLE, alias="al2@latest"))
    failure = resolved.failures["AMIsReady"]
    assert failure.reason == "AMIAliasUnsupported"
    assert "AL2 AMIs are not published for Kubernetes 1.33" in failure.message


async def test_cleanup_deletes_templates_and_profile(
    aws: AwsClients, network: Network, resolver: NodeClassResolver
) -> None:
    seed_al2023(K8S, {"x86_64": seed_image("amd")})
    nc = ec2nodeclass(role=ROLE)
    other = ec2nodeclass("other", uid="6f1c1a52-0000-4000-8000-000000000002", role=ROLE)
    name = (await resolver.resolve(nc)).instance_profile
    for template, owner in (("karpenter.k8s.aws/1", "default"), ("karpenter.k8s.aws/2", "other")):
        await aws.ec2.create_launch_template(
            LaunchTemplateName=template,
            LaunchTemplateData={"ImageId": "ami-12345678"},
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": [
                        {"Key": AWS_TAG_CLUSTER, "Value": CLUSTER},
                        {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": owner},
                    ],
                }
            ],
        )
    await resolver.cleanup(nc)
    left = (await aws.ec2.describe_launch_templates())["LaunchTemplates"]
    assert [t["LaunchTemplateName"] for t in left] == ["karpenter.k8s.aws/2"]
    profiles = (await aws.iam.list_instance_profiles())["InstanceProfiles"]
    assert name not in [p["InstanceProfileName"] for p in profiles]
    await resolver.cleanup(other)  # nothing of its own to delete but its template
    assert (await aws.ec2.describe_launch_templates())["LaunchTemplates"] == []


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "Operation")


async def test_aws_error_is_a_transient_failure(
    monkeypatch: pytest.MonkeyPatch, network: Network, resolver: NodeClassResolver
) -> None:
    seed_al2023(K8S, {"x86_64": seed_image("amd")})

    async def throttled(*args: object, **kwargs: object) -> None:
        raise client_error("RequestLimitExceeded")

    monkeypatch.setattr("karpenter_py.cloudprovider.aws.nodeclass.discover_subnets", throttled)
    resolved = await resolver.resolve(ec2nodeclass(role=ROLE))
    assert resolved.failures["SubnetsReady"] == Failure(
        "SubnetsResolutionFailed", "failed to resolve Subnets: RequestLimitExceeded", transient=True
    )
    assert set(resolved.failures) == {"SubnetsReady", "ValidationSucceeded"}


async def test_unreadable_kubernetes_version(aws: AwsClients, network: Network) -> None:
    async def broken() -> str:
        raise OSError("connection refused")

    resolver = NodeClassResolver(aws, CLUSTER, kubernetes_version=broken, clock=FakeClock())
    resolved = await resolver.resolve(ec2nodeclass(role=ROLE))
    assert resolved.failures["AMIsReady"] == Failure(
        "AMIsResolutionFailed",
        "cannot read the Kubernetes version: connection refused",
        transient=True,
    )


async def test_dry_run_authorization(
    monkeypatch: pytest.MonkeyPatch,
    aws: AwsClients,
    network: Network,
    resolver: NodeClassResolver,
) -> None:
    seed_al2023(K8S, {"x86_64": seed_image("amd")})
    nc = ec2nodeclass(role=ROLE)
    real = aws.ec2.run_instances
    calls: list[dict[str, Any]] = []

    async def counted(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return await real(**kwargs)

    monkeypatch.setattr(aws.ec2, "run_instances", counted)
    assert (await resolver.resolve(nc)).failures == {}
    assert [c["DryRun"] for c in calls] == [True]  # moto answered DryRunOperation
    assert calls[0]["InstanceType"] == "m5.large"
    assert (await resolver.resolve(nc)).failures == {}
    assert len(calls) == 1  # a passing check is remembered for 30 minutes

    async def denied(**kwargs: Any) -> Any:
        raise client_error("UnauthorizedOperation")

    monkeypatch.setattr(aws.ec2, "run_instances", denied)
    fresh = NodeClassResolver(aws, CLUSTER, kubernetes_version=version, clock=FakeClock())
    assert (await fresh.resolve(nc)).failures == {
        "ValidationSucceeded": Failure(
            "RunInstancesAuthCheckFailed", "not authorized: UnauthorizedOperation"
        )
    }
