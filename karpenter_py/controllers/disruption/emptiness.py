"""Emptiness (pure): delete every empty node the budgets allow, in one command.

A node is empty when no pod that must move has a positive eviction cost; it also has to be
``Consolidatable`` in a pool whose ``consolidateAfter`` is not ``Never`` (every consolidation
policy deletes empty nodes). Re-validation keeps the candidates that are still empty and within
budget, so the command may shrink; it fails only when none is left.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Final

from karpenter_py.controllers.disruption.candidates import emptiness_block, is_empty
from karpenter_py.controllers.disruption.context import PassContext, money, nodes
from karpenter_py.controllers.disruption.types import Candidate, Command, Reason


class Emptiness:
    name: Final = "emptiness"
    reason: Final = Reason.EMPTY
    reason_label: Final = "empty"
    consolidation_type: Final = "empty"
    eventual: Final = False
    validates: Final = True

    def block(self, candidate: Candidate, now: datetime) -> str | None:
        return emptiness_block(candidate, now)

    def compute_command(self, ctx: PassContext) -> Command | None:
        empty = ctx.admitted(self, (c for c in ctx.candidates if is_empty(c.pods)))
        taken = ctx.within_budget(empty, self.reason)
        kept = {c.name for c in taken}
        ctx.budget_blocked += sum(c.price for c in empty if c.name not in kept)
        if not taken:
            return None
        price = sum(c.price for c in taken)
        return Command(
            self,
            tuple(taken),
            explanation=f"{nodes(len(taken))} empty: deleting saves {money(price)}/h",
        )

    def revalidate(self, ctx: PassContext, command: Command) -> tuple[Command | None, str]:
        current = {c.name: c for c in ctx.candidates_for(self)}
        still = [
            current[c.name]
            for c in command.candidates
            if c.name in current and self.block(current[c.name], ctx.facts.now) is None
        ]
        still = ctx.within_budget(still, self.reason)
        if not still:
            return None, "no candidate is still empty and within budget"
        return replace(command, candidates=tuple(still)), ""


EMPTINESS: Final = Emptiness()
