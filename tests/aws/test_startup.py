"""``karpenter-py controller`` with ``CLOUD_PROVIDER=aws``: an unusable AWS environment is one
clear message and exit 2, found before any controller starts (moto over HTTP for the queue)."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.manager import EXIT_USAGE, run
from tests.motofixture import CLUSTER, MotoServer

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setenv("CLOUD_PROVIDER", "aws")
    monkeypatch.setenv("CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("HEALTH_PROBE_PORT", "18081")
    monkeypatch.setenv("METRICS_PORT", "18080")
    return path


def test_no_region_exits_2(
    kubeconfig: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert run([]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        "error: no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, or region in ~/.aws/config)\n"
    )


def test_no_endpoint_and_no_eks_cluster_exits_2(
    kubeconfig: Path, aws_env: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(
        "error: CLUSTER_ENDPOINT is not set and EKS DescribeCluster for 'test-cluster' failed: "
        "ResourceNotFoundException"
    )


def test_unknown_interruption_queue_exits_2(
    kubeconfig: Path,
    aws_env: MotoServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CLUSTER_ENDPOINT", "https://example.invalid")
    monkeypatch.setenv("INTERRUPTION_QUEUE", "no-such-queue")
    assert run([]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        "error: INTERRUPTION_QUEUE='no-such-queue': cannot resolve the queue URL "
        "(looking up queue 'no-such-queue': the queue does not exist)\n"
    )


async def test_endpoint_from_eks_describe_cluster(aws: AwsClients) -> None:
    from karpenter_py.cloudprovider.aws.cluster import resolve_cluster

    await aws.iam.create_role(RoleName="eks", AssumeRolePolicyDocument="{}")
    created = await aws.eks.create_cluster(
        name=CLUSTER,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": []},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"},
    )
    info = await resolve_cluster(aws, name=CLUSTER)
    assert info.endpoint == created["cluster"]["endpoint"]
    assert info.endpoint.startswith("https://")
    assert info.service_cidr == "172.20.0.0/16"
    assert (await resolve_cluster(aws, name=CLUSTER, endpoint="https://mine")).endpoint == (
        "https://mine"
    )
