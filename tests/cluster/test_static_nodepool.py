"""Static NodePools (``spec.replicas``, gate StaticCapacity) with the whole controller against the
local control plane: a pool reaches its replicas with no pod, scaling it down through the scale
subresource (what ``kubectl scale nodepool`` sends) removes NodeClaims, the apiserver refuses to
remove ``replicas``, and with the gate off (upstream's default) the pool launches nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpenter_py.kube import NODEPOOLS, InvalidError, KubeClient, PatchType
from karpenter_py.manager.app import App
from tests.cluster.harness import (
    claims_of,
    eventually,
    force_delete_pool,
    nodepool,
    prepared_client,
    running,
    unique,
)
from tests.cluster.test_controller import clean_pool, settings
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

GATE_ON = {"FEATURE_GATES": "StaticCapacity=true"}
C2 = "c-2x-amd64-linux"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def static_pool(name: str, replicas: int, limit: str | None = None) -> dict[str, Any]:
    body = nodepool(
        name,
        requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [C2]}
        ],
        limits={"nodes": limit} if limit is not None else None,
    )
    body["spec"]["replicas"] = replicas
    return body


def alive(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in claims if not c["metadata"].get("deletionTimestamp")]


async def wait_claims(client: KubeClient, pool: str, n: int, what: str) -> list[dict[str, Any]]:
    """Until the pool has exactly ``n`` NodeClaims, none being deleted."""

    async def settled() -> list[dict[str, Any]] | None:
        claims = await claims_of(client, pool)
        return claims if len(claims) == n and len(alive(claims)) == n else None

    result: list[dict[str, Any]] = await eventually(settled, within=90, what=what)
    return result


async def test_a_static_pool_keeps_its_replicas_and_scales_down_through_the_scale_subresource(
    client: KubeClient,
) -> None:
    pool = unique("static")
    await client.create(NODEPOOLS, static_pool(pool, 3, limit="4"))
    try:
        async with running(App(settings(**GATE_ON), client)):
            claims = await wait_claims(client, pool, 3, "3 NodeClaims with no pod")
            assert sorted(
                c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims
            ) == [
                C2,
                C2,
                C2,
            ]

            async def counted() -> dict[str, Any] | None:
                scale = await client.get(NODEPOOLS, pool, subresource="scale")
                return scale if scale["status"].get("replicas") == 3 else None

            scale = await eventually(counted, within=30, what="status.nodes to read 3")
            assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 3)

            # kubectl scale nodepool <pool> --replicas=1
            await client.patch(
                NODEPOOLS,
                pool,
                {"spec": {"replicas": 1}},
                patch_type=PatchType.MERGE,
                subresource="scale",
            )
            kept = await wait_claims(client, pool, 1, "scale-down to 1 NodeClaim")
            assert {c["metadata"]["name"] for c in kept} < {c["metadata"]["name"] for c in claims}
            # Settled: nothing launches back.
            await asyncio.sleep(2.0)
            assert [c["metadata"]["name"] for c in await claims_of(client, pool)] == [
                c["metadata"]["name"] for c in kept
            ]
    finally:
        await clean_pool(client, lambda: App(settings(**GATE_ON), client), pool)


async def test_replicas_stay_within_limits_nodes(client: KubeClient) -> None:
    pool = unique("static")
    await client.create(NODEPOOLS, static_pool(pool, 3, limit="2"))
    try:
        async with running(App(settings(**GATE_ON), client)):
            await wait_claims(client, pool, 2, "2 NodeClaims (limits.nodes 2)")
            await asyncio.sleep(2.0)
            assert len(await claims_of(client, pool)) == 2
    finally:
        await clean_pool(client, lambda: App(settings(**GATE_ON), client), pool)


async def test_gate_off_a_static_pool_launches_nothing(client: KubeClient) -> None:
    pool = unique("static")
    await client.create(NODEPOOLS, static_pool(pool, 2))
    try:
        async with running(App(settings(), client)):

            async def ready() -> bool:
                obj = await client.get(NODEPOOLS, pool)
                return any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in (obj.get("status") or {}).get("conditions", [])
                )

            await eventually(ready, within=30, what="the pool to be Ready")
            await asyncio.sleep(3.0)
            assert await claims_of(client, pool) == []
    finally:
        await force_delete_pool(client, pool)


async def test_the_apiserver_refuses_to_remove_replicas_or_add_weight(client: KubeClient) -> None:
    pool = unique("static")
    await client.create(NODEPOOLS, static_pool(pool, 2))
    try:
        with pytest.raises(InvalidError) as removed:
            await client.patch(NODEPOOLS, pool, {"spec": {"replicas": None}})
        assert (
            "Cannot transition NodePool between static (replicas set) and dynamic "
            "(replicas unset) provisioning modes"
        ) in str(removed.value)
        with pytest.raises(InvalidError) as weighted:
            await client.patch(NODEPOOLS, pool, {"spec": {"weight": 10}})
        assert "'weight' is not supported on static NodePools" in str(weighted.value)
        with pytest.raises(InvalidError) as limited:
            await client.patch(NODEPOOLS, pool, {"spec": {"limits": {"cpu": "10"}}})
        assert "only 'limits.nodes' is supported on static NodePools" in str(limited.value)
        assert (await client.get(NODEPOOLS, pool))["spec"]["replicas"] == 2
    finally:
        await force_delete_pool(client, pool)


async def test_drift_replaces_static_nodes_one_at_a_time_within_limits_nodes(
    client: KubeClient,
) -> None:
    pool = unique("static")
    body = static_pool(pool, 2, limit="3")
    body["spec"]["disruption"] = {"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}
    await client.create(NODEPOOLS, body)
    app = App(settings(**GATE_ON), client)
    try:
        async with running(app):
            old = {
                c["metadata"]["name"] for c in await wait_claims(client, pool, 2, "2 NodeClaims")
            }

            async def initialized() -> bool:
                claims = await claims_of(client, pool)
                return all(
                    any(
                        c["type"] == "Initialized" and c["status"] == "True"
                        for c in (nc.get("status") or {}).get("conditions", [])
                    )
                    for nc in claims
                )

            await eventually(initialized, within=60, what="both NodeClaims initialized")
            await client.patch(
                NODEPOOLS,
                pool,
                {"spec": {"template": {"metadata": {"labels": {"app-version": "2"}}}}},
                patch_type=PatchType.MERGE,
            )
            most = 0

            async def replaced() -> bool:
                nonlocal most
                claims = await claims_of(client, pool)
                most = max(most, len(claims))
                live = alive(claims)
                return (
                    len(claims) == 2
                    and not {c["metadata"]["name"] for c in claims} & old
                    and all(c["metadata"]["labels"].get("app-version") == "2" for c in live)
                )

            await eventually(replaced, within=150, interval=0.2, what="both nodes replaced")
            history = list(app.disruption.queue.history)
            assert [(e.command.method.name, e.outcome.value) for e in history] == [
                ("static-drift", "Succeeded"),
                ("static-drift", "Succeeded"),
            ]
            assert [(len(e.command.candidates), len(e.replacements)) for e in history] == [
                (1, 1),
                (1, 1),
            ]
            assert {n for e in history for n in e.deleted} == old
            # Never more than limits.nodes NodeClaims at once, replacements included.
            assert most == 3
    finally:
        await clean_pool(client, lambda: App(settings(**GATE_ON), client), pool)
