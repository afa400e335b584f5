"""Launch templates against moto: created with the resolved options, reused, deleted by tag."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from karpenter_py.cloudprovider.aws.clients import AwsClients, paginate
from karpenter_py.cloudprovider.aws.launchtemplates import (
    LaunchTemplateProvider,
    delete_launch_templates,
)
from tests.aws.launchsupport import CLUSTER_INFO, ec2nodeclass, instance_type, nodeclaim

ZONE = "us-west-2a"


async def _template(aws: AwsClients, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the template, its latest version's data)."""
    described = await aws.ec2.describe_launch_templates(LaunchTemplateNames=[name])
    versions = await aws.ec2.describe_launch_template_versions(
        LaunchTemplateName=name, Versions=["$Latest"]
    )
    return described["LaunchTemplates"][0], versions["LaunchTemplateVersions"][0][
        "LaunchTemplateData"
    ]


async def test_ensure_creates_template_with_resolved_options(aws: AwsClients) -> None:
    provider = LaunchTemplateProvider(aws, CLUSTER_INFO)
    nc = ec2nodeclass(tags={"team": "a"}, detailedMonitoring=True)
    types = [instance_type("m5.large", [(ZONE, "on-demand", 0.096)])]
    resolved = await provider.ensure(nc, nodeclaim(), types, "on-demand")
    assert len(resolved) == 1
    assert resolved[0].image_id == "ami-0amd64"
    assert resolved[0].instance_types == ("m5.large",)
    template, data = await _template(aws, resolved[0].name)
    assert {t["Key"]: t["Value"] for t in template["Tags"]} == {
        "team": "a",
        "karpenter.k8s.aws/cluster": "test-cluster",
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "eks:eks-cluster-name": "test-cluster",
    }
    assert data["ImageId"] == "ami-0amd64"
    assert data["IamInstanceProfile"] == {"Name": "test-cluster_profile"}
    assert data["SecurityGroupIds"] == ["sg-0123"]
    assert data["Monitoring"] == {"Enabled": True}
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["BlockDeviceMappings"][0]["DeviceName"] == "/dev/xvda"
    text = base64.b64decode(data["UserData"]).decode()
    assert "kind: NodeConfig" in text
    assert (
        "--node-labels=karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=default" in text
    )


async def test_equal_options_reuse_and_cache(aws: AwsClients) -> None:
    types = [instance_type("m5.large", [(ZONE, "on-demand", 0.096)])]
    first = LaunchTemplateProvider(aws, CLUSTER_INFO)
    a = await first.ensure(ec2nodeclass(), nodeclaim("a"), types, "on-demand")
    b = await first.ensure(ec2nodeclass(), nodeclaim("b"), types, "on-demand")
    assert a == b
    assert first.create_calls == 1  # cached
    # A fresh provider (restart) meets the existing template: AlreadyExists is success.
    second = LaunchTemplateProvider(aws, CLUSTER_INFO)
    assert await second.ensure(ec2nodeclass(), nodeclaim("c"), types, "on-demand") == a
    assert second.create_calls == 1
    first.invalidate(a[0].name)
    assert await first.ensure(ec2nodeclass(), nodeclaim("d"), types, "on-demand") == a
    assert first.create_calls == 2
    spot = await first.ensure(ec2nodeclass(), nodeclaim("e"), types, "spot")
    assert spot[0].name != a[0].name  # the capacity-type label is in the user data
    names = [t["LaunchTemplateName"] for t in await _all(aws)]
    assert sorted(names) == sorted({a[0].name, spot[0].name})


async def test_concurrent_launches_share_one_create(aws: AwsClients) -> None:
    types = [instance_type("m5.large", [(ZONE, "on-demand", 0.096)])]
    provider = LaunchTemplateProvider(aws, CLUSTER_INFO)
    async with asyncio.TaskGroup() as tg:
        ensured = [
            tg.create_task(provider.ensure(ec2nodeclass(), nodeclaim(n), types, "on-demand"))
            for n in ("a", "b", "c")
        ]
    first = ensured[0].result()
    assert [e.result() for e in ensured] == [first] * 3
    assert provider.create_calls == 1
    assert [t["LaunchTemplateName"] for t in await _all(aws)] == [first[0].name]


async def test_one_template_per_ami_and_expiry(aws: AwsClients) -> None:
    now = [0.0]
    provider = LaunchTemplateProvider(aws, CLUSTER_INFO, cache_ttl=60.0, clock=lambda: now[0])
    nc = ec2nodeclass(amis=[("ami-0arm", "arm64"), ("ami-0amd", "amd64")])
    types = [
        instance_type("m5.large", [(ZONE, "on-demand", 0.096)]),
        instance_type("m7g.large", [(ZONE, "on-demand", 0.08)], arch="arm64"),
    ]
    resolved = await provider.ensure(nc, nodeclaim(), types, "on-demand")
    assert [(r.image_id, r.instance_types) for r in resolved] == [
        ("ami-0amd", ("m5.large",)),
        ("ami-0arm", ("m7g.large",)),
    ]
    assert provider.create_calls == 2
    now[0] = 61.0  # past the cache TTL: ensured again (AlreadyExists is fine)
    assert await provider.ensure(nc, nodeclaim(), types, "on-demand") == resolved
    assert provider.create_calls == 4


async def _all(aws: AwsClients) -> list[dict[str, Any]]:
    return await paginate(aws.ec2, "describe_launch_templates", "LaunchTemplates")


async def test_delete_launch_templates_by_tag(aws: AwsClients) -> None:
    provider = LaunchTemplateProvider(aws, CLUSTER_INFO)
    types = [instance_type("m5.large", [(ZONE, "on-demand", 0.096)])]
    mine = ec2nodeclass("mine")
    other = ec2nodeclass("other")
    await provider.ensure(mine, nodeclaim(), types, "on-demand")
    await provider.ensure(mine, nodeclaim(), types, "spot")
    kept = await provider.ensure(other, nodeclaim(), types, "on-demand")
    assert await delete_launch_templates(aws, "test-cluster", "mine") == 2
    assert [t["LaunchTemplateName"] for t in await _all(aws)] == [kept[0].name]
    assert await delete_launch_templates(aws, "test-cluster", "mine") == 0
    assert await delete_launch_templates(aws, "another-cluster", "other") == 0
