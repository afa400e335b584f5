"""Disruption decisions, pure: which nodes to remove or replace now, and why every other node stays.

``next_command`` runs upstream's methods in order (emptiness, drift, multi-node consolidation,
single-node consolidation) and returns the first command one of them finds; the controller runs
it through the orchestration queue. ``evaluate`` keeps going on the cluster as it would be after
each command, which is what ``karpenter-py plan --disruption`` prints. Both use the same solver
the provisioner uses, through ``scheduling.Simulator``: "could these nodes' pods run elsewhere,
and on what?".

Beyond upstream, multi-node consolidation (``search="extended"``, the default) also tries a
greedy subset search next to upstream's prefix binary search: it grows a set of candidates one
by one in disruption-cost order, keeping each that still leaves a valid, cheaper command, and it
accepts N -> M replacements (M < N, cheaper in sum) where upstream accepts at most one. The
better of the two commands (by hourly saving) wins. ``search="upstream"`` is upstream's search
alone, kept for the benchmark that compares them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from karpenter_py.controllers.disruption.budgets import (
    PoolUsage,
    allowed_disruptions,
    explain_budget,
    pool_node_counts,
)
from karpenter_py.controllers.disruption.candidates import (
    build_candidates,
    consolidation_block,
    drift_block,
    emptiness_block,
    is_empty,
    order_for_consolidation,
    order_for_drift,
)
from karpenter_py.controllers.disruption.types import (
    Candidate,
    Command,
    Decision,
    Method,
    Reason,
)
from karpenter_py.model.core import Node, Pod
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.scheduling.plan import ExistingPlacement, NewNodeClaim
from karpenter_py.scheduling.requirements import Req, Requirements
from karpenter_py.scheduling.simulate import Simulation, Simulator
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode

COMMAND_VALIDATION_DELAY = 15.0  # seconds a consolidation command waits before re-validation
MULTI_NODE_TIMEOUT = 60.0
SINGLE_NODE_TIMEOUT = 180.0
MAX_MULTI_NODE_CANDIDATES = 100
MIN_SPOT_TO_SPOT_TYPES = 15
BALANCED_APPROVAL = 0.5  # score >= 1/k with k = 2

SPOT = "spot"
ON_DEMAND = "on-demand"
RESERVED = "reserved"

Search = Literal["upstream", "extended"]


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything a decision reads. ``disrupting`` counts, per NodePool, nodes already taken by
    earlier commands of the same evaluation (they consume budget like nodes being deleted)."""

    snapshot: Snapshot
    instance_types: Mapping[str, Sequence[InstanceType]]
    now: datetime
    options: SolveOptions = field(default_factory=SolveOptions)
    spot_to_spot: bool = False
    queued: frozenset[str] = frozenset()
    indexes: IndexCache | None = None
    search: Search = "extended"
    disrupting: Mapping[str, int] = field(default_factory=dict)
    multi_node_timeout: float = MULTI_NODE_TIMEOUT
    single_node_timeout: float = SINGLE_NODE_TIMEOUT


Timer = Callable[[], float]


# ---------------------------------------------------------------------------------- entry points
def next_command(facts: Facts, *, timer: Timer = time.perf_counter) -> Decision:
    """The first command a method finds (emptiness, drift, multi-node, single-node), and why
    every other node is left alone."""
    return _Pass(facts, timer).run()


def evaluate(
    facts: Facts, *, timer: Timer = time.perf_counter, max_commands: int = 1000
) -> Decision:
    """Every command disruption would take, in order, on the cluster as each leaves it."""
    commands: list[Command] = []
    taken: set[str] = set()
    timed_out: list[Method] = []
    eligible: dict[Method, int] = {}
    current = facts
    unchanged: dict[str, str] = {}
    for step in range(max_commands):
        decision = next_command(current, timer=timer)
        timed_out.extend(m for m in decision.timed_out if m not in timed_out)
        for m, n in decision.eligible.items():
            eligible.setdefault(m, n)
        unchanged = decision.unchanged
        if not decision.commands:
            break
        (command,) = decision.commands
        commands.append(command)
        taken.update(c.name for c in command.candidates)
        disrupting = dict(current.disrupting)
        for c in command.candidates:
            disrupting[c.pool_name] = disrupting.get(c.pool_name, 0) + 1
        current = replace(
            current,
            snapshot=apply_command(current.snapshot, command, tag=str(step)),
            disrupting=disrupting,
        )
    # Replacement nodes of earlier commands are not real nodes: report only nodes that exist.
    existing = {n.name for n in facts.snapshot.nodes}
    return Decision(
        commands=tuple(commands),
        unchanged={k: v for k, v in unchanged.items() if k in existing and k not in taken},
        timed_out=tuple(timed_out),
        eligible=eligible,
    )


def needs_validation(command: Command) -> bool:
    """Consolidation and emptiness wait COMMAND_VALIDATION_DELAY and re-check; drift does not."""
    return command.method is not Method.DRIFT


def revalidate(command: Command, facts: Facts) -> tuple[Command | None, str]:
    """Re-check a command against fresh facts after the validation delay, as upstream does: every
    candidate must still qualify and fit the budget, and a fresh simulation must agree on the
    number of replacements with a type list that includes the command's. Emptiness keeps the
    candidates that are still empty and fails only when none are. Returns the command to run (for
    emptiness possibly smaller) or None with the rejection reason."""
    p = _Pass(facts, time.perf_counter)
    pool = p.drift_candidates if command.method is Method.DRIFT else p.candidates
    current = {c.name: c for c in pool}
    names = [c.name for c in command.candidates]
    if command.method is Method.EMPTINESS:
        still = [
            current[n]
            for n in names
            if n in current and emptiness_block(current[n], facts.now) is None
        ]
        still = p.within_budget(still, Reason.EMPTY)
        if not still:
            return None, "no candidate is still empty and within budget"
        return replace(command, candidates=tuple(still)), ""
    missing = [n for n in names if n not in current]
    if missing:
        return (
            None,
            f"candidate {missing[0]} no longer qualifies: {p.unchanged.get(missing[0], 'changed')}",
        )
    fresh = [current[n] for n in names]
    for c in fresh:
        why = p.consolidatable_why(c) if command.method is not Method.DRIFT else p.drift_why(c)
        if why is not None:
            return None, f"candidate {c.name}: {why}"
    if len(p.within_budget(fresh, command.reason)) < len(fresh):
        return None, f"budget no longer allows disrupting {len(fresh)} node(s)"
    single = command.method is Method.SINGLE_NODE
    limit = max(1, len(command.replacements))
    again, why = p.consolidate(
        fresh, method=command.method, single=single, max_replacements=limit, refine=True
    )
    if again is None:
        return None, f"re-simulation: {why}"
    if len(again.replacements) != len(command.replacements):
        return None, (
            f"re-simulation needs {len(again.replacements)} replacement(s), "
            f"the command {len(command.replacements)}"
        )
    for old, new in zip(command.replacements, again.replacements, strict=True):
        if not {it.name for it in old.instance_types} <= {it.name for it in new.instance_types}:
            return None, "re-simulation narrowed the replacement's instance types"
    return command, ""


def validate(command: Command, facts: Facts) -> str | None:
    """``revalidate`` as a yes/no: None when the command may go ahead unchanged."""
    again, why = revalidate(command, facts)
    if again is None:
        return why
    if len(again.candidates) != len(command.candidates):
        return "some candidates are no longer empty"
    return None


# ---------------------------------------------------------------------------------- one pass
class _Pass:
    def __init__(self, facts: Facts, timer: Timer) -> None:
        self.facts = facts
        self.timer = timer
        snap = facts.snapshot
        self.candidates, unchanged = build_candidates(
            snap, facts.instance_types, now=facts.now, queued=facts.queued
        )
        self.unchanged: dict[str, str] = dict(unchanged)
        # Drift is the eventual class: nodes with a terminationGracePeriod ignore pod blocks.
        self.drift_candidates, _ = build_candidates(
            snap, facts.instance_types, now=facts.now, queued=facts.queued, eventual=True
        )
        self.sim = Simulator(
            snap, instance_types=facts.instance_types, options=facts.options, indexes=facts.indexes
        )
        self.usage = pool_node_counts(snap.nodes)
        self._budgets: dict[Reason, dict[str, int]] = {}
        self.timed_out: list[Method] = []
        self.eligible: dict[Method, int] = {}

    # ------------------------------------------------------------------ budgets
    def counts(self, pool: str) -> tuple[int, int]:
        """(pool size, nodes disrupting) for budgets; nodes that earlier commands of the same
        evaluation removed still count as both, as they would while being replaced."""
        usage = self.usage.get(pool, PoolUsage())
        removed = self.facts.disrupting.get(pool, 0)
        return usage.size + removed, usage.disrupting + removed

    def budget(self, reason: Reason) -> dict[str, int]:
        if reason not in self._budgets:
            out = {}
            for name, np in self.facts.snapshot.nodepools.items():
                size, disrupting = self.counts(name)
                allowed = allowed_disruptions(np, reason.value, pool_size=size, now=self.facts.now)
                out[name] = max(0, allowed - disrupting)
            self._budgets[reason] = out
        return self._budgets[reason]

    def budget_why(self, c: Candidate, reason: Reason) -> str:
        size, disrupting = self.counts(c.pool_name)
        return explain_budget(
            c.nodepool, reason.value, self.facts.now, pool_size=size, disrupting=disrupting
        )

    def within_budget(self, cands: Sequence[Candidate], reason: Reason) -> list[Candidate]:
        """The candidates the pools' budgets allow, in order; the rest are told why."""
        left = dict(self.budget(reason))
        out = []
        for c in cands:
            if left.get(c.pool_name, 0) > 0:
                left[c.pool_name] -= 1
                out.append(c)
            else:
                self.note(c, self.budget_why(c, reason))
        return out

    # ------------------------------------------------------------------ filters
    def note(self, c: Candidate, why: str) -> None:
        self.unchanged.setdefault(c.name, why)

    def consolidatable_why(self, c: Candidate) -> str | None:
        return consolidation_block(c, self.facts.now)

    def drift_why(self, c: Candidate) -> str | None:
        return drift_block(c)

    # ------------------------------------------------------------------ the pass
    def run(self) -> Decision:
        command = None
        for method in (self.emptiness, self.drift, self.multi_node, self.single_node):
            command = method()
            if command is not None:
                break
        taken = {c.name for c in command.candidates} if command is not None else set()
        for c in self.candidates:
            if c.name not in taken:
                self.note(c, "no disruption method applies")
        return Decision(
            commands=(command,) if command is not None else (),
            unchanged={k: v for k, v in self.unchanged.items() if k not in taken},
            timed_out=tuple(self.timed_out),
            eligible=dict(self.eligible),
        )

    def emptiness(self) -> Command | None:
        empty = []
        for c in self.candidates:
            if not is_empty(c.pods):
                continue
            why = emptiness_block(c, self.facts.now)
            if why is not None:
                self.note(c, why)
                continue
            empty.append(c)
        self.eligible[Method.EMPTINESS] = len(empty)
        taken = self.within_budget(empty, Reason.EMPTY)
        if not taken:
            return None
        price = sum(c.price for c in taken)
        return Command(
            Method.EMPTINESS,
            tuple(taken),
            explanation=f"{_nodes(len(taken))} empty: deleting saves {_money(price)}/h",
        )

    def drift(self) -> Command | None:
        drifted = [c for c in self.drift_candidates if drift_block(c) is None]
        if drifted:
            blocked = {c.name for c in self.candidates}
            for c in drifted:
                if c.name not in blocked:  # pod-blocked, but drift may go ahead
                    self.unchanged.pop(c.name, None)
        self.eligible[Method.DRIFT] = len(drifted)
        for c in self.within_budget(order_for_drift(drifted), Reason.DRIFTED):
            sim = self.sim.run([c.name], repack=True)
            if not sim.all_scheduled:
                self.note(c, f"drifted, but {_pod_error(sim)}")
                continue
            reps = sim.replacements
            what = f"{len(reps)} replacement(s)" if reps else "no replacement needed"
            return Command(
                Method.DRIFT,
                (c,),
                replacements=reps,
                placements=_placements(sim),
                explanation=f"{c.name} drifted: replace ({what})",
            )
        return None

    def consolidation_candidates(self, method: Method) -> list[Candidate]:
        out = []
        for c in self.candidates:
            why = self.consolidatable_why(c)
            if why is not None:
                self.note(c, why)
                continue
            out.append(c)
        self.eligible[method] = len(out)
        return self.within_budget(order_for_consolidation(out), Reason.UNDERUTILIZED)

    def multi_node(self) -> Command | None:
        started = self.timer()
        cands = self.consolidation_candidates(Method.MULTI_NODE)[:MAX_MULTI_NODE_CANDIDATES]
        if len(cands) < 2:
            return None

        def expired() -> bool:
            if self.timer() - started > self.facts.multi_node_timeout:
                if Method.MULTI_NODE not in self.timed_out:
                    self.timed_out.append(Method.MULTI_NODE)
                return True
            return False

        best = self._prefix_search(cands, expired)
        if self.facts.search == "extended" and not expired():
            greedy = self._greedy_search(cands, expired)
            if greedy is not None and (best is None or greedy.savings > best.savings + 1e-9):
                best = greedy
        return None if best is None else self.refined(best)

    def refined(self, command: Command) -> Command:
        """The chosen command with its replacements packed (``consolidate(refine=True)``): the
        search simulates greedily, the command it settles on gets the packing step's choice."""
        if not command.replacements:
            return command
        again, _ = self.consolidate(
            list(command.candidates),
            method=command.method,
            single=command.method is Method.SINGLE_NODE,
            max_replacements=len(command.replacements),
            refine=True,
        )
        return command if again is None else again

    def _prefix_search(self, cands: list[Candidate], expired: Callable[[], bool]) -> Command | None:
        """Upstream: binary search for the longest prefix (>= 2) that consolidates to <= 1 node."""
        lo, hi = 2, len(cands)
        best: Command | None = None
        while lo <= hi and not expired():
            mid = (lo + hi) // 2
            command, _ = self.consolidate(
                cands[:mid], method=Method.MULTI_NODE, single=False, max_replacements=1
            )
            if command is not None:
                best = command
                lo = mid + 1
            else:
                hi = mid - 1
        return best

    def _greedy_search(self, cands: list[Candidate], expired: Callable[[], bool]) -> Command | None:
        """Ours, two linear scans in candidate order:

        * every prefix, not only the ones a binary search visits (three small nodes may merge
          into one bigger node although no two of them can), with at most one replacement: a
          long prefix onto several new nodes tends to pack worse than later moves would;
        * a growing set that keeps a candidate only when the set then saves more, with N -> M
          replacements (M < N), which finds sets that are not prefixes (a node that cannot
          move is skipped, not a barrier).

        The command with the largest saving wins; ties keep the fewer candidates."""
        best: Command | None = None

        def consider(trial: list[Candidate], max_replacements: int) -> Command | None:
            nonlocal best
            command, _ = self.consolidate(
                trial, method=Method.MULTI_NODE, single=False, max_replacements=max_replacements
            )
            better = best is None or (command is not None and command.savings > best.savings + 1e-9)
            if command is not None and len(trial) >= 2 and better:
                best = command
            return command

        for k in range(2, len(cands) + 1):
            if expired():
                break
            consider(cands[:k], 1)
        chosen: list[Candidate] = []
        kept: Command | None = None
        for c in cands:
            if expired():
                break
            trial = [*chosen, c]
            command = consider(trial, max(1, len(trial) - 1))
            if command is not None and (kept is None or command.savings > kept.savings + 1e-9):
                chosen, kept = trial, command
        return best

    def single_node(self) -> Command | None:
        started = self.timer()
        for c in _interleave(self.consolidation_candidates(Method.SINGLE_NODE)):
            if self.timer() - started > self.facts.single_node_timeout:
                self.timed_out.append(Method.SINGLE_NODE)
                break
            command, why = self.consolidate(
                [c], method=Method.SINGLE_NODE, single=True, max_replacements=1
            )
            if command is not None:
                return self.refined(command)
            self.unchanged[c.name] = why
        return None

    # ------------------------------------------------------------------ one consolidation
    def consolidate(
        self,
        cands: Sequence[Candidate],
        *,
        method: Method,
        single: bool,
        max_replacements: int,
        refine: bool = False,
    ) -> tuple[Command | None, str]:
        """Can these candidates go (delete) or be replaced by cheaper capacity? The command, or
        None and a reason a person can act on. With ``refine``, a replacing command is also
        simulated with the packing step, and the one that saves more is returned."""
        unknown = [c for c in cands if c.price <= 0]
        if unknown:
            return (
                None,
                f"price of {unknown[0].instance_type_name or 'its instance type'} is unknown",
            )
        names = [c.name for c in cands]
        command, why = self._command(
            cands, self.sim.run(names), method=method, single=single, limit=max_replacements
        )
        if refine and command is not None and command.replacements:
            packed, _ = self._command(
                cands,
                self.sim.run(names, repack=True),
                method=method,
                single=single,
                limit=max_replacements,
            )
            if packed is not None and packed.savings > command.savings + 1e-9:
                return packed, ""
        return command, why

    def _command(
        self,
        cands: Sequence[Candidate],
        sim: Simulation,
        *,
        method: Method,
        single: bool,
        limit: int,
    ) -> tuple[Command | None, str]:
        """The command a simulation without ``cands`` supports, or None and why not."""
        total = sum(c.price for c in cands)
        if not sim.all_scheduled:
            return None, _pod_error(sim)
        reps = sim.replacements
        if not reps:
            return (
                Command(
                    method,
                    tuple(cands),
                    placements=_placements(sim),
                    explanation=f"{_nodes(len(cands))} can go: pods fit elsewhere, saves "
                    f"{_money(total)}/h",
                ),
                "",
            )
        if len(reps) > limit:
            return None, f"its pods would need {len(reps)} new nodes"
        cheaper: list[NewNodeClaim] = []
        spent = 0.0
        for i, nc in enumerate(reps):
            # Each replacement must save even at its worst launch price, with the others at
            # their cheapest: the command never costs more than what it removes.
            others = sum(r.price for r in reps[i + 1 :])
            narrowed, why = self._cheaper(nc, total - spent - others, cands, single=single)
            if narrowed is None:
                return None, why
            cheaper.append(narrowed)
            spent += _worst_price(narrowed)
        command = Command(
            method,
            tuple(cands),
            replacements=tuple(cheaper),
            placements=_placements(sim),
        )
        balanced = self._balanced_why(command)
        if balanced is not None:
            return None, balanced
        types = ", ".join(sorted({r.instance_type.name for r in cheaper}))
        return (
            replace(
                command,
                explanation=f"{_nodes(len(cands))} -> {_nodes(len(cheaper))} ({types}) saves "
                f"{_money(command.savings)}/h",
            ),
            "",
        )

    def _capacity_types(
        self, reqs: Requirements, cands: Sequence[Candidate]
    ) -> tuple[set[str] | None, str]:
        """Capacity types a replacement may launch as, by upstream's rules: spot candidates
        need the SpotToSpotConsolidation gate to go to spot, and a replacement that may be spot
        or on-demand is pinned to spot (an on-demand fallback could cost more than today)."""
        ct = reqs.get(LABEL_CAPACITY_TYPE)
        allowed = {t for t in (SPOT, ON_DEMAND, RESERVED) if ct is None or ct.has(t)}
        if all(c.capacity_type == SPOT for c in cands) and SPOT in allowed:
            if not self.facts.spot_to_spot:
                return None, (
                    "spot-to-spot consolidation is disabled (feature gate SpotToSpotConsolidation)"
                )
            return {SPOT}, ""
        if SPOT in allowed and ON_DEMAND in allowed:
            allowed.discard(ON_DEMAND)
        return allowed, ""

    def _cheaper(
        self, nc: NewNodeClaim, budget: float, cands: Sequence[Candidate], *, single: bool
    ) -> tuple[NewNodeClaim | None, str]:
        """Narrow a replacement to the options whose worst launch price is below ``budget``,
        with upstream's capacity-type rules; None and why when nothing qualifies."""
        reqs = Requirements.from_selectors(nc.requirements)
        allowed, why = self._capacity_types(reqs, cands)
        if allowed is None:
            return None, why
        zone = reqs.get(LABEL_TOPOLOGY_ZONE)
        kept, why = _cheaper_options(nc.instance_types, allowed, zone, budget, cands)
        if not kept:
            return None, why
        min_values = [(k, r) for k, r in reqs.items() if r.min_values is not None]
        if allowed == {SPOT} and all(c.capacity_type == SPOT for c in cands) and single:
            if len(kept) < MIN_SPOT_TO_SPOT_TYPES:
                return None, (
                    f"only {len(kept)} cheaper spot types ({MIN_SPOT_TO_SPOT_TYPES} needed for "
                    "spot-to-spot consolidation)"
                )
            n = MIN_SPOT_TO_SPOT_TYPES
            while n < len(kept) and not _meets(kept[:n], min_values):
                n += 1
            kept = kept[:n]
        if not _meets(kept, min_values):
            return None, "the cheaper options would not meet the NodePool's minValues"
        return _narrow(nc, kept, allowed, zone), ""

    def _balanced_why(self, command: Command) -> str | None:
        """consolidationPolicy Balanced: each source pool approves only moves whose share of the
        pool's saving is at least half their share of the pool's disruption (k = 2)."""
        by_pool: dict[str, list[Candidate]] = {}
        for c in command.candidates:
            if c.nodepool.spec.disruption.consolidation_policy == "Balanced":
                by_pool.setdefault(c.pool_name, []).append(c)
        if not by_pool:
            return None
        saving_share = command.savings / max(1, len(command.candidates))
        for pool, mine in by_pool.items():
            nodes = [c for c in self.candidates if c.pool_name == pool]
            pool_cost = sum(c.price for c in nodes) or 1.0
            pool_disruption = sum(1.0 + c.disruption_cost for c in nodes) or 1.0
            evicted = sum(1.0 + c.disruption_cost for c in mine)
            score = (saving_share * len(mine) / pool_cost) / (evicted / pool_disruption)
            if score < BALANCED_APPROVAL:
                return (
                    f"Balanced policy of nodepool {pool}: score {score:.2f} < {BALANCED_APPROVAL}"
                )
        return None


# ---------------------------------------------------------------------------------- helpers
def _interleave(cands: Sequence[Candidate]) -> list[Candidate]:
    """Round-robin across NodePools, keeping each pool's order (upstream's single-node order)."""
    by_pool: dict[str, list[Candidate]] = {}
    for c in cands:
        by_pool.setdefault(c.pool_name, []).append(c)
    out: list[Candidate] = []
    queues = list(by_pool.values())
    i = 0
    while any(queues):
        q = queues[i % len(queues)]
        if q:
            out.append(q.pop(0))
        i += 1
    return out


def _placements(sim: Simulation) -> tuple[ExistingPlacement, ...]:
    moved = {p.key for p in sim.moved}
    out = []
    for pl in sim.plan.existing:
        pods = tuple(p for p in pl.pods if p.key in moved)
        if pods:
            out.append(replace(pl, pods=pods))
    return tuple(out)


def _pod_error(sim: Simulation) -> str:
    err = sim.errors[0]
    return f"pod {err.pod.key} cannot move: {err.reason}"


def _cheaper_options(
    types: Sequence[InstanceType],
    allowed: set[str],
    zone: Req | None,
    budget: float,
    cands: Sequence[Candidate],
) -> tuple[list[InstanceType], str]:
    """Options whose worst launch price is below ``budget``, cheapest first (a candidate's own
    type must also beat that candidate's price); else [] and why, naming the cheapest."""
    priced: list[tuple[float, str, InstanceType]] = []
    cheapest: tuple[float, str] | None = None
    own: dict[str, float] = {}
    for c in cands:
        own[c.instance_type_name] = min(c.price, own.get(c.instance_type_name, c.price))
    for it in types:
        worst = _worst_launch_price(it, allowed, zone)
        if worst is None:
            continue
        if cheapest is None or (worst, it.name) < cheapest:
            cheapest = (worst, it.name)
        if it.name in own and worst >= own[it.name]:
            continue  # swapping a node for its own type saves nothing
        if worst < budget - 1e-12:
            priced.append((worst, it.name, it))
    if priced:
        priced.sort(key=lambda p: (p[0], p[1]))
        return [it for _, _, it in priced], ""
    if cheapest is None:
        return [], "no replacement offering is available"
    return [], (
        f"no cheaper replacement: cheapest option {cheapest[1]} at {_money(cheapest[0])}/h"
        f" >= current {_money(budget)}/h"
    )


def _offerings(it: InstanceType, allowed: set[str], zone: Req | None) -> list[Offering]:
    return [
        o
        for o in it.offerings
        if o.available and o.capacity_type in allowed and (zone is None or zone.has(o.zone))
    ]


def _worst_launch_price(it: InstanceType, allowed: set[str], zone: Req | None) -> float | None:
    """Upstream's worst launch price: the dearest compatible reserved offering, else spot, else
    on-demand; None when the type has no compatible offering."""
    offers = _offerings(it, allowed, zone)
    for ct in (RESERVED, SPOT, ON_DEMAND):
        prices = [o.price for o in offers if o.capacity_type == ct]
        if prices:
            return max(prices)
    return None


def _worst_price(nc: NewNodeClaim) -> float:
    reqs = Requirements.from_selectors(nc.requirements)
    ct = reqs.get(LABEL_CAPACITY_TYPE)
    allowed = {t for t in (SPOT, ON_DEMAND, RESERVED) if ct is None or ct.has(t)}
    prices = [
        p
        for it in nc.instance_types
        if (p := _worst_launch_price(it, allowed, reqs.get(LABEL_TOPOLOGY_ZONE))) is not None
    ]
    return max(prices, default=nc.price)


def _meets(types: Sequence[InstanceType], wanted: Sequence[tuple[str, Req]]) -> bool:
    for key, req in wanted:
        values = {v for it in types for v in it.requirements.get(key, ()) if req.has(v)}
        if len(values) < (req.min_values or 0):
            return False
    return True


def _narrow(
    nc: NewNodeClaim, kept: Sequence[InstanceType], allowed: set[str], zone: Req | None
) -> NewNodeClaim:
    """The replacement restricted to ``kept`` types and ``allowed`` capacity types, its cheapest
    option and offering recomputed."""
    reqs = Requirements.from_selectors(nc.requirements)
    reqs = reqs.with_req(Req.in_(LABEL_INSTANCE_TYPE, (it.name for it in kept)))
    offered = {o.capacity_type for it in kept for o in _offerings(it, allowed, zone)}
    reqs = reqs.with_req(Req.in_(LABEL_CAPACITY_TYPE, offered))
    best_it, best = min(
        ((it, o) for it in kept for o in _offerings(it, allowed, zone)),
        key=lambda p: (p[1].price, p[0].name),
    )
    labels = dict(nc.labels)
    labels.update(
        {
            LABEL_INSTANCE_TYPE: best_it.name,
            LABEL_TOPOLOGY_ZONE: best.zone,
            LABEL_CAPACITY_TYPE: best.capacity_type,
        }
    )
    return replace(
        nc,
        instance_types=tuple(kept),
        requirements=reqs.to_selectors(),
        labels=labels,
        instance_type=best_it,
        offering=best,
    )


def apply_command(snapshot: Snapshot, command: Command, *, tag: str = "0") -> Snapshot:
    """The snapshot as it will be once ``command`` is done: candidates gone, their pods on the
    nodes the simulation chose, replacements present as initialized nodes holding their pods.

    Replacements are named ``replacement-<tag>-<n>``: the solver's placeholder hostnames restart
    in every solve, so ``tag`` (the command's step in an evaluation) keeps names unique. They
    have no NodeClaim, so later steps never disrupt them: a node launched a moment ago is not
    consolidated either (consolidateAfter counts from its initialization)."""
    gone = {c.name for c in command.candidates}
    pods_by_node = {k: v for k, v in snapshot.pods_by_node.items() if k not in gone}
    for pl in command.placements:
        pods_by_node[pl.node_name] = (
            *pods_by_node.get(pl.node_name, ()),
            *(_bound(p, pl.node_name) for p in pl.pods),
        )
    moved = {p.key for c in command.candidates for p in c.pods}
    nodes = [n for n in snapshot.nodes if n.name not in gone]
    for n, nc in enumerate(command.replacements):
        name = f"replacement-{tag}-{n}"
        labels = {
            **nc.labels,
            LABEL_HOSTNAME: name,
            LABEL_NODE_REGISTERED: "true",
            LABEL_NODE_INITIALIZED: "true",
        }
        it = nc.instance_type
        node = Node(
            name=name,
            labels=labels,
            taints=nc.taints,
            capacity=dict(it.capacity),
            allocatable=dict(it.allocatable),
            ready=True,
        )
        nodes.append(StateNode(node=node, nodeclaim=None))
        pods_by_node[name] = tuple(_bound(p, name) for p in nc.pods if p.key in moved)
    return replace(snapshot, nodes=tuple(nodes), pods_by_node=pods_by_node)


def _bound(pod: Pod, node_name: str) -> Pod:
    return replace(pod, node_name=node_name, unschedulable=False, nominated_node_name="")


def hourly_price(sn: StateNode, instance_types: Mapping[str, Sequence[InstanceType]]) -> float:
    """What a node costs per hour: its instance type's offering in its zone and capacity type."""
    labels = sn.labels
    name = labels.get(LABEL_INSTANCE_TYPE, "")
    for it in instance_types.get(sn.node_pool, ()):
        if it.name != name:
            continue
        for o in it.offerings:
            if o.zone == labels.get(LABEL_TOPOLOGY_ZONE) and o.capacity_type == labels.get(
                LABEL_CAPACITY_TYPE
            ):
                return o.price
    return 0.0


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _money(amount: float) -> str:
    return f"${amount:.4f}"
