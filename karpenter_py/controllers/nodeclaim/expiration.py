"""``nodeclaim.expiration``: a NodeClaim older than its ``expireAfter`` is deleted.

Expiration is forceful, as upstream's: no disruption budgets, no replacement launched first (the
provisioner reacts to the pods the drain evicts), and a terminationGracePeriod still bounds the
drain. ``expireAfter: Never`` turns it off. Each NodeClaim is requeued for the moment it expires,
so nothing polls.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from karpenter_py.aio.clock import Clock
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.controllers.common import Deps
from karpenter_py.controllers.nodeclaim.common import delete_nodeclaim, nodeclaim_ref, wait_synced
from karpenter_py.controllers.runtime import Result, WorkerMetrics, new_queue, run_workers
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.objects import KubeObject
from karpenter_py.model.api.common import parse_nillable_duration
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster

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


class NodeClaimExpiration:
    name = "nodeclaim.expiration"

    def __init__(
        self,
        client: KubeClient,
        cluster: Cluster,
        cloud: CloudProvider,
        recorder: EventRecorder,
        *,
        clock: Clock,
        metrics: Metrics | None = None,
        workers: int = 10,
    ) -> None:
        self.deps = Deps(client, cluster, cloud, recorder, clock, metrics)
        self.workers = workers
        self.queue = new_queue(self.name)

    def on_nodeclaim(self, obj: KubeObject) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name:
            self.queue.add(str(name))

    async def run(self) -> None:
        await wait_synced(self.deps.cluster)
        worker_metrics: WorkerMetrics | None = self.deps.metrics
        await run_workers(self, self.queue, workers=self.workers, metrics=worker_metrics)

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
