"""``nodeclaim.expiration``: a NodeClaim older than its ``expireAfter`` is deleted.

Expiration is forceful, as upstream's: no disruption budgets, no replacement launched first (the
provisioner reacts to the pods the drain evicts), and a terminationGracePeriod still bounds the
drain. ``expireAfter: Never`` turns it off. Each NodeClaim is requeued for the moment it expires,
so nothing polls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from karpenter_py.controllers.nodeclaim.common import delete_nodeclaim, nodeclaim_ref
from karpenter_py.controllers.runtime import QueueController, Result, Watch
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.common import parse_nillable_duration
from karpenter_py.model.api.nodeclaim import NodeClaim

log = logging.getLogger("karpenter.nodeclaim.expiration")

REASON_EXPIRED = "expired"


def expires_at(nc: NodeClaim) -> datetime | None:
    """When the NodeClaim expires: creation + expireAfter; None for Never or no creation time."""
    created = nc.metadata.creation_timestamp
    try:
        ttl = parse_nillable_duration(nc.spec.expire_after)
    except ValueError:
        return None  # the CRD pattern rejects bad durations; never act on one we cannot read
    if created is None or ttl is None:
        return None
    return created + ttl


def seconds_until_expiry(nc: NodeClaim, now: datetime) -> float | None:
    when = expires_at(nc)
    return None if when is None else (when - now) / timedelta(seconds=1)


class NodeClaimExpiration(QueueController):
    name = "nodeclaim.expiration"

    def watches(self) -> Sequence[Watch]:
        return (Watch(NODECLAIMS, upsert=self.enqueue),)

    async def reconcile(self, key: str) -> Result | None:
        nc = self.deps.cluster.nodeclaims.get(key)
        if nc is None or nc.metadata.deletion_timestamp is not None:
            return None
        remaining = seconds_until_expiry(nc, self.deps.clock.now())
        if remaining is None:
            return None
        if remaining > 0:
            return Result(requeue_after=remaining)
        log.info("nodeclaim expired", extra={"nodeclaim": key, "expireAfter": nc.spec.expire_after})
        self.deps.recorder.record(
            nodeclaim_ref(nc),
            "Disrupted",
            f"Disrupting NodeClaim: Expired (expireAfter {nc.spec.expire_after})",
        )
        await delete_nodeclaim(self.deps, nc, REASON_EXPIRED)
        return None
