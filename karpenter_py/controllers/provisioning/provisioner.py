"""The provisioner: batches of pending pods become NodeClaims.

Each round, in upstream's order: wait for a batch (1 s idle / 10 s max), hold until the cluster
state is synced, snapshot it (nodes before pods), fetch each NodePool's instance types, solve
(in a worker thread when the batch is large, so watches and the leader lease keep flowing),
then write one NodeClaim per new claim and nominate pods onto the capacity they were given. The
steps themselves live in ``launcher.round`` (disruption uses them too); this module owns the
batching and the round's bookkeeping.

Beyond upstream, a round holds the pods earlier rounds placed on capacity that is not
initialized yet (NodeClaims in flight, nodes still registering) where they were placed, and packs
the others around them (``scheduling.fromstate.hold_pods``). Those pods are still pending, and
upstream places them anew each round, largest first on the first node with room: after an early
first batch (``aio.batcher``'s first window) the large pods took nodes bought for small ones and
the small pods new nodes, 1.2 % more per hour than one round for the e2e benchmark's pods with a
200-pod first round, 0.02 % when held (``benchmarks/firstround.py``). Once a node is initialized
the kube-scheduler binds what it will, and pods still pending there are solved as upstream
solves them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from karpenter_py.aio.batcher import Batcher
from karpenter_py.controllers.runtime import Watch
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODES, PODS
from karpenter_py.launcher.failures import log_failure
from karpenter_py.launcher.round import Events, NodeClaimWriter, OfferingFilter, RoundRunner
from karpenter_py.model.core import Pod
from karpenter_py.scheduling.fromstate import hold_pods, solve_input
from karpenter_py.scheduling.inputs import SolveInput, SolveOptions
from karpenter_py.scheduling.plan import ExistingPlacement, Plan
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
    held: int = 0  # of ``pods``, those held where an earlier round placed them


@dataclass(frozen=True, slots=True)
class Decided:
    """What a round decided before it writes: the snapshot it saw, the solver's input and plan.
    The plan places the held pods too (``held``: their placements); the input does not have
    them among its pods, but on their nodes."""

    snapshot: Snapshot
    inp: SolveInput
    plan: Plan
    solve_seconds: float
    held: tuple[ExistingPlacement, ...] = ()


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
        hold: bool = True,
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
        # Hold pods on the capacity not initialized yet that earlier rounds placed them on
        # (module docstring); False places every pending pod anew each round, as upstream.
        self.hold = hold

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
        inp, held = hold_pods(inp, self._hold_targets(snapshot, inp.pods))
        solve_started = time.perf_counter()
        plan = _with_placements(await self.round.solve(inp, snapshot), held)
        return Decided(snapshot, inp, plan, time.perf_counter() - solve_started, held)

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
        held = sum(len(p.pods) for p in decided.held)
        result = RoundResult(
            pods=len(inp.pods) + held,
            created=tuple(created.values()),
            placed_on_existing=sum(len(p.pods) for p in plan.existing),
            errors=len(plan.errors),
            seconds=time.perf_counter() - started,
            solve_seconds=decided.solve_seconds,
            decided=_decided(plan),
            ignored=sum(1 for pod in inp.pods if unsupported_reason(pod) is not None),
            held=held,
        )
        log.info(
            "provisioning round",
            extra={
                "pods": result.pods,
                "nodeclaims": len(result.created),
                "existing": result.placed_on_existing,
                "unschedulable": result.errors,
                "held": result.held,
                "seconds": round(result.seconds, 3),
            },
        )
        return self._finish(result)

    def _hold_targets(self, snapshot: Snapshot, pods: Sequence[Pod]) -> dict[str, str]:
        """Pod key -> node name, for each of ``pods`` that an earlier round planned onto a
        NodeClaim or node not initialized yet (``Cluster.pod_plans``, which the rounds write)."""
        if not self.hold:
            return {}
        plans = self.cluster.pod_plans
        if not len(plans):
            return {}
        unready = _unready(snapshot)
        holds: dict[str, str] = {}
        for pod in pods:
            target = plans.target(pod.key)
            node = unready.get(target) if target is not None else None
            if node is not None:
                holds[pod.key] = node
        return holds

    def _finish(self, result: RoundResult) -> RoundResult:
        self.rounds.append(result)
        del self.rounds[:-100]
        if self.observe is not None:
            self.observe(result)
        return result


def _unready(snapshot: Snapshot) -> dict[str, str]:
    """A plan's target (NodeClaim name, or node name) -> node name, for the snapshot's
    NodeClaims not initialized yet."""
    out: dict[str, str] = {}
    for sn in snapshot.nodes:
        if sn.nodeclaim is not None and not sn.initialized:
            out.setdefault(sn.nodeclaim_name, sn.name)
            out.setdefault(sn.name, sn.name)
    return out


def _with_placements(plan: Plan, held: Sequence[ExistingPlacement]) -> Plan:
    """``plan`` with the held pods placed too, each node's pods in one placement."""
    if not held:
        return plan
    pods = {p.node_name: p.pods for p in held}
    merged = [
        ExistingPlacement(p.node_name, (*pods.pop(p.node_name, ()), *p.pods)) for p in plan.existing
    ]
    merged.extend(ExistingPlacement(node, placed) for node, placed in pods.items())
    return replace(plan, existing=tuple(merged))


def _decided(plan: Plan) -> tuple[str, ...]:
    """Every pod the plan gives an answer: a new NodeClaim, an existing node, or an error."""
    keys = [p.key for nc in plan.new_node_claims for p in nc.pods]
    keys.extend(p.key for placement in plan.existing for p in placement.pods)
    keys.extend(err.pod.key for err in plan.errors)
    return tuple(keys)
