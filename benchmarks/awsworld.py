"""The AWS side of the benchmarks: moto's server, a VPC as the getting-started guide tags it,
an EC2NodeClass, the controller's environment, and the fake kubelet that turns moto's instances
into Nodes (tests/cluster/awskubelet.py; moto runs no machines).

moto runs in this process (``ThreadedMotoServer``) on a loopback port; the controller, a
subprocess, reaches it over HTTP through ``AWS_ENDPOINT_URL`` like any other endpoint. The AMI is
selected by id (one of moto's bundled Amazon images), so no SSM seeding is needed.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.instancetypes import InstanceTypeProvider
from karpenter_py.cloudprovider.aws.pricing import PricingProvider
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.resources import Resource
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.instancetype import InstanceType
from tests.cluster.awskubelet import FakeKubelet

REGION = "us-west-2"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
CLUSTER = "bench-cluster"
ROLE = "KarpenterNodeRole-bench"
QUEUE = "karpenter-bench-interruptions"
EC2NODECLASSES = Resource("karpenter.k8s.aws", "v1", "ec2nodeclasses", False, "EC2NodeClass")
CREDENTIALS = {
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_SESSION_TOKEN": "bench",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class AwsWorld:
    endpoint: str
    clients: AwsClients
    queue_url: str
    image_id: str
    types: dict[str, InstanceType] = field(default_factory=dict)

    def controller_env(self) -> dict[str, str]:
        return {
            **CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "CLOUD_PROVIDER": "aws",
            "CLUSTER_NAME": CLUSTER,
            "CLUSTER_ENDPOINT": "https://bench-cluster.eks.example.com",
            "CLUSTER_CA_BUNDLE": "YmVuY2g=",
            "INTERRUPTION_QUEUE": QUEUE,
        }

    def nodeclass(self, name: str = "default") -> dict[str, Any]:
        return {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": name},
            "spec": {
                "role": ROLE,
                "amiFamily": "AL2023",
                "amiSelectorTerms": [{"id": self.image_id}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            },
        }

    async def load_types(self, client: KubeClient, name: str = "default") -> None:
        """The catalog the controller sees for the class (same moto data, same arithmetic)."""
        nodeclass = EC2NodeClass.model_validate(await client.get(EC2NODECLASSES, name))
        pricing = PricingProvider(self.clients, isolated_vpc=True)
        provider = InstanceTypeProvider(self.clients, pricing)
        await pricing.refresh()
        await provider.refresh()
        self.types = {t.name: t for t in provider.list(nodeclass)}

    def kubelet(self, client: KubeClient, poll: float = 0.5) -> FakeKubelet:
        return FakeKubelet(client, self.clients, CLUSTER, self.types.get, poll=poll)

    async def create_fleet_calls(self) -> int:
        """Fleets moto recorded: one per CreateFleet call the controller made."""
        fleets = 0
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"NextToken": token} if token else {}
            resp = await self.clients.ec2.describe_fleets(**kw)
            fleets += len(resp.get("Fleets") or [])
            token = resp.get("NextToken")
            if not token:
                return fleets

    async def instances(self, *states: str) -> list[dict[str, Any]]:
        filters = [{"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]}]
        if states:
            filters.append({"Name": "instance-state-name", "Values": list(states)})
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"NextToken": token} if token else {}
            resp = await self.clients.ec2.describe_instances(Filters=filters, **kw)
            out.extend(i for r in resp["Reservations"] for i in r["Instances"])
            token = resp.get("NextToken")
            if not token:
                return out


@contextlib.asynccontextmanager
async def aws_world() -> AsyncIterator[AwsWorld]:
    """moto on a free port, seeded with a tagged VPC, a node role and the interruption queue."""
    import os

    from moto.server import ThreadedMotoServer

    os.environ.update(CREDENTIALS)
    logging.getLogger("werkzeug").setLevel(
        logging.CRITICAL
    )  # moto: per-request lines, and tracebacks for the Pricing API it lacks
    from tests.aws.motofleet import apply_template_security_groups, honour_client_tokens

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    patch = contextlib.ExitStack()
    # EC2's behaviour: fleet instances get their template's groups; a retried CreateFleet
    # (same ClientToken) launches nothing more.
    patch.enter_context(apply_template_security_groups())
    patch.enter_context(honour_client_tokens())
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        # moto's threaded server now and then answers an HTML 500 under concurrent calls; the
        # runner's and the fake kubelet's own calls retry (botocore's standard mode) rather than
        # end a run with an error that is not the controller's.
        async with AwsClients.open(REGION, endpoint_url=endpoint, max_attempts=4) as clients:
            await _seed_network(clients)
            await clients.iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
            queue_url = (await clients.sqs.create_queue(QueueName=QUEUE))["QueueUrl"]
            images = (await clients.ec2.describe_images(Owners=["amazon"]))["Images"]
            image = next(
                i
                for i in images
                if i.get("Architecture") == "x86_64" and i.get("State") == "available"
            )
            yield AwsWorld(endpoint, clients, queue_url, image["ImageId"])
    finally:
        server.stop()
        patch.close()


async def _seed_network(clients: AwsClients) -> None:
    tags = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
    vpc = (await clients.ec2.create_vpc(CidrBlock="10.0.0.0/16"))["Vpc"]["VpcId"]
    for i, zone in enumerate(ZONES):
        await clients.ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"10.0.{i * 64}.0/18",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}],
        )
    await clients.ec2.create_security_group(
        GroupName=f"{CLUSTER}-nodes",
        Description="nodes",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )


async def delete_quietly(client: KubeClient, resource: Resource, name: str) -> None:
    with contextlib.suppress(NotFoundError):
        await client.delete(resource, name)
