"""The provisioner: batches of pending pods become NodeClaims.

Each round, in upstream's order: wait for a batch (1 s idle / 10 s max), hold until the cluster
state is synced, snapshot it (nodes before pods), fetch each NodePool's instance types, solve
(in a worker thread when the batch is large, so watches and the leader lease keep flowing),
then write one NodeClaim per new claim and nominate pods onto the capacity they were given.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import Clock
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.launcher.persist import nodeclaim_body
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.fromstate import nodeclass_key, provisionable_pools, solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.plan import NewNodeClaim, Plan
from karpenter_py.scheduling.scheduler import solve, unsupported_reason
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.snapshot import is_provisionable

log = logging.getLogger("karpenter.provisioner")

# Solves with more pods than this run in a worker thread.
THREAD_THRESHOLD = 200


class NodeClaimWriter(Protocol):
    async def create_nodeclaim(self, body: dict[str, object]) -> dict[str, object]: ...


class OfferingFilter(Protocol):
    """Offerings recently found unavailable (insufficient capacity), hidden from the solver."""

    def apply(self, instance_types: Sequence[InstanceType]) -> list[InstanceType]: ...


class Events(Protocol):
    def pod_nominated(self, pod: Pod, target: str) -> None: ...
    def pod_failed_scheduling(self, pod: Pod, reason: str) -> None: ...
    def nodeclaim_created(self, nodepool: str) -> None: ...


@dataclass(frozen=True, slots=True)
class RoundResult:
    pods: int
    created: tuple[str, ...]
    placed_on_existing: int
    errors: int
    seconds: float  # the whole round: snapshot, instance types, solve, writes
    solve_seconds: float = 0.0  # the scheduling simulation alone
    decided: tuple[str, ...] = ()  # keys of the pods the solve placed or found unschedulable
    ignored: int = 0  # pods Karpenter will not simulate (matchFields, DRA claims, ...)


class Provisioner:
    name = "provisioner"

    def __init__(
        self,
        *,
        cluster: Cluster,
        writer: NodeClaimWriter,
        cloud: CloudProvider,
        clock: Clock,
        batcher: Batcher[str],
        options: SolveOptions | None = None,
        offerings: OfferingFilter | None = None,
        events: Events | None = None,
        observe: Callable[[RoundResult], None] | None = None,
        nomination_seconds: float = 20.0,
        resync_seconds: float = 10.0,
    ) -> None:
        self.cluster = cluster
        self.writer = writer
        self.cloud = cloud
        self.clock = clock
        self.batcher = batcher
        self.options = options or SolveOptions()
        self.offerings = offerings
        self.events = events
        self.observe = observe
        self.nomination_seconds = nomination_seconds
        self.resync_seconds = resync_seconds
        self.rounds: list[RoundResult] = []

    # ------------------------------------------------------------------ triggers (sync; from sinks)
    def on_pod(self, pod: Pod) -> None:
        if is_provisionable(pod):
            self.batcher.trigger(pod.uid or pod.key)

    def on_node_deleting(self, name: str) -> None:
        """A node going away may leave pods to re-home."""
        self.batcher.trigger(f"node/{name}")

    # ------------------------------------------------------------------ loops
    async def run(self) -> None:
        """Provision forever; owned by the manager's (leader-gated) TaskGroup."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._resync())
            while True:
                await self.batcher.wait()
                await self.wait_synced()
                try:
                    await self.provision()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("provisioning round failed; retrying with the next batch")
                    self.batcher.trigger("retry")

    async def _resync(self) -> None:
        """Pods stay pending without events; re-arm the batcher while any remain (upstream: 10 s)."""
        while True:
            await self.clock.sleep(self.resync_seconds)
            if any(is_provisionable(p) for p in self.cluster.pods.values()):
                self.batcher.trigger("resync")

    async def wait_synced(self) -> None:
        while not self.cluster.synced():
            log.info(
                "waiting for cluster state to sync", extra={"unsynced": self.cluster.unsynced()}
            )
            await self.clock.sleep(1.0)

    # ------------------------------------------------------------------ one round
    async def provision(self) -> RoundResult:
        started = time.perf_counter()
        snapshot = self.cluster.snapshot(self.clock.now())
        if not snapshot.pending and not snapshot.reschedulable:
            return self._finish(RoundResult(0, (), 0, 0, time.perf_counter() - started))
        ready = {np.metadata.name for np in provisionable_pools(snapshot)}
        for name, np in snapshot.nodepools.items():
            if name not in ready and np.metadata.deletion_timestamp is None:
                _, kind, nc = nodeclass_key(np)
                log.info(
                    "skipping nodepool: its nodeclass is missing or not Ready",
                    extra={"nodepool": name, "nodeclass": f"{kind}/{nc}"},
                )
        types = await self._instance_types(
            {n: np for n, np in snapshot.nodepools.items() if n in ready}
        )
        inp = solve_input(snapshot, instance_types=types, options=self.options)
        solve_started = time.perf_counter()
        if len(inp.pods) > THREAD_THRESHOLD:
            plan = await asyncio.to_thread(solve, inp, namespace_labels=snapshot.namespace_labels)
        else:
            plan = solve(inp, namespace_labels=snapshot.namespace_labels)
        solve_seconds = time.perf_counter() - solve_started
        created = await self._create(plan, snapshot.nodepools)
        self._nominate(plan, created)
        result = RoundResult(
            pods=len(inp.pods),
            created=tuple(created.values()),
            placed_on_existing=sum(len(p.pods) for p in plan.existing),
            errors=len(plan.errors),
            seconds=time.perf_counter() - started,
            solve_seconds=solve_seconds,
            decided=_decided(plan),
            ignored=sum(1 for pod in inp.pods if unsupported_reason(pod) is not None),
        )
        log.info(
            "provisioning round",
            extra={
                "pods": result.pods,
                "nodeclaims": len(result.created),
                "existing": result.placed_on_existing,
                "unschedulable": result.errors,
                "seconds": round(result.seconds, 3),
            },
        )
        return self._finish(result)

    def _finish(self, result: RoundResult) -> RoundResult:
        self.rounds.append(result)
        del self.rounds[:-100]
        if self.observe is not None:
            self.observe(result)
        return result

    async def _instance_types(
        self, nodepools: Mapping[str, NodePool]
    ) -> dict[str, list[InstanceType]]:
        out: dict[str, list[InstanceType]] = {}
        for name, np in nodepools.items():
            types = await self.cloud.get_instance_types(np)
            out[name] = self.offerings.apply(types) if self.offerings is not None else types
        return out

    async def _create(
        self, plan: Plan, nodepools: Mapping[str, NodePool]
    ) -> dict[NewNodeClaim, str]:
        """Write every planned NodeClaim concurrently; record each in state as soon as it exists,
        so the next round counts it even before its watch event arrives."""
        created: dict[NewNodeClaim, str] = {}

        async def one(nc: NewNodeClaim) -> None:
            np = nodepools.get(nc.node_pool)
            if np is None:
                return
            obj = await self.writer.create_nodeclaim(nodeclaim_body(nc, np))
            claim = NodeClaim.model_validate(obj)
            name = claim.metadata.name or ""
            self.cluster.upsert_nodeclaim(claim)
            self.cluster.reserve(name, _largest_capacity(nc))
            created[nc] = name
            if self.events is not None:
                self.events.nodeclaim_created(nc.node_pool)

        failures: list[BaseException] = []

        async def guarded(nc: NewNodeClaim) -> None:
            try:
                await one(nc)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # one failed write must not abort the others
                failures.append(err)
                log.warning(
                    "creating nodeclaim failed", extra={"nodepool": nc.node_pool, "error": str(err)}
                )

        async with asyncio.TaskGroup() as tg:
            for nc in plan.new_node_claims:
                tg.create_task(guarded(nc))
        if failures:
            self.batcher.trigger("retry")
        return created

    def _nominate(self, plan: Plan, created: Mapping[NewNodeClaim, str]) -> None:
        until = self.clock.now() + timedelta(seconds=self.nomination_seconds)
        for nc, name in created.items():
            self.cluster.nominate(name, until)
            if self.events is not None:
                for pod in nc.pods:
                    self.events.pod_nominated(pod, f"nodeclaim/{name}")
        for placement in plan.existing:
            self.cluster.nominate(placement.node_name, until)
            if self.events is not None:
                for pod in placement.pods:
                    self.events.pod_nominated(pod, f"node/{placement.node_name}")
        if self.events is not None:
            for err in plan.errors:
                self.events.pod_failed_scheduling(err.pod, err.reason)


def _decided(plan: Plan) -> tuple[str, ...]:
    """Every pod the plan gives an answer: a new NodeClaim, an existing node, or an error."""
    keys = [p.key for nc in plan.new_node_claims for p in nc.pods]
    keys.extend(p.key for placement in plan.existing for p in placement.pods)
    keys.extend(err.pod.key for err in plan.errors)
    return tuple(keys)


def _largest_capacity(nc: NewNodeClaim) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in nc.instance_types:
        for name, amount in it.capacity.items():
            out[name] = max(out.get(name, 0), amount)
    return out
