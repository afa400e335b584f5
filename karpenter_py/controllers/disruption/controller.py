"""The disruption controller: one leader-only loop that finds a command and hands it to the queue.

Each pass, once the cluster state is synced (every 10 s while idle, at once again after a command
was started):

a. hygiene: ``karpenter.sh/disrupted:NoSchedule`` taints and ``DisruptionReason`` conditions on
   managed nodes that are neither queued nor marked for deletion nor being deleted are removed.
   This is how a restart at any step of a command is recovered: the next leader untaints the
   candidates; a replacement that was already created stays as ordinary capacity;
b. budget signals: ``karpenter_nodepools_allowed_disruptions{nodepool,reason}`` and, for pools
   with nodes whose budget allows 0, a ``DisruptionBlocked`` event (1 min dedupe);
c. the decision (``decide.next_command``) on a snapshot, each pool's instance types (the shared
   ``RoundRunner``) and the shared index cache; it runs in a worker thread so watches and the
   Lease keep flowing during a long consolidation search. Nodes left alone get an
   ``Unconsolidatable`` event with the reason (15 min dedupe); a method that hit its time limit
   (``multi_node_timeout``/``single_node_timeout``, the MULTI_NODE_CONSOLIDATION_TIMEOUT and
   SINGLE_NODE_CONSOLIDATION_TIMEOUT settings) is logged at warning level, counted in
   ``karpenter_voluntary_disruption_consolidation_timeouts_total``, published as
   ``ConsolidationTimedOut`` on the NodePools concerned and listed under ``timedOut`` in
   ``report()`` with how many candidates it left unexamined. Skipped while the cluster state is
   unchanged since the last pass that found nothing, with a forced pass every 5 min; a pass that
   found nothing because of a time-based reason (a nomination, a ``consolidateAfter`` not yet
   passed, a budget window) names when that runs out (``Decision.recheck_at``), and the loop wakes and decides
   again at that moment, since time passing is not a cluster change;
d. consolidation and emptiness commands wait 15 s and are re-validated on fresh facts
   (``decide.revalidate``; emptiness may shrink to the still-empty subset); a rejection publishes
   ``ConsolidationRejected`` and counts ``karpenter_voluntary_disruption_failed_validations_total``;
e. the command goes to the :class:`~karpenter_py.controllers.disruption.queue.OrchestrationQueue`;
   the pass waits until the queue has tainted the candidates, created the replacements and marked
   the candidates for deletion (upstream's synchronous StartCommand), so the next pass's budgets
   count them; waiting for the replacements and the deletes go on in the queue's own task.

Each pass that decides also refreshes the cost gauges from its facts (``cost.CostMetrics``: offering,
node and NodePool prices, and the saving it found but could not act on: kept by a budget, rejected
at validation, or failed to start).

The last decision is kept (``last_decision``; ``report()`` gives it as JSON-ready data) and logged,
so "why is this node still here?" has an answer on demand.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

from karpenter_py.controllers.disruption import events
from karpenter_py.controllers.disruption.budgets import (
    budget_mapping,
    explain_budget,
    pool_node_counts,
)
from karpenter_py.controllers.disruption.cost import (
    BUDGET,
    START_FAILED,
    VALIDATION,
    CostMetrics,
)
from karpenter_py.controllers.disruption.decide import (
    COMMAND_VALIDATION_DELAY,
    Facts,
    needs_validation,
    next_command,
    revalidate,
)
from karpenter_py.controllers.disruption.multinode import MULTI_NODE_TIMEOUT
from karpenter_py.controllers.disruption.queue import (
    OrchestrationQueue,
    Outcome,
    set_disrupted_taint,
    set_disruption_reason,
)
from karpenter_py.controllers.disruption.singlenode import SINGLE_NODE_TIMEOUT
from karpenter_py.controllers.disruption.types import Command, Decision, Reason, Timeout
from karpenter_py.controllers.runtime import Deps, Watch, wait_synced
from karpenter_py.kube.events import WARNING
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.model.api.nodeclaim import CONDITION_DISRUPTION_REASON
from karpenter_py.model.core import is_disrupted_taint
from karpenter_py.obs.metrics import Metrics
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode

log = logging.getLogger("karpenter.disruption")

PERIOD: Final = 10.0
RECHECK_AFTER: Final = 300.0  # forced pass when nothing changed (upstream: 5 min)
BLOCKED_DEDUPE: Final = 60.0
UNCONSOLIDATABLE_DEDUPE: Final = 900.0
SETTLE: Final = 1.0  # after hygiene wrote something, let the watches catch up before deciding

Decide = Callable[[Facts], Decision]


class Disruption:
    name = "disruption"

    def __init__(
        self,
        deps: Deps,
        rounds: RoundRunner,
        *,
        options: SolveOptions | None = None,
        spot_to_spot: bool = False,
        period: float = PERIOD,
        validation_delay: float = COMMAND_VALIDATION_DELAY,
        recheck_after: float = RECHECK_AFTER,
        poll_interval: float = 1.0,
        queue: OrchestrationQueue | None = None,
        offload: bool = True,
        decide: Decide = next_command,
        multi_node_timeout: float = MULTI_NODE_TIMEOUT,
        single_node_timeout: float = SINGLE_NODE_TIMEOUT,
    ) -> None:
        self.deps = deps
        self.rounds = rounds
        self.options = options or SolveOptions()
        self.spot_to_spot = spot_to_spot
        self.period = period
        self.validation_delay = validation_delay
        self.recheck_after = recheck_after
        self.offload = offload
        self.decide = decide
        self.multi_node_timeout = multi_node_timeout
        self.single_node_timeout = single_node_timeout
        self.queue = (
            queue
            if queue is not None
            else OrchestrationQueue(deps, rounds, poll_interval=poll_interval)
        )
        self.last_decision: Decision | None = None
        self.last_decided_at: datetime | None = None
        self.last_rejection: str = ""
        self.passes = 0
        self.skipped = 0
        self._noop_generation: int | None = None
        self._noop_at = 0.0
        self._recheck_at: datetime | None = None  # the last no-op decision's ``recheck_at``
        self._blocked_seen: dict[tuple[str, str], float] = {}
        self._unconsolidatable_seen: dict[tuple[str, str], float] = {}
        self._gauge_pools: set[tuple[str, str]] = set()
        self.cost = CostMetrics(deps.metrics) if deps.metrics is not None else None

    # ------------------------------------------------------------------ loop
    def watches(self) -> Sequence[Watch]:
        return ()  # a periodic pass over the whole cluster state: nothing wakes it

    async def run(self) -> None:
        """Disrupt forever; owned by the manager's leader-gated TaskGroup."""
        await wait_synced(self.deps.cluster)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.queue.run())
            await self.queue.wait_running()
            while True:
                try:
                    started = await self.reconcile()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("disruption pass failed; retrying after the period")
                    started = False
                if started:
                    await asyncio.sleep(0)  # a checkpoint, then straight into the next pass
                else:
                    await self.deps.clock.sleep(self.idle_delay())

    async def reconcile(self) -> bool:
        """One pass; True when a command was handed to the queue."""
        self.passes += 1
        snapshot = self.deps.cluster.snapshot(self.deps.clock.now())
        if await self.cleanup_strays(snapshot):
            await self.deps.clock.sleep(SETTLE)
            snapshot = self.deps.cluster.snapshot(self.deps.clock.now())
        self.budget_signals(snapshot)
        generation = self.deps.cluster.generation
        if self._unchanged_since_noop(generation):
            self.skipped += 1
            return False
        facts = await self.facts(snapshot)
        if self.cost is not None:
            self.cost.prices(facts.snapshot, facts.instance_types)
        decision = await self._decide(facts)
        self.last_decision = decision
        self.last_decided_at = facts.now
        self._observe(decision)
        blocked = {BUDGET: decision.budget_blocked}
        self.timeouts(decision, snapshot)
        self.unconsolidatable(decision, snapshot)
        events.invalid_do_not_disrupt(self.deps.recorder, snapshot)
        if not decision.commands:
            self._noop_generation = generation
            self._noop_at = self.deps.clock.monotonic()
            self._recheck_at = decision.recheck_at
            log.debug("disruption pass found nothing", extra={"decision": self.report()})
            self._blocked(blocked)
            return False
        self._noop_generation = None
        self._recheck_at = None
        command = decision.commands[0]
        log.info("disruption command found", extra={"command": command_report(command)})
        if needs_validation(command):
            validated = await self.validate(command)
            if validated is None:
                blocked[VALIDATION] = command.savings
                self._blocked(blocked)
                return False
            command = validated
        entry = self.queue.add(command)
        # Like upstream's synchronous StartCommand: the next pass sees the candidates marked.
        await entry.wait_started()
        # A command that failed to start (taint or create failed) waits out the period before
        # the next pass rather than retrying in a tight loop.
        started = entry.outcome in (Outcome.PENDING, Outcome.SUCCEEDED)
        if not started:
            blocked[START_FAILED] = command.savings
        self._blocked(blocked)
        return started

    def _blocked(self, savings: dict[str, float]) -> None:
        if self.cost is not None:
            self.cost.blocked(savings)

    def idle_delay(self) -> float:
        """Seconds to wait after a pass that started nothing: the period, or less when the last
        no-op decision named an earlier moment to look again (``Decision.recheck_at``), so that
        pass runs on time."""
        if self._recheck_at is None:
            return self.period
        until = (self._recheck_at - self.deps.clock.now()).total_seconds()
        return min(self.period, max(0.0, until))

    def _unchanged_since_noop(self, generation: int) -> bool:
        if self._noop_generation is None or generation != self._noop_generation:
            return False
        if self._recheck_at is not None and self.deps.clock.now() >= self._recheck_at:
            return False  # a time-based reason the last pass waited on has run out
        return self.deps.clock.monotonic() - self._noop_at < self.recheck_after

    async def facts(self, snapshot: Snapshot) -> Facts:
        types = await self.rounds.instance_types(snapshot)
        return Facts(
            snapshot=snapshot,
            instance_types=types,
            now=snapshot.now,
            options=self.options,
            spot_to_spot=self.spot_to_spot,
            queued=self.queue.queued_nodes(),
            indexes=self.rounds.indexes,
            multi_node_timeout=self.multi_node_timeout,
            single_node_timeout=self.single_node_timeout,
        )

    async def _decide(self, facts: Facts) -> Decision:
        started = time.perf_counter()
        if self.offload:
            decision = await asyncio.to_thread(self.decide, facts)
        else:
            decision = self.decide(facts)
        if self.deps.metrics is not None:
            command = decision.commands[0] if decision.commands else None
            self.deps.metrics.voluntary_disruption_decision_evaluation_duration.labels(
                method=command.method.reason_label if command is not None else "none",
                consolidation_type=command.method.consolidation_type if command is not None else "",
            ).observe(time.perf_counter() - started)
        return decision

    async def validate(self, command: Command) -> Command | None:
        """Wait the validation delay, then re-check on fresh facts. The command to run (emptiness
        may have shrunk), or None after publishing the rejection."""
        for c in command.candidates:
            events.candidate(self.deps.recorder, c, command.explanation, self.validation_delay)
        await self.deps.clock.sleep(self.validation_delay)
        snapshot = self.deps.cluster.snapshot(self.deps.clock.now())
        facts = await self.facts(snapshot)
        if self.offload:
            again, why = await asyncio.to_thread(revalidate, command, facts)
        else:
            again, why = revalidate(command, facts)
        if again is not None:
            if again is not command:
                log.info(
                    "disruption command changed at validation",
                    extra={"command": command_report(command), "now": command_report(again)},
                )
            return again
        self.last_rejection = why
        log.info(
            "disruption command rejected at validation",
            extra={"command": command_report(command), "why": why},
        )
        for c in command.candidates:
            events.rejected(self.deps.recorder, c, why)
        if self.deps.metrics is not None:
            self.deps.metrics.voluntary_disruption_failed_validations.labels(
                consolidation_type=command.method.consolidation_type
            ).inc()
        return None

    # ------------------------------------------------------------------ hygiene
    async def cleanup_strays(self, snapshot: Snapshot) -> int:
        """Remove disruption taints and conditions that no command owns; the number removed."""
        queued_nodes = self.queue.queued_nodes()
        queued_claims = self.queue.queued_nodeclaims()
        removed = 0
        for sn in snapshot.nodes:
            if sn.nodeclaim is None or sn.marked_for_deletion:
                continue
            if sn.name in queued_nodes or sn.nodeclaim_name in queued_claims:
                continue
            if sn.node is not None and _has_disrupted_taint(sn):
                log.info("removing stray disruption taint", extra={"node": sn.node.name})
                if await set_disrupted_taint(self.deps.client, sn.node.name, present=False):
                    removed += 1
            if sn.nodeclaim.status.get_condition(CONDITION_DISRUPTION_REASON) is not None:
                log.info(
                    "removing stray disruption condition", extra={"nodeclaim": sn.nodeclaim_name}
                )
                if await set_disruption_reason(
                    self.deps.client, self.deps.clock, sn.nodeclaim_name, None
                ):
                    removed += 1
        return removed

    # ------------------------------------------------------------------ signals
    def budget_signals(self, snapshot: Snapshot) -> None:
        """Allowed-disruption gauges, and DisruptionBlocked on pools with nodes and no budget."""
        now = snapshot.now
        usage = pool_node_counts(snapshot.nodes)
        seen: set[tuple[str, str]] = set()
        mono = self.deps.clock.monotonic()
        for reason in Reason:
            allowed = budget_mapping(snapshot, reason.value, now)
            for pool, n in allowed.items():
                seen.add((pool, reason.value))
                if self.deps.metrics is not None:
                    self.deps.metrics.nodepools_allowed_disruptions.labels(
                        nodepool=pool, reason=reason.value
                    ).set(n)
                size = usage[pool].size if pool in usage else 0
                if n > 0 or size == 0:
                    continue
                key = (pool, reason.value)
                last = self._blocked_seen.get(key)
                if last is not None and mono - last < BLOCKED_DEDUPE:
                    continue
                self._blocked_seen[key] = mono
                np = snapshot.nodepools[pool]
                why = explain_budget(
                    np, reason.value, now, pool_size=size, disrupting=usage[pool].disrupting
                )
                self.deps.recorder.record(
                    events.nodepool_ref(np),
                    events.DISRUPTION_BLOCKED,
                    f"No allowed disruptions for disruption reason {reason.value}: {why}",
                    event_type=WARNING,
                    dedupe=False,
                )
        if self.deps.metrics is not None:
            for pool, reason_value in self._gauge_pools - seen:
                Metrics.remove_series(
                    self.deps.metrics.nodepools_allowed_disruptions, (pool, reason_value)
                )
        self._gauge_pools = seen

    def timeouts(self, decision: Decision, snapshot: Snapshot) -> None:
        """Say when a method hit its time limit: a warning log line and a
        ``ConsolidationTimedOut`` event on the NodePools concerned (the timeouts metric is
        counted in ``_observe``)."""
        for timeout in decision.timed_out:
            log.warning(timeout.explanation, extra={"timeout": timeout_report(timeout)})
            events.timed_out(self.deps.recorder, timeout, snapshot.nodepools)

    def unconsolidatable(self, decision: Decision, snapshot: Snapshot) -> None:
        """``Unconsolidatable`` with the reason on every managed node left alone (15 min dedupe
        per node and reason)."""
        mono = self.deps.clock.monotonic()
        self._unconsolidatable_seen = {
            k: t
            for k, t in self._unconsolidatable_seen.items()
            if mono - t < UNCONSOLIDATABLE_DEDUPE
        }
        queued = self.queue.queued_nodes()
        by_name: dict[str, StateNode] = {n.name: n for n in snapshot.nodes}
        for name, why in decision.unchanged.items():
            sn = by_name.get(name)
            if sn is None or sn.node is None or sn.nodeclaim is None:
                continue
            if sn.marked_for_deletion or name in queued:
                continue
            key = (name, why)
            if key in self._unconsolidatable_seen:
                continue
            self._unconsolidatable_seen[key] = mono
            events.publish(self.deps.recorder, sn, events.UNCONSOLIDATABLE, why, dedupe=False)

    def _observe(self, decision: Decision) -> None:
        if self.deps.metrics is None:
            return
        eligible: dict[str, int] = {}
        for method, n in decision.eligible.items():
            label = method.reason_label
            eligible[label] = max(eligible.get(label, 0), n)
        for label, n in eligible.items():
            self.deps.metrics.voluntary_disruption_eligible_nodes.labels(reason=label).set(n)
        for timeout in decision.timed_out:
            self.deps.metrics.voluntary_disruption_consolidation_timeouts.labels(
                consolidation_type=timeout.method.consolidation_type
            ).inc()

    # ------------------------------------------------------------------ on demand
    def report(self) -> dict[str, Any]:
        """The last decision, the queue and recent outcomes, as JSON-ready data."""
        decision = self.last_decision
        return {
            "decidedAt": self.last_decided_at.isoformat() if self.last_decided_at else None,
            "recheckAt": (
                decision.recheck_at.isoformat() if decision and decision.recheck_at else None
            ),
            "commands": [command_report(c) for c in decision.commands] if decision else [],
            "unchanged": dict(sorted(decision.unchanged.items())) if decision else {},
            "timedOut": [timeout_report(t) for t in decision.timed_out] if decision else [],
            "lastRejection": self.last_rejection,
            "queue": [e.summary() for e in self.queue.entries],
            "recent": [e.summary() for e in list(self.queue.history)[-10:]],
        }


def timeout_report(timeout: Timeout) -> dict[str, Any]:
    return {
        "method": timeout.method.name,
        "examined": timeout.examined,
        "unexamined": timeout.unexamined,
        "limitSeconds": timeout.limit,
        "nodepools": list(timeout.nodepools),
    }


def command_report(command: Command) -> dict[str, Any]:
    return {
        "method": command.method.name,
        "reason": command.reason.value,
        "decision": command.decision,
        "candidates": [
            {
                "node": c.name,
                "nodeclaim": c.nodeclaim_name,
                "nodepool": c.pool_name,
                "instanceType": c.instance_type_name,
                "price": c.price,
            }
            for c in command.candidates
        ],
        "replacements": [
            {
                "nodepool": r.node_pool,
                "instanceTypes": [it.name for it in r.instance_types[:10]],
                "options": len(r.instance_types),
                "price": r.price,
            }
            for r in command.replacements
        ],
        "savings": round(command.savings, 6),
        "explanation": command.explanation,
    }


def _has_disrupted_taint(sn: StateNode) -> bool:
    assert sn.node is not None
    return any(is_disrupted_taint(t) for t in sn.node.taints)
