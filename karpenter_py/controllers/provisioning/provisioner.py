"""The provisioner: batches of pending pods become NodeClaims.

Each round, in upstream's order: wait for a batch (1 s idle / 10 s max), hold until the cluster
state is synced, snapshot it (nodes before pods), fetch each NodePool's instance types, solve
(in a worker thread when the batch is large, so watches and the leader lease keep flowing),
then write one NodeClaim per new claim and nominate pods onto the capacity they were given. The
steps themselves live in ``launcher.round`` (disruption uses them too); this module owns the
batching and the round's bookkeeping.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from karpenter_py.aio.batcher import Batcher
from karpenter_py.controllers.runtime import Watch
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODES, PODS
from karpenter_py.launcher.failures import log_failure
from karpenter_py.launcher.round import Events, NodeClaimWriter, OfferingFilter, RoundRunner
from karpenter_py.model.core import Pod
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveInput, SolveOptions
from karpenter_py.scheduling.plan import Plan
from karpenter_py.scheduling.scheduler import unsupported_reason
from karpenter_py.state.ingest import object_key
from karpenter_py.state.snapshot import Snapshot, is_provisionable

log = logging.getLogger("karpenter.provisioner")

__all__ = ["Decided", "Events", "NodeClaimWriter", "OfferingFilter", "Provisioner", "RoundResult"]


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


@dataclass(frozen=True, slots=True)
class Decided:
    """What a round decided before it writes: the snapshot it saw, the solver's input and plan."""

    snapshot: Snapshot
    inp: SolveInput
    plan: Plan
    solve_seconds: float


class Provisioner:
    name = "provisioner"

    def __init__(
        self,
        rounds: RoundRunner,
        batcher: Batcher[str],
        *,
        options: SolveOptions | None = None,
        observe: Callable[[RoundResult], None] | None = None,
        resync_seconds: float = 10.0,
    ) -> None:
        # The round runner holds the cluster state, the clock and the cloud; disruption
        # shares it.
        self.round = rounds
        self.cluster = rounds.cluster
        self.clock = rounds.clock
        self.batcher = batcher
        self.options = options or SolveOptions()
        self.observe = observe
        self.resync_seconds = resync_seconds
        self.rounds: list[RoundResult] = []

    # ------------------------------------------------------------------ triggers (sync; from sinks)
    def watches(self) -> Sequence[Watch]:
        return (Watch(PODS, upsert=self._pod_changed), Watch(NODES, upsert=self._node_changed))

    def _pod_changed(self, obj: KubeObject) -> None:
        # The state has taken this delivery in already (the manager's contract): read the parsed
        # Pod back instead of parsing it twice.
        pod = self.cluster.pods.get(object_key(obj))
        if pod is not None:
            self.on_pod(pod)

    def _node_changed(self, obj: KubeObject) -> None:
        if metadata(obj).get("deletionTimestamp"):
            self.on_node_deleting(object_key(obj))

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
                except Exception as exc:
                    log_failure(
                        log, "provisioning round failed; retrying with the next batch", exc, {}
                    )
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
    async def decide(self) -> Decided | None:
        """The round up to its NodeClaims decided, without writing anything: snapshot (nodes
        before pods), each NodePool's instance types, solve input, solve. None when no pod
        needs a home."""
        snapshot = self.cluster.snapshot(self.clock.now())
        if not snapshot.pending and not snapshot.reschedulable:
            return None
        types = await self.round.instance_types(snapshot)
        inp = solve_input(
            snapshot, instance_types=types, options=self.options, memo=self.round.existing
        )
        solve_started = time.perf_counter()
        plan = await self.round.solve(inp, snapshot)
        return Decided(snapshot, inp, plan, time.perf_counter() - solve_started)

    async def provision(self) -> RoundResult:
        started = time.perf_counter()
        decided = await self.decide()
        if decided is None:
            return self._finish(RoundResult(0, (), 0, 0, time.perf_counter() - started))
        inp, plan = decided.inp, decided.plan
        created, failures = await self.round.create(
            plan.new_node_claims, decided.snapshot.nodepools
        )
        if failures:
            self.batcher.trigger("retry")
        self.round.nominate(plan, created)
        result = RoundResult(
            pods=len(inp.pods),
            created=tuple(created.values()),
            placed_on_existing=sum(len(p.pods) for p in plan.existing),
            errors=len(plan.errors),
            seconds=time.perf_counter() - started,
            solve_seconds=decided.solve_seconds,
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


def _decided(plan: Plan) -> tuple[str, ...]:
    """Every pod the plan gives an answer: a new NodeClaim, an existing node, or an error."""
    keys = [p.key for nc in plan.new_node_claims for p in nc.pods]
    keys.extend(p.key for placement in plan.existing for p in placement.pods)
    keys.extend(err.pod.key for err in plan.errors)
    return tuple(keys)
