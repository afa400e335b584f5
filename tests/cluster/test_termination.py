"""Termination against the local control plane: deleting a NodeClaim (or its Node) drains the
node through the Eviction API, honours PodDisruptionBudgets and do-not-disrupt pods until the
termination grace period, deletes the instance and releases both finalizers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from karpenter_py.kube import (
    NODECLAIMS,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    KubeClient,
    PatchType,
    Resource,
)
from karpenter_py.model.labels import (
    ANNOTATION_DO_NOT_DISRUPT,
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP,
    LABEL_NODE_EXCLUDE_FROM_LB,
    TAINT_DISRUPTED_KEY,
)
from karpenter_py.obs.metrics import Metrics
from tests.cluster.harness import (
    Harness,
    Stack,
    events_for,
    eventually,
    get_or_none,
    is_true,
    lifecycle_stack,
    namespace,
    nodeclaim,
    pdb,
    pod,
    prepared_client,
    unique,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster


@dataclass
class Env:
    client: KubeClient
    harness: Harness
    stack: Stack
    ns: str
    metrics: Metrics


@pytest.fixture
async def env(cluster: ClusterHandle) -> AsyncIterator[Env]:
    async with prepared_client(cluster) as client, namespace(client, "karpy-term") as ns:
        h = Harness(client)
        metrics = Metrics()
        stack = lifecycle_stack(h, metrics=metrics)
        async with h.running():
            stack.start()
            yield Env(client, h, stack, ns, metrics)


async def ready_node(env: Env, *, tgp: str | None = None) -> str:
    """A NodeClaim launched, registered and initialized; returns its (= its Node's) name."""
    name = unique("nc")
    await env.client.create(
        NODECLAIMS,
        nodeclaim(name, "term", labels=env.harness.labels(), termination_grace_period=tgp),
    )

    async def ready() -> bool:
        return is_true(await get_or_none(env.client, NODECLAIMS, name), "Ready")

    await eventually(ready, within=30, what=f"nodeclaim {name} to become Ready")
    return name


async def running_pod(env: Env, node: str, **kw: Any) -> str:
    name = unique("p")
    await env.client.create(PODS, pod(name, node, **kw), namespace=env.ns)

    async def running() -> bool:
        p = await get_or_none(env.client, PODS, name, env.ns)
        return p is not None and (p.get("status") or {}).get("phase") == "Running"

    await eventually(running, within=30, what=f"pod {name} to run")
    return name


async def gone(env: Env, *objs: tuple[Resource, str, str | None], within: float = 60) -> None:
    async def all_gone() -> bool:
        for resource, name, ns in objs:
            if await get_or_none(env.client, resource, name, ns) is not None:
                return False
        return True

    await eventually(all_gone, within=within, what=f"{[o[1] for o in objs]} to be deleted")


async def test_deleting_a_nodeclaim_drains_and_removes_its_node(env: Env) -> None:
    name = await ready_node(env)
    workload = await running_pod(env, name)
    tolerant = unique("tolerant")
    body = pod(tolerant, name)
    body["spec"]["tolerations"] = [{"key": TAINT_DISRUPTED_KEY, "operator": "Exists"}]
    await env.client.create(PODS, body, namespace=env.ns)

    await env.client.delete(NODECLAIMS, name)

    async def cordoned() -> bool:
        node = await get_or_none(env.client, NODES, name)
        if node is None:
            return True  # already through: the cordon was transient
        labels = node["metadata"].get("labels") or {}
        taints = node["spec"].get("taints") or []
        return labels.get(LABEL_NODE_EXCLUDE_FROM_LB) == "karpenter" and any(
            t["key"] == TAINT_DISRUPTED_KEY and t["effect"] == "NoSchedule" for t in taints
        )

    await eventually(cordoned, within=30, what="the node to be tainted karpenter.sh/disrupted")
    await gone(env, (PODS, workload, env.ns), (NODES, name, None), (NODECLAIMS, name, None))
    assert await events_for(env.client, workload, "Evicted")
    text = env.metrics.render()[0].decode()
    for line in (
        'karpenter_nodes_created_total{nodepool="term",zone="test-zone-a"} 1.0',
        'karpenter_nodes_drained_total{nodepool="term"} 1.0',
        'karpenter_nodes_terminated_total{nodepool="term",zone="test-zone-a"} 1.0',
        'karpenter_nodeclaims_terminated_total{capacity_type="on-demand",nodepool="term",zone="test-zone-a"} 1.0',
        'karpenter_pods_eviction_requests_total{code="200"} 1.0',
    ):
        assert line in text, line


async def test_deleting_the_node_takes_the_same_path(env: Env) -> None:
    name = await ready_node(env)
    workload = await running_pod(env, name)
    await env.client.delete(NODES, name)
    await gone(env, (PODS, workload, env.ns), (NODES, name, None), (NODECLAIMS, name, None))


async def test_pdb_without_budget_blocks_drain_until_it_allows(env: Env) -> None:
    name = await ready_node(env)
    guarded = await running_pod(env, name, labels={"app": "guarded"})
    budget = unique("pdb")
    await env.client.create(
        PODDISRUPTIONBUDGETS, pdb(budget, {"app": "guarded"}, min_available=1), namespace=env.ns
    )

    async def budget_observed() -> bool:
        p = await env.client.get(PODDISRUPTIONBUDGETS, budget, namespace=env.ns)
        status = p.get("status") or {}
        return status.get("expectedPods") == 1 and status.get("disruptionsAllowed") == 0

    await eventually(budget_observed, within=30, what="the PDB status to be computed")

    await env.client.delete(NODECLAIMS, name)

    async def refused() -> list[Any]:
        return await events_for(env.client, name, "FailedDraining")

    await eventually(refused, within=30, what="a FailedDraining event on the node")
    await asyncio.sleep(3)  # retries keep being refused meanwhile
    p = await env.client.get(PODS, guarded, namespace=env.ns)
    assert "deletionTimestamp" not in p["metadata"], "the PDB must hold the pod"
    node = await env.client.get(NODES, name)
    assert node["metadata"].get("deletionTimestamp")

    await env.client.patch(
        PODDISRUPTIONBUDGETS,
        budget,
        {"spec": {"minAvailable": 0}},
        namespace=env.ns,
        patch_type=PatchType.MERGE,
    )
    await gone(env, (PODS, guarded, env.ns), (NODES, name, None), (NODECLAIMS, name, None))


async def test_do_not_disrupt_pod_blocks_drain_until_the_grace_period(env: Env) -> None:
    name = await ready_node(env, tgp="20s")
    protected = await running_pod(
        env,
        name,
        annotations={ANNOTATION_DO_NOT_DISRUPT: "true"},
        termination_grace_period_seconds=5,
    )
    other = await running_pod(env, name)
    loop = asyncio.get_running_loop()
    await env.client.delete(NODECLAIMS, name)
    deleted_at = loop.time()

    async def stamped() -> bool:
        nc = await get_or_none(env.client, NODECLAIMS, name)
        return nc is not None and ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP in (
            nc["metadata"].get("annotations") or {}
        )

    await eventually(stamped, within=10, what="the termination timestamp annotation")
    # The ordinary pod is evicted; the protected one stays although it is in the same group.
    await gone(env, (PODS, other, env.ns), within=20)
    await asyncio.sleep(max(0.0, 8 - (loop.time() - deleted_at)))
    p = await env.client.get(PODS, protected, namespace=env.ns)
    assert "deletionTimestamp" not in p["metadata"], "do-not-disrupt must hold the pod before TGP"
    assert await get_or_none(env.client, NODES, name) is not None

    # deadline - 5 s (the pod's own grace period) ~ 15 s after deletion: forced delete, then done.
    await gone(env, (PODS, protected, env.ns), (NODES, name, None), (NODECLAIMS, name, None))
    assert loop.time() - deleted_at >= 12
    assert await events_for(env.client, protected, "Disrupted")
