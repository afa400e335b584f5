"""``nodeoverlay`` (feature gate ``NodeOverlay``): each NodeOverlay's ``ValidationSucceeded``
condition and its ``Ready`` roll-up.

Upstream's controller resolves every overlay against every NodePool's instance types at once
(one overlay's conflict depends on the others) and writes the outcome on each. Here the
resolution is ``scheduling.overlays.resolve_overlays``, the very function the decisions take
their instance types through, so the status says exactly which overlays the provisioner and
disruption apply: True when applied; False with reason ``Conflict`` when an overlay of the same
weight already set a price or resource it sets (it is applied nowhere), or ``RuntimeValidation``
with the problem when its requirements fail upstream's run-time checks, or when the overlay
does not parse at all (then it is in no decision's set; a Warning event says so the first time
an error shows).

Woken by NodeOverlay, NodePool and NodeClass changes (one key: the whole set is resolved each
time) and every 6 hours as upstream (instance types change under it: prices, new types).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from pydantic import ValidationError

from karpenter_py.controllers.conditions import (
    DesiredCondition,
    conditions_patch,
    ready_rollup,
    report_unreadable,
    set_conditions,
    validation_message,
)
from karpenter_py.controllers.runtime import EVERY_NODECLASS, QueueController, Result, Watch
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import NODEOVERLAYS, NODEPOOLS
from karpenter_py.model.api.meta import CONDITION_FALSE, CONDITION_TRUE
from karpenter_py.model.api.nodeoverlay import CONDITION_VALIDATION_SUCCEEDED, NodeOverlay
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.fromstate import ready_pools
from karpenter_py.scheduling.overlays import (
    CONFLICT_MESSAGE,
    REASON_CONFLICT,
    REASON_RUNTIME_VALIDATION,
    OverlayOutcome,
    resolve_overlays,
)

log = logging.getLogger("karpenter.nodeoverlay")

KEY: Final = "nodeoverlays"  # the one work item: every overlay is resolved together
INVALID_PREFIX: Final = "nodeoverlays/"  # Cluster.invalid key prefix written by NodeOverlaySink
RESYNC_SECONDS: Final = 6 * 3600.0  # upstream's requeue


def overlay_conditions(name: str, outcome: OverlayOutcome) -> tuple[DesiredCondition, ...]:
    """ValidationSucceeded and its Ready roll-up for the overlay ``name``."""
    problem = outcome.invalid.get(name)
    if problem is not None:
        validation = DesiredCondition(
            CONDITION_VALIDATION_SUCCEEDED, CONDITION_FALSE, REASON_RUNTIME_VALIDATION, problem
        )
    elif name in outcome.conflicts:
        validation = DesiredCondition(
            CONDITION_VALIDATION_SUCCEEDED, CONDITION_FALSE, REASON_CONFLICT, CONFLICT_MESSAGE
        )
    else:
        validation = DesiredCondition(
            CONDITION_VALIDATION_SUCCEEDED, CONDITION_TRUE, CONDITION_VALIDATION_SUCCEEDED
        )
    return validation, ready_rollup((validation,))


class NodeOverlayStatus(QueueController):
    name = "nodeoverlay"
    default_workers = 1

    def watches(self) -> Sequence[Watch]:
        return (
            Watch(NODEOVERLAYS, upsert=self.on_change, delete=self.on_change),
            Watch(NODEPOOLS, upsert=self.on_change, delete=self.on_change),
            Watch(EVERY_NODECLASS, upsert=self.on_change, delete=self.on_change),
        )

    def on_change(self, _obj: KubeObject) -> None:
        self.queue.add(KEY)

    async def reconcile(self, key: str) -> Result | None:
        cluster = self.deps.cluster
        overlays = dict(cluster.overlays)
        # The pools the decisions resolve overlays over (those that may launch now), so the
        # status says exactly what they apply.
        pools = {
            np.metadata.name or "": np for np in ready_pools(cluster.nodepools, cluster.nodeclasses)
        }
        types: dict[str, Sequence[InstanceType]] = {}
        for name, np in pools.items():
            types[name] = await self.deps.cloud.get_instance_types(np)
        outcome = resolve_overlays(overlays.values(), pools, types)
        for name, overlay in overlays.items():
            await self._write(overlay, overlay_conditions(name, outcome))
        for key in [k for k in cluster.invalid if k.startswith(INVALID_PREFIX)]:
            await self._report_unreadable(key.removeprefix(INVALID_PREFIX))
        return Result(requeue_after=RESYNC_SECONDS)

    async def _report_unreadable(self, name: str) -> None:
        """An overlay that does not parse is applied nowhere: say why on it (read afresh, it
        may have been fixed or deleted since the cache saw it)."""
        try:
            raw = await self.deps.client.get(NODEOVERLAYS, name)
        except NotFoundError:
            return
        try:
            NodeOverlay.model_validate(raw)
        except ValidationError as err:
            await report_unreadable(
                self.deps,
                NODEOVERLAYS,
                raw,
                validation_message(err),
                reason=REASON_RUNTIME_VALIDATION,
            )

    async def _write(self, overlay: NodeOverlay, desired: Sequence[DesiredCondition]) -> None:
        meta = overlay.metadata
        conditions, changed = set_conditions(
            overlay.status.conditions,
            desired,
            now=self.deps.clock.now(),
            generation=meta.generation,
        )
        if not changed:
            return
        try:
            await self.deps.client.patch(
                NODEOVERLAYS,
                meta.name or "",
                conditions_patch(meta.resource_version or "", conditions),
                patch_type=PatchType.MERGE,
                subresource="status",
            )
        except NotFoundError:
            return
        log.info(
            "nodeoverlay validation updated",
            extra={
                "nodeoverlay": meta.name,
                "status": desired[0].status,
                "reason": desired[0].reason,
            },
        )
