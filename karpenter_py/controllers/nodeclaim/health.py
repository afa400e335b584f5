"""``node.health``: the NodeClaim of a Node unhealthy past its toleration is force-terminated.

Upstream's node repair (pkg/controllers/node/health), on only with the ``NodeRepair`` feature
gate. The cloud provider's repair policies say which Node conditions are unhealthy and for how
long each is tolerated; :mod:`~karpenter_py.controllers.nodeclaim.repair` decides. Once a repair
is due:

1. the NodeClaim's ``karpenter.sh/nodeclaim-termination-timestamp`` is set to now (kept if it is
   already earlier), so termination deletes its pods without waiting for PDBs or
   ``do-not-disrupt``, as at the end of a terminationGracePeriod;
2. the NodeClaim is deleted (unless it is being deleted already), counted in
   ``karpenter_nodeclaims_disrupted_total{reason="unhealthy"}`` and
   ``karpenter_nodeclaims_unhealthy_disrupted_total{condition,...}``; no replacement is launched
   first: provisioning reacts to the pods the drain sends back, as for expiration.

A due repair blocked by the unhealthy threshold publishes ``NodeRepairBlocked`` (Warning) on the
Node, its NodeClaim and its NodePool, de-duplicated for 15 minutes per object as upstream's, and
is retried every 5 minutes. A Node still within its toleration is requeued for the moment it runs
out, so nothing polls. Nodes without a NodeClaim are not Karpenter's and never repaired.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Final

from karpenter_py.controllers.nodeclaim.common import delete_nodeclaim, nodeclaim_ref, nodepool_of
from karpenter_py.controllers.nodeclaim.repair import (
    BLOCKED_RETRY_SECONDS,
    Action,
    Health,
    Match,
    Verdict,
    decide,
    describe,
    health_of,
    is_unhealthy,
    verdict_report,
)
from karpenter_py.controllers.runtime import Deps, QueueController, Result, Watch, name_of
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.events import WARNING, Reason, object_ref
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import NODECLAIMS, NODES
from karpenter_py.model.api.base import format_time, parse_time
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import API_VERSION as NODEPOOL_API_VERSION
from karpenter_py.model.api.nodepool import KIND as NODEPOOL_KIND
from karpenter_py.model.core import Node
from karpenter_py.model.labels import (
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP,
    LABEL_CAPACITY_TYPE,
    LABEL_NODEPOOL,
)

log = logging.getLogger("karpenter.node.health")

REASON_UNHEALTHY: Final = "unhealthy"  # karpenter_nodeclaims_disrupted_total's reason label
BLOCKED_DEDUPE_SECONDS: Final = 15 * 60.0


class NodeHealth(QueueController):
    name = "node.health"

    def __init__(self, deps: Deps, *, workers: int | None = None) -> None:
        super().__init__(deps, workers=workers)
        self.policies = tuple(deps.cloud.repair_policies())

    def watches(self) -> Sequence[Watch]:
        return (Watch(NODES, upsert=self.on_node),)

    def on_node(self, obj: KubeObject) -> None:
        """Only an unhealthy Node has anything to reconcile: a heartbeat of a healthy one costs
        a lookup. A Node that recovers while queued finds nothing to do."""
        name = name_of(obj)
        node = self.deps.cluster.nodes.get(name)
        if node is not None and is_unhealthy(node, self.policies):
            self.queue.add(name)

    async def reconcile(self, key: str) -> Result | None:
        node = self.deps.cluster.nodes.get(key)
        if node is None:
            return None
        nc = self.deps.cluster.nodeclaim_for_provider_id(node.provider_id)
        if nc is None:
            return None
        now = self.deps.clock.now()
        verdict = self.verdict(node, nc, now)
        if verdict.action is Action.WAIT:
            return Result(requeue_after=verdict.seconds_until_due(now))
        if verdict.action is Action.BLOCKED:
            self._blocked(node, nc, verdict)
            return Result(requeue_after=BLOCKED_RETRY_SECONDS)
        if verdict.action is Action.REPAIR:
            assert verdict.match is not None
            await self._repair(node, nc, verdict.match, now)
        return None

    def verdict(
        self, node: Node, nc: NodeClaim, now: datetime, health: Health | None = None
    ) -> Verdict:
        pool = nodepool_of(nc)

        def scope() -> Health:
            if health is not None:
                return health
            nodes: Iterable[Node] = self.deps.cluster.nodes.values()
            if pool:
                nodes = (n for n in nodes if n.labels.get(LABEL_NODEPOOL) == pool)
            return health_of(nodes, self.policies)

        return decide(node, self.policies, now, nodepool=pool, scope=scope)

    # ------------------------------------------------------------------ effects
    async def _repair(self, node: Node, nc: NodeClaim, match: Match, now: datetime) -> None:
        cluster = self.deps.cluster
        if cluster.is_marked_for_deletion(nc.name):
            return  # repaired by an earlier pass the cache has not caught up with
        if not await self._force(nc, now):
            return  # the NodeClaim is gone
        if nc.metadata.deletion_timestamp is not None:
            return
        # Marked before the delete, as disruption marks its candidates: provisioning counts the
        # node's pods as to be rescheduled at once, and a pass on a stale cache does nothing.
        cluster.mark_for_deletion(nc.name)
        log.info(
            "repairing unhealthy node",
            extra={"node": node.name, "nodeclaim": nc.name, "condition": describe(match)},
        )
        self.deps.recorder.record(
            nodeclaim_ref(nc),
            Reason.DISRUPTED,
            f"Disrupting NodeClaim: Unhealthy ({describe(match)} since "
            f"{format_time(match.since)}, past its toleration)",
        )
        deleted = False
        try:
            deleted = await delete_nodeclaim(self.deps, nc, REASON_UNHEALTHY)
        finally:
            if not deleted:  # gone already, or the call failed: a later pass decides afresh
                cluster.unmark_for_deletion(nc.name)
        if not deleted:
            return
        if self.deps.metrics is not None:
            self.deps.metrics.nodeclaims_unhealthy_disrupted.labels(
                condition=snake_case(match.condition.type),
                nodepool=node.labels.get(LABEL_NODEPOOL, ""),
                capacity_type=node.labels.get(LABEL_CAPACITY_TYPE, ""),
                image_id=nc.status.image_id,
            ).inc()

    async def _force(self, nc: NodeClaim, now: datetime) -> bool:
        """Termination deadline now (an earlier one stays); False when the NodeClaim is gone."""
        stamped = parse_time(
            nc.metadata.annotations.get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP, "")
        )
        if stamped is not None and stamped <= now:
            return True
        patch = {
            "metadata": {
                "annotations": {ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: format_time(now)}
            }
        }
        try:
            await self.deps.client.patch(NODECLAIMS, nc.name, patch, patch_type=PatchType.MERGE)
        except NotFoundError:
            return False
        return True

    def _blocked(self, node: Node, nc: NodeClaim, verdict: Verdict) -> None:
        refs = [object_ref("v1", "Node", node.name, uid=node.uid or None), nodeclaim_ref(nc)]
        np = self.deps.cluster.nodepools.get(nodepool_of(nc))
        if np is not None:
            refs.append(
                object_ref(
                    NODEPOOL_API_VERSION,
                    NODEPOOL_KIND,
                    np.metadata.name or "",
                    uid=np.metadata.uid or None,
                )
            )
        for ref in refs:
            self.deps.recorder.record(
                ref,
                Reason.NODE_REPAIR_BLOCKED,
                f"Node {node.name}: {verdict.reason}",
                event_type=WARNING,
                dedupe_values=(node.name,),
                dedupe_window=BLOCKED_DEDUPE_SECONDS,
            )

    # ------------------------------------------------------------------ on demand
    def report(self) -> dict[str, Any]:
        """Every unhealthy Node and what repair does about it, as JSON-ready data (each scope's
        health counted once)."""
        cluster = self.deps.cluster
        now = self.deps.clock.now()
        unhealthy = [n for n in cluster.nodes.values() if is_unhealthy(n, self.policies)]
        pools: dict[str, list[Node]] = {}
        for n in cluster.nodes.values():
            pools.setdefault(n.labels.get(LABEL_NODEPOOL, ""), []).append(n)
        whole = health_of(cluster.nodes.values(), self.policies) if unhealthy else None
        counted: dict[str, Health] = {}
        nodes: dict[str, Any] = {}
        for node in sorted(unhealthy, key=lambda n: n.name):
            nc = cluster.nodeclaim_for_provider_id(node.provider_id)
            if nc is None:
                nodes[node.name] = {"action": "none", "reason": "no NodeClaim: not Karpenter's"}
                continue
            pool = nodepool_of(nc)
            if pool and pool not in counted:
                counted[pool] = health_of(pools.get(pool, ()), self.policies)
            health = counted[pool] if pool else whole
            entry = verdict_report(self.verdict(node, nc, now, health))
            entry["nodeclaim"] = nc.name
            nodes[node.name] = entry
        return {
            "policies": [
                {
                    "condition": f"{p.condition_type}={p.condition_status}",
                    "tolerationSeconds": p.toleration_seconds,
                }
                for p in self.policies
            ],
            "nodes": nodes,
        }


_WORD = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """``AcceleratedHardwareReady`` -> ``accelerated_hardware_ready`` (the metric's label)."""
    return _WORD.sub("_", name).lower()
