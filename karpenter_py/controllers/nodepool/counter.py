"""``nodepool.counter``: keep each NodePool's ``status.resources`` and ``status.nodes`` current.

Upstream's pkg/controllers/nodepool/counter. ``status.resources`` is the summed capacity of the
pool's nodes and NodeClaims, as the provisioner charges them against ``limits`` (NodeClaims in
flight at their reserved or requested size), always listing cpu, memory, pods, ephemeral-storage and
``nodes`` (zero when empty); ``status.nodes`` (the scale subresource's replicas) counts them.
Users read these with ``kubectl get nodepool``; limits are enforced by the provisioner from the
same cluster state. Written through the status subresource, only when a value changed.

Woken by NodePool upserts, and by NodeClaim and Node upserts and deletes (the pool in their
``karpenter.sh/nodepool`` label); see :meth:`NodePoolCounter.watches`. Bursts coalesce in the
work queue. Counting waits for the cluster state to sync: before that it would publish
too-small numbers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from karpenter_py.controllers.runtime import QueueController, Result, Watch
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODEPOOLS, NODES
from karpenter_py.model.labels import (
    LABEL_NODEPOOL,
    RESOURCE_CPU,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_MEMORY,
    RESOURCE_PODS,
)
from karpenter_py.model.quantity import QuantityError, format_resources, parse_resources
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


class NodePoolCounter(QueueController):
    name = "nodepool.counter"
    default_workers = 4

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(NODEPOOLS, upsert=self.on_nodepool),
            Watch(NODECLAIMS, upsert=self.on_nodeclaim, delete=self.on_nodeclaim),
            Watch(NODES, upsert=self.on_node, delete=self.on_node),
        )

    on_nodepool = QueueController.enqueue

    def on_member(self, obj: KubeObject) -> None:
        """A NodeClaim or Node came, changed or went: recount the pool it is labelled with."""
        pool = (metadata(obj).get("labels") or {}).get(LABEL_NODEPOOL)
        if pool:
            self.queue.add(str(pool))

    on_nodeclaim = on_node = on_member

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        np = self.deps.cluster.nodepools.get(key)
        if np is None or np.metadata.deletion_timestamp is not None:
            return None
        usage = pool_usage(self.deps.cluster.state_nodes(self.deps.clock.now()), key)
        patch = status_patch(dict(np.status.resources), np.status.nodes, usage)
        if patch is None:
            return None
        try:
            await self.deps.client.patch(
                NODEPOOLS, key, patch, patch_type=PatchType.MERGE, subresource="status"
            )
        except NotFoundError:
            return None
        return None
