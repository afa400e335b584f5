"""What every scheduling round needs, for provisioning and disruption alike.

A round: the instance types of each NodePool that may launch now (unavailable offerings masked),
a solve (in a worker thread when it is large, so watches and the leader lease keep flowing),
then one NodeClaim per new claim, recorded in state at once, and nominations. Provisioning
calls all of it each batch; disruption calls the same pieces for its what-if simulations and to
launch replacements, so both decide with the same solver on the same facts.

Each NodePool's instance-type index is kept across rounds (``scheduling.IndexCache``): the cloud
provider and the unavailable-offerings filter hand back the same list while nothing changed,
which is what keeps a one-pod round on 1,340 types in milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from karpenter_py.aio.clock import Clock
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.launcher.persist import nodeclaim_body
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED
from karpenter_py.scheduling.fromstate import ExistingMemo, nodeclass_key, provisionable_pools
from karpenter_py.scheduling.inputs import SolveInput
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.scheduling.overlays import OverlayMemo, overlaid_types
from karpenter_py.scheduling.plan import NewNodeClaim, Plan
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.snapshot import Snapshot

log = logging.getLogger("karpenter.launcher.round")

# Solves with more pods than this run in a worker thread.
THREAD_THRESHOLD = 200
REASON_PROVISIONED = "provisioned"


class NodeClaimWriter(Protocol):
    async def create_nodeclaim(self, body: dict[str, object]) -> dict[str, object]: ...


class OfferingFilter(Protocol):
    """Offerings recently found unavailable (insufficient capacity), hidden from the solver."""

    def apply(self, instance_types: Sequence[InstanceType]) -> list[InstanceType]: ...


class Events(Protocol):
    def pod_nominated(self, pod: Pod, target: str) -> None: ...
    def pod_failed_scheduling(self, pod: Pod, reason: str) -> None: ...
    def nodeclaim_created(self, nodepool: str, reason: str, min_values_relaxed: bool) -> None: ...


@dataclass(kw_only=True, eq=False)
class RoundRunner:
    """The shared steps of a round. Stateless across rounds except for the solver's index cache."""

    cluster: Cluster
    writer: NodeClaimWriter
    cloud: CloudProvider
    clock: Clock
    offerings: OfferingFilter | None = None
    events: Events | None = None
    nomination_seconds: float = 20.0
    # Told the pods each round planned (``controllers.provisioning.nominations`` writes their
    # nominatedNodeName once the planned node exists).
    planned: Callable[[Sequence[str]], None] | None = None
    indexes: IndexCache = field(default_factory=IndexCache)
    existing: ExistingMemo = field(default_factory=ExistingMemo)
    overlays: OverlayMemo = field(default_factory=OverlayMemo)

    # ------------------------------------------------------------------ facts
    async def instance_types(self, snapshot: Snapshot) -> Mapping[str, Sequence[InstanceType]]:
        """Instance types of every NodePool that may launch now (NodeClass present and Ready,
        not being deleted), unavailable offerings masked, the snapshot's NodeOverlays applied
        (``scheduling.overlays``, as ``plan`` applies them). Pools left out are logged."""
        ready = {np.metadata.name or "": np for np in provisionable_pools(snapshot)}
        for name, np in snapshot.nodepools.items():
            if name not in ready and np.metadata.deletion_timestamp is None:
                _, kind, nc = nodeclass_key(np)
                log.info(
                    "skipping nodepool: its nodeclass is missing or not Ready",
                    extra={"nodepool": name, "nodeclass": f"{kind}/{nc}"},
                )
        return overlaid_types(snapshot, await self.types_for(ready), self.overlays)

    async def types_for(self, nodepools: Mapping[str, NodePool]) -> dict[str, list[InstanceType]]:
        out: dict[str, list[InstanceType]] = {}
        for name, np in nodepools.items():
            types = await self.cloud.get_instance_types(np)
            out[name] = self.offerings.apply(types) if self.offerings is not None else types
        return out

    # ------------------------------------------------------------------ the solve
    async def solve(self, inp: SolveInput, snapshot: Snapshot) -> Plan:
        """The pure solver, on a worker thread above THREAD_THRESHOLD pods."""
        if len(inp.pods) > THREAD_THRESHOLD:
            return await asyncio.to_thread(
                solve, inp, namespace_labels=snapshot.namespace_labels, indexes=self.indexes
            )
        return solve(inp, namespace_labels=snapshot.namespace_labels, indexes=self.indexes)

    # ------------------------------------------------------------------ effects
    async def create(
        self,
        claims: Sequence[NewNodeClaim],
        nodepools: Mapping[str, NodePool],
        *,
        reason: str = REASON_PROVISIONED,
    ) -> tuple[dict[NewNodeClaim, str], list[BaseException]]:
        """Write every planned NodeClaim concurrently; record each in state as soon as it exists,
        so the next round counts it even before its watch event arrives. Returns the created
        names and the failures (one failed write never aborts the others). ``reason`` is the
        ``karpenter_nodeclaims_created_total`` reason: "provisioned", or the lower-case
        disruption reason for replacements, as upstream labels them."""
        created: dict[NewNodeClaim, str] = {}
        failures: list[BaseException] = []

        async def one(nc: NewNodeClaim) -> None:
            np = nodepools.get(nc.node_pool)
            if np is None:
                return
            try:
                obj = await self.writer.create_nodeclaim(nodeclaim_body(nc, np))
            except asyncio.CancelledError:
                raise
            except Exception as err:
                failures.append(err)
                log.warning(
                    "creating nodeclaim failed", extra={"nodepool": nc.node_pool, "error": str(err)}
                )
                return
            claim = NodeClaim.model_validate(obj)
            name = claim.metadata.name or ""
            self.cluster.upsert_nodeclaim(claim)
            self.cluster.reserve(name, largest_capacity(nc))
            created[nc] = name
            if self.events is not None:
                relaxed = nc.annotations.get(ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED) == "true"
                self.events.nodeclaim_created(nc.node_pool, reason, relaxed)

        async with asyncio.TaskGroup() as tg:
            for nc in claims:
                tg.create_task(one(nc))
        return created, failures

    def nominate(self, plan: Plan, created: Mapping[NewNodeClaim, str]) -> None:
        """Nominate the capacity pods were given (disruption leaves it alone meanwhile), record
        where each pod was planned (``Cluster.pod_plans``), and tell each pod where it is going,
        or why it cannot go anywhere."""
        until = self.clock.now() + timedelta(seconds=self.nomination_seconds)
        plans = self.cluster.pod_plans
        keys: list[str] = []
        for nc, name in created.items():
            self.cluster.nominate(name, until)
            for pod in nc.pods:
                plans.plan(pod.key, name)
                keys.append(pod.key)
                if self.events is not None:
                    self.events.pod_nominated(pod, f"nodeclaim/{name}")
        for placement in plan.existing:
            self.cluster.nominate(placement.node_name, until)
            for pod in placement.pods:
                plans.plan(pod.key, placement.node_name)
                keys.append(pod.key)
                if self.events is not None:
                    self.events.pod_nominated(pod, f"node/{placement.node_name}")
        unwritten = [p for nc in plan.new_node_claims if nc not in created for p in nc.pods]
        for pod in unwritten:  # its NodeClaim could not be written: no plan holds for it
            plans.forget_pod(pod.key)
            keys.append(pod.key)
        for err in plan.errors:
            # No home this round: an older plan no longer holds.
            plans.forget_pod(err.pod.key)
            keys.append(err.pod.key)
            if self.events is not None:
                self.events.pod_failed_scheduling(err.pod, err.reason)
        if self.planned is not None and keys:
            self.planned(keys)


def largest_capacity(nc: NewNodeClaim) -> dict[str, int]:
    """What a NodeClaim may launch as at most: the per-resource maximum over its options."""
    out: dict[str, int] = {}
    for it in nc.instance_types:
        for name, amount in it.capacity.items():
            out[name] = max(out.get(name, 0), amount)
    return out
