"""EC2NodeClass status against the local control plane and moto: an upstream-style class
(role, al2023@latest, discovery-tag selectors) becomes Ready with its status filled in; a
selector matching nothing says so; deletion waits for NodeClaims, then removes the instance
profile, the launch templates and the finalizer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.aio.clock import RealClock
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code
from karpenter_py.cloudprovider.aws.nodeclass import NodeClassResolver
from karpenter_py.controllers.nodeclass import KubernetesVersion, NodeClassStatus
from karpenter_py.informer import CallbackSink, KubeListWatch, Reflector
from karpenter_py.kube import EC2NODECLASSES, NODECLAIMS, KubeClient, NotFoundError, PatchType
from karpenter_py.kube.events import EventRecorder
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.labels import AWS_GROUP, AWS_TAG_CLUSTER
from karpenter_py.state.ingest import NodeClassSink
from tests.aws.amiseed import seed_al2023, seed_image
from tests.aws.nodeclasses import ec2nodeclass_doc
from tests.cluster.harness import (
    Harness,
    condition,
    eventually,
    get_or_none,
    nodeclaim,
    prepared_client,
    unique,
)
from tests.clusterfixture import ClusterHandle
from tests.motofixture import CLUSTER, DISCOVERY_TAG, Network, seed_network
from tests.unit.fakes import deps

pytestmark = pytest.mark.cluster

ROLE = "KarpenterNodeRole-test-cluster"
FINALIZER = "karpenter.k8s.aws/termination"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


@dataclass
class World:
    client: KubeClient
    aws: AwsClients
    network: Network
    amis: dict[str, str]  # EC2 arch -> image id
    harness: Harness
    controller: NodeClassStatus


def ec2nodeclass(name: str, *, subnet_discovery: str = CLUSTER) -> dict[str, Any]:
    return ec2nodeclass_doc(
        name,
        role=ROLE,
        subnetSelectorTerms=[{"tags": {DISCOVERY_TAG: subnet_discovery}}],
    )


@contextlib.asynccontextmanager
async def world(client: KubeClient, aws: AwsClients) -> AsyncIterator[World]:
    await aws.iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
    network = await seed_network(aws)
    clock = RealClock()
    version = KubernetesVersion(client, clock=clock)
    amis = {
        "x86_64": seed_image("al2023-x86", created=datetime(2025, 2, 1, tzinfo=UTC)),
        "arm64": seed_image("al2023-arm", arch="arm64", created=datetime(2025, 1, 1, tzinfo=UTC)),
    }
    seed_al2023(await version(), amis)
    resolver = NodeClassResolver(aws, CLUSTER, kubernetes_version=version, clock=clock)
    h = Harness(client)
    recorder = EventRecorder(client, clock=clock)
    ctrl = NodeClassStatus(
        deps(client=client, cluster=h.cluster, recorder=recorder, clock=clock),
        resolver,
        requeue_seconds=5,
        wait_seconds=0.5,
    )
    h.on(NODECLAIMS, delete=ctrl.on_nodeclaim_deleted)
    reflector = Reflector(
        KubeListWatch(client, EC2NODECLASSES),
        name="ec2nodeclasses",
        sinks=[
            NodeClassSink(h.cluster, group=AWS_GROUP, kind="EC2NodeClass", model=EC2NodeClass),
            CallbackSink(on_upsert=ctrl.on_nodeclass, on_delete=ctrl.on_nodeclass_deleted),
        ],
    )
    async with h.running():
        h.spawn(reflector.run())
        h.spawn(recorder.run())
        h.spawn(ctrl.run())
        yield World(client, aws, network, amis, h, ctrl)


@contextlib.asynccontextmanager
async def removed_on_exit(client: KubeClient, name: str) -> AsyncIterator[None]:
    try:
        yield
    finally:
        with contextlib.suppress(NotFoundError):
            await client.patch(EC2NODECLASSES, name, {"metadata": {"finalizers": None}})
            await client.delete(EC2NODECLASSES, name)


def state(obj: dict[str, Any] | None, type_: str) -> tuple[str, str] | None:
    c = condition(obj, type_)
    return (c["status"], c["reason"]) if c is not None else None


async def wait_ready(client: KubeClient, name: str, status: str = "True") -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        obj = await get_or_none(client, EC2NODECLASSES, name)
        c = condition(obj, "Ready")
        return obj if c is not None and c["status"] == status else None

    result: dict[str, Any] = await eventually(ready, within=30, what=f"{name} Ready={status}")
    return result


async def profile_exists(aws: AwsClients, name: str) -> bool:
    try:
        await aws.iam.get_instance_profile(InstanceProfileName=name)
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return False
        raise
    return True


async def test_upstream_style_class_becomes_ready(client: KubeClient, aws: AwsClients) -> None:
    name = unique("ec2nc")
    async with world(client, aws) as w, removed_on_exit(client, name):
        await client.create(EC2NODECLASSES, ec2nodeclass(name))
        obj = await wait_ready(client, name)
        status = obj["status"]
        assert obj["metadata"]["finalizers"] == [FINALIZER]
        assert [s["id"] for s in status["subnets"]] == sorted(w.network.subnets.values())
        assert {s["id"]: s["zone"] for s in status["subnets"]} == {
            v: k for k, v in w.network.subnets.items()
        }
        assert all(s["zoneID"] for s in status["subnets"])
        assert status["securityGroups"] == [
            {"id": w.network.security_group_id, "name": f"{CLUSTER}-nodes"}
        ]
        assert [(a["id"], a["requirements"][0]["values"]) for a in status["amis"]] == [
            (w.amis["x86_64"], ["amd64"]),
            (w.amis["arm64"], ["arm64"]),
        ]
        assert status["instanceProfile"].startswith(f"{CLUSTER}_")
        assert await profile_exists(aws, status["instanceProfile"])
        for type_ in (
            "SubnetsReady",
            "SecurityGroupsReady",
            "AMIsReady",
            "InstanceProfileReady",
            "ValidationSucceeded",
            "Ready",
        ):
            assert state(obj, type_) == ("True", type_)
        assert w.harness.cluster.nodeclasses[(AWS_GROUP, "EC2NodeClass", name)] is True

        # Settled: the periodic re-resolve (every 5 s here) writes nothing when nothing moved.
        rv = obj["metadata"]["resourceVersion"]
        await asyncio.sleep(6)
        assert (await client.get(EC2NODECLASSES, name))["metadata"]["resourceVersion"] == rv


async def test_selector_matching_nothing_then_fixed(client: KubeClient, aws: AwsClients) -> None:
    name = unique("ec2nc")
    async with world(client, aws), removed_on_exit(client, name):
        await client.create(EC2NODECLASSES, ec2nodeclass(name, subnet_discovery="nowhere"))
        obj = await wait_ready(client, name, status="False")
        subnets = condition(obj, "SubnetsReady")
        assert subnets is not None
        assert (subnets["status"], subnets["reason"], subnets["message"]) == (
            "False",
            "SubnetsNotFound",
            "SubnetSelector did not match any Subnets",
        )
        ready = condition(obj, "Ready")
        assert ready is not None
        assert ready["reason"] == "UnhealthyDependents"
        assert ready["message"] == "SubnetsReady=False, ValidationSucceeded=False"
        assert state(obj, "SecurityGroupsReady") == ("True", "SecurityGroupsReady")
        assert obj["status"]["subnets"] == []

        await client.patch(
            EC2NODECLASSES,
            name,
            {"spec": {"subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: CLUSTER}}]}},
            patch_type=PatchType.MERGE,
        )
        obj = await wait_ready(client, name)
        assert len(obj["status"]["subnets"]) == 3


async def test_deletion_waits_for_nodeclaims_then_cleans_up(
    client: KubeClient, aws: AwsClients
) -> None:
    name = unique("ec2nc")
    async with world(client, aws) as w, removed_on_exit(client, name):
        await client.create(EC2NODECLASSES, ec2nodeclass(name))
        obj = await wait_ready(client, name)
        profile = obj["status"]["instanceProfile"]
        # A launch template the provider would have made for this class.
        await aws.ec2.create_launch_template(
            LaunchTemplateName=f"karpenter.k8s.aws/{name}",
            LaunchTemplateData={"ImageId": w.amis["x86_64"]},
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": [
                        {"Key": AWS_TAG_CLUSTER, "Value": CLUSTER},
                        {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": name},
                    ],
                }
            ],
        )
        claim = nodeclaim(unique("nc"), "pool", labels=w.harness.labels(), finalizers=())
        claim["spec"]["nodeClassRef"] = {"group": AWS_GROUP, "kind": "EC2NodeClass", "name": name}
        await client.create(NODECLAIMS, claim)
        await eventually(
            lambda: claim["metadata"]["name"] in w.harness.cluster.nodeclaims,
            what="the NodeClaim in the cluster state",
        )

        await client.delete(EC2NODECLASSES, name)
        await asyncio.sleep(2)
        held = await client.get(EC2NODECLASSES, name)
        assert held["metadata"]["finalizers"] == [FINALIZER]
        assert await profile_exists(aws, profile)

        await client.delete(NODECLAIMS, claim["metadata"]["name"])

        async def gone() -> bool:
            return await get_or_none(client, EC2NODECLASSES, name) is None

        await eventually(gone, within=30, what="the EC2NodeClass to be finalized")
        assert not await profile_exists(aws, profile)
        templates = (await aws.ec2.describe_launch_templates())["LaunchTemplates"]
        assert [t["LaunchTemplateName"] for t in templates] == []
