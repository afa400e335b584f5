"""The whole controller with ``CLOUD_PROVIDER=aws``: the local control plane + moto's server.

Every AWS call goes over HTTP through aiobotocore to moto (in-process, so the two things it
cannot be told over the wire are seeded by named helpers: the EKS AMI SSM parameters
(tests/aws/amiseed.py) and insufficient capacity (tests/aws/fleetfaults.py)). moto runs no
machines: tests/cluster/awskubelet.py registers a Node for each instance, as a kubelet would,
and removes it when the instance goes, as the cloud node controller would.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.cli.manifests import load_manifests
from karpenter_py.cli.offline import build_cluster
from karpenter_py.cli.plan import solve_input
from karpenter_py.cloudprovider.aws import userdata
from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.kube import (
    DEPLOYMENTS,
    EC2NODECLASSES,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    KubeClient,
    NotFoundError,
    PatchType,
)
from karpenter_py.manager.app import App
from karpenter_py.manager.aws import AwsStack, open_aws
from karpenter_py.model.api.convert import KUBELET_ANNOTATION
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.scheduler import solve
from tests.aws.amiseed import seed_al2023, seed_image
from tests.aws.fleetfaults import insufficient_capacity
from tests.aws.nodeclasses import ec2nodeclass_doc
from tests.cluster.awskubelet import FakeKubelet, running_kubelet
from tests.cluster.harness import (
    claims_of,
    deployment,
    eventually,
    is_true,
    namespace,
    prepared_client,
    running,
    running_pods,
    unique,
)
from tests.cluster.test_controller import settings
from tests.clusterfixture import ClusterHandle
from tests.motofixture import CLUSTER, REGION, MotoServer, seed_network

pytestmark = pytest.mark.cluster

ROLE = "KarpenterNodeRole-test"
QUEUE = "karpenter-interruptions"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def aws_settings(**env: str) -> Any:
    aws = {
        "CLOUD_PROVIDER": "aws",
        "CLUSTER_NAME": CLUSTER,
        "CLUSTER_ENDPOINT": "https://test-cluster.eks.example.com",
        "CLUSTER_CA_BUNDLE": "dGVzdA==",
        "INTERRUPTION_QUEUE": QUEUE,
    }
    return settings(**{**aws, **env})


def ec2nodeclass(name: str) -> dict[str, Any]:
    """The getting-started guide's EC2NodeClass, unchanged but for the names."""
    return ec2nodeclass_doc(name, role=ROLE)


def aws_pool(name: str, nodeclass: str, capacity_types: tuple[str, ...] = ("on-demand",)) -> Any:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": nodeclass,
                    },
                    "requirements": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": list(capacity_types),
                        },
                        {
                            "key": "karpenter.k8s.aws/instance-category",
                            "operator": "In",
                            "values": ["c", "m", "r"],
                        },
                        {
                            "key": "karpenter.k8s.aws/instance-generation",
                            "operator": "Gt",
                            "values": ["4"],
                        },
                    ],
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "Never",
            },
        },
    }


@dataclass
class World:
    client: KubeClient
    moto: MotoServer
    ec2: AwsClients
    nodeclass: str
    pool: str
    ns: str
    queue_url: str

    def app(self, stack: AwsStack, **env: str) -> App:
        return App(aws_settings(**env), self.client, aws=stack)

    @contextlib.asynccontextmanager
    async def stack(self, **env: str) -> AsyncIterator[AwsStack]:
        async with open_aws(aws_settings(**env), endpoint_url=self.moto.endpoint) as stack:
            yield stack

    def kubelet(self, stack: AwsStack) -> FakeKubelet:
        cache: dict[int, dict[str, InstanceType]] = {}

        def lookup(name: str) -> InstanceType | None:
            nc = stack.nodeclasses.get(self.nodeclass)
            if nc is None or not stack.instance_types.loaded:
                return None
            types = stack.instance_types.list(nc)
            by_name = cache.setdefault(id(types), {t.name: t for t in types})
            return by_name.get(name)

        return FakeKubelet(self.client, self.ec2, CLUSTER, lookup, poll=0.3)

    async def instances(self, *states: str) -> list[dict[str, Any]]:
        filters = [{"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]}]
        if states:
            filters.append({"Name": "instance-state-name", "Values": list(states)})
        resp = await self.ec2.ec2.describe_instances(Filters=filters)
        return [i for r in resp["Reservations"] for i in r["Instances"]]


@contextlib.asynccontextmanager
async def world(client: KubeClient, moto: MotoServer) -> AsyncIterator[World]:
    async with AwsClients.open(REGION, endpoint_url=moto.endpoint) as ec2:
        await seed_network(ec2)
        await ec2.iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
        queue_url = (await ec2.sqs.create_queue(QueueName=QUEUE))["QueueUrl"]
        version = await client.version()
        k8s = f"{version['major']}.{str(version['minor']).rstrip('+')}"
        seed_al2023(
            k8s,
            {
                "x86_64": seed_image("amazon-eks-node-al2023-x86_64-standard", arch="x86_64"),
                "arm64": seed_image("amazon-eks-node-al2023-arm64-standard", arch="arm64"),
            },
        )
        nodeclass, pool = unique("ec2nc"), unique("pool")
        await client.create(EC2NODECLASSES, ec2nodeclass(nodeclass))
        await client.create(NODEPOOLS, aws_pool(pool, nodeclass))
        try:
            async with namespace(client) as ns:
                yield World(client, moto, ec2, nodeclass, pool, ns, queue_url)
        finally:
            await _cleanup(client, pool, nodeclass)


async def _cleanup(client: KubeClient, pool: str, nodeclass: str) -> None:
    """Leave nothing behind for the next test: claims, nodes, pool and class, finalizers cut."""
    for nc in await claims_of(client, pool):
        with contextlib.suppress(NotFoundError):
            await client.patch(
                NODECLAIMS,
                nc["metadata"]["name"],
                {"metadata": {"finalizers": None}},
                patch_type=PatchType.MERGE,
            )
            await client.delete(NODECLAIMS, nc["metadata"]["name"])
    nodes = (await client.list(NODES, label_selector=f"karpenter.sh/nodepool={pool}")).items
    for node in nodes:
        with contextlib.suppress(NotFoundError):
            await client.patch(
                NODES,
                node["metadata"]["name"],
                {"metadata": {"finalizers": None}},
                patch_type=PatchType.MERGE,
            )
            await client.delete(NODES, node["metadata"]["name"])
    with contextlib.suppress(NotFoundError):
        await client.delete(NODEPOOLS, pool)
    with contextlib.suppress(NotFoundError):
        await client.patch(
            EC2NODECLASSES,
            nodeclass,
            {"metadata": {"finalizers": None}},
            patch_type=PatchType.MERGE,
        )
        await client.delete(EC2NODECLASSES, nodeclass)


def plan_types(
    docs: list[Mapping[str, Any]], catalog: list[InstanceType], tmp_path: Path
) -> list[str]:
    """The instance types ``karpenter-py plan`` would launch for ``docs`` on ``catalog``."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    manifests = load_manifests([str(path)])
    now = datetime.now(UTC)
    snapshot = build_cluster(manifests.cluster, now)[0].snapshot(now)
    plan = solve(solve_input(snapshot, catalog), namespace_labels=snapshot.namespace_labels)
    assert not plan.errors
    return sorted(c.instance_types[0].name for c in plan.new_node_claims)


async def wait_ready(w: World) -> None:
    async def ready() -> bool:
        nc = await w.client.get(EC2NODECLASSES, w.nodeclass)
        return is_true(nc, "Ready")

    await eventually(ready, within=60, what=f"EC2NodeClass {w.nodeclass} Ready")


async def test_pending_deployment_launches_the_instances_plan_predicts(
    client: KubeClient, aws_env: MotoServer, tmp_path: Path
) -> None:
    async with world(client, aws_env) as w, w.stack() as stack:
        app = w.app(stack)
        dep = deployment("web", w.ns, w.pool, replicas=5, cpu="1500m", memory="3Gi")
        async with running(app), running_kubelet(w.kubelet(stack)) as kubelet:
            await wait_ready(w)
            status = (await client.get(EC2NODECLASSES, w.nodeclass))["status"]
            assert sorted(s["zone"] for s in status["subnets"]) == [
                "us-west-2a",
                "us-west-2b",
                "us-west-2c",
            ]
            assert status["instanceProfile"].startswith(f"{CLUSTER}_")
            await client.create(DEPLOYMENTS, dep)

            async def all_running() -> bool:
                return len(await running_pods(client, w.ns)) == 5

            await eventually(all_running, within=120, what="5 pods Running on EC2 instances")
            claims = await claims_of(client, w.pool)
            instances = await w.instances("running")
            assert sorted(nc["status"]["providerID"] for nc in claims) == sorted(
                f"aws:///{i['Placement']['AvailabilityZone']}/{i['InstanceId']}" for i in instances
            )
            tags = {t["Key"]: t["Value"] for t in instances[0]["Tags"]}
            assert tags["karpenter.sh/nodepool"] == w.pool
            assert tags["karpenter.k8s.aws/ec2nodeclass"] == w.nodeclass
            assert tags["kubernetes.io/cluster/test-cluster"] == "owned"
            assert stack.instances.create_fleet_calls <= len(claims)
            launched = sorted(t for _, t in kubelet.launched)
            nodeclass = stack.nodeclasses.get(w.nodeclass)
            assert nodeclass is not None
            catalog = stack.instance_types.list(nodeclass)
        pool = await client.get(NODEPOOLS, w.pool)
        predicted = plan_types([pool, ec2nodeclass(w.nodeclass), dep], catalog, tmp_path)
        assert launched == predicted


async def test_v1beta1_kubelet_annotation_shapes_the_launch(
    client: KubeClient, aws_env: MotoServer
) -> None:
    """A NodePool converted from v1beta1 keeps its kubelet block in the compatibility
    annotation: its NodeClaims carry it, and launch with those settings (upstream v1.0)."""
    kubelet = {"clusterDNS": ["10.0.1.100"], "maxPods": 20}
    async with world(client, aws_env) as w, w.stack() as stack:
        await client.patch(
            NODEPOOLS,
            w.pool,
            {"metadata": {"annotations": {KUBELET_ANNOTATION: json.dumps(kubelet)}}},
            patch_type=PatchType.MERGE,
        )
        dep = deployment("compat", w.ns, w.pool, replicas=1, cpu="500m", memory="1Gi")
        async with running(w.app(stack)), running_kubelet(w.kubelet(stack)):
            await wait_ready(w)
            await client.create(DEPLOYMENTS, dep)

            async def launched() -> list[dict[str, Any]]:
                return [
                    c
                    for c in await claims_of(client, w.pool)
                    if c.get("status", {}).get("providerID")
                ]

            (claim,) = await eventually(launched, within=120, what="the NodeClaim launched")
            assert json.loads(claim["metadata"]["annotations"][KUBELET_ANNOTATION]) == kubelet
            assert claim["status"]["allocatable"]["pods"] == "20"
            templates = (
                await w.ec2.ec2.describe_launch_templates(
                    Filters=[
                        {"Name": "tag:karpenter.k8s.aws/ec2nodeclass", "Values": [w.nodeclass]}
                    ]
                )
            )["LaunchTemplates"]
            configs = []
            for template in templates:
                version = (
                    await w.ec2.ec2.describe_launch_template_versions(
                        LaunchTemplateName=template["LaunchTemplateName"], Versions=["$Latest"]
                    )
                )["LaunchTemplateVersions"][0]
                text = base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()
                (part,) = [
                    p
                    for p in userdata.parse_mime(text)
                    if p.content_type == userdata.NODECONFIG_CONTENT_TYPE
                ]
                configs.append(yaml.safe_load(part.body)["spec"]["kubelet"]["config"])
            # One template per AMI (the seeded amd64 and arm64 ones): both say the pool's kubelet.
            assert configs == [kubelet, kubelet]


async def test_insufficient_capacity_on_the_first_choice_launches_the_next(
    client: KubeClient, aws_env: MotoServer, tmp_path: Path
) -> None:
    async with world(client, aws_env) as w, w.stack() as stack:
        app = w.app(stack)
        dep = deployment("ice", w.ns, w.pool, replicas=1, cpu="1500m", memory="3Gi")
        nodeclass_doc = ec2nodeclass(w.nodeclass)
        async with running(app), running_kubelet(w.kubelet(stack)) as kubelet:
            await wait_ready(w)

            def cached_with_subnets() -> EC2NodeClass | None:
                # The API server said Ready; the controller's cache sees that status a moment
                # later, and without its subnets the catalog has no offerings (CI saw it once).
                nc = stack.nodeclasses.get(w.nodeclass)
                return nc if nc is not None and nc.status.subnets else None

            nodeclass = await eventually(cached_with_subnets, within=30, what="cached subnets")
            await stack.provider.get_instance_types(
                NodePool.model_validate(await client.get(NODEPOOLS, w.pool))
            )
            catalog = stack.instance_types.list(nodeclass)
            first = plan_types(
                [await client.get(NODEPOOLS, w.pool), nodeclass_doc, dep], catalog, tmp_path
            )
            assert len(first) == 1
            zones = ("us-west-2a", "us-west-2b", "us-west-2c")
            with insufficient_capacity(*((first[0], z, "on-demand") for z in zones)) as faults:
                await client.create(DEPLOYMENTS, dep)

                async def running_one() -> list[dict[str, Any]]:
                    return await running_pods(client, w.ns)

                await eventually(running_one, within=120, what="the pod to run on the next type")
            assert faults.requests, "CreateFleet was never called"
            assert [t for _, t in kubelet.launched] != [first[0]]
            assert first[0] not in {t for _, t in kubelet.launched}
            assert app.launcher.unavailable.is_unavailable(first[0], "us-west-2a", "on-demand")


async def test_nodeclaim_deleted_terminates_its_instance(
    client: KubeClient, aws_env: MotoServer
) -> None:
    async with world(client, aws_env) as w, w.stack() as stack:
        app = w.app(stack)
        async with running(app), running_kubelet(w.kubelet(stack)):
            await wait_ready(w)
            await client.create(DEPLOYMENTS, deployment("one", w.ns, w.pool, replicas=1))
            await eventually(lambda: running_pods(client, w.ns), within=120, what="the pod Running")
            [claim] = await claims_of(client, w.pool)
            iid = claim["status"]["providerID"].rsplit("/", 1)[-1]
            await client.delete(DEPLOYMENTS, "one", namespace=w.ns)
            await client.delete(NODECLAIMS, claim["metadata"]["name"])

            async def terminated() -> bool:
                return [i["InstanceId"] for i in await w.instances("running", "pending")] == []

            await eventually(terminated, within=60, what=f"instance {iid} terminated")

            async def claim_gone() -> bool:
                return await claims_of(client, w.pool) == []

            await eventually(claim_gone, within=60, what="the NodeClaim gone")


async def test_instance_terminated_outside_karpenter_is_cleaned_up(
    client: KubeClient, aws_env: MotoServer
) -> None:
    async with world(client, aws_env) as w, w.stack() as stack:
        app = w.app(stack)
        app.gc.interval = 2.0
        async with running(app), running_kubelet(w.kubelet(stack)):
            await wait_ready(w)
            await client.create(DEPLOYMENTS, deployment("lost", w.ns, w.pool, replicas=1))
            await eventually(lambda: running_pods(client, w.ns), within=120, what="pod Running")

            # The pod may run before the claim's status write lands: wait for its providerID.
            async def launched() -> dict[str, Any] | None:
                [claim] = await claims_of(client, w.pool)
                return claim if (claim.get("status") or {}).get("providerID") else None

            claim = await eventually(launched, within=60, what="NodeClaim providerID")
            iid = claim["status"]["providerID"].rsplit("/", 1)[-1]
            await w.ec2.ec2.terminate_instances(InstanceIds=[iid])

            async def replaced() -> bool:
                names = [nc["metadata"]["name"] for nc in await claims_of(client, w.pool)]
                return (
                    claim["metadata"]["name"] not in names
                    and len(await running_pods(client, w.ns)) == 1
                )

            await eventually(replaced, within=120, what="the lost NodeClaim replaced")


async def test_spot_interruption_drains_and_replaces_within_the_warning(
    client: KubeClient, aws_env: MotoServer
) -> None:
    async with world(client, aws_env) as w, w.stack() as stack:
        await client.patch(
            NODEPOOLS,
            w.pool,
            {
                "spec": {
                    "template": {
                        "spec": {
                            "requirements": aws_pool(w.pool, w.nodeclass, ("spot",))["spec"][
                                "template"
                            ]["spec"]["requirements"]
                        }
                    }
                }
            },
            patch_type=PatchType.MERGE,
        )
        app = w.app(stack)
        async with running(app), running_kubelet(w.kubelet(stack)):
            await wait_ready(w)
            await client.create(DEPLOYMENTS, deployment("spot", w.ns, w.pool, replicas=2))

            async def two_running() -> bool:
                return len(await running_pods(client, w.ns)) == 2

            await eventually(two_running, within=120, what="2 pods Running on spot")

            async def claim_with_pods() -> dict[str, Any] | None:
                # A NodeClaim whose node runs one of the pods: the list may also hold a claim
                # still registering, whose status has no nodeName yet.
                hosts = {p["spec"]["nodeName"] for p in await running_pods(client, w.ns)}
                for nc in await claims_of(client, w.pool):
                    if nc.get("status", {}).get("nodeName") in hosts:
                        return nc
                return None

            victim = await eventually(claim_with_pods, within=60, what="a NodeClaim running a pod")
            iid = victim["status"]["providerID"].rsplit("/", 1)[-1]
            itype = victim["metadata"]["labels"]["node.kubernetes.io/instance-type"]
            zone = victim["metadata"]["labels"]["topology.kubernetes.io/zone"]
            sent = asyncio.get_running_loop().time()
            await w.ec2.sqs.send_message(
                QueueUrl=w.queue_url,
                MessageBody=json.dumps(spot_warning(iid)),
            )

            async def replaced() -> bool:
                names = {nc["metadata"]["name"] for nc in await claims_of(client, w.pool)}
                pods = await running_pods(client, w.ns)
                return (
                    victim["metadata"]["name"] not in names
                    and len(pods) == 2
                    and all(p["spec"]["nodeName"] != victim["status"]["nodeName"] for p in pods)
                )

            await eventually(replaced, within=110, what="the interrupted node replaced")
            assert asyncio.get_running_loop().time() - sent < 120
            assert app.launcher.unavailable.is_unavailable(itype, zone, "spot")


def spot_warning(instance_id: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-12-02T00:00:00Z",
        "region": REGION,
        "resources": [f"arn:aws:ec2:{REGION}b:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    }


async def test_controller_killed_mid_launch_leaks_no_instance(
    client: KubeClient, aws_env: MotoServer
) -> None:
    """Killed after CreateFleet but before the instance is tagged with its NodeClaim and the
    launch result is written: the restarted controller launches again and garbage collection
    terminates the orphan (tagged for the cluster, claimed by nobody)."""
    async with world(client, aws_env) as w:
        await client.create(DEPLOYMENTS, deployment("crash", w.ns, w.pool, replicas=2))
        async with w.stack() as stack:
            launched = asyncio.Event()

            async def hang_after_fleet(instance_id: str, tags: Mapping[str, str]) -> None:
                launched.set()
                await asyncio.Event().wait()  # the process dies here

            stack.instances.tag = hang_after_fleet  # type: ignore[method-assign]
            async with running(w.app(stack)):
                await wait_ready(w)
                async with asyncio.timeout(120):
                    await launched.wait()
        orphans = {i["InstanceId"] for i in await w.instances("running", "pending")}
        assert orphans, "the first controller launched nothing before it was killed"
        async with w.stack() as stack:
            app = w.app(stack)
            app.gc.interval, app.gc.orphan_grace = 2.0, 3.0
            async with running(app), running_kubelet(w.kubelet(stack)):

                async def settled() -> bool:
                    claims = await claims_of(client, w.pool)
                    live = {i["InstanceId"] for i in await w.instances("running", "pending")}
                    claimed = {
                        (nc.get("status") or {}).get("providerID", "").rsplit("/", 1)[-1]
                        for nc in claims
                    }
                    return (
                        len(await running_pods(client, w.ns)) == 2
                        and not (orphans & live - claimed)
                        and live == claimed
                    )

                await eventually(settled, within=120, what="no instance without a NodeClaim")
