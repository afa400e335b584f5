"""Multi-node consolidation (pure): remove several underused nodes at once, onto the nodes that
stay and at most a cheaper replacement.

Upstream searches the candidates (at most ``MAX_MULTI_NODE_CANDIDATES``, in consolidation order)
for the longest prefix of two or more that consolidates to at most one new node, by binary
search. Beyond upstream, ``Facts.search="extended"`` (the default) also tries a greedy subset
search: every prefix, and a growing set that keeps each candidate that still leaves a valid,
cheaper command, accepting N -> M replacements (M < N, cheaper in sum). The better of the two
commands (by hourly saving) wins. ``search="upstream"`` is upstream's search alone, kept for the
benchmark that compares them. The search stops at ``Facts.multi_node_timeout`` with the best
command found so far.
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

        def expired() -> bool:
            if ctx.timer() - started > ctx.facts.multi_node_timeout:
                ctx.time_out(self)
                return True
            return False

        best = self._prefix_search(ctx, cands, expired)
        if ctx.facts.search == "extended" and not expired():
            greedy = self._greedy_search(ctx, cands, expired)
            if greedy is not None and (best is None or greedy.savings > best.savings + 1e-9):
                best = greedy
        return None if best is None else consolidation.refined(ctx, best, single=self.single)

    def _consolidate(
        self, ctx: PassContext, cands: list[Candidate], max_replacements: int
    ) -> Command | None:
        command, _ = consolidation.consolidate(
            ctx, cands, method=self, single=self.single, max_replacements=max_replacements
        )
        return command

    def _prefix_search(
        self, ctx: PassContext, cands: list[Candidate], expired: Callable[[], bool]
    ) -> Command | None:
        """Upstream: binary search for the longest prefix (>= 2) that consolidates to <= 1 node."""
        lo, hi = 2, len(cands)
        best: Command | None = None
        while lo <= hi and not expired():
            mid = (lo + hi) // 2
            command = self._consolidate(ctx, cands[:mid], 1)
            if command is not None:
                best = command
                lo = mid + 1
            else:
                hi = mid - 1
        return best

    def _greedy_search(
        self, ctx: PassContext, cands: list[Candidate], expired: Callable[[], bool]
    ) -> Command | None:
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
            command = self._consolidate(ctx, trial, max_replacements)
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


MULTI_NODE: Final = MultiNodeConsolidation()
