"""``static.capacity``: keep each static NodePool (``spec.replicas``) at its replicas (gate
``StaticCapacity``; the manager runs it only with the gate on).

Upstream's static provisioning and deprovisioning controllers in one reconcile per pool, both
decided by :func:`~karpenter_py.controllers.static.decide.decide` (``karpenter-py plan`` calls
the same): missing NodeClaims are written through the launcher's round (the one NodeClaim
builder; each is in the cluster state at once, so the next reconcile counts it), extra ones are
deleted with a UID precondition, after which the termination controller drains their nodes as
for any deletion (PDBs respected, disruption budgets not). Woken by the pool's changes and its
NodeClaims coming and going; every pool is looked at again each minute, and after 30 s while
``limits.nodes`` holds launches back (upstream's periods).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from karpenter_py.controllers.common import delete_nodeclaim
from karpenter_py.controllers.runtime import Deps, QueueController, Result, Watch
from karpenter_py.controllers.static.decide import REASON_OVERPROVISIONED, decide, to_launch
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODEPOOLS
from karpenter_py.launcher.round import REASON_PROVISIONED, RoundRunner
from karpenter_py.model.labels import LABEL_NODEPOOL
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.staticpool import count, is_static, pool_members

log = logging.getLogger("karpenter.static")

RESYNC: Final = 60.0
HELD_BACK_RETRY: Final = 30.0


class StaticCapacity(QueueController):
    name = "static.capacity"
    default_workers = 4

    def __init__(
        self,
        deps: Deps,
        rounds: RoundRunner,
        *,
        options: SolveOptions | None = None,
        workers: int | None = None,
    ) -> None:
        super().__init__(deps, workers=workers)
        self.rounds = rounds
        self.options = options or SolveOptions()

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(NODEPOOLS, upsert=self.enqueue),
            Watch(NODECLAIMS, upsert=self.on_nodeclaim, delete=self.on_nodeclaim),
        )

    def on_nodeclaim(self, obj: KubeObject) -> None:
        """A NodeClaim came, changed or went: look at its pool again."""
        pool = (metadata(obj).get("labels") or {}).get(LABEL_NODEPOOL)
        if pool:
            self.queue.add(str(pool))

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        cluster = self.deps.cluster
        np = cluster.nodepools.get(key)
        if np is None or not is_static(np) or np.metadata.deletion_timestamp is not None:
            return None
        snapshot = cluster.snapshot(self.deps.clock.now())
        launches, _ = to_launch(np, count(pool_members(snapshot.nodes, key)))
        # Instance types only when something is to be launched (a cloud call for AWS).
        types = await self.rounds.types_for({key: np}) if launches else {}
        (decision,) = decide(
            snapshot, types, options=self.options, indexes=self.rounds.indexes, pool=key
        )
        if decision.launch:
            log.info(
                "launching nodeclaims for static nodepool",
                extra={
                    "nodepool": key,
                    "replicas": decision.replicas,
                    "nodeclaims": len(decision.launch),
                },
            )
            _, failures = await self.rounds.create(
                decision.launch, snapshot.nodepools, reason=REASON_PROVISIONED
            )
            if failures:
                raise failures[0]
        for name in decision.remove:
            nc = cluster.nodeclaims.get(name)
            if nc is None:
                continue
            log.info(
                "deleting nodeclaim of static nodepool over its replicas",
                extra={"nodepool": key, "nodeclaim": name, "replicas": decision.replicas},
            )
            await delete_nodeclaim(self.deps, nc, REASON_OVERPROVISIONED)
            cluster.mark_for_deletion(name)
        if decision.held_back:
            log.info(
                "static nodepool cannot launch all it is missing",
                extra={"nodepool": key, "reason": decision.held_back},
            )
            return Result(requeue_after=HELD_BACK_RETRY)
        return Result(requeue_after=RESYNC)
