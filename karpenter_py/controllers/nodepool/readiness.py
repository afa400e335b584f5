"""``nodepool.readiness`` (with ``nodepool.validation`` and ``nodepool.hash``): NodePool conditions
and the drift hash annotations.

Upstream runs three controllers over the NodePool watch (pkg/controllers/nodepool/{readiness,
validation,hash}); they share one object and one trigger set, so here they are one reconciler
and a NodePool costs at most one metadata patch and one status patch per change:

* ``ValidationSucceeded``: True when the object passes runtime validation (for us: it parses into
  the :class:`NodePool` model); False with reason ``NodePoolValidationFailed`` and the errors.
* ``NodeClassReady``: True when the referenced NodeClass exists and is Ready; False with reason
  ``NodeClassNotFound`` or ``NodeClassNotReady`` and a message naming the NodeClass.
* ``Ready``: the operatorpkg roll-up of the two: True (reason ``Ready``) when both are True, else
  False with reason ``UnhealthyDependents`` and a message listing them (``NodeClassReady=False``).
* ``karpenter.sh/nodepool-hash`` / ``karpenter.sh/nodepool-hash-version`` (``v3``) annotations:
  the static-drift hash of the template, the same value the launcher stamps on NodeClaims.
  When the pool's hash version is not the current one (a new pool, or a hash algorithm change
  since it was written), its NodeClaims stamped under another version are first moved onto the
  current one, as upstream's drift hash versioning does: version and the pool's current hash,
  except that an already Drifted claim keeps its old hash. Their old hashes cannot be compared
  any more, so without this static drift would never fire for them again.

``lastTransitionTime`` moves only when a status flips; every condition carries the generation it
was computed from. Nothing is written when nothing changed. Conditions are written with a status
merge patch of ``status.conditions`` alone (the counter's ``resources``/``nodes`` are left as they
are), computed from the stored list so other condition types survive, and guarded by the
resourceVersion it was computed from: a concurrent writer makes it a ``ConflictError`` and the
work queue retries on fresher data.

A NodePool that does not parse (a bad field, or a duration past Go's ``time.Duration`` that the
CRD pattern admits) is not in ``Cluster.nodepools`` (the state sink records it in
``Cluster.invalid``), so provisioning and disruption skip it and serve every other pool; for it
the raw object is read from the API and only its conditions are written (no hash: there is no
valid template to hash), with a ``NodePoolValidationFailed`` Warning event the first time an
error shows (when the stored condition does not carry it yet).

Woken by NodePool upserts (:meth:`on_nodepool`) and by upserts and deletes of every NodeClass kind
the provider supports (:meth:`on_nodeclass`); see :meth:`NodePoolReadiness.watches`. It waits for
the cluster state to sync: before that a NodeClass may merely not be seen yet, and reporting
NodeClassNotFound then would flap Ready.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from karpenter_py.controllers.conditions import (
    MAX_MESSAGE,
    conditions_patch,
    raw_conditions,
    ready_rollup,
    report_unreadable,
    set_conditions,
)
from karpenter_py.controllers.conditions import DesiredCondition as DesiredCondition  # re-exported
from karpenter_py.controllers.conditions import validation_message as validation_message
from karpenter_py.controllers.runtime import EVERY_NODECLASS, QueueController, Result, Watch
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODEPOOLS
from karpenter_py.launcher.persist import nodepool_hash
from karpenter_py.model.api.meta import (
    CONDITION_FALSE,
    CONDITION_READY,
    CONDITION_TRUE,
    Condition,
)
from karpenter_py.model.api.nodeclaim import CONDITION_DRIFTED, NodeClaim
from karpenter_py.model.api.nodepool import (
    CONDITION_NODE_CLASS_READY,
    CONDITION_VALIDATION_SUCCEEDED,
    NodePool,
)
from karpenter_py.model.labels import (
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    LABEL_NODEPOOL,
    NODEPOOL_HASH_VERSION,
)
from karpenter_py.state.cluster import NodeClassKey

log = logging.getLogger("karpenter.nodepool.readiness")

REASON_VALIDATION_FAILED: Final = "NodePoolValidationFailed"
REASON_NODECLASS_NOT_FOUND: Final = "NodeClassNotFound"
REASON_NODECLASS_NOT_READY: Final = "NodeClassNotReady"

# The conditions that roll up into Ready, in the order their names appear in Ready's message.
READY_DEPENDENTS: Final = (CONDITION_VALIDATION_SUCCEEDED, CONDITION_NODE_CLASS_READY)
INVALID_PREFIX: Final = "nodepools/"  # Cluster.invalid key prefix written by NodePoolSink


# ----------------------------------------------------------------------------- decisions (pure)


def nodeclass_key(np: NodePool) -> NodeClassKey:
    ref = np.spec.template.spec.node_class_ref
    return (ref.group, ref.kind, ref.name)


def raw_nodeclass_key(obj: KubeObject) -> NodeClassKey | None:
    """``spec.template.spec.nodeClassRef`` of a raw NodePool, or None when unreadable."""
    node: Any = obj
    for part in ("spec", "template", "spec", "nodeClassRef"):
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return None
    group, kind, name = node.get("group"), node.get("kind"), node.get("name")
    if not (isinstance(group, str) and isinstance(kind, str) and isinstance(name, str) and name):
        return None
    return (group, kind, name)


def _nodeclass_condition(nodeclass: NodeClassKey | None, ready: bool | None) -> DesiredCondition:
    if nodeclass is None:
        return DesiredCondition(
            CONDITION_NODE_CLASS_READY,
            CONDITION_FALSE,
            REASON_NODECLASS_NOT_FOUND,
            "spec.template.spec.nodeClassRef is missing or incomplete",
        )
    group, kind, name = nodeclass
    if ready is None:
        return DesiredCondition(
            CONDITION_NODE_CLASS_READY,
            CONDITION_FALSE,
            REASON_NODECLASS_NOT_FOUND,
            f'{kind} "{name}" ({group}) not found on cluster',
        )
    if not ready:
        return DesiredCondition(
            CONDITION_NODE_CLASS_READY,
            CONDITION_FALSE,
            REASON_NODECLASS_NOT_READY,
            f'{kind} "{name}" ({group}) is not ready',
        )
    return DesiredCondition(CONDITION_NODE_CLASS_READY, CONDITION_TRUE, CONDITION_NODE_CLASS_READY)


def readiness_conditions(
    *,
    validation_error: str | None,
    nodeclass: NodeClassKey | None,
    nodeclass_ready: bool | None,
) -> tuple[DesiredCondition, DesiredCondition, DesiredCondition]:
    """ValidationSucceeded, NodeClassReady and their Ready roll-up.

    ``validation_error`` is None for a valid NodePool; ``nodeclass`` is the reference (None when
    it cannot be read); ``nodeclass_ready`` is None when that NodeClass does not exist.
    """
    if validation_error is None:
        validation = DesiredCondition(
            CONDITION_VALIDATION_SUCCEEDED, CONDITION_TRUE, CONDITION_VALIDATION_SUCCEEDED
        )
    else:
        validation = DesiredCondition(
            CONDITION_VALIDATION_SUCCEEDED,
            CONDITION_FALSE,
            REASON_VALIDATION_FAILED,
            validation_error[:MAX_MESSAGE],
        )
    nodeclass_cond = _nodeclass_condition(nodeclass, nodeclass_ready)
    return validation, nodeclass_cond, ready_rollup((validation, nodeclass_cond))


def updated_conditions(
    current: Sequence[Condition],
    desired: Sequence[DesiredCondition],
    *,
    now: datetime,
    generation: int | None,
) -> list[Condition] | None:
    """``current`` with ``desired`` applied (other condition types kept, order kept, new ones
    appended), or None when that changes nothing."""
    out, changed = set_conditions(current, desired, now=now, generation=generation)
    return out if changed else None


def hash_patch(np: NodePool) -> KubeObject | None:
    """The metadata merge patch bringing the hash annotations up to date, or None."""
    want = {
        ANNOTATION_NODEPOOL_HASH: nodepool_hash(np),
        ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION,
    }
    diff = {k: v for k, v in want.items() if np.metadata.annotations.get(k) != v}
    return {"metadata": {"annotations": diff}} if diff else None


def nodeclaim_hash_migration(nc: NodeClaim, pool_hash: str) -> KubeObject | None:
    """The metadata merge patch moving a NodeClaim stamped under another hash version (or none)
    onto the current one, or None when it already is.

    A hash of another version says nothing about the template now, so the claim takes the
    pool's current hash: it counts as launched from the current template. A claim already
    Drifted keeps its old hash, and so its condition: whether it still holds cannot be told."""
    if nc.metadata.annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION) == NODEPOOL_HASH_VERSION:
        return None
    annotations = {ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}
    if nc.status.get_condition(CONDITION_DRIFTED) is None:
        annotations[ANNOTATION_NODEPOOL_HASH] = pool_hash
    return {"metadata": {"annotations": annotations}}


def nodeclass_identity(obj: KubeObject) -> tuple[str | None, str | None, str]:
    """(group, kind, name) of a NodeClass watch object; group/kind None when not on the object."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
    return group, kind if isinstance(kind, str) else None, str(metadata(obj).get("name", ""))


# ----------------------------------------------------------------------------- reconciler


class NodePoolReadiness(QueueController):
    name = "nodepool.readiness"
    default_workers = 2

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(NODEPOOLS, upsert=self.on_nodepool),
            Watch(EVERY_NODECLASS, upsert=self.on_nodeclass, delete=self.on_nodeclass),
        )

    on_nodepool = QueueController.enqueue

    def on_nodeclass(self, obj: KubeObject) -> None:
        """Requeue every NodePool referencing this NodeClass (and every unparsable one: its
        reference is only known from the raw object)."""
        group, kind, name = nodeclass_identity(obj)
        if not name:
            return
        for pool, np in self.deps.cluster.nodepools.items():
            g, k, n = nodeclass_key(np)
            if n == name and group in (None, g) and kind in (None, k):
                self.queue.add(pool)
        for key in self.deps.cluster.invalid:
            if key.startswith(INVALID_PREFIX):
                self.queue.add(key.removeprefix(INVALID_PREFIX))

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        np = self.deps.cluster.nodepools.get(key)
        if np is None:
            if INVALID_PREFIX + key in self.deps.cluster.invalid:
                await self._reconcile_invalid(key)
            return None
        if np.metadata.deletion_timestamp is not None:
            return None
        rv = np.metadata.resource_version
        conditions: list[Condition] = np.status.conditions
        patch = hash_patch(np)
        if np.metadata.annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION) != NODEPOOL_HASH_VERSION:
            # Before the pool's own version moves: a failure here is retried with it unmoved.
            await self._migrate_nodeclaims(key, nodepool_hash(np))
        if patch is not None:
            try:
                updated = await self.deps.client.patch(
                    NODEPOOLS, key, patch, patch_type=PatchType.MERGE
                )
            except NotFoundError:
                return None
            # Continue from the server's copy: it is at least as fresh as the cache.
            rv = str(metadata(updated).get("resourceVersion") or rv)
            conditions = raw_conditions(updated)
        ref = nodeclass_key(np)
        desired = readiness_conditions(
            validation_error=None,
            nodeclass=ref,
            nodeclass_ready=self.deps.cluster.nodeclasses.get(ref),
        )
        await self._write(key, rv, conditions, desired, np.metadata.generation)
        return None

    async def _migrate_nodeclaims(self, pool: str, pool_hash: str) -> None:
        for name, nc in list(self.deps.cluster.nodeclaims.items()):
            if nc.metadata.labels.get(LABEL_NODEPOOL) != pool:
                continue
            patch = nodeclaim_hash_migration(nc, pool_hash)
            if patch is None:
                continue
            try:
                await self.deps.client.patch(NODECLAIMS, name, patch, patch_type=PatchType.MERGE)
            except NotFoundError:
                continue
            log.info(
                "nodeclaim moved to the current nodepool hash version",
                extra={"nodepool": pool, "nodeclaim": name, "version": NODEPOOL_HASH_VERSION},
            )

    async def _reconcile_invalid(self, key: str) -> None:
        try:
            raw = await self.deps.client.get(NODEPOOLS, key)
        except NotFoundError:
            return
        meta = metadata(raw)
        if meta.get("deletionTimestamp"):
            return
        try:
            NodePool.model_validate(raw)
        except ValidationError as err:
            error = validation_message(err)
        else:
            return  # fixed since the cache saw it; the watch event will bring it back
        ref = raw_nodeclass_key(raw)
        desired = readiness_conditions(
            validation_error=error,
            nodeclass=ref,
            nodeclass_ready=None if ref is None else self.deps.cluster.nodeclasses.get(ref),
        )
        await report_unreadable(
            self.deps, NODEPOOLS, raw, error, reason=REASON_VALIDATION_FAILED, desired=desired
        )

    async def _write(
        self,
        key: str,
        resource_version: str,
        current: Sequence[Condition],
        desired: Sequence[DesiredCondition],
        generation: int | None,
    ) -> None:
        conditions = updated_conditions(
            current, desired, now=self.deps.clock.now(), generation=generation
        )
        if conditions is None:
            return
        try:
            await self.deps.client.patch(
                NODEPOOLS,
                key,
                conditions_patch(resource_version, conditions),
                patch_type=PatchType.MERGE,
                subresource="status",
            )
        except NotFoundError:
            return
        ready = next(c for c in conditions if c.type == CONDITION_READY)
        log.debug(
            "nodepool conditions updated",
            extra={"nodepool": key, "ready": ready.status, "reason": ready.reason},
        )
