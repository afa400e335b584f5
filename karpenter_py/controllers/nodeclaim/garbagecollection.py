"""``nodeclaim.garbagecollection``: reconcile NodeClaims with the instances that really exist.

Two directions, every ``interval`` (upstream: 2 minutes):

* a registered NodeClaim whose provider ID is no longer in ``CloudProvider.list()`` and whose
  Node is missing or not Ready lost its instance (terminated behind our back): delete it
  (metric reason ``garbage_collected``), which runs the normal termination path;
* an instance no NodeClaim claims (a crash between launch and the status write, or a NodeClaim
  force-removed) is terminated once it has been unclaimed for ``orphan_grace`` seconds (upstream
  AWS: 30 s), long enough for a fresh launch's status write to land in our cache.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.controllers.nodeclaim.common import delete_nodeclaim
from karpenter_py.controllers.runtime import Deps, Watch, wait_synced
from karpenter_py.model.api.nodeclaim import CONDITION_REGISTERED, NodeClaim

log = logging.getLogger("karpenter.nodeclaim.garbagecollection")

GC_INTERVAL = 120.0
ORPHAN_GRACE = 30.0


@dataclass(slots=True)
class CollectResult:
    nodeclaims_deleted: list[str] = field(default_factory=list)
    instances_deleted: list[str] = field(default_factory=list)  # provider IDs


class NodeClaimGarbageCollector:
    name = "nodeclaim.garbagecollection"

    def __init__(
        self, deps: Deps, *, interval: float = GC_INTERVAL, orphan_grace: float = ORPHAN_GRACE
    ) -> None:
        self.deps = deps
        self.interval = interval
        self.orphan_grace = orphan_grace
        self._unclaimed_since: dict[str, float] = {}  # provider ID -> monotonic first seen

    def watches(self) -> Sequence[Watch]:
        return ()  # a periodic sweep: nothing wakes it

    async def run(self) -> None:
        await wait_synced(self.deps.cluster)
        while True:
            try:
                await self.collect()
            except Exception:  # one failed pass (cloud or API hiccup) must not end the loop
                log.exception("garbage collection pass failed")
            await self.deps.clock.sleep(self.interval)

    async def collect(self) -> CollectResult:
        out = CollectResult()
        cluster, cloud = self.deps.cluster, self.deps.cloud
        instances = await cloud.list()
        live = {i.status.provider_id for i in instances if i.status.provider_id}
        for nc in list(cluster.nodeclaims.values()):
            if self._instance_vanished(nc, live):
                await delete_nodeclaim(self.deps, nc, "garbage_collected")
                out.nodeclaims_deleted.append(nc.name)
        claimed_ids = {nc.status.provider_id for nc in cluster.nodeclaims.values()}
        now = self.deps.clock.monotonic()
        unclaimed: dict[str, float] = {}
        for inst in instances:
            pid = inst.status.provider_id
            # A NodeClaim of the same name is mid-launch: its status has no provider ID yet.
            if not pid or pid in claimed_ids or inst.name in cluster.nodeclaims:
                continue
            since = unclaimed[pid] = self._unclaimed_since.get(pid, now)
            if now - since < self.orphan_grace:
                continue
            await self._terminate(inst)
            unclaimed.pop(pid, None)
            out.instances_deleted.append(pid)
        self._unclaimed_since = unclaimed
        return out

    def _instance_vanished(self, nc: NodeClaim, live: set[str]) -> bool:
        pid = nc.status.provider_id
        if nc.metadata.deletion_timestamp is not None or not pid or pid in live:
            return False
        if not nc.status.is_true(CONDITION_REGISTERED):
            return False  # liveness owns NodeClaims that never registered
        node = self.deps.cluster.node_for_provider_id(pid)
        return node is None or not node.ready

    async def _terminate(self, inst: NodeClaim) -> None:
        try:
            await self.deps.cloud.delete(inst)
        except NodeClaimNotFoundError:
            return
        log.info(
            "garbage collected instance without nodeclaim",
            extra={"provider_id": inst.status.provider_id},
        )
