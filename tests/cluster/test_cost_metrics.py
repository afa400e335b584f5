"""Cost as metrics on the local control plane: the whole controller prices the node it launched,
reports the empty node a zero budget keeps as a blocked saving, and drops the node's series once
emptiness removes it (after the budget is opened)."""

from __future__ import annotations

import pytest

from karpenter_py.kube import DEPLOYMENTS, NODEPOOLS, KubeClient, PatchType
from karpenter_py.manager.app import App
from tests.cluster.harness import claims_of, eventually, namespace, running, unique
from tests.cluster.test_disruption import (
    clean_pool,
    client,  # noqa: F401 (the fixture)
    deployment,
    names,
    nodes_of,
    pool_body,
    wait_running,
)
from tests.cluster.test_disruption import new_app as disruption_app

pytestmark = pytest.mark.cluster


def node_series(app: App, pool: str) -> dict[str, float]:
    """node name -> karpenter_nodes_hourly_price of the pool's nodes."""
    out = {}
    for family in app.metrics.registry.collect():
        for s in family.samples:
            if s.name == "karpenter_nodes_hourly_price" and s.labels["nodepool"] == pool:
                out[s.labels["node_name"]] = s.value
    return out


def sample(app: App, name: str, **labels: str) -> float | None:
    return app.metrics.registry.get_sample_value(name, labels)


async def test_node_prices_and_the_saving_a_budget_blocks(client: KubeClient) -> None:  # noqa: F811
    pool = unique("pool")
    await client.create(NODEPOOLS, pool_body(pool, budgets=[{"nodes": "0"}]))
    async with namespace(client) as ns:
        app = disruption_app(client)
        try:
            async with running(app):
                await client.create(DEPLOYMENTS, deployment("web", ns, pool))
                await wait_running(client, ns, 1)
                (node,) = await nodes_of(client, pool)
                name = node["metadata"]["name"]
                (claim,) = await claims_of(client, pool)
                await eventually(
                    lambda: name in node_series(app, pool),
                    within=30,
                    interval=0.5,
                    what="the node's price series",
                )
                price = node_series(app, pool)[name]
                labels = node["metadata"]["labels"]
                assert price > 0.0
                assert (
                    sample(
                        app,
                        "karpenter_nodes_hourly_price",
                        node_name=name,
                        nodepool=pool,
                        instance_type=labels["node.kubernetes.io/instance-type"],
                        capacity_type="on-demand",
                        zone=labels["topology.kubernetes.io/zone"],
                    )
                    == price
                )
                assert sample(app, "karpenter_nodepools_hourly_price", nodepool=pool) == price
                assert (
                    sample(
                        app,
                        "karpenter_cloudprovider_instance_type_offering_price_estimate",
                        instance_type=labels["node.kubernetes.io/instance-type"],
                        capacity_type="on-demand",
                        zone=labels["topology.kubernetes.io/zone"],
                    )
                    == price
                )

                # Empty and kept by the zero budget: its whole price is a blocked saving.
                await client.patch(
                    DEPLOYMENTS,
                    "web",
                    {"spec": {"replicas": 0}},
                    namespace=ns,
                    patch_type=PatchType.MERGE,
                )
                blocked = "karpenter_voluntary_disruption_blocked_savings_hourly"
                await eventually(
                    lambda: sample(app, blocked, reason="budget") == price,
                    within=30,
                    interval=0.5,
                    what="the blocked saving of the empty node",
                )
                assert names(await claims_of(client, pool)) == {claim["metadata"]["name"]}

                # The budget opens: emptiness deletes the node, its series goes, nothing blocked.
                await client.patch(
                    NODEPOOLS,
                    pool,
                    {"spec": {"disruption": {"budgets": [{"nodes": "100%"}]}}},
                    patch_type=PatchType.MERGE,
                )
                await eventually(
                    lambda: not node_series(app, pool),
                    within=60,
                    interval=0.5,
                    what="the node's price series removed",
                )
                assert sample(app, blocked, reason="budget") == 0.0
                assert sample(app, "karpenter_nodepools_hourly_price", nodepool=pool) is None
        finally:
            await clean_pool(client, pool, ns)
