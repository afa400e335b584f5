"""Disruption decisions, pure: which nodes to remove or replace now, and why every other node stays.

``METHODS`` lists upstream's disruption methods in the order a pass tries them (emptiness,
static drift, drift, multi-node consolidation, single-node consolidation), one module each; adding a method is
a module and a line here. ``next_command`` returns the first command one of them finds; the
controller runs it through the orchestration queue. ``evaluate`` keeps going on the cluster as
it would be after each command, which is what ``karpenter-py plan --disruption`` prints. Both
use the same solver the provisioner uses, through ``scheduling.Simulator``: "could these nodes'
pods run elsewhere, and on what?".
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final, Literal

from karpenter_py.controllers.disruption.budgets import next_budget_change
from karpenter_py.controllers.disruption.candidates import do_not_disrupt_expiry, recheck_at
from karpenter_py.controllers.disruption.context import PassContext, Timer
from karpenter_py.controllers.disruption.drift import DRIFT
from karpenter_py.controllers.disruption.emptiness import EMPTINESS
from karpenter_py.controllers.disruption.multinode import MULTI_NODE, MULTI_NODE_TIMEOUT
from karpenter_py.controllers.disruption.singlenode import SINGLE_NODE, SINGLE_NODE_TIMEOUT
from karpenter_py.controllers.disruption.staticdrift import STATIC_DRIFT
from karpenter_py.controllers.disruption.types import Command, Decision, Method, Timeout
from karpenter_py.model.core import Node, Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    LABEL_HOSTNAME,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
)
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode

COMMAND_VALIDATION_DELAY = 15.0  # seconds a consolidation command waits before re-validation

# The methods in the order a pass tries them (upstream's).
METHODS: Final[tuple[Method, ...]] = (EMPTINESS, STATIC_DRIFT, DRIFT, MULTI_NODE, SINGLE_NODE)

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


# ---------------------------------------------------------------------------------- entry points
def next_command(facts: Facts, *, timer: Timer = time.perf_counter) -> Decision:
    """The first command a method of ``METHODS`` finds, and why every other node is left alone."""
    ctx = PassContext(facts, timer)
    command = None
    for method in METHODS:
        command = method.compute_command(ctx)
        if command is not None:
            break
    taken = {c.name for c in command.candidates} if command is not None else set()
    for c in ctx.candidates:
        if c.name not in taken:
            ctx.note(c, "no disruption method applies")
    return Decision(
        commands=(command,) if command is not None else (),
        unchanged={k: v for k, v in ctx.unchanged.items() if k not in taken},
        timed_out=tuple(ctx.timed_out),
        eligible=dict(ctx.eligible),
        recheck_at=_recheck_at(ctx),
        budget_blocked=ctx.budget_blocked,
    )


def _recheck_at(ctx: PassContext) -> datetime | None:
    """When to look again though nothing changes: a node's time-based block running out (a
    nomination, consolidateAfter, a pod's do-not-disrupt duration), or a budget window of a
    candidate's pool opening or closing."""
    now = ctx.facts.now
    pools = {c.pool_name: c.nodepool for c in ctx.candidates}
    moments = [
        recheck_at(ctx.facts.snapshot.nodes, ctx.candidates, now),
        do_not_disrupt_expiry(ctx.facts.snapshot),
        *(next_budget_change(np, now) for np in pools.values()),
    ]
    return min((m for m in moments if m is not None), default=None)


def evaluate(
    facts: Facts, *, timer: Timer = time.perf_counter, max_commands: int = 1000
) -> Decision:
    """Every command disruption would take, in order, on the cluster as each leaves it."""
    commands: list[Command] = []
    taken: set[str] = set()
    timed_out: list[Timeout] = []
    eligible: dict[Method, int] = {}
    current = facts
    unchanged: dict[str, str] = {}
    recheck = None
    budget_blocked = 0.0
    for step in range(max_commands):
        decision = next_command(current, timer=timer)
        if step == 0:
            recheck = decision.recheck_at  # later steps are on a cluster that is not real yet
        # The first pass a method timed out in is the one reported (as for ``eligible``).
        timed_out.extend(
            t for t in decision.timed_out if all(t.method is not s.method for s in timed_out)
        )
        for m, n in decision.eligible.items():
            eligible.setdefault(m, n)
        unchanged = decision.unchanged
        budget_blocked = decision.budget_blocked  # what the budgets still keep at the end
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
        recheck_at=recheck,
        budget_blocked=budget_blocked,
    )


def needs_validation(command: Command) -> bool:
    """Consolidation and emptiness wait COMMAND_VALIDATION_DELAY and re-check; drift does not."""
    return command.method.validates


def revalidate(command: Command, facts: Facts) -> tuple[Command | None, str]:
    """Re-check a command against fresh facts after the validation delay, as upstream does (each
    method's ``revalidate``): every candidate must still qualify and fit the budget, and a fresh
    simulation must agree on the number of replacements with a type list that includes the
    command's. Emptiness keeps the candidates that are still empty and fails only when none are.
    Returns the command to run (for emptiness possibly smaller) or None with the rejection
    reason."""
    return command.method.revalidate(PassContext(facts, time.perf_counter), command)


def validate(command: Command, facts: Facts) -> str | None:
    """``revalidate`` as a yes/no: None when the command may go ahead unchanged."""
    again, why = revalidate(command, facts)
    if again is None:
        return why
    if len(again.candidates) != len(command.candidates):
        return "some candidates are no longer empty"
    return None


# ---------------------------------------------------------------------------------- what-if
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
