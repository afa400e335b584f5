"""moto's server as the AWS peer of the tests (pytest plugin; see tests/aws/conftest.py).

* ``moto_server`` (session): moto's HTTP server started in this process
  (``ThreadedMotoServer``) on a free loopback port. In-process so the few things moto cannot be
  told over the wire (insufficient capacity, the EKS AMI SSM parameters) can be seeded into its
  backends by small named helpers; every product call still goes over HTTP through aiobotocore.
  Its CreateFleet applies launch-template security groups and honours ``ClientToken`` as EC2
  does (tests/aws/motofleet.py).
* ``aws_env`` (function): a reset moto (``POST /moto-api/reset``) and the environment the
  product reads (``AWS_ENDPOINT_URL``, ``AWS_REGION``, static test credentials).
* ``aws`` (function, async): open :class:`AwsClients` against it.
* :func:`seed_network`: a VPC with one subnet per zone and a security group, tagged for
  discovery as the getting-started guide tags them.

Tests that use ``aws_env`` get the ``aws`` marker automatically.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import pytest

from karpenter_py.cloudprovider.aws.clients import AwsClients

REGION = "us-west-2"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
CLUSTER = "test-cluster"
DISCOVERY_TAG = "karpenter.sh/discovery"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True)
class MotoServer:
    endpoint: str

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    from moto.server import ThreadedMotoServer

    from tests.aws.motofleet import apply_template_security_groups, honour_client_tokens

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    with apply_template_security_groups(), honour_client_tokens():
        server.start()
        try:
            yield MotoServer(f"http://127.0.0.1:{port}")
        finally:
            server.stop()


@pytest.fixture
def aws_env(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    moto_server.reset()
    for key, value in {
        "AWS_ENDPOINT_URL": moto_server.endpoint,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(key, raising=False)
    return moto_server


@pytest.fixture
async def aws(aws_env: MotoServer) -> AsyncIterator[AwsClients]:
    async with AwsClients.open(REGION, endpoint_url=aws_env.endpoint) as clients:
        yield clients


@dataclass(slots=True)
class Network:
    vpc_id: str
    subnets: dict[str, str] = field(default_factory=dict)  # zone -> subnet id
    security_group_id: str = ""


async def seed_network(
    clients: AwsClients, *, cluster: str = CLUSTER, zones: tuple[str, ...] = ZONES
) -> Network:
    """A VPC, one /20 subnet per zone and a security group, each tagged
    ``karpenter.sh/discovery=<cluster>``."""
    tags = [{"Key": DISCOVERY_TAG, "Value": cluster}]
    vpc = await clients.ec2.create_vpc(CidrBlock="10.0.0.0/16")
    net = Network(vpc_id=vpc["Vpc"]["VpcId"])
    for i, zone in enumerate(zones):
        subnet = await clients.ec2.create_subnet(
            VpcId=net.vpc_id,
            CidrBlock=f"10.0.{i * 16}.0/20",
            AvailabilityZone=zone,
            TagSpecifications=[
                {"ResourceType": "subnet", "Tags": [*tags, {"Key": "Name", "Value": zone}]}
            ],
        )
        net.subnets[zone] = subnet["Subnet"]["SubnetId"]
    sg = await clients.ec2.create_security_group(
        GroupName=f"{cluster}-nodes",
        Description="nodes",
        VpcId=net.vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )
    net.security_group_id = sg["GroupId"]
    return net


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "aws_env" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.aws)
