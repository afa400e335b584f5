"""``node.termination``: a deleted Node is cordoned, drained, its instance deleted, then released.

Upstream's pkg/controllers/node/termination/controller.go. For a Node with a deletionTimestamp and
the ``karpenter.sh/termination`` finalizer, each pass:

1. taints it ``karpenter.sh/disrupted:NoSchedule`` (replacing the key's other effects) and labels
   it ``node.kubernetes.io/exclude-from-external-load-balancers=karpenter``;
2. drains it (``drain.plan_drain``): forced deletes past the grace-period deadline, evictions of
   the first non-empty priority group through the :class:`EvictionQueue`; requeue until drained
   and the node has been tainted for at least ``volumes.MIN_DRAIN_TIME`` (``Drained=True``);
3. waits (1 s requeues) until no VolumeAttachment of a drained pod's volume is left on the node
   (``VolumesDetached``; event ``AwaitingVolumeDetachment``), unless the grace period is over;
4. ``CloudProvider.delete`` until it answers NodeClaimNotFound;
5. removes the finalizer (conditional on the Node's resourceVersion).

A Node deleted directly (``kubectl delete node``) also gets its NodeClaim deleted, so both take
the same path. A NotReady Node whose instance is already gone skips straight to 5, as does a
Node without a NodeClaim (nothing would track its termination). The grace-period deadline is the NodeClaim's
``karpenter.sh/nodeclaim-termination-timestamp`` annotation.

Woken by Node upserts (:meth:`on_node`) and by Pod upserts and deletes (:meth:`on_pod`); see
:meth:`NodeTermination.watches`. The eviction queue it drains through runs beside it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.controllers.runtime import Deps, Result, Watch
from karpenter_py.controllers.termination.common import (
    FinalizingController,
    remove_finalizer,
    set_nodeclaim_condition,
)
from karpenter_py.controllers.termination.drain import DrainPlan, plan_drain
from karpenter_py.controllers.termination.eviction import EvictionQueue
from karpenter_py.controllers.termination.volumes import (
    grace_period_elapsed,
    min_drain_remaining,
    pending_volume_attachments,
)
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import ConflictError, NotFoundError
from karpenter_py.kube.events import WARNING, Reason, object_ref
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODES, PODS
from karpenter_py.model.api.base import parse_time
from karpenter_py.model.api.meta import CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN
from karpenter_py.model.api.nodeclaim import (
    CONDITION_DRAINED,
    CONDITION_INSTANCE_TERMINATING,
    CONDITION_VOLUMES_DETACHED,
    NodeClaim,
)
from karpenter_py.model.core import EFFECT_NO_SCHEDULE, Node, is_disrupted_taint, node_from_dict
from karpenter_py.model.labels import (
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP,
    FINALIZER_TERMINATION,
    LABEL_NODE_EXCLUDE_FROM_LB,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
    TAINT_DISRUPTED_KEY,
)

log = logging.getLogger("karpenter.node.termination")

DRAIN_REQUEUE = 1.0
VOLUME_REQUEUE = 1.0
INSTANCE_REQUEUE = 5.0
REASON_AWAITING_VOLUME_DETACHMENT = "AwaitingVolumeDetachment"
REASON_GRACE_PERIOD_ELAPSED = "TerminationGracePeriodElapsed"
EXCLUDE_FROM_LB_VALUE = "karpenter"


def cordon_patch(node: KubeObject) -> KubeObject | None:
    """Merge patch adding the disrupted NoSchedule taint and the LB-exclusion label, or None."""
    meta = metadata(node)
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    taints: list[dict[str, Any]] = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    wanted = {"key": TAINT_DISRUPTED_KEY, "effect": EFFECT_NO_SCHEDULE}
    has_taint = any(is_disrupted_taint(t) for t in taints)
    labels = meta.get("labels") or {}
    has_label = labels.get(LABEL_NODE_EXCLUDE_FROM_LB) == EXCLUDE_FROM_LB_VALUE
    if has_taint and not any(
        t.get("key") == TAINT_DISRUPTED_KEY and t.get("effect") != EFFECT_NO_SCHEDULE
        for t in taints
    ):
        if has_label:
            return None
        return {"metadata": {"labels": {LABEL_NODE_EXCLUDE_FROM_LB: EXCLUDE_FROM_LB_VALUE}}}
    new_taints = [t for t in taints if t.get("key") != TAINT_DISRUPTED_KEY] + [wanted]
    return {
        "metadata": {
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {LABEL_NODE_EXCLUDE_FROM_LB: EXCLUDE_FROM_LB_VALUE},
        },
        "spec": {"taints": new_taints},
    }


def _is_cordoned(node: Node) -> bool:
    return node.labels.get(LABEL_NODE_EXCLUDE_FROM_LB) == EXCLUDE_FROM_LB_VALUE and [
        t.effect for t in node.taints if t.key == TAINT_DISRUPTED_KEY
    ] == [EFFECT_NO_SCHEDULE]


class NodeTermination(FinalizingController):
    name = "node.termination"
    default_workers = 50

    def __init__(
        self, deps: Deps, eviction_queue: EvictionQueue, *, workers: int | None = None
    ) -> None:
        super().__init__(deps, workers=workers)
        self.evictions = eviction_queue
        self._terminating: set[str] = set()  # nodes mid-drain: their pods' events wake us
        self._tainted_at: dict[str, datetime] = {}  # node -> when we first saw it tainted

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(NODES, upsert=self.on_node),
            Watch(PODS, upsert=self.on_pod, delete=self.on_pod),
        )

    on_node = FinalizingController.enqueue_finalizing

    def on_pod(self, obj: KubeObject) -> None:
        spec = obj.get("spec")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        if isinstance(node, str) and node in self._terminating:
            self.queue.add(node)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        node = await self._load(key)
        if (
            node is None
            or not node.deletion_timestamp
            or FINALIZER_TERMINATION not in node.finalizers
        ):
            self._forget(key)
            return None
        self._terminating.add(key)
        nc = (
            self.deps.cluster.nodeclaim_for_provider_id(node.provider_id)
            if node.provider_id
            else None
        )
        if nc is None:
            log.error("terminating node without a nodeclaim", extra={"node": key})
            return await self._release(node)
        if nc.metadata.deletion_timestamp is None:
            # The Node was deleted directly (kubectl delete node): its NodeClaim goes too, or it
            # would stay behind as a claim for an instance we are about to terminate.
            await self._delete_nodeclaim(nc)
        if not node.ready and await self._instance_gone(node):
            return await self._release(node)
        await self._cordon(key)
        now = self.deps.clock.now()
        deadline = parse_time(
            nc.metadata.annotations.get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP, "")
        )
        plan = plan_drain(self.deps.cluster.pods_on(key), now, deadline)
        if not plan.drained:
            await self._drain(node, nc, plan)
            return Result(requeue_after=DRAIN_REQUEUE)
        wait = min_drain_remaining(self._tainted_at.get(key), now)
        if wait > 0:
            # Let the scheduler and kubelet see the taint: a pod bound in the meantime is
            # drained on the next pass instead of dying with the instance.
            return Result(requeue_after=wait)
        if not nc.status.is_true(CONDITION_DRAINED):
            nc = await set_nodeclaim_condition(self.deps, nc, CONDITION_DRAINED, CONDITION_TRUE)
            if self.deps.metrics is not None:
                self.deps.metrics.nodes_drained.labels(
                    nodepool=node.labels.get(LABEL_NODEPOOL, "")
                ).inc()
        nc, waiting = await self._await_volumes(node, nc, now, deadline)
        if waiting:
            return Result(requeue_after=VOLUME_REQUEUE)
        try:
            await self.deps.cloud.delete(nc)
        except NodeClaimNotFoundError:
            return await self._release(node)
        await set_nodeclaim_condition(self.deps, nc, CONDITION_INSTANCE_TERMINATING, CONDITION_TRUE)
        return Result(requeue_after=INSTANCE_REQUEUE)

    async def _await_volumes(
        self, node: Node, nc: NodeClaim, now: datetime, deadline: datetime | None
    ) -> tuple[NodeClaim, bool]:
        """VolumesDetached: True once no blocking VolumeAttachment is left; Unknown (and an
        ``AwaitingVolumeDetachment`` event) while some are; False when the grace period cut the
        wait short. Returns the NodeClaim as written and whether to keep waiting."""
        done = nc.status.get_condition(CONDITION_VOLUMES_DETACHED)
        if done is not None and done.status != CONDITION_UNKNOWN:
            return nc, False  # decided on an earlier pass: no more LISTs
        pending = await pending_volume_attachments(
            self.deps.client, self.deps.cluster.pods_on(node.name), node.name, now
        )
        if not pending:
            nc = await set_nodeclaim_condition(
                self.deps, nc, CONDITION_VOLUMES_DETACHED, CONDITION_TRUE
            )
            return nc, False
        if grace_period_elapsed(deadline, now):
            log.info(
                "termination grace period elapsed, not waiting for volumes to detach",
                extra={"node": node.name, "volumeattachments": len(pending)},
            )
            nc = await set_nodeclaim_condition(
                self.deps,
                nc,
                CONDITION_VOLUMES_DETACHED,
                CONDITION_FALSE,
                reason=REASON_GRACE_PERIOD_ELAPSED,
                message=REASON_GRACE_PERIOD_ELAPSED,
            )
            return nc, False
        self.deps.recorder.record(
            object_ref("v1", "Node", node.name, uid=node.uid or None),
            REASON_AWAITING_VOLUME_DETACHMENT,
            f"Awaiting deletion of {len(pending)} VolumeAttachments bound to node",
            event_type=WARNING,
            dedupe_values=(node.name,),
        )
        nc = await set_nodeclaim_condition(
            self.deps,
            nc,
            CONDITION_VOLUMES_DETACHED,
            CONDITION_UNKNOWN,
            reason=REASON_AWAITING_VOLUME_DETACHMENT,
            message=REASON_AWAITING_VOLUME_DETACHMENT,
        )
        return nc, True

    def _forget(self, name: str) -> None:
        self._terminating.discard(name)
        self._tainted_at.pop(name, None)

    async def _load(self, name: str) -> Node | None:
        cached = self.deps.cluster.nodes.get(name)
        if cached is not None:
            return cached
        try:
            return node_from_dict(await self.deps.client.get(NODES, name))
        except NotFoundError:
            return None

    async def _delete_nodeclaim(self, nc: NodeClaim) -> None:
        try:
            await self.deps.client.delete(NODECLAIMS, nc.name, uid=nc.metadata.uid or None)
        except (NotFoundError, ConflictError):
            return
        log.info("deleting nodeclaim of deleted node", extra={"nodeclaim": nc.name})

    async def _instance_gone(self, node: Node) -> bool:
        try:
            await self.deps.cloud.get(node.provider_id)
        except NodeClaimNotFoundError:
            return True
        return False

    async def _cordon(self, name: str) -> None:
        """Taint and label the node; remember when we first knew it tainted (the minimum drain
        time counts from there; after a restart, from the first pass, which only waits longer)."""
        cached = self.deps.cluster.nodes.get(name)
        if cached is None or not _is_cordoned(cached):  # else skip the GET
            try:
                raw = await self.deps.client.get(NODES, name)
            except NotFoundError:
                return
            patch = cordon_patch(raw)
            if patch is not None:
                await self.deps.client.patch(NODES, name, patch, patch_type=PatchType.MERGE)
        self._tainted_at.setdefault(name, self.deps.clock.now())

    async def _drain(self, node: Node, nc: NodeClaim, plan: DrainPlan) -> None:
        deadline = nc.metadata.annotations.get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP, "")
        for pod, grace in plan.delete:
            self.deps.recorder.record(
                object_ref("v1", "Pod", pod.name, namespace=pod.namespace, uid=pod.uid or None),
                Reason.DISRUPTED,
                f"Deleting the pod to accommodate the terminationTime {deadline} of the node. "
                f"The pod was granted {grace} seconds of grace-period of its "
                f"{pod.termination_grace_period_seconds} terminationGracePeriodSeconds. "
                "This bypasses the PDB of the pod and the do-not-disrupt annotation.",
                event_type=WARNING,
            )
            try:
                await self.deps.client.delete(
                    PODS,
                    pod.name,
                    namespace=pod.namespace,
                    uid=pod.uid or None,
                    grace_period_seconds=grace,
                )
            except NotFoundError:
                continue
            if self.deps.metrics is not None:
                self.deps.metrics.pods_drained.labels(reason="termination_grace_period").inc()
        if plan.evict:
            self.evictions.add(node.name, plan.evict)
        self.deps.recorder.record(
            object_ref("v1", "Node", node.name, uid=node.uid or None),
            Reason.FAILED_DRAINING,
            f"Failed to drain node, {plan.waiting} pods are waiting to be evicted",
            event_type=WARNING,
            dedupe_values=(node.name,),
        )
        if not nc.status.get_condition(CONDITION_DRAINED):
            await set_nodeclaim_condition(
                self.deps, nc, CONDITION_DRAINED, CONDITION_UNKNOWN, reason="Draining"
            )

    async def _release(self, node: Node) -> Result | None:
        try:
            raw = await self.deps.client.get(NODES, node.name)
        except NotFoundError:
            self._forget(node.name)
            return None
        meta = metadata(raw)
        removed = await remove_finalizer(
            self.deps.client,
            NODES,
            node.name,
            finalizers=list(meta.get("finalizers") or []),
            resource_version=str(meta.get("resourceVersion") or ""),
            finalizer=FINALIZER_TERMINATION,
        )
        self._forget(node.name)
        if removed:
            self._terminated(node, str(meta.get("deletionTimestamp") or ""))
        return None

    def _terminated(self, node: Node, deletion_timestamp: str) -> None:
        log.info("deleted node", extra={"node": node.name})
        metrics = self.deps.metrics
        if metrics is None:
            return
        pool = node.labels.get(LABEL_NODEPOOL, "")
        metrics.nodes_terminated.labels(
            nodepool=pool, zone=node.labels.get(LABEL_TOPOLOGY_ZONE, "")
        ).inc()
        now = self.deps.clock.now()
        deleted = parse_time(deletion_timestamp)
        if deleted is not None:
            metrics.nodes_termination_duration.labels(nodepool=pool).observe(
                max(0.0, (now - deleted).total_seconds())
            )
        created = parse_time(node.creation_timestamp)
        if created is not None:
            metrics.nodes_lifetime_duration.labels(nodepool=pool).observe(
                max(0.0, (now - created).total_seconds())
            )
