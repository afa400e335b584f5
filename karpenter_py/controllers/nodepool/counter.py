"""``nodepool.counter``: keep each NodePool's ``status.resources`` and ``status.nodes`` current.

Upstream's pkg/controllers/nodepool/counter. ``status.resources`` is the summed capacity of the
pool's nodes and NodeClaims, as the provisioner charges them against ``limits`` (NodeClaims in
flight at their reserved or requested size), always listing cpu, memory, pods, ephemeral-storage and
``nodes`` (zero when empty); ``status.nodes`` (the scale subresource's replicas) counts them.
Users read these with ``kubectl get nodepool``; limits are enforced by the provisioner from the
same cluster state. Written through the status subresource, only when a value changed.

Wiring (manager): run :meth:`NodePoolCounter.run`; NodePool upserts -> :meth:`on_nodepool`;
NodeClaim and Node upserts and deletes -> :meth:`on_nodeclaim` / :meth:`on_node` (after the
``state`` sinks). Bursts coalesce in the work queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from karpenter_py.aio.clock import Clock
from karpenter_py.controllers.runtime import Result, WorkerMetrics, new_queue, run_workers
from karpenter_py.kube.client import KubeClient, PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODEPOOLS
from karpenter_py.model.labels import (
    LABEL_NODEPOOL,
    RESOURCE_CPU,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_MEMORY,
    RESOURCE_PODS,
)
from karpenter_py.model.quantity import QuantityError, format_resources, parse_resources
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.statenode import StateNode
from karpenter_py.state.usage import RESOURCE_NODES, nodepool_usage

log = logging.getLogger("karpenter.nodepool.counter")

BASE_RESOURCES = (RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_PODS, RESOURCE_EPHEMERAL_STORAGE)


def pool_usage(nodes: Iterable[StateNode], pool: str) -> dict[str, int]:
    """The pool's usage as the provisioner charges it (``state.usage.nodepool_usage``: nodes,
    launched NodeClaims at their capacity, NodeClaims in flight at their reserved or requested
    size), always listing the base resources and ``nodes``."""
    usage = dict.fromkeys((*BASE_RESOURCES, RESOURCE_NODES), 0)
    usage.update(nodepool_usage(sn for sn in nodes if sn.node_pool == pool).get(pool, {}))
    return usage


def status_patch(
    current: dict[str, str], nodes: int | None, usage: dict[str, int]
) -> KubeObject | None:
    """The status merge patch moving the stored values to ``usage``, or None when equal."""
    try:
        parsed = parse_resources(current)
    except QuantityError:
        parsed = {}
    if parsed == usage and nodes == usage[RESOURCE_NODES]:
        return None
    desired = format_resources(usage)
    resources: dict[str, Any] = dict(desired)
    resources.update({k: None for k in current if k not in desired})
    return {"status": {"resources": resources, "nodes": usage[RESOURCE_NODES]}}


class NodePoolCounter:
    name = "nodepool.counter"

    def __init__(
        self,
        client: KubeClient,
        cluster: Cluster,
        *,
        clock: Clock,
        workers: int = 4,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.clock = clock
        self.workers = workers
        self.metrics = metrics
        self.queue = new_queue(self.name)

    # ------------------------------------------------------------------ triggers (sync)
    def on_nodepool(self, obj: KubeObject) -> None:
        name = metadata(obj).get("name")
        if name:
            self.queue.add(str(name))

    def on_nodeclaim(self, obj: KubeObject) -> None:
        self._by_label(obj)

    def on_node(self, obj: KubeObject) -> None:
        self._by_label(obj)

    def _by_label(self, obj: KubeObject) -> None:
        pool = (metadata(obj).get("labels") or {}).get(LABEL_NODEPOOL)
        if pool:
            self.queue.add(str(pool))

    # ------------------------------------------------------------------ running
    async def run(self) -> None:
        # Counting before every informer has listed would publish too-small numbers.
        # (Cluster mutators are sync and signal nothing, hence a poll.)
        while True:
            if self.cluster.synced():
                break
            await asyncio.sleep(0.1)
        await run_workers(self, self.queue, workers=self.workers, metrics=self.metrics)

    async def reconcile(self, key: str) -> Result | None:
        np = self.cluster.nodepools.get(key)
        if np is None or np.metadata.deletion_timestamp is not None:
            return None
        usage = pool_usage(self.cluster.state_nodes(self.clock.now()), key)
        patch = status_patch(dict(np.status.resources), np.status.nodes, usage)
        if patch is None:
            return None
        try:
            await self.client.patch(
                NODEPOOLS, key, patch, patch_type=PatchType.MERGE, subresource="status"
            )
        except NotFoundError:
            return None
        return None
