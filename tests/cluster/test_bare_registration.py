"""A Node that registers bare is counted as the capacity it is (issue 17, fault 1).

The kwok provider registers each Node as a kubelet without ``--node-labels`` would
(``bare_nodes``): no ``karpenter.sh/nodepool``, none of the NodeClaim's labels. Registration copies
them over; until then the provisioner must judge the node by its NodeClaim, or pods that select
``karpenter.sh/nodepool`` look homeless and every round buys them another node. Before the fix,
8 such pods ended on 13 nodes.

The window between a Node's registration and its label sync is short on an idle control plane,
so the test holds it open. It plays the booting kubelets: each launched instance's Node is
registered once the launch has been written (:class:`BootLater`), and the controller's
registration patches wait (:class:`HeldRegistrations`) until provisioning rounds have run with
every Node bare and joined to its NodeClaim.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.kube import (
    DEPLOYMENTS,
    KWOKNODECLASSES,
    NODEPOOLS,
    NODES,
    KubeClient,
    load_kubeconfig,
)
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import Resource
from karpenter_py.manager.adapters import KubeNodeAPI
from karpenter_py.manager.app import App
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.labels import LABEL_NODE_REGISTERED
from tests.cluster.harness import (
    FIELD_MANAGER,
    claims_of,
    deployment,
    eventually,
    install_crds,
    is_true,
    kwok_nodeclass,
    namespace,
    running,
    running_pods,
    unique,
)
from tests.cluster.test_controller import clean_pool, pool_body, settings
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

N = 4
INSTANCE_TYPE = "c-2x-amd64-linux"  # 2 vCPU: one 1500m pod per node


class HeldRegistrations(KubeClient):
    """A client whose Node patches that register a node (set ``karpenter.sh/registered``) wait
    for :attr:`release`: the label sync made as slow as the test needs, nothing else changed."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.release = asyncio.Event()
        self.held: set[str] = set()

    async def patch(self, resource: Resource, name: str, patch: Any, **kw: Any) -> KubeObject:
        if resource == NODES and _registers(patch):
            self.held.add(name)
            await self.release.wait()
        return await super().patch(resource, name, patch, **kw)


class BootLater(KubeNodeAPI):
    """The kwok provider's Node API with each launched instance's Node kept back until
    :meth:`boot`: a kubelet registering after the launch returned, as real instances do. The
    instance exists meanwhile (``get_node`` answers with the Node it will register)."""

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.booting: dict[str, KubeObject] = {}

    async def create_node(self, body: KubeObject) -> KubeObject:
        self.booting[str(body["metadata"]["name"])] = body
        return body

    async def get_node(self, name: str) -> KubeObject | None:
        return self.booting.get(name) or await super().get_node(name)

    async def boot(self) -> None:
        for name, body in list(self.booting.items()):
            await super().create_node(body)
            del self.booting[name]


def _registers(patch: Any) -> bool:
    labels = patch.get("metadata", {}).get("labels") if isinstance(patch, dict) else None
    return isinstance(labels, dict) and labels.get(LABEL_NODE_REGISTERED) == "true"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[HeldRegistrations]:
    config = await asyncio.to_thread(load_kubeconfig, [cluster.kubeconfig_path])
    async with HeldRegistrations(config, qps=500, burst=1000) as c:
        await install_crds(c)
        await c.apply(KWOKNODECLASSES, kwok_nodeclass(), field_manager=FIELD_MANAGER)
        yield c


async def one_round(app: App) -> None:
    """Trigger a provisioning round and wait until one more has run."""
    seen = len(app.provisioner.rounds)
    app.provisioner.batcher.trigger("test")

    def ran() -> bool:
        return len(app.provisioner.rounds) > seen

    await eventually(ran, within=30, what="a provisioning round")


async def test_pods_for_a_pool_fill_the_nodes_that_registered_bare_and_no_more(
    client: HeldRegistrations,
) -> None:
    pool = unique("pool")
    await client.create(
        NODEPOOLS,
        pool_body(
            pool,
            requirements=[
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": [INSTANCE_TYPE],
                },
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            ],
        ),
    )
    kubelets = BootLater(client)
    provider = KwokCloudProvider(kubelets, kwok_catalog(), bare_nodes=True)
    app = App(settings(), client, cloud=provider)
    async with namespace(client) as ns:
        try:
            async with running(app):
                await client.create(
                    DEPLOYMENTS, deployment("web", ns, pool, replicas=N, cpu="1500m")
                )

                def launches_written() -> bool:
                    """Every instance launched and its NodeClaim's status write in the state."""
                    claims = [
                        nc
                        for nc in app.cluster.nodeclaims.values()
                        if nc.metadata.labels.get("karpenter.sh/nodepool") == pool
                    ]
                    return (
                        len(claims) == N
                        and all(nc.status.provider_id for nc in claims)
                        and len(kubelets.booting) == N
                    )

                await eventually(launches_written, within=60, what=f"{N} launches written")
                await kubelets.boot()

                def all_bare_and_joined() -> bool:
                    # Registration starts once the state holds the Node, joined to its claim by
                    # the provider ID the launch wrote.
                    return len(client.held) == N and all(
                        name in app.cluster.nodes for name in client.held
                    )

                await eventually(
                    all_bare_and_joined, within=60, what=f"{N} bare Nodes joined to their claims"
                )
                # Two rounds, so that one surely began after the join.
                for _ in range(2):
                    await one_round(app)
                client.release.set()

                async def all_running() -> bool:
                    return len(await running_pods(client, ns)) == N

                await eventually(all_running, within=90, what=f"{N} pods Running")
                assert len(await claims_of(client, pool)) == N  # no node bought twice

                async def claims_initialized() -> list[dict[str, Any]] | None:
                    # A pod runs once its node is registered; the claim's own status write
                    # (nodeName, Initialized) may land a moment later.
                    claims = await claims_of(client, pool)
                    return claims if all(is_true(nc, "Initialized") for nc in claims) else None

                claims = await eventually(
                    claims_initialized, within=30, what="the claims to report their nodes"
                )
                nodes = {
                    n["metadata"]["name"]: n["metadata"]["labels"]
                    for n in (
                        await client.list(NODES, label_selector=f"karpenter.sh/nodepool={pool}")
                    ).items
                }
            assert sorted(nodes) == sorted(nc["status"]["nodeName"] for nc in claims)
            # Registration copied every label of the NodeClaim onto its bare Node.
            for nc in claims:
                name = nc["status"]["nodeName"]
                assert nc["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
                assert nodes[name] == {
                    **nc["metadata"]["labels"],
                    "kubernetes.io/hostname": name,
                    "kwok.x-k8s.io/node": "fake",
                    # The control plane mirrors os and arch into the deprecated beta labels.
                    "beta.kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    LABEL_NODE_REGISTERED: "true",
                    "karpenter.sh/initialized": "true",
                }
        finally:
            client.release.set()
            await clean_pool(client, lambda: App(settings(), client), pool)
