"""Security group discovery against moto: by id, name and tags; sorted by id."""

from __future__ import annotations

import pytest

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.securitygroups import (
    discover_security_groups,
    security_group_filters,
)
from karpenter_py.model.api.ec2nodeclass import SecurityGroupSelectorTerm

DISCOVERY = "karpenter.sh/discovery"


def term(**kw: object) -> SecurityGroupSelectorTerm:
    return SecurityGroupSelectorTerm.model_validate(kw)


@pytest.fixture
async def groups(aws: AwsClients) -> dict[str, str]:
    vpc = (await aws.ec2.create_vpc(CidrBlock="10.0.0.0/16"))["Vpc"]["VpcId"]
    out = {}
    for name, tags in (
        ("nodes", {DISCOVERY: "c1"}),
        ("extra", {DISCOVERY: "c1", "role": "extra"}),
        ("other", {"team": "x"}),
    ):
        sg = await aws.ec2.create_security_group(
            GroupName=name,
            Description=name,
            VpcId=vpc,
            TagSpecifications=[
                {
                    "ResourceType": "security-group",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ],
        )
        out[name] = str(sg["GroupId"])
    return out


async def found(aws: AwsClients, *terms: SecurityGroupSelectorTerm) -> list[tuple[str, str]]:
    return [(g.id, g.name) for g in await discover_security_groups(aws, terms)]


async def test_by_tags_sorted_by_id(aws: AwsClients, groups: dict[str, str]) -> None:
    expected = sorted([(groups["nodes"], "nodes"), (groups["extra"], "extra")])
    assert await found(aws, term(tags={DISCOVERY: "c1"})) == expected
    assert await found(aws, term(tags={DISCOVERY: "*"})) == expected
    assert await found(aws, term(tags={DISCOVERY: "c1", "role": "extra"})) == [
        (groups["extra"], "extra")
    ]


async def test_by_name_and_id_ored(aws: AwsClients, groups: dict[str, str]) -> None:
    assert await found(aws, term(name="other"), term(id=groups["nodes"])) == sorted(
        [(groups["other"], "other"), (groups["nodes"], "nodes")]
    )


async def test_nothing_matches(aws: AwsClients, groups: dict[str, str]) -> None:
    assert await found(aws, term(name="missing"), term(tags={"team": "y"})) == []


def test_filters() -> None:
    assert security_group_filters(term(name="n")) == [{"Name": "group-name", "Values": ["n"]}]
    assert security_group_filters(term(tags={"k": "*", "j": "v"})) == [
        {"Name": "tag:j", "Values": ["v"]},
        {"Name": "tag-key", "Values": ["k"]},
    ]
    assert security_group_filters(term(id="sg-1")) == [{"Name": "group-id", "Values": ["sg-1"]}]
