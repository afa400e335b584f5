"""The shared AWS clients reach moto's server over HTTP."""

from __future__ import annotations

import pytest

from karpenter_py.cloudprovider.aws.clients import (
    AwsClients,
    AwsConfigError,
    pricing_region,
    resolve_region,
)
from tests.motofixture import ZONES, seed_network


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        ("us-west-2", "us-east-1"),
        ("us-east-1", "us-east-1"),
        ("eu-west-1", "eu-central-1"),
        ("ap-northeast-1", "ap-south-1"),
        ("cn-north-1", "cn-northwest-1"),
        ("sa-east-1", "us-east-1"),
    ],
)
def test_pricing_region(region: str, expected: str) -> None:
    assert pricing_region(region) == expected


def test_region_from_env_and_missing(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    assert resolve_region({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "x"}) == "eu-west-1"
    assert resolve_region({"AWS_DEFAULT_REGION": "ap-south-1"}) == "ap-south-1"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(AwsConfigError, match="no AWS region: set AWS_REGION"):
        resolve_region({})


async def test_seed_network_over_the_wire(aws: AwsClients) -> None:
    net = await seed_network(aws)
    subnets = await aws.ec2.describe_subnets(
        Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["test-cluster"]}]
    )
    assert sorted(s["AvailabilityZone"] for s in subnets["Subnets"]) == list(ZONES)
    assert sorted(s["SubnetId"] for s in subnets["Subnets"]) == sorted(net.subnets.values())
    assert aws.endpoint_url is not None
    assert aws.endpoint_url.startswith("http://127.0.0.1:")
