"""NodePool readiness against the local control plane: conditions from the NodeClass the pool
references (KWOKNodeClass, watched by the harness), the hash annotations, and invalid pools."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpenter_py.aio.clock import RealClock
from karpenter_py.controllers.nodepool import NodePoolReadiness
from karpenter_py.kube import (
    KWOKNODECLASSES,
    NODECLAIMS,
    NODEPOOLS,
    KubeClient,
    NotFoundError,
    PatchType,
)
from karpenter_py.launcher.persist import nodepool_hash
from karpenter_py.model.api.nodepool import NodePool
from tests.cluster.harness import (
    FIELD_MANAGER,
    Harness,
    condition,
    eventually,
    get_or_none,
    kwok_nodeclass,
    nodeclaim,
    nodepool,
    prepared_client,
    unique,
)
from tests.clusterfixture import ClusterHandle
from tests.unit.fakes import deps

pytestmark = pytest.mark.cluster

HASH = "karpenter.sh/nodepool-hash"
HASH_VERSION = "karpenter.sh/nodepool-hash-version"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def wired(h: Harness) -> NodePoolReadiness:
    ctrl = NodePoolReadiness(deps(client=h.client, cluster=h.cluster, clock=RealClock()))
    h.on(NODEPOOLS, upsert=ctrl.on_nodepool)
    h.on(KWOKNODECLASSES, upsert=ctrl.on_nodeclass, delete=ctrl.on_nodeclass)
    return ctrl


def state(obj: dict[str, Any] | None, type_: str) -> tuple[str, str] | None:
    c = condition(obj, type_)
    return (c["status"], c["reason"]) if c is not None else None


async def wait_for(
    client: KubeClient, name: str, want: dict[str, tuple[str, str]], what: str
) -> dict[str, Any]:
    async def matches() -> dict[str, Any] | None:
        obj = await get_or_none(client, NODEPOOLS, name)
        ok = obj is not None and all(state(obj, t) == w for t, w in want.items())
        return obj if ok else None

    result: dict[str, Any] = await eventually(matches, within=30, what=what)
    return result


@contextlib.asynccontextmanager
async def deleted_on_exit(client: KubeClient, *names: str) -> AsyncIterator[None]:
    try:
        yield
    finally:
        for name in names:
            with contextlib.suppress(NotFoundError):
                await client.delete(KWOKNODECLASSES, name)


READY = {
    "ValidationSucceeded": ("True", "ValidationSucceeded"),
    "NodeClassReady": ("True", "NodeClassReady"),
    "Ready": ("True", "Ready"),
}
NOT_FOUND = {
    "ValidationSucceeded": ("True", "ValidationSucceeded"),
    "NodeClassReady": ("False", "NodeClassNotFound"),
    "Ready": ("False", "UnhealthyDependents"),
}


async def test_pool_with_existing_nodeclass_is_ready_and_hashed(client: KubeClient) -> None:
    h = Harness(client)
    ctrl = wired(h)
    pool = unique("pool")
    await client.create(NODEPOOLS, nodepool(pool, labels=h.labels()))
    async with h.running():
        h.spawn(ctrl.run())
        obj = await wait_for(client, pool, READY, "the NodePool to become Ready")
        ready = condition(obj, "Ready")
        assert ready is not None
        assert ready["message"] == ""
        assert ready["observedGeneration"] == obj["metadata"]["generation"]

        async def hashed() -> dict[str, Any] | None:
            o = await client.get(NODEPOOLS, pool)
            return o if HASH in o["metadata"].get("annotations", {}) else None

        obj = await eventually(hashed, within=30, what="the hash annotations")
        annotations = obj["metadata"]["annotations"]
        assert annotations[HASH] == nodepool_hash(NodePool.model_validate(obj))
        assert annotations[HASH_VERSION] == "v3"

        # Settled: no further writes (no API churn).
        rv = obj["metadata"]["resourceVersion"]
        await asyncio.sleep(1.5)
        assert (await client.get(NODEPOOLS, pool))["metadata"]["resourceVersion"] == rv

        # A template change moves the hash; conditions keep their transition times.
        await client.patch(
            NODEPOOLS,
            pool,
            {"spec": {"template": {"metadata": {"labels": {"team": "a"}}}}},
        )

        async def rehashed() -> dict[str, Any] | None:
            o = await client.get(NODEPOOLS, pool)
            want = nodepool_hash(NodePool.model_validate(o))
            gen = o["metadata"]["generation"]
            c = condition(o, "Ready")
            settled = c is not None and c["observedGeneration"] == gen
            return o if o["metadata"]["annotations"].get(HASH) == want and settled else None

        obj = await eventually(rehashed, within=30, what="the hash to follow the template")
        assert obj["metadata"]["annotations"][HASH] != annotations[HASH]
        after = condition(obj, "Ready")
        assert after is not None
        assert after["lastTransitionTime"] == ready["lastTransitionTime"]


async def test_old_hash_version_moves_nodeclaims_to_the_current_one(client: KubeClient) -> None:
    """Upstream's drift hash versioning: a pool still at an old hash version has its NodeClaims
    re-stamped with the current version and hash (a Drifted one keeps its hash) before its own
    annotations move."""
    h = Harness(client)
    ctrl = wired(h)
    pool = unique("pool")
    old = {HASH: "12345", HASH_VERSION: "v2"}
    np_obj = nodepool(pool, labels=h.labels())
    np_obj["metadata"]["annotations"] = dict(old)
    await client.create(NODEPOOLS, np_obj)
    fresh, drifted = unique("nc"), unique("nc")
    for name in (fresh, drifted):
        nc_obj = nodeclaim(name, pool, labels=h.labels(), finalizers=())
        nc_obj["metadata"]["annotations"] = dict(old)
        await client.create(NODECLAIMS, nc_obj)
    await client.patch(
        NODECLAIMS,
        drifted,
        {
            "status": {
                "conditions": [
                    {
                        "type": "Drifted",
                        "status": "True",
                        "reason": "NodePoolDrifted",
                        "message": "NodePoolDrifted",
                        "lastTransitionTime": "2025-01-01T00:00:00Z",
                    }
                ]
            }
        },
        patch_type=PatchType.MERGE,
        subresource="status",
    )
    async with h.running():
        h.spawn(ctrl.run())

        async def pool_current() -> dict[str, Any] | None:
            o = await client.get(NODEPOOLS, pool)
            return o if o["metadata"]["annotations"].get(HASH_VERSION) == "v3" else None

        obj = await eventually(pool_current, within=30, what="the pool at hash version v3")
        want = nodepool_hash(NodePool.model_validate(obj))
        assert obj["metadata"]["annotations"][HASH] == want
        # The claims were moved before the pool's version: no waiting needed.
        fresh_annotations = (await client.get(NODECLAIMS, fresh))["metadata"]["annotations"]
        drifted_annotations = (await client.get(NODECLAIMS, drifted))["metadata"]["annotations"]
        assert (fresh_annotations[HASH], fresh_annotations[HASH_VERSION]) == (want, "v3")
        assert (drifted_annotations[HASH], drifted_annotations[HASH_VERSION]) == ("12345", "v3")


async def test_missing_nodeclass_then_created_then_deleted(client: KubeClient) -> None:
    h = Harness(client)
    ctrl = wired(h)
    pool, nodeclass = unique("pool"), unique("nodeclass")
    await client.create(NODEPOOLS, nodepool(pool, nodeclass=nodeclass, labels=h.labels()))
    async with deleted_on_exit(client, nodeclass), h.running():
        h.spawn(ctrl.run())
        obj = await wait_for(client, pool, NOT_FOUND, "NodeClassReady=False (NodeClassNotFound)")
        nc_cond, ready = condition(obj, "NodeClassReady"), condition(obj, "Ready")
        assert nc_cond is not None
        assert ready is not None
        assert nodeclass in nc_cond["message"]
        assert ready["message"] == "NodeClassReady=False"
        validated = condition(obj, "ValidationSucceeded")
        assert validated is not None

        await client.apply(KWOKNODECLASSES, kwok_nodeclass(nodeclass), field_manager=FIELD_MANAGER)
        obj = await wait_for(client, pool, READY, "the NodePool to become Ready")
        assert condition(obj, "ValidationSucceeded") == validated  # untouched

        await client.delete(KWOKNODECLASSES, nodeclass)
        await wait_for(client, pool, NOT_FOUND, "NodeClassNotFound after the class is deleted")


async def test_invalid_pool_gets_validation_failed(client: KubeClient) -> None:
    h = Harness(client)
    ctrl = wired(h)
    pool = unique("pool")
    # The CRD's rules accept this label key; runtime validation (qualified names) does not.
    await client.create(
        NODEPOOLS, nodepool(pool, labels=h.labels(), template_labels={"a/b/c": "x"})
    )
    async with h.running():
        h.spawn(ctrl.run())
        obj = await wait_for(
            client,
            pool,
            {
                "ValidationSucceeded": ("False", "NodePoolValidationFailed"),
                "NodeClassReady": ("True", "NodeClassReady"),
                "Ready": ("False", "UnhealthyDependents"),
            },
            "ValidationSucceeded=False",
        )
        validated = condition(obj, "ValidationSucceeded")
        assert validated is not None
        assert "'a/b/c' is not a qualified name" in validated["message"]
        assert HASH not in obj["metadata"].get("annotations", {})

        # Fixing the template makes it valid, Ready and hashed.
        await client.patch(
            NODEPOOLS,
            pool,
            {"spec": {"template": {"metadata": {"labels": {"a/b/c": None, "team": "a"}}}}},
        )
        await wait_for(client, pool, READY, "the fixed NodePool to become Ready")

        async def hashed() -> bool:
            o = await client.get(NODEPOOLS, pool)
            return HASH in o["metadata"].get("annotations", {})

        await eventually(hashed, within=30, what="hash annotations on the fixed NodePool")
