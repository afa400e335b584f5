"""``node.termination``: a deleted Node is cordoned, drained, its instance deleted, then released.

Upstream's pkg/controllers/node/termination/controller.go. For a Node with a deletionTimestamp and
the ``karpenter.sh/termination`` finalizer, each pass:

1. taints it ``karpenter.sh/disrupted:NoSchedule`` (replacing the key's other effects) and labels
   it ``node.kubernetes.io/exclude-from-external-load-balancers=karpenter``;
2. drains it (``drain.plan_drain``): forced deletes past the grace-period deadline, evictions of
   the first non-empty priority group through the :class:`EvictionQueue`; requeue until drained;
3. ``CloudProvider.delete`` until it answers NodeClaimNotFound;
4. removes the finalizer (conditional on the Node's resourceVersion).

A Node deleted directly (``kubectl delete node``) also gets its NodeClaim deleted, so both take
the same path. A NotReady Node whose instance is already gone skips straight to 4, as does a
Node without a NodeClaim (nothing would track its termination). The grace-period deadline is the NodeClaim's
``karpenter.sh/nodeclaim-termination-timestamp`` annotation.

Wiring (manager): run :meth:`NodeTermination.run` and the eviction queue's ``run``; Node upserts ->
:meth:`on_node`; Pod upserts and deletes -> :meth:`on_pod` (after the ``state`` sinks).
"""

from __future__ import annotations

import logging
from typing import Any

from karpenter_py.aio.clock import Clock
from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.controllers.runtime import Result, new_queue, run_workers
from karpenter_py.controllers.termination.common import (
    Deps,
    remove_finalizer,
    set_nodeclaim_condition,
    wait_synced,
)
from karpenter_py.controllers.termination.drain import DrainPlan, parse_time, plan_drain
from karpenter_py.controllers.termination.eviction import EvictionQueue
from karpenter_py.kube.client import KubeClient, PatchType
from karpenter_py.kube.errors import ConflictError, NotFoundError
from karpenter_py.kube.events import WARNING, EventRecorder, Reason, object_ref
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODES, PODS
from karpenter_py.model.api.meta import CONDITION_TRUE, CONDITION_UNKNOWN
from karpenter_py.model.api.nodeclaim import (
    CONDITION_DRAINED,
    CONDITION_INSTANCE_TERMINATING,
    NodeClaim,
)
from karpenter_py.model.core import EFFECT_NO_SCHEDULE, Node, node_from_dict
from karpenter_py.model.labels import (
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP,
    FINALIZER_TERMINATION,
    LABEL_NODE_EXCLUDE_FROM_LB,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
    TAINT_DISRUPTED_KEY,
)
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster

log = logging.getLogger("karpenter.node.termination")

DRAIN_REQUEUE = 1.0
INSTANCE_REQUEUE = 5.0
EXCLUDE_FROM_LB_VALUE = "karpenter"


def cordon_patch(node: KubeObject) -> KubeObject | None:
    """Merge patch adding the disrupted NoSchedule taint and the LB-exclusion label, or None."""
    meta = metadata(node)
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    taints: list[dict[str, Any]] = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    wanted = {"key": TAINT_DISRUPTED_KEY, "effect": EFFECT_NO_SCHEDULE}
    has_taint = any(
        t.get("key") == TAINT_DISRUPTED_KEY and t.get("effect") == EFFECT_NO_SCHEDULE
        for t in taints
    )
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


class NodeTermination:
    name = "node.termination"

    def __init__(
        self,
        client: KubeClient,
        cluster: Cluster,
        cloud: CloudProvider,
        eviction_queue: EvictionQueue,
        recorder: EventRecorder,
        *,
        clock: Clock,
        metrics: Metrics | None = None,
        workers: int = 50,
    ) -> None:
        self.deps = Deps(client, cluster, cloud, recorder, clock, metrics)
        self.evictions = eviction_queue
        self.workers = workers
        self.queue = new_queue(self.name)
        self._terminating: set[str] = set()  # nodes mid-drain: their pods' events wake us

    # ------------------------------------------------------------------ triggers (sync)
    def on_node(self, obj: KubeObject) -> None:
        meta = metadata(obj)
        if meta.get("deletionTimestamp") and FINALIZER_TERMINATION in (
            meta.get("finalizers") or []
        ):
            self.queue.add(str(meta.get("name")))

    def on_pod(self, obj: KubeObject) -> None:
        spec = obj.get("spec")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        if isinstance(node, str) and node in self._terminating:
            self.queue.add(node)

    # ------------------------------------------------------------------ running
    async def run(self) -> None:
        await wait_synced(self.deps.cluster)
        await run_workers(self, self.queue, workers=self.workers, metrics=self.deps.metrics)

    async def reconcile(self, key: str) -> Result | None:
        node = await self._load(key)
        if (
            node is None
            or not node.deletion_timestamp
            or FINALIZER_TERMINATION not in node.finalizers
        ):
            self._terminating.discard(key)
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
        plan = plan_drain(
            self.deps.cluster.pods_on(key),
            self.deps.clock.now(),
            parse_time(nc.metadata.annotations.get(ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP, "")),
        )
        if not plan.drained:
            await self._drain(node, nc, plan)
            return Result(requeue_after=DRAIN_REQUEUE)
        if not nc.status.is_true(CONDITION_DRAINED):
            await set_nodeclaim_condition(self.deps, nc, CONDITION_DRAINED, CONDITION_TRUE)
            if self.deps.metrics is not None:
                self.deps.metrics.nodes_drained.labels(
                    nodepool=node.labels.get(LABEL_NODEPOOL, "")
                ).inc()
        try:
            await self.deps.cloud.delete(nc)
        except NodeClaimNotFoundError:
            return await self._release(node)
        await set_nodeclaim_condition(self.deps, nc, CONDITION_INSTANCE_TERMINATING, CONDITION_TRUE)
        return Result(requeue_after=INSTANCE_REQUEUE)

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
        cached = self.deps.cluster.nodes.get(name)
        if cached is not None and _is_cordoned(cached):
            return  # skip the GET
        try:
            raw = await self.deps.client.get(NODES, name)
        except NotFoundError:
            return
        patch = cordon_patch(raw)
        if patch is not None:
            await self.deps.client.patch(NODES, name, patch, patch_type=PatchType.MERGE)

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
            self._terminating.discard(node.name)
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
        self._terminating.discard(node.name)
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
