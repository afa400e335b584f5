"""Drift (pure): replace one drifted node, oldest drift first, as soon as its pods have a place.

Drift is upstream's eventual disruption class: a node whose NodeClaim has a
``terminationGracePeriod`` is a candidate even when pods block the graceful methods (termination
gets it out within that bound anyway). Replacing at the same price is fine: the point is to move
off what drifted, not to save. Its commands start at once, without the validation delay.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from karpenter_py.controllers.disruption import consolidation
from karpenter_py.controllers.disruption.candidates import drift_block, order_for_drift
from karpenter_py.controllers.disruption.context import PassContext, placements, pod_error
from karpenter_py.controllers.disruption.types import Candidate, Command, Reason


class Drift:
    name: Final = "drift"
    reason: Final = Reason.DRIFTED
    reason_label: Final = "drifted"
    consolidation_type: Final = ""
    eventual: Final = True
    validates: Final = False

    def block(self, candidate: Candidate, now: datetime) -> str | None:
        return drift_block(candidate)

    def compute_command(self, ctx: PassContext) -> Command | None:
        now = ctx.facts.now
        drifted = [c for c in ctx.candidates_for(self) if self.block(c, now) is None]
        if drifted:
            graceful = {c.name for c in ctx.candidates}
            for c in drifted:
                if c.name not in graceful:  # pod-blocked, but drift may go ahead
                    ctx.clear_note(c.name)
        ctx.considered(self, len(drifted))
        for c in ctx.within_budget(order_for_drift(drifted), self.reason):
            sim = ctx.sim.run([c.name], repack=True)
            if not sim.all_scheduled:
                ctx.note(c, f"drifted, but {pod_error(sim)}")
                continue
            reps = sim.replacements
            what = f"{len(reps)} replacement(s)" if reps else "no replacement needed"
            return Command(
                self,
                (c,),
                replacements=reps,
                placements=placements(sim),
                explanation=f"{c.name} drifted: replace ({what})",
            )
        return None

    def revalidate(self, ctx: PassContext, command: Command) -> tuple[Command | None, str]:
        return consolidation.revalidate(ctx, command, single=False)


DRIFT: Final = Drift()
