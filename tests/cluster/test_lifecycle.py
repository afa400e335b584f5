"""NodeClaim lifecycle against the local control plane: launch, registration, initialization,
insufficient capacity and garbage collection, with the kwok provider writing real Nodes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpenter_py.kube import NODECLAIMS, NODEPOOLS, NODES, KubeClient, PatchType
from karpenter_py.kube.errors import ConflictError
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.labels import (
    FINALIZER_TERMINATION,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    LABEL_NODEPOOL,
    TAINT_UNREGISTERED_KEY,
)
from tests.cluster.harness import (
    Harness,
    condition,
    events_for,
    eventually,
    get_or_none,
    is_true,
    lifecycle_stack,
    nodeclaim,
    nodepool,
    prepared_client,
    unique,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

TEAM_TAINT = {"key": "example.com/team", "value": "a", "effect": "NoSchedule"}
STARTUP_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoExecute"}


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def taint_keys(node: dict[str, Any]) -> set[str]:
    return {t["key"] for t in node.get("spec", {}).get("taints") or []}


async def test_nodeclaim_launches_registers_and_initializes(client: KubeClient) -> None:
    h = Harness(client)
    stack = lifecycle_stack(h)
    pool = unique("pool")
    await client.create(NODEPOOLS, nodepool(pool, labels=h.labels()))
    name = unique("nc")
    async with h.running():
        stack.start()
        created = await client.create(
            NODECLAIMS,
            nodeclaim(
                name,
                pool,
                labels=h.labels(team="a"),
                taints=[TEAM_TAINT],
                startup_taints=[STARTUP_TAINT],
            ),
        )

        async def registered() -> dict[str, Any] | None:
            nc = await get_or_none(client, NODECLAIMS, name)
            return nc if is_true(nc, "Registered") else None

        nc = await eventually(registered, within=30, what="the NodeClaim to register")
        assert is_true(nc, "Launched")
        assert nc["status"]["providerID"] == f"kwok://{name}"
        assert nc["status"]["nodeName"] == name
        assert nc["status"]["capacity"]["cpu"] == "2"
        assert nc["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c-2x-amd64-linux"

        node = await client.get(NODES, name)
        meta = node["metadata"]
        assert FINALIZER_TERMINATION in meta["finalizers"]
        assert meta["labels"][LABEL_NODE_REGISTERED] == "true"
        assert meta["labels"]["team"] == "a"
        assert meta["labels"][LABEL_NODEPOOL] == pool
        owner = meta["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "NodeClaim",
            name,
            created["metadata"]["uid"],
        )
        keys = taint_keys(node)
        assert TAINT_UNREGISTERED_KEY not in keys
        assert {TEAM_TAINT["key"], STARTUP_TAINT["key"]} <= keys

        # kwok marks the node Ready, but the startup taint still holds initialization back.
        async def startup_taint_blocks() -> bool:
            c = condition(await client.get(NODECLAIMS, name), "Initialized")
            return c is not None and c["reason"] == "StartupTaintsExist"

        await eventually(startup_taint_blocks, within=30, what="Initialized=StartupTaintsExist")

        async def remove_startup_taint() -> bool:
            # kwok writes the Node's status meanwhile; an optimistic-lock conflict means read again.
            node = await client.get(NODES, name)
            taints = [t for t in node["spec"]["taints"] if t["key"] != STARTUP_TAINT["key"]]
            try:
                await client.patch(
                    NODES,
                    name,
                    {
                        "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                        "spec": {"taints": taints},
                    },
                    patch_type=PatchType.MERGE,
                )
            except ConflictError:
                return False
            return True

        await eventually(remove_startup_taint, within=10, what="the startup taint's removal")

        async def ready() -> dict[str, Any] | None:
            nc = await client.get(NODECLAIMS, name)
            return nc if is_true(nc, "Initialized") and is_true(nc, "Ready") else None

        await eventually(ready, within=30, what="the NodeClaim to become Ready")
        node = await client.get(NODES, name)
        assert node["metadata"]["labels"][LABEL_NODE_INITIALIZED] == "true"
        assert stack.launcher.creates == 1  # one CloudProvider.create for the NodeClaim's UID

        async def counted() -> dict[str, Any] | None:
            np = await client.get(NODEPOOLS, pool)
            status = np.get("status") or {}
            return status if status.get("nodes") == 1 else None

        status = await eventually(counted, within=30, what="NodePool status.nodes == 1")
        assert status["resources"]["cpu"] == "2"
        assert status["resources"]["nodes"] == "1"


async def test_insufficient_capacity_deletes_claim_and_marks_offering(client: KubeClient) -> None:
    h = Harness(client)
    stack = lifecycle_stack(h)
    offering = ("c-4x-amd64-linux", "test-zone-b", "spot")
    stack.provider.mark_unavailable(*offering)
    pool = unique("pool")
    name = unique("nc")
    async with h.running():
        stack.start()
        await client.create(
            NODECLAIMS,
            nodeclaim(
                name,
                pool,
                instance_type=offering[0],
                zone=offering[1],
                capacity_type=offering[2],
                labels=h.labels(),
            ),
        )

        async def gone() -> bool:
            return await get_or_none(client, NODECLAIMS, name) is None

        await eventually(gone, within=30, what="the NodeClaim to be deleted")
        assert await get_or_none(client, NODES, name) is None
        ice = stack.launcher.unavailable
        assert ice.is_unavailable(*offering)
        assert 0 < ice.entries()[offering] <= 180
        masked = {it.name: it for it in ice.apply(kwok_catalog())}[offering[0]]
        by_key = {(o.zone, o.capacity_type): o.available for o in masked.offerings}
        assert by_key[(offering[1], offering[2])] is False
        assert by_key[("test-zone-a", "spot")] is True

        async def event() -> list[Any]:
            return await events_for(client, name, "InsufficientCapacityError")

        events = await eventually(event, within=15, what="an InsufficientCapacityError event")
        assert events[0]["type"] == "Warning"


async def test_garbage_collection_removes_instances_without_nodeclaims(
    client: KubeClient,
) -> None:
    h = Harness(client)
    stack = lifecycle_stack(h, gc_interval=0.5, orphan_grace=1.0)
    pool = unique("pool")
    orphan = unique("orphan")
    async with h.running():
        stack.start()
        # An instance (kwok Node) launched for a NodeClaim that never made it to the API.
        claim = nodeclaim(orphan, pool, labels=h.labels())
        model = NodeClaim.model_validate({**claim, "metadata": {**claim["metadata"], "uid": "x"}})
        await stack.provider.create(model)
        assert await get_or_none(client, NODES, orphan) is not None

        async def orphan_gone() -> bool:
            return await get_or_none(client, NODES, orphan) is None

        await eventually(orphan_gone, within=30, what="the orphaned instance to be deleted")


async def test_many_nodeclaims_launch_concurrently_once_each(client: KubeClient) -> None:
    h = Harness(client)
    stack = lifecycle_stack(h, registration_delay=1.0)  # boot time: launches must overlap
    pool = unique("pool")
    names = [unique("nc") for _ in range(20)]
    async with h.running():
        stack.start()
        loop = asyncio.get_running_loop()
        started = loop.time()
        for name in names:
            await client.create(NODECLAIMS, nodeclaim(name, pool, labels=h.labels()))

        async def all_ready() -> bool:
            claims = (
                await client.list(NODECLAIMS, label_selector=f"{LABEL_NODEPOOL}={pool}")
            ).items
            return len(claims) == len(names) and all(is_true(c, "Ready") for c in claims)

        await eventually(all_ready, within=60, what="20 NodeClaims to become Ready")
        assert loop.time() - started < 20  # 20 x 1 s boots would take 20 s if serialised
        assert stack.launcher.creates == len(names)
        nodes = (await client.list(NODES, label_selector=f"{LABEL_NODEPOOL}={pool}")).items
        assert sorted(n["metadata"]["name"] for n in nodes) == sorted(names)
