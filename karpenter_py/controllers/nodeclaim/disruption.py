"""``nodeclaim.disruption``: keep the ``Consolidatable`` and ``Drifted`` conditions current.

The disruption controller only reads these two conditions; this one writes them.

``Consolidatable`` (initialized NodeClaims only; removed otherwise, and when the NodePool's
``consolidateAfter`` is ``Never``): True once ``consolidateAfter`` has passed since
``status.lastPodEventTime``, or since the ``Initialized`` transition when no pod event was seen.
Before that it is False with reason :data:`REASON_CONSOLIDATE_AFTER_PENDING` and a message giving
the moment it turns True, and the NodeClaim is requeued for exactly that moment. A new pod event
updates the NodeClaim, which triggers a reconcile that moves the moment (and the condition) back.

``Drifted`` (launched NodeClaims only; removed otherwise): True with the first drift reason found,
in upstream's order (see :mod:`.drift`): ``NodePoolDrifted``, ``RequirementsDrifted``,
``InstanceTypeNotFound`` (from 1 h of age, at most every 30 min after a check that found the
type; an empty instance-type list is taken as no answer), then the provider's ``is_drifted``
reason. Removed again once nothing is drifted. A
launched NodeClaim is requeued every :data:`DRIFT_REQUEUE` (5 min), as the provider's answers can
change without any watch event.

One reconcile computes both conditions on a copy and writes them with one merge patch of
``status.conditions`` through the status subresource, carrying the resourceVersion it was computed
from (a concurrent writer makes it a ``ConflictError``, retried on fresher data); nothing is
written when nothing changed. A cloud error is not a verdict: ``Drifted`` is left as it was, the
other condition is still written, and the error is raised so the key backs off.

Woken by NodeClaim upserts (:meth:`on_nodeclaim`) and deletes (:meth:`on_nodeclaim_deleted`), and
by NodePool upserts (:meth:`on_nodepool`); see :meth:`NodeClaimDisruption.watches`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Final

from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.controllers.nodeclaim.common import nodepool_of
from karpenter_py.controllers.nodeclaim.drift import (
    instance_type_check_due,
    instance_type_drift,
    nodepool_drift,
)
from karpenter_py.controllers.runtime import QueueController, Result, Watch
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODEPOOLS
from karpenter_py.model.api.base import format_time
from karpenter_py.model.api.common import parse_nillable_duration
from karpenter_py.model.api.meta import CONDITION_FALSE, CONDITION_TRUE
from karpenter_py.model.api.nodeclaim import (
    CONDITION_CONSOLIDATABLE,
    CONDITION_DRIFTED,
    CONDITION_INITIALIZED,
    CONDITION_LAUNCHED,
    NodeClaim,
)
from karpenter_py.model.api.nodepool import NodePool

log = logging.getLogger("karpenter.nodeclaim.disruption")

DRIFT_REQUEUE: Final = 300.0
REASON_CONSOLIDATE_AFTER_PENDING: Final = "ConsolidateAfterPending"


@dataclass(frozen=True, slots=True)
class Consolidatability:
    """When a NodeClaim becomes consolidatable, and what that is measured from."""

    at: datetime
    since: str  # "the last pod event" or "initialization"


def consolidatable_at(nc: NodeClaim, np: NodePool) -> Consolidatability | None:
    """The moment ``Consolidatable`` turns True; None when it does not apply (not initialized,
    ``consolidateAfter: Never``, or a duration we cannot read)."""
    initialized = nc.status.get_condition(CONDITION_INITIALIZED)
    if initialized is None or initialized.status != CONDITION_TRUE:
        return None
    try:
        after = parse_nillable_duration(np.spec.disruption.consolidate_after)
    except ValueError:
        return None  # the CRD pattern rejects bad durations; never act on one we cannot read
    if after is None:
        return None
    if nc.status.last_pod_event_time is not None:
        return Consolidatability(nc.status.last_pod_event_time + after, "the last pod event")
    return Consolidatability(initialized.last_transition_time + after, "initialization")


def set_consolidatable(nc: NodeClaim, np: NodePool, now: datetime) -> float | None:
    """Bring ``Consolidatable`` up to date on ``nc``; returns seconds until it flips to True
    (None when nothing is pending)."""
    when = consolidatable_at(nc, np)
    if when is None:
        nc.status.clear_condition(CONDITION_CONSOLIDATABLE)
        return None
    remaining = (when.at - now) / timedelta(seconds=1)
    if remaining <= 0:
        nc.status.set_condition(CONDITION_CONSOLIDATABLE, CONDITION_TRUE, now=now)
        return None
    nc.status.set_condition(
        CONDITION_CONSOLIDATABLE,
        CONDITION_FALSE,
        now=now,
        reason=REASON_CONSOLIDATE_AFTER_PENDING,
        message=(
            f"consolidatable at {format_time(when.at)} (consolidateAfter "
            f"{np.spec.disruption.consolidate_after} since {when.since})"
        ),
    )
    return remaining


def set_drifted(nc: NodeClaim, reason: str, now: datetime) -> None:
    """``Drifted`` True with ``reason`` (also its message), or removed for ``""``."""
    if reason:
        nc.status.set_condition(
            CONDITION_DRIFTED, CONDITION_TRUE, now=now, reason=reason, message=reason
        )
    else:
        nc.status.clear_condition(CONDITION_DRIFTED)


class NodeClaimDisruption(QueueController):
    name = "nodeclaim.disruption"

    @cached_property
    def _type_found(self) -> dict[str, tuple[str, datetime]]:
        """NodeClaim name -> (UID, when a check last found its instance type). Only checks that
        found the type are remembered, so a missing type is confirmed on every reconcile."""
        return {}

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(NODECLAIMS, upsert=self.on_nodeclaim, delete=self.on_nodeclaim_deleted),
            Watch(NODEPOOLS, upsert=self.on_nodepool),
        )

    def on_nodeclaim(self, obj: KubeObject) -> None:
        meta = metadata(obj)
        name = meta.get("name")
        if name and not meta.get("deletionTimestamp"):
            self.queue.add(str(name))

    def on_nodeclaim_deleted(self, obj: KubeObject) -> None:
        self._type_found.pop(str(metadata(obj).get("name") or ""), None)

    def on_nodepool(self, obj: KubeObject) -> None:
        """A NodePool changed: every NodeClaim of it may have drifted, or its consolidateAfter
        moved."""
        pool = str(metadata(obj).get("name") or "")
        if not pool:
            return
        for name, nc in self.deps.cluster.nodeclaims.items():
            if nodepool_of(nc) == pool and nc.metadata.deletion_timestamp is None:
                self.queue.add(name)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        nc = self.deps.cluster.nodeclaims.get(key)
        if nc is None:
            self._type_found.pop(key, None)
            return None
        if nc.metadata.deletion_timestamp is not None:
            return None
        np = self.deps.cluster.nodepools.get(nodepool_of(nc))
        if np is None:
            return None  # not ours, or its NodePool is gone: nothing to measure against
        work = nc.model_copy(deep=True)
        now = self.deps.clock.now()
        requeues: list[float] = []
        failure: Exception | None = None
        if work.status.is_true(CONDITION_LAUNCHED):
            requeues.append(DRIFT_REQUEUE)
            try:
                set_drifted(work, await self._drift_reason(work, np, now), now)
            except NodeClaimNotFoundError:
                pass  # the instance is gone: garbage collection's business, not drift
            except Exception as e:  # re-raised after the write below
                failure = e
        else:
            set_drifted(work, "", now)
        pending = set_consolidatable(work, np, now)
        if pending is not None:
            requeues.append(pending)
        await self._write(nc, work)
        if failure is not None:
            raise failure
        return Result(requeue_after=min(requeues)) if requeues else None

    async def _drift_reason(self, nc: NodeClaim, np: NodePool, now: datetime) -> str:
        reason = nodepool_drift(nc, np)
        if reason:
            return reason
        found = self._type_found.get(nc.name)
        last = found[1] if found is not None and found[0] == nc.metadata.uid else None
        if instance_type_check_due(nc, now, last):
            types = await self.deps.cloud.get_instance_types(np)
            # An empty answer is an outage, not a verdict on every node of the pool.
            if types:
                reason = instance_type_drift(nc, types)
                if reason:
                    return reason
                self._type_found[nc.name] = (nc.metadata.uid, now)
        return await self.deps.cloud.is_drifted(nc)

    async def _write(self, before: NodeClaim, after: NodeClaim) -> None:
        old = [c.model_dump(mode="json", by_alias=True) for c in before.status.conditions]
        new = [c.model_dump(mode="json", by_alias=True) for c in after.status.conditions]
        if new == old:
            return
        for type_ in (CONDITION_DRIFTED, CONDITION_CONSOLIDATABLE):
            was, will = before.status.get_condition(type_), after.status.get_condition(type_)
            if (was and (was.status, was.reason)) != (will and (will.status, will.reason)):
                log.info(
                    "condition changed",
                    extra={
                        "nodeclaim": after.name,
                        "condition": type_,
                        "status": will.status if will else "removed",
                        "reason": will.reason if will else "",
                    },
                )
        patch = {
            "metadata": {"resourceVersion": before.metadata.resource_version},
            "status": {"conditions": new},
        }
        try:
            await self.deps.client.patch(
                NODECLAIMS, after.name, patch, patch_type=PatchType.MERGE, subresource="status"
            )
        except NotFoundError:
            return
