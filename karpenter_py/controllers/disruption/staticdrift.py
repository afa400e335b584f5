"""Static drift (pure): replace a drifted node of a static NodePool with a fresh one of its
template, one command at a time, within the budgets and ``limits.nodes``.

Upstream's StaticDrift method: it runs whether or not the StaticCapacity gate is on, and only it
takes static pools' nodes (drift, emptiness and consolidation leave them alone). Per pool, in
order: nothing while the pool still has more nodes than ``replicas`` (its scale-down goes first);
the oldest drift first within the Drifted budget; the replacement is staged first, so a pool at
``limits.nodes`` cannot replace and says so. No simulation: the replacement is the pool's
template, not a home sized for the node's pods (they reschedule as on any drain). Eventual
class: a NodeClaim with a terminationGracePeriod is replaced though pods block the graceful
methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from karpenter_py.controllers.disruption.candidates import drift_block, order_for_drift
from karpenter_py.controllers.disruption.context import PassContext
from karpenter_py.controllers.disruption.types import Candidate, Command, Reason
from karpenter_py.scheduling.fromstate import static_input
from karpenter_py.scheduling.scheduler import static_claims
from karpenter_py.state.staticpool import count, node_limit, pool_members

# Upstream's Blocked event message for a pool that cannot stage a replacement.
AT_NODE_LIMIT: Final = "static NodePool is at its node limit and cannot stage a replacement"


class StaticDrift:
    name: Final = "static-drift"
    reason: Final = Reason.DRIFTED
    reason_label: Final = "drifted"
    consolidation_type: Final = ""
    eventual: Final = True
    validates: Final = False

    def block(self, candidate: Candidate, now: datetime) -> str | None:
        return drift_block(candidate, static=True)

    def compute_command(self, ctx: PassContext) -> Command | None:
        now = ctx.facts.now
        # Dynamic pools' nodes are drift's; they are left without a note from here.
        drifted = [c for c in ctx.candidates_for(self) if self.block(c, now) is None]
        for c in drifted:
            # Only this method may take them: its verdict is the one a person acts on, not an
            # earlier method's "the pool is static" (or a pod block it is not bound by).
            ctx.clear_note(c.name)
        ctx.considered(self, len(drifted))
        for pool in sorted({c.pool_name for c in drifted}):
            command = self._pool_command(ctx, [c for c in drifted if c.pool_name == pool])
            if command is not None:
                return command
        return None

    def _pool_command(self, ctx: PassContext, cands: Sequence[Candidate]) -> Command | None:
        np = cands[0].nodepool
        snapshot = ctx.facts.snapshot
        counted = count(pool_members(snapshot.nodes, cands[0].pool_name))
        replicas = np.spec.replicas or 0
        if counted.running > replicas:
            for c in cands:
                ctx.note(
                    c,
                    f"static NodePool has {counted.running} nodes for {replicas} replicas: scale-down first",
                )
            return None
        allowed = ctx.within_budget(order_for_drift(cands), self.reason)
        if not allowed:
            return None
        limit = node_limit(np)
        if limit is not None and counted.total >= limit:
            for c in allowed:
                ctx.note(c, f"drifted, but {AT_NODE_LIMIT} (limits.nodes {limit})")
            return None
        c = allowed[0]
        inp = static_input(
            snapshot,
            np,
            instance_types=ctx.facts.instance_types.get(c.pool_name, ()),
            options=ctx.facts.options,
        )
        built = static_claims(inp, 1, indexes=ctx.facts.indexes)
        if isinstance(built, str):
            ctx.note(c, f"drifted, but no replacement can launch: {built}")
            return None
        return Command(
            self,
            (c,),
            replacements=built,
            explanation=f"{c.name} drifted: replace with a node of static NodePool {c.pool_name!r}",
        )

    def revalidate(self, ctx: PassContext, command: Command) -> tuple[Command | None, str]:
        # Not validated by the controller (``validates`` is False); on fresh facts the command
        # still holds while its node is still a static-drift candidate.
        current = {c.name for c in ctx.candidates_for(self)}
        for c in command.candidates:
            if c.name not in current:
                return None, f"{c.name} is no longer a candidate"
            why = self.block(c, ctx.facts.now)
            if why is not None:
                return None, why
        return command, ""


STATIC_DRIFT: Final = StaticDrift()
