"""Multi-node consolidation (pure): remove several underused nodes at once, onto the nodes that
stay and at most a cheaper replacement.

Upstream searches the candidates (at most ``MAX_MULTI_NODE_CANDIDATES``, in consolidation order)
for the longest prefix of two or more that consolidates to at most one new node, by binary
search. Beyond upstream, ``Facts.search="extended"`` (the default) also tries a greedy subset
search: every prefix, and a growing set that keeps each candidate that still leaves a valid,
cheaper command, accepting N -> M replacements (M < N, cheaper in sum). The better of the two
commands (by hourly saving) wins. ``search="upstream"`` is upstream's search alone, kept for the
benchmark that compares them. The search stops at ``Facts.multi_node_timeout`` with the best
command found so far, and records the timeout with how many candidates took part in no
simulation (``PassContext.time_out``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from karpenter_py.controllers.disruption import consolidation
from karpenter_py.controllers.disruption.context import PassContext
from karpenter_py.controllers.disruption.types import Candidate, Command

MULTI_NODE_TIMEOUT: Final = 60.0
MAX_MULTI_NODE_CANDIDATES: Final = 100


class MultiNodeConsolidation(consolidation.Consolidation):
    name: Final = "multi-node-consolidation"
    consolidation_type: Final = "multi"
    single = False

    def compute_command(self, ctx: PassContext) -> Command | None:
        started = ctx.timer()
        cands = consolidation.consolidation_candidates(ctx, self)[:MAX_MULTI_NODE_CANDIDATES]
        if len(cands) < 2:
            return None
        limit = ctx.facts.multi_node_timeout
        search = _Search(ctx, self, lambda: ctx.timer() - started > limit)
        best = self._prefix_search(search, cands)
        if ctx.facts.search == "extended" and not search.expired():
            greedy = self._greedy_search(search, cands)
            if greedy is not None and (best is None or greedy.savings > best.savings + 1e-9):
                best = greedy
        if search.timed_out:
            # Every candidate is part of the search for the best set, so every pool is concerned.
            ctx.time_out(self, limit=limit, examined=search.examined, meant=cands, concerned=cands)
        return None if best is None else consolidation.refined(ctx, best, single=self.single)

    def _prefix_search(self, search: _Search, cands: list[Candidate]) -> Command | None:
        """Upstream: binary search for the longest prefix (>= 2) that consolidates to <= 1 node."""
        lo, hi = 2, len(cands)
        best: Command | None = None
        while lo <= hi and not search.expired():
            mid = (lo + hi) // 2
            command = search.consolidate(cands[:mid], 1)
            if command is not None:
                best = command
                lo = mid + 1
            else:
                hi = mid - 1
        return best

    def _greedy_search(self, search: _Search, cands: list[Candidate]) -> Command | None:
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
            command = search.consolidate(trial, max_replacements)
            better = best is None or (command is not None and command.savings > best.savings + 1e-9)
            if command is not None and len(trial) >= 2 and better:
                best = command
            return command

        for k in range(2, len(cands) + 1):
            if search.expired():
                break
            consider(cands[:k], 1)
        chosen: list[Candidate] = []
        kept: Command | None = None
        for c in cands:
            if search.expired():
                break
            trial = [*chosen, c]
            command = consider(trial, max(1, len(trial) - 1))
            if command is not None and (kept is None or command.savings > kept.savings + 1e-9):
                chosen, kept = trial, command
        return best


class _Search:
    """One multi-node search: its simulations, the candidates they took part in (what a
    timeout reports as examined) and whether the time limit cut it short."""

    def __init__(
        self, ctx: PassContext, method: MultiNodeConsolidation, over: Callable[[], bool]
    ) -> None:
        self.ctx = ctx
        self.method = method
        self.over = over
        self.examined: set[str] = set()
        self.timed_out = False

    def expired(self) -> bool:
        self.timed_out = self.timed_out or self.over()
        return self.timed_out

    def consolidate(self, cands: list[Candidate], max_replacements: int) -> Command | None:
        self.examined.update(c.name for c in cands)
        command, _ = consolidation.consolidate(
            self.ctx,
            cands,
            method=self.method,
            single=self.method.single,
            max_replacements=max_replacements,
        )
        return command


MULTI_NODE: Final = MultiNodeConsolidation()
