"""``nodeclaim.lifecycle``: drive a NodeClaim from created to Ready, one reconciler, four phases.

Launch -> registration -> initialization -> liveness run in that order on one working copy of the
NodeClaim (each phase gates itself on the conditions before it), then the result is written once:
metadata (labels, annotations, finalizers) by a merge patch, then status through the status
subresource, both carrying the resourceVersion they were computed from. A lost race surfaces as
``ConflictError``, which the runtime retries quietly on fresher data. Every step is idempotent, so
a crash between any two writes is repaired by the next reconcile; the launcher's UID-keyed results
make sure that repair never launches a second instance.

NodeClaims being deleted belong to ``termination.NodeClaimTermination``; this controller leaves
them alone.

Woken by NodeClaim upserts (:meth:`on_nodeclaim`) and deletes (:meth:`on_nodeclaim_deleted`),
and by Node upserts (:meth:`on_node`); see :meth:`NodeClaimLifecycle.watches`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from karpenter_py.controllers.common import load_nodeclaim, nodes_for
from karpenter_py.controllers.nodeclaim.common import PhaseResult, map_diff
from karpenter_py.controllers.nodeclaim.initialization import Initialization
from karpenter_py.controllers.nodeclaim.launch import Launch
from karpenter_py.controllers.nodeclaim.liveness import (
    LAUNCH_TIMEOUT,
    REGISTRATION_TIMEOUT,
    Liveness,
)
from karpenter_py.controllers.nodeclaim.registration import BeforeRegister, Registration
from karpenter_py.controllers.runtime import Deps, QueueController, Result, Watch
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODES
from karpenter_py.launcher.launch import Launcher
from karpenter_py.model.api.meta import (
    CONDITION_FALSE,
    CONDITION_READY,
    CONDITION_TRUE,
    CONDITION_UNKNOWN,
)
from karpenter_py.model.api.nodeclaim import LIFECYCLE_CONDITIONS, NodeClaim
from karpenter_py.model.labels import FINALIZER_TERMINATION, LABEL_NODE_INITIALIZED

log = logging.getLogger("karpenter.nodeclaim.lifecycle")


class Phase(Protocol):
    async def reconcile(self, nc: NodeClaim) -> PhaseResult: ...


def initialize_conditions(nc: NodeClaim, now: datetime) -> None:
    """Lifecycle conditions start Unknown (operatorpkg does this on first sight); the Launched
    condition's transition time then anchors the liveness clocks."""
    for type_ in LIFECYCLE_CONDITIONS:
        if nc.status.get_condition(type_) is None:
            nc.status.set_condition(
                type_,
                CONDITION_UNKNOWN,
                now=now,
                reason="AwaitingReconciliation",
                message="object is awaiting reconciliation",
            )


def set_ready(nc: NodeClaim, now: datetime) -> None:
    """Ready = Launched and Registered and Initialized (False if any is False)."""
    pending = [t for t in LIFECYCLE_CONDITIONS if not nc.status.is_true(t)]
    if not pending:
        nc.status.set_condition(CONDITION_READY, CONDITION_TRUE, now=now)
        return
    failed = any(
        (c := nc.status.get_condition(t)) is not None and c.status == CONDITION_FALSE
        for t in pending
    )
    nc.status.set_condition(
        CONDITION_READY,
        CONDITION_FALSE if failed else CONDITION_UNKNOWN,
        now=now,
        reason="UnhealthyDependents",
        message=", ".join(f"{t}={_status(nc, t)}" for t in pending),
    )


def _status(nc: NodeClaim, type_: str) -> str:
    c = nc.status.get_condition(type_)
    return c.status if c is not None else CONDITION_UNKNOWN


def metadata_patch(before: NodeClaim, after: NodeClaim) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if after.metadata.labels != before.metadata.labels:
        out["labels"] = map_diff(before.metadata.labels, after.metadata.labels)
    if after.metadata.annotations != before.metadata.annotations:
        out["annotations"] = map_diff(before.metadata.annotations, after.metadata.annotations)
    if after.metadata.finalizers != before.metadata.finalizers:
        out["finalizers"] = list(after.metadata.finalizers)
    return out


class NodeClaimLifecycle(QueueController):
    name = "nodeclaim.lifecycle"
    default_workers = 100

    def __init__(
        self,
        deps: Deps,
        launcher: Launcher,
        *,
        launch_timeout: float = LAUNCH_TIMEOUT,
        registration_timeout: float = REGISTRATION_TIMEOUT,
        before_register: BeforeRegister | None = None,
        workers: int | None = None,
    ) -> None:
        super().__init__(deps, workers=workers)
        self.launcher = launcher
        self._phases: tuple[Phase, ...] = (
            Launch(self.deps, launcher),
            Registration(self.deps, before_register=before_register),
            Initialization(self.deps),
            Liveness(
                self.deps,
                launch_timeout=launch_timeout,
                registration_timeout=registration_timeout,
            ),
        )
        self._by_provider_id: dict[str, str] = {}  # providerID -> NodeClaim name

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(NODECLAIMS, upsert=self.on_nodeclaim, delete=self.on_nodeclaim_deleted),
            Watch(NODES, upsert=self.on_node),
        )

    def on_nodeclaim(self, obj: KubeObject) -> None:
        name = str(metadata(obj).get("name") or "")
        pid = _provider_id(obj, "status")
        if pid:
            self._by_provider_id[pid] = name
        if name and not metadata(obj).get("deletionTimestamp"):
            self.queue.add(name)

    def on_nodeclaim_deleted(self, obj: KubeObject) -> None:
        uid = metadata(obj).get("uid")
        if uid:
            self.launcher.forget(str(uid))
        pid = _provider_id(obj, "status")
        if pid and self._by_provider_id.get(pid) == metadata(obj).get("name"):
            del self._by_provider_id[pid]

    def on_node(self, obj: KubeObject) -> None:
        pid = _provider_id(obj, "spec")
        if not pid:
            return
        name = self._by_provider_id.get(pid)
        if name is None:
            nc = self.deps.cluster.nodeclaim_for_provider_id(pid)
            name = nc.name if nc is not None else None
        if name:
            self.queue.add(name)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        nc = await load_nodeclaim(self.deps, key)
        if nc is None or nc.metadata.deletion_timestamp is not None:
            return None
        if self._settled(nc):
            return None
        try:
            return await self._reconcile(nc)
        except NotFoundError as e:
            if e.name != nc.name or e.resource != NODECLAIMS.qualified:
                raise
            # Deleted while this pass ran (a disruption command, a user): nothing to write, and
            # the termination finalizer, persisted before any launch, owns its instance.
            log.info("nodeclaim gone while reconciling", extra={"nodeclaim": nc.name})
            return None

    async def _reconcile(self, nc: NodeClaim) -> Result | None:
        if FINALIZER_TERMINATION not in nc.metadata.finalizers:
            # Persist the finalizer before any instance exists, so no instance can outlive its
            # NodeClaim unnoticed.
            nc = await self._add_finalizer(nc)
        work = nc.model_copy(deep=True)
        now = self.deps.clock.now()
        initialize_conditions(work, now)
        requeues: list[float] = []
        for phase in self._phases:
            result = await phase.reconcile(work)
            if result.deleted:
                return None
            if result.requeue_after is not None:
                requeues.append(result.requeue_after)
        set_ready(work, self.deps.clock.now())
        await self._write(nc, work)
        return Result(requeue_after=min(requeues)) if requeues else None

    def _settled(self, nc: NodeClaim) -> bool:
        """Nothing left to do: skip the deep copy and every API call (the common case for node
        heartbeats once a cluster is up)."""
        if FINALIZER_TERMINATION not in nc.metadata.finalizers or not nc.is_ready():
            return False
        if not nc.status.is_true(CONDITION_READY):
            return False
        nodes = nodes_for(self.deps.cluster, nc)
        return len(nodes) == 1 and nodes[0].labels.get(LABEL_NODE_INITIALIZED) == "true"

    async def _add_finalizer(self, nc: NodeClaim) -> NodeClaim:
        patch = {
            "metadata": {
                "resourceVersion": nc.metadata.resource_version,
                "finalizers": [*nc.metadata.finalizers, FINALIZER_TERMINATION],
            }
        }
        updated = await self.deps.client.patch(NODECLAIMS, nc.name, patch)
        return NodeClaim.model_validate(updated)

    async def _write(self, before: NodeClaim, after: NodeClaim) -> None:
        rv = before.metadata.resource_version
        meta = metadata_patch(before, after)
        if meta:
            meta["resourceVersion"] = rv
            updated = await self.deps.client.patch(
                NODECLAIMS, after.name, {"metadata": meta}, patch_type=PatchType.MERGE
            )
            rv = str(metadata(updated).get("resourceVersion") or rv)
        status_before = before.status.model_dump(mode="json", by_alias=True)
        status_after = after.status.model_dump(mode="json", by_alias=True)
        if status_after != status_before:
            await self.deps.client.patch(
                NODECLAIMS,
                after.name,
                {"metadata": {"resourceVersion": rv}, "status": status_after},
                patch_type=PatchType.MERGE,
                subresource="status",
            )


def _provider_id(obj: KubeObject, section: str) -> str:
    part = obj.get(section)
    pid = part.get("providerID") if isinstance(part, dict) else None
    return pid if isinstance(pid, str) else ""
