"""Node repair (feature gate ``NodeRepair``) end to end: the whole controller (``manager.App``,
kwok provider) on the local control plane.

A Node is made unhealthy as a dead kubelet leaves it: kwok stops playing its kubelet (the
``kwok.x-k8s.io/node`` annotation is removed, or kwok would mark it Ready again at once) and its
Ready condition is written False with a lastTransitionTime 31 minutes ago, past the kwok
provider's 30 minute toleration. The pools allow no voluntary disruption (budget 0), which
repair, being forceful, ignores.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from karpenter_py.kube import DEPLOYMENTS, NODECLAIMS, NODEPOOLS, NODES, KubeClient, PatchType
from karpenter_py.manager.app import App
from karpenter_py.manager.settings import FeatureGates
from karpenter_py.model.api.base import format_time
from tests.cluster.harness import (
    claims_of,
    events_for,
    eventually,
    get_or_none,
    is_true,
    namespace,
    prepared_client,
    running,
    running_pods,
    unique,
)
from tests.cluster.test_disruption import (
    clean_pool,
    deployment,
    nodes_of,
    pool_body,
    settings,
    wait_running,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

STAMP = "karpenter.sh/nodeclaim-termination-timestamp"
NO_VOLUNTARY_DISRUPTION = [{"nodes": "0"}]
BLOCKED = "NodeRepairBlocked"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def repair_app(client: KubeClient) -> App:
    s = settings()
    return App(s.model_copy(update={"feature_gates": FeatureGates(node_repair=True)}), client)


async def break_node(client: KubeClient, name: str, minutes: float = 31) -> None:
    """Leave the Node as a dead kubelet does: nobody renews it, Ready=False for ``minutes``."""
    await client.patch(
        NODES,
        name,
        {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}}},
        patch_type=PatchType.MERGE,
    )
    now = datetime.now(UTC)
    ready = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "test: the kubelet stopped posting status",
        "lastHeartbeatTime": format_time(now),
        "lastTransitionTime": format_time(now - timedelta(minutes=minutes)),
    }
    await client.patch(
        NODES,
        name,
        {"status": {"conditions": [ready]}},
        patch_type=PatchType.MERGE,
        subresource="status",
    )


def node_name(claim: dict[str, Any]) -> str:
    return str(claim["status"]["nodeName"])


async def test_an_unhealthy_node_is_force_terminated_and_its_pods_get_a_new_node(
    client: KubeClient,
) -> None:
    pool = unique("pool")
    await client.create(NODEPOOLS, pool_body(pool, budgets=NO_VOLUNTARY_DISRUPTION))
    async with namespace(client) as ns:
        try:
            app = repair_app(client)
            async with running(app):
                await client.create(DEPLOYMENTS, deployment("web", ns, pool))
                await wait_running(client, ns, 1)

                async def initialized() -> list[dict[str, Any]]:
                    claims = await claims_of(client, pool)
                    return claims if [is_true(c, "Initialized") for c in claims] == [True] else []

                (broken,) = await eventually(initialized, within=30, what="one initialized claim")
                broken_node = node_name(broken)
                await break_node(client, broken_node)
                broken_since = ready_since(await client.get(NODES, broken_node))

                async def replaced() -> list[dict[str, Any]]:
                    others = [
                        c
                        for c in await claims_of(client, pool)
                        if c["metadata"]["name"] != broken["metadata"]["name"]
                    ]
                    if [is_true(c, "Initialized") for c in others] != [True]:
                        return []
                    pods = await running_pods(client, ns)
                    on = [p["spec"].get("nodeName") for p in pods]
                    return others if on == [node_name(others[0])] else []

                (replacement,) = await eventually(
                    replaced, within=60, interval=0.5, what="a new claim running the pod"
                )
                assert node_name(replacement) != broken_node

                # Force-terminated: the deadline was set to the moment of the repair, so the
                # pod that could never leave the dead node did not hold the NodeClaim back.
                async def broken_gone() -> bool:
                    name = broken["metadata"]["name"]
                    return await get_or_none(client, NODECLAIMS, name) is None

                await eventually(broken_gone, within=150, interval=1.0, what="the broken claim")
                disrupted = await eventually(
                    partial(kind_events, client, broken["metadata"]["name"], "Disrupted", 1),
                    within=10,
                    what="the Disrupted event",
                )
                assert disrupted == [
                    (
                        "NodeClaim",
                        f"Disrupting NodeClaim: Unhealthy (Ready=False since {broken_since}, "
                        "past its toleration)",
                    )
                ]
                assert [n["metadata"]["name"] for n in await nodes_of(client, pool)] == [
                    node_name(replacement)
                ]
                registry = app.metrics.registry
                labels = {"nodepool": pool, "capacity_type": "on-demand"}
                assert (
                    registry.get_sample_value(
                        "karpenter_nodeclaims_disrupted_total", {"reason": "unhealthy", **labels}
                    )
                    == 1.0
                )
                assert (
                    registry.get_sample_value(
                        "karpenter_nodeclaims_unhealthy_disrupted_total",
                        {"condition": "ready", "image_id": "", **labels},
                    )
                    == 1.0
                )
        finally:
            await clean_pool(client, pool, ns)


async def test_repair_stops_when_too_much_of_the_pool_is_unhealthy(client: KubeClient) -> None:
    pool = unique("pool")
    body = pool_body(pool, budgets=NO_VOLUNTARY_DISRUPTION, instance_types=["c-4x-amd64-linux"])
    await client.create(NODEPOOLS, body)
    async with namespace(client) as ns:
        try:
            app = repair_app(client)
            async with running(app):
                # Three cpus each: one pod per 4-cpu node, two nodes.
                await client.create(DEPLOYMENTS, deployment("web", ns, pool, replicas=2, cpu="3"))
                await wait_running(client, ns, 2)
                claims = await claims_of(client, pool)
                assert len(claims) == 2
                # Both unhealthy within their toleration first, so that neither is due while
                # the other still looks healthy (1 of 2 is within the threshold).
                for claim in claims:
                    await break_node(client, node_name(claim), minutes=1)

                def both_waiting() -> bool:
                    report = app.disruption_report()["repair"]["nodes"]
                    actions = {n: report[n]["action"] for n in report}
                    return actions == {node_name(c): "wait" for c in claims}

                await eventually(both_waiting, within=10, what="both nodes seen unhealthy")
                for claim in claims:
                    await break_node(client, node_name(claim))

                # Two of two unhealthy: more than 20% of 2 rounded up (1). The event is on the
                # Node, its NodeClaim (kwok names both alike) and the NodePool.
                messages: list[str] = []
                for claim in claims:
                    name = node_name(claim)
                    message = (
                        f"Node {name}: Ready=False since "
                        f"{ready_since(await client.get(NODES, name))}; repair blocked: "
                        f'2 of 2 nodes in NodePool "{pool}" are unhealthy, more than the 20% (1) '
                        "node repair allows"
                    )
                    events = await eventually(
                        partial(kind_events, client, name, BLOCKED, 2, "Warning"),
                        within=30,
                        what=f"NodeRepairBlocked on {name}",
                    )
                    assert events == [("Node", message), ("NodeClaim", message)]
                    messages.append(message)
                pool_events = await eventually(
                    partial(kind_events, client, pool, BLOCKED, 2, "Warning"),
                    within=30,
                    what="the pool's events",
                )
                assert pool_events == sorted(("NodePool", m) for m in messages)  # one per node
                report = app.disruption_report()["repair"]["nodes"]
                assert {n: report[n]["action"] for n in report} == {
                    node_name(c): "blocked" for c in claims
                }
                after = await claims_of(client, pool)
                assert sorted(c["metadata"]["name"] for c in after) == sorted(
                    c["metadata"]["name"] for c in claims
                )
                assert [c["metadata"].get("deletionTimestamp") for c in after] == [None, None]
                assert [STAMP in c["metadata"].get("annotations", {}) for c in after] == [
                    False,
                    False,
                ]
                assert (
                    app.metrics.registry.get_sample_value(
                        "karpenter_nodeclaims_disrupted_total",
                        {"reason": "unhealthy", "nodepool": pool, "capacity_type": "on-demand"},
                    )
                    is None
                )
        finally:
            await clean_pool(client, pool, ns)


def ready_since(node: dict[str, Any]) -> str:
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    return str(ready[0]["lastTransitionTime"])


async def kind_events(
    client: KubeClient, name: str, reason: str, expect: int, type_: str = "Normal"
) -> list[tuple[str, str]]:
    """(kind, message) of the ``reason`` events of type ``type_`` about objects called ``name``,
    by kind; [] until there are ``expect`` of them."""
    events = sorted(
        (e["involvedObject"]["kind"], e["message"])
        for e in await events_for(client, name, reason)
        if e["type"] == type_
    )
    return events if len(events) == expect else []
