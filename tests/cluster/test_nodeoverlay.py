"""NodeOverlay on the local control plane with the whole controller (gate NodeOverlay on).

A capacity overlay gives one instance type an extended resource a pod asks for, so the
controller launches that type instead of the cheapest one (the kwok provider launches the
cheapest type a NodeClaim allows, so a capacity overlay, which narrows the options, is what
shows on the launch). Two overlays of equal weight setting the same resource conflict: the one
later in the alphabet is applied, the other reports ``ValidationSucceeded=False`` (``Conflict``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpenter_py.kube import NODEOVERLAYS, NODEPOOLS, PODS, KubeClient, NotFoundError
from karpenter_py.manager.app import App
from tests import factories
from tests.cluster.harness import (
    claims_of,
    condition,
    eventually,
    namespace,
    prepared_client,
    running,
    unique,
)
from tests.cluster.test_controller import clean_pool, pool_body, settings
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

CHEAP, LARGER = "c-2x-amd64-linux", "c-4x-amd64-linux"
FUSE = "example.com/fuse"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def fuse_overlay(name: str, pool: str) -> dict[str, Any]:
    return factories.nodeoverlay_dict(
        name,
        weight=7,
        requirements=[
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [LARGER]},
        ],
        capacity={FUSE: 1},
    )


def fuse_pod(ns: str, pool: str) -> dict[str, Any]:
    requests = {"cpu": "250m", FUSE: "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "needs-fuse", "namespace": ns},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": pool},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "app",
                    "image": "pause",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
        },
    }


async def test_capacity_overlay_changes_the_launch_and_a_conflict_is_reported(
    client: KubeClient,
) -> None:
    pool = unique("overlay")
    first, second = f"{pool}-a", f"{pool}-b"
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [CHEAP, LARGER]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    await client.create(NODEPOOLS, pool_body(pool, requirements=requirements))
    app_settings = settings(FEATURE_GATES="NodeOverlay=true")
    try:
        for name in (first, second):
            await client.create(NODEOVERLAYS, fuse_overlay(name, pool))
        async with namespace(client) as ns, running(App(app_settings, client)):

            async def validation(name: str) -> tuple[str, str] | None:
                got = await client.get(NODEOVERLAYS, name)
                cond = condition(got, "ValidationSucceeded")
                return (cond["status"], cond["reason"]) if cond else None

            assert await eventually(
                lambda: validation(first), within=60, what="the conflict on the overlay"
            ) == ("False", "Conflict")
            assert await eventually(
                lambda: validation(second), within=30, what="the applied overlay's condition"
            ) == ("True", "ValidationSucceeded")
            ready = condition(await client.get(NODEOVERLAYS, first), "Ready")
            assert ready is not None
            assert (ready["status"], ready["reason"], ready["message"]) == (
                "False",
                "UnhealthyDependents",
                "ValidationSucceeded=False",
            )

            await client.create(PODS, fuse_pod(ns, pool))

            async def launched() -> list[dict[str, Any]] | None:
                claims = await claims_of(client, pool)
                typed = all(
                    nc["metadata"].get("labels", {}).get("node.kubernetes.io/instance-type")
                    for nc in claims
                )
                return claims if claims and typed else None

            claims = await eventually(launched, within=90, what="a NodeClaim launched")
            # The kwok node has no fuse to offer, so the pod stays pending: stop it asking (its
            # empty node may then go at once: the claims were read above).
            await client.delete(PODS, "needs-fuse", namespace=ns)
            types = {nc["metadata"]["labels"]["node.kubernetes.io/instance-type"] for nc in claims}
            assert types == {LARGER}
            claim = claims[0]
            assert claim["spec"]["resources"]["requests"][FUSE] == "1"
            annotations = claim["metadata"]["annotations"]
            assert annotations.get("karpenter.sh/capacity-overlay-applied") == "true"
            assert "karpenter.sh/price-overlay-applied" not in annotations
    finally:
        for name in (first, second):
            with contextlib.suppress(NotFoundError):
                await client.delete(NODEOVERLAYS, name)
        await clean_pool(client, lambda: App(app_settings, client), pool)
