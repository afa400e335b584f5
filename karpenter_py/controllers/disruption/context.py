"""What one pass of the disruption methods shares: candidates, the what-if simulator, budgets
left, and the notes methods leave for the next one (pure).

A pass (``decide.next_command``, or ``decide.revalidate`` on fresh facts) builds one
:class:`PassContext` and hands it to each method in turn. The shared state is explicit here and
written only through its methods:

* ``unchanged``: node name -> why it stays. The first note about a node wins (an earlier method's
  reason is the one a person acts on), except where a method says its own verdict replaces it
  (single-node consolidation's simulation result) or clears it (drift may go ahead on a node
  that pods block for the graceful methods);
* ``eligible``: candidates each method considered (the eligible-nodes gauge);
* ``timed_out``: methods that hit their time limit, once each, with how many of their
  candidates they simulated and how many they never reached;
* budgets per reason, computed once per pass from the pool usage of the snapshot plus the nodes
  earlier commands of the same evaluation took (``Facts.disrupting``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from karpenter_py.controllers.disruption.budgets import (
    PoolUsage,
    allowed_disruptions,
    explain_budget,
    pool_node_counts,
)
from karpenter_py.controllers.disruption.candidates import build_candidates
from karpenter_py.controllers.disruption.types import Candidate, Method, Reason, Timeout
from karpenter_py.scheduling.plan import ExistingPlacement
from karpenter_py.scheduling.simulate import Simulation, Simulator

if TYPE_CHECKING:
    # decide builds the context from its Facts; only the type is needed here.
    from karpenter_py.controllers.disruption.decide import Facts

Timer = Callable[[], float]


class PassContext:
    """The facts of one pass and what its methods tell each other (see the module docstring)."""

    def __init__(self, facts: Facts, timer: Timer) -> None:
        self.facts = facts
        self.timer = timer
        snap = facts.snapshot
        self.candidates, unchanged = build_candidates(
            snap, facts.instance_types, now=facts.now, queued=facts.queued
        )
        self.unchanged: dict[str, str] = dict(unchanged)
        # The eventual class: nodes with a terminationGracePeriod ignore pod blocks.
        self.eventual_candidates, _ = build_candidates(
            snap, facts.instance_types, now=facts.now, queued=facts.queued, eventual=True
        )
        self.sim = Simulator(
            snap, instance_types=facts.instance_types, options=facts.options, indexes=facts.indexes
        )
        self.usage = pool_node_counts(snap.nodes)
        self._budgets: dict[Reason, dict[str, int]] = {}
        self.timed_out: list[Timeout] = []
        self.eligible: dict[Method, int] = {}
        self.budget_blocked = 0.0  # see Decision.budget_blocked

    def candidates_for(self, method: Method) -> list[Candidate]:
        """The candidates of ``method``'s disruption class."""
        return self.eventual_candidates if method.eventual else self.candidates

    # ------------------------------------------------------------------ notes
    def note(self, c: Candidate, why: str, *, override: bool = False) -> None:
        """Why ``c`` stays; an earlier note wins unless ``override``."""
        if override:
            self.unchanged[c.name] = why
        else:
            self.unchanged.setdefault(c.name, why)

    def clear_note(self, name: str) -> None:
        self.unchanged.pop(name, None)

    def admitted(self, method: Method, cands: Iterable[Candidate]) -> list[Candidate]:
        """The candidates ``method`` may act on (its eligible ones, counted); the others are
        told why."""
        out = []
        for c in cands:
            why = method.block(c, self.facts.now)
            if why is not None:
                self.note(c, why)
                continue
            out.append(c)
        self.considered(method, len(out))
        return out

    def considered(self, method: Method, n: int) -> None:
        """``method`` considered ``n`` candidates."""
        self.eligible[method] = n

    def time_out(
        self,
        method: Method,
        *,
        limit: float,
        examined: Collection[str],
        meant: Sequence[Candidate],
        concerned: Iterable[Candidate],
    ) -> None:
        """``method`` hit its time limit of ``limit`` seconds, having simulated the candidates
        named in ``examined`` out of the ``meant`` ones it set out to try; ``concerned`` are the
        candidates whose NodePools the cut-off search was about (recorded once per method)."""
        if any(t.method is method for t in self.timed_out):
            return
        left = sum(1 for c in meant if c.name not in examined)
        self.timed_out.append(
            Timeout(
                method=method,
                limit=limit,
                examined=len(meant) - left,
                unexamined=left,
                nodepools=tuple(sorted({c.pool_name for c in concerned})),
            )
        )

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


# ---------------------------------------------------------------------------------- wording
# What every method says about a simulation and a saving, in the same words.
def placements(sim: Simulation) -> tuple[ExistingPlacement, ...]:
    """Where the moved pods go on nodes that stay."""
    moved = {p.key for p in sim.moved}
    out = []
    for pl in sim.plan.existing:
        pods = tuple(p for p in pl.pods if p.key in moved)
        if pods:
            out.append(replace(pl, pods=pods))
    return tuple(out)


def pod_error(sim: Simulation) -> str:
    err = sim.errors[0]
    return f"pod {err.pod.key} cannot move: {err.reason}"


def nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def money(amount: float) -> str:
    return f"${amount:.4f}"
