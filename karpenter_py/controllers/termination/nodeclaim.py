"""``nodeclaim.termination``: a deleted NodeClaim takes its Node and its instance with it.

Upstream's finalize in pkg/controllers/nodeclaim/lifecycle/controller.go. For a NodeClaim with a
deletionTimestamp and the ``karpenter.sh/termination`` finalizer:

1. stamp ``karpenter.sh/nodeclaim-termination-timestamp`` = deletion time + the NodeClaim's
   ``terminationGracePeriod`` (when it has one): the deadline the node termination controller
   enforces against PDBs and do-not-disrupt pods;
2. delete its Node(s), which runs the Node's own finalizer flow (drain, instance delete) — and
   wait until they are gone;
3. ``CloudProvider.delete`` until it answers NodeClaimNotFound (``InstanceTerminating=True``);
4. remove the finalizer (conditional on the resourceVersion it read).

``kubectl delete nodeclaim`` and ``kubectl delete node`` both end up here and in
``node.termination``: whichever object goes first, the other follows through the same steps.

Woken by NodeClaim upserts (:meth:`on_nodeclaim`) and Node deletes (:meth:`on_node_deleted`); see
:meth:`NodeClaimTermination.watches`. Pass the lifecycle's :class:`Launcher` so a NodeClaim deleted
mid-launch (provider ID never written) still has its instance terminated instead of waiting for
garbage collection.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.controllers.common import load_nodeclaim, nodes_for
from karpenter_py.controllers.runtime import Deps, Result, Watch
from karpenter_py.controllers.termination.common import (
    FinalizingController,
    remove_finalizer,
    set_nodeclaim_condition,
)
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import NODECLAIMS, NODES
from karpenter_py.launcher.launch import Launcher
from karpenter_py.model.api.base import format_time
from karpenter_py.model.api.common import parse_duration
from karpenter_py.model.api.meta import CONDITION_TRUE
from karpenter_py.model.api.nodeclaim import CONDITION_INSTANCE_TERMINATING, NodeClaim
from karpenter_py.model.labels import (
    ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP,
    FINALIZER_TERMINATION,
    LABEL_CAPACITY_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)

log = logging.getLogger("karpenter.nodeclaim.termination")

WAIT_FOR_NODE = 10.0  # safety net; the Node's deletion event normally wakes us first
WAIT_FOR_INSTANCE = 5.0  # upstream requeues instance termination every 5 s


def termination_deadline(nc: NodeClaim) -> datetime | None:
    """deletionTimestamp + spec.terminationGracePeriod, or None when either is unset."""
    deleted = nc.metadata.deletion_timestamp
    tgp = nc.spec.termination_grace_period
    if deleted is None or not tgp:
        return None
    return deleted + parse_duration(tgp)


class NodeClaimTermination(FinalizingController):
    name = "nodeclaim.termination"
    default_workers = 50

    def __init__(
        self, deps: Deps, *, launcher: Launcher | None = None, workers: int | None = None
    ) -> None:
        super().__init__(deps, workers=workers)
        self.launcher = launcher

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(NODECLAIMS, upsert=self.on_nodeclaim),
            Watch(NODES, delete=self.on_node_deleted),
        )

    on_nodeclaim = FinalizingController.enqueue_finalizing

    def on_node_deleted(self, obj: KubeObject) -> None:
        spec = obj.get("spec")
        pid = spec.get("providerID") if isinstance(spec, dict) else None
        if not isinstance(pid, str) or not pid:
            return
        nc = self.deps.cluster.nodeclaim_for_provider_id(pid)
        if nc is not None and nc.metadata.deletion_timestamp is not None:
            self.queue.add(nc.name)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        nc = await load_nodeclaim(self.deps, key)
        if nc is None or nc.metadata.deletion_timestamp is None:
            return None
        if FINALIZER_TERMINATION not in nc.metadata.finalizers:
            return None
        nc = await self._stamp_deadline(nc)
        nodes = nodes_for(self.deps.cluster, nc)
        if nodes:
            for node in nodes:
                if not node.deletion_timestamp:
                    try:
                        await self.deps.client.delete(NODES, node.name)
                    except NotFoundError:
                        continue
                    log.info("deleting node", extra={"nodeclaim": nc.name, "node": node.name})
            return Result(requeue_after=WAIT_FOR_NODE)
        instance = self._instance_of(nc)
        if instance.status.provider_id:
            try:
                await self.deps.cloud.delete(instance)
            except NodeClaimNotFoundError:
                pass
            else:
                await set_nodeclaim_condition(
                    self.deps, nc, CONDITION_INSTANCE_TERMINATING, CONDITION_TRUE
                )
                return Result(requeue_after=WAIT_FOR_INSTANCE)
        removed = await remove_finalizer(
            self.deps.client,
            NODECLAIMS,
            nc.name,
            finalizers=nc.metadata.finalizers,
            resource_version=nc.metadata.resource_version,
            finalizer=FINALIZER_TERMINATION,
        )
        if removed:
            self._terminated(nc)
        return None

    def _instance_of(self, nc: NodeClaim) -> NodeClaim:
        """The NodeClaim as the cloud knows it. A claim deleted mid-launch may never have had
        its provider ID written; the launcher still holds the result under its UID."""
        if nc.status.provider_id or self.launcher is None:
            return nc
        launched = self.launcher.result(nc.metadata.uid)
        return launched if launched is not None else nc

    async def _stamp_deadline(self, nc: NodeClaim) -> NodeClaim:
        deadline = termination_deadline(nc)
        if (
            deadline is None
            or ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP in nc.metadata.annotations
        ):
            return nc
        patch = {
            "metadata": {
                "resourceVersion": nc.metadata.resource_version,
                "annotations": {ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: format_time(deadline)},
            }
        }
        updated = await self.deps.client.patch(
            NODECLAIMS, nc.name, patch, patch_type=PatchType.MERGE
        )
        return NodeClaim.model_validate(updated)

    def _terminated(self, nc: NodeClaim) -> None:
        labels = nc.metadata.labels
        log.info("deleted nodeclaim", extra={"nodeclaim": nc.name})
        metrics = self.deps.metrics
        if metrics is None:
            return
        pool = labels.get(LABEL_NODEPOOL, "")
        metrics.nodeclaims_terminated.labels(
            nodepool=pool,
            capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
            zone=labels.get(LABEL_TOPOLOGY_ZONE, ""),
        ).inc()
        if nc.metadata.deletion_timestamp is not None:
            elapsed = (self.deps.clock.now() - nc.metadata.deletion_timestamp).total_seconds()
            metrics.nodeclaims_termination_duration.labels(nodepool=pool).observe(max(0.0, elapsed))
