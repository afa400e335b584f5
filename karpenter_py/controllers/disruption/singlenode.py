"""Single-node consolidation (pure): delete or replace one underused node with cheaper capacity.

Candidates are tried in consolidation order, round-robin across NodePools (upstream's order, so
one large pool does not starve the others); the first that consolidates is the command. Each
candidate tried and rejected is told the simulation's reason, which replaces any earlier note.
Spot-to-spot replacement needs at least ``MIN_SPOT_TO_SPOT_TYPES`` cheaper spot types. The scan
stops at ``Facts.single_node_timeout`` and records the timeout with the candidates it never
reached (``PassContext.time_out``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from karpenter_py.controllers.disruption import consolidation
from karpenter_py.controllers.disruption.context import PassContext
from karpenter_py.controllers.disruption.types import Candidate, Command

SINGLE_NODE_TIMEOUT: Final = 180.0


class SingleNodeConsolidation(consolidation.Consolidation):
    name: Final = "single-node-consolidation"
    consolidation_type: Final = "single"
    single = True

    def compute_command(self, ctx: PassContext) -> Command | None:
        started = ctx.timer()
        limit = ctx.facts.single_node_timeout
        order = _interleave(consolidation.consolidation_candidates(ctx, self))
        for i, c in enumerate(order):
            if ctx.timer() - started > limit:
                # The candidates from here on were never simulated: their pools are concerned.
                examined = [x.name for x in order[:i]]
                ctx.time_out(self, limit=limit, examined=examined, meant=order, concerned=order[i:])
                break
            command, why = consolidation.consolidate(
                ctx, [c], method=self, single=self.single, max_replacements=1
            )
            if command is not None:
                return consolidation.refined(ctx, command, single=self.single)
            ctx.note(c, why, override=True)
        return None


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


SINGLE_NODE: Final = SingleNodeConsolidation()
