"""``nodeclaim.consistency``: does the Node look like the instance the NodeClaim launched?

Upstream's pkg/controllers/nodeclaim/consistency (the NodeShape check). Every
:data:`SCAN_PERIOD` (10 min) per initialized NodeClaim that is not being deleted: for each
resource the NodeClaim requested (non-zero) and expected from launch (``status.capacity``,
non-zero), the Node's ``status.capacity`` must be at least :data:`MIN_FRACTION` (90 %) of the
expected amount. Each shortfall is an issue: event ``FailedConsistencyCheck`` (Warning, on the
NodeClaim) and ``ConsistentStateFound=False`` (reason ``ConsistencyCheckFailed``, the issues as
message); no issue sets it True. The condition is informational: it does not affect Ready.

The first check runs when the NodeClaim turns Initialized; after that it is requeued for the end
of each period (triggers inside the period do nothing), so a capacity change is noticed within
10 minutes without watching Node heartbeats.

Woken by NodeClaim upserts (:meth:`on_nodeclaim`) and deletes (:meth:`on_nodeclaim_deleted`); see
:meth:`NodeClaimConsistency.watches`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from karpenter_py.controllers.nodeclaim.common import nodeclaim_ref
from karpenter_py.controllers.runtime import Deps, QueueController, Result, Watch
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.events import WARNING
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.meta import CONDITION_FALSE, CONDITION_TRUE
from karpenter_py.model.api.nodeclaim import (
    CONDITION_CONSISTENT_STATE_FOUND,
    CONDITION_INITIALIZED,
    NodeClaim,
)
from karpenter_py.model.core import Node
from karpenter_py.model.quantity import QuantityError, format_resource, parse_resource

log = logging.getLogger("karpenter.nodeclaim.consistency")

SCAN_PERIOD: Final = 600.0
MIN_FRACTION: Final = 0.90
REASON_CONSISTENCY_CHECK_FAILED: Final = "ConsistencyCheckFailed"
EVENT_FAILED_CONSISTENCY_CHECK: Final = "FailedConsistencyCheck"


def _amount(name: str, value: int | str | None) -> int:
    if value is None:
        return 0
    try:
        return parse_resource(name, value)
    except QuantityError:
        return 0


def should_check(nc: NodeClaim) -> bool:
    """Only initialized NodeClaims that are not going away are compared with their Node."""
    return (
        nc.metadata.deletion_timestamp is None
        and bool(nc.status.provider_id)
        and nc.status.is_true(CONDITION_INITIALIZED)
    )


def node_shape_issues(nc: NodeClaim, node: Node) -> list[str]:
    """Resources the Node has less than 90 % of; empty when the shape is as expected."""
    if not should_check(nc):
        return []
    issues = []
    for name, requested in sorted(nc.spec.resources.requests.items()):
        expected_text = nc.status.capacity.get(name)
        expected = _amount(name, expected_text)
        if _amount(name, requested) == 0 or expected == 0:
            continue
        found = node.capacity.get(name, 0)
        fraction = found / expected
        if fraction < MIN_FRACTION:
            issues.append(
                f"expected {expected_text} of resource {name}, but found "
                f"{format_resource(name, found)} ({fraction * 100:.1f}% of expected)"
            )
    return issues


class NodeClaimConsistency(QueueController):
    name = "nodeclaim.consistency"

    def __init__(
        self, deps: Deps, *, scan_period: float = SCAN_PERIOD, workers: int | None = None
    ) -> None:
        super().__init__(deps, workers=workers)
        self.scan_period = scan_period
        self._scanned: dict[str, float] = {}  # NodeClaim UID -> monotonic time of last check

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (Watch(NODECLAIMS, upsert=self.on_nodeclaim, delete=self.on_nodeclaim_deleted),)

    def on_nodeclaim(self, obj: KubeObject) -> None:
        meta = metadata(obj)
        name = meta.get("name")
        if not name or self._remaining(str(meta.get("uid") or "")) > 0:
            return  # checked recently: its periodic requeue is already pending
        self.queue.add(str(name))

    def on_nodeclaim_deleted(self, obj: KubeObject) -> None:
        self._scanned.pop(str(metadata(obj).get("uid") or ""), None)

    def _remaining(self, uid: str) -> float:
        last = self._scanned.get(uid)
        if last is None:
            return 0.0
        return max(0.0, self.scan_period - (self.deps.clock.monotonic() - last))

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        nc = self.deps.cluster.nodeclaims.get(key)
        if nc is None or not should_check(nc):
            return None  # an Initialized (or delete) update triggers us again
        uid = nc.metadata.uid
        wait = self._remaining(uid)
        if wait > 0:
            return Result(requeue_after=wait)
        nodes = [
            n for n in self.deps.cluster.nodes.values() if n.provider_id == nc.status.provider_id
        ]
        if len(nodes) != 1:
            # Missing or duplicated Nodes are the lifecycle controller's to report.
            self._scanned[uid] = self.deps.clock.monotonic()
            return Result(requeue_after=self.scan_period)
        issues = node_shape_issues(nc, nodes[0])
        for issue in issues:
            log.error("consistency error", extra={"nodeclaim": nc.name, "issue": issue})
            self.deps.recorder.record(
                nodeclaim_ref(nc),
                EVENT_FAILED_CONSISTENCY_CHECK,
                issue,
                event_type=WARNING,
                dedupe_values=(uid, issue),
            )
        await self._write_condition(nc, issues)
        self._scanned[uid] = self.deps.clock.monotonic()
        return Result(requeue_after=self.scan_period)

    async def _write_condition(self, nc: NodeClaim, issues: list[str]) -> None:
        """ConsistentStateFound through the status subresource, conditional on the
        resourceVersion read (a conflict raises: the runtime retries on fresher data)."""
        work = nc.model_copy(deep=True)
        now = self.deps.clock.now()
        if issues:
            changed = work.status.set_condition(
                CONDITION_CONSISTENT_STATE_FOUND,
                CONDITION_FALSE,
                now=now,
                reason=REASON_CONSISTENCY_CHECK_FAILED,
                message="; ".join(issues),
            )
        else:
            changed = work.status.set_condition(
                CONDITION_CONSISTENT_STATE_FOUND, CONDITION_TRUE, now=now
            )
        if not changed:
            return
        patch = {
            "metadata": {"resourceVersion": nc.metadata.resource_version},
            "status": work.status.model_dump(mode="json", by_alias=True),
        }
        try:
            await self.deps.client.patch(
                NODECLAIMS, nc.name, patch, patch_type=PatchType.MERGE, subresource="status"
            )
        except NotFoundError:
            return
