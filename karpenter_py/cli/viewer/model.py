"""What the viewer shows, computed from a snapshot and the decisions made on it: pure, no I/O.

The road is the one ``plan --disruption`` takes: a :class:`~karpenter_py.state.snapshot.Snapshot`
(from the informers live, from ``build_cluster`` offline), the controller's disruption decision
on it (:class:`~karpenter_py.cli.disruption.DisruptionPlan`) and the provisioner's plan for its
pending pods (:class:`~karpenter_py.scheduling.plan.Plan`). This module only reads them: a node's
state and reason are the decision's words, its price is ``hourly_price``; nothing here decides.

Either decision may be missing (``None``): live, they are computed on a slower cadence than the
rows are redrawn, and the first rows appear before the first decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final, Literal

from karpenter_py.cli.disruption import DisruptionPlan
from karpenter_py.cli.plan import _money, _natural
from karpenter_py.controllers.disruption.candidates import hourly_price
from karpenter_py.controllers.disruption.types import Command
from karpenter_py.model.api.nodeclaim import (
    CONDITION_CONSOLIDATABLE,
    CONDITION_DISRUPTION_REASON,
    CONDITION_DRIFTED,
)
from karpenter_py.model.core import LabelSelector, Pod, label_selector_from_string
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE,
    RESOURCE_CPU,
    RESOURCE_MEMORY,
    RESOURCE_PODS,
    TAINT_DISRUPTED_KEY,
)
from karpenter_py.scheduling.plan import Plan
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode

# AWS prices a month as 730 hours (its pricing pages and calculator do).
HOURS_PER_MONTH: Final = 730
NO_NODEPOOL: Final = "(none)"  # the group of nodes no NodePool manages


class NodeState(StrEnum):
    """A node's disruption state, most telling first: what the cluster says is happening wins
    over what the decision would do next, which wins over the conditions."""

    DISRUPTING = "Disrupting"  # being deleted, or tainted karpenter.sh/disrupted
    NEXT = "Next"  # a candidate of one of the decision's commands
    DRIFTED = "Drifted"  # Drifted condition, left alone for now
    CONSOLIDATABLE = "Consolidatable"  # Consolidatable condition, left alone for now
    LEFT_ALONE = "Left alone"
    UNDECIDED = "-"  # no decision yet


SortKey = Literal["cost", "age", "utilisation", "name"]
SORT_KEYS: Final[tuple[SortKey, ...]] = ("cost", "age", "utilisation", "name")


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One node (or NodeClaim in flight) as the viewer shows it. Quantities are canonical
    (millicores, bytes); ``age`` is in seconds (None when nothing says when it was created)."""

    name: str
    nodepool: str
    instance_type: str
    capacity_type: str
    zone: str
    price: float
    age: float | None
    cpu: tuple[int, int]  # requested, allocatable
    memory: tuple[int, int]
    pods: tuple[int, int]  # pods on it, max pods
    state: NodeState
    reason: str  # the decision's words: why left alone, or the command it is part of
    labels: Mapping[str, str]
    registered: bool

    @property
    def utilisation(self) -> float:
        """The fuller of CPU and memory, requested over allocatable (0..1, more when overcommitted)."""
        return max(_fraction(*self.cpu), _fraction(*self.memory))


@dataclass(frozen=True, slots=True)
class PendingRow:
    pod: str
    cpu: int
    memory: int
    reason: str


@dataclass(frozen=True, slots=True)
class Totals:
    """Nodes, pods and use of a NodePool (or the cluster), its cost and the next saving."""

    name: str
    nodes: int
    pods: int
    cpu: tuple[int, int]
    memory: tuple[int, int]
    hourly: float
    saving: float  # per hour, of the next command touching these nodes (0 when none)

    @property
    def monthly(self) -> float:
        return self.hourly * HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class View:
    now: datetime
    nodes: tuple[NodeRow, ...]  # grouped by NodePool, sorted within each group
    unregistered: tuple[NodeRow, ...]  # NodeClaims without a registered Node yet
    pending: tuple[PendingRow, ...]
    pools: tuple[Totals, ...]
    cluster: Totals
    decided_at: datetime | None  # when the disruption decision shown was made


# ----------------------------------------------------------------------------- filter


@dataclass(frozen=True, slots=True)
class Filter:
    """Which nodes to show: one NodePool's, and/or those whose labels a selector matches."""

    nodepool: str = ""
    selector: LabelSelector | None = None

    def keeps(self, row: NodeRow) -> bool:
        if self.nodepool and row.nodepool != self.nodepool:
            return False
        return self.selector is None or self.selector.matches(row.labels)


# ----------------------------------------------------------------------------- building


def _fraction(used: int, total: int) -> float:
    return used / total if total > 0 else 0.0


def _age(sn: StateNode, now: datetime) -> float | None:
    if sn.node is not None and sn.node.creation_timestamp:
        created = datetime.fromisoformat(sn.node.creation_timestamp)
    elif sn.nodeclaim is not None and sn.nodeclaim.metadata.creation_timestamp is not None:
        created = sn.nodeclaim.metadata.creation_timestamp
    else:
        return None
    return max(0.0, (now - created).total_seconds())


def _requested(pods: Iterable[Pod], resource: str) -> int:
    return sum(p.requests.get(resource, 0) for p in pods if not p.is_terminal())


def command_text(index: int, command: Command) -> str:
    """A command in one line: its place, method, reason, what replaces the candidates, saving."""
    if command.replacements:
        action = "replace with " + ", ".join(nc.instance_type.name for nc in command.replacements)
    else:
        action = "delete"
    return (
        f"#{index} {command.method.name} ({command.reason.value}): {action}, "
        f"saves ${_money(command.savings)}/h"
    )


def _disrupting(sn: StateNode) -> str | None:
    """Why the cluster says the node is going (None: it does not): the NodeClaim's
    DisruptionReason condition, else the deletion or the taint that shows it."""
    nc = sn.nodeclaim
    if nc is not None:
        reason = nc.status.get_condition(CONDITION_DISRUPTION_REASON)
        if reason is not None and reason.status == "True":
            return f"{reason.reason}: being disrupted"
        if nc.metadata.deletion_timestamp is not None:
            return "NodeClaim deleting"
    node = sn.node
    if node is not None:
        if node.deletion_timestamp:
            return "Node deleting"
        if any(t.key == TAINT_DISRUPTED_KEY for t in node.taints):
            return f"tainted {TAINT_DISRUPTED_KEY}"
    return "marked for deletion" if sn.marked_for_deletion else None


def _state(
    sn: StateNode, commands: Mapping[str, tuple[int, Command]], plan: DisruptionPlan | None
) -> tuple[NodeState, str]:
    going = _disrupting(sn)
    if going is not None:
        return NodeState.DISRUPTING, going
    if sn.name in commands:
        index, command = commands[sn.name]
        return NodeState.NEXT, command_text(index, command)
    if plan is None:
        return NodeState.UNDECIDED, ""
    reason = plan.decision.unchanged.get(sn.name, "")
    nc = sn.nodeclaim
    if nc is not None and nc.status.is_true(CONDITION_DRIFTED):
        return NodeState.DRIFTED, reason
    if nc is not None and nc.status.is_true(CONDITION_CONSOLIDATABLE):
        return NodeState.CONSOLIDATABLE, reason
    return NodeState.LEFT_ALONE, reason


def bound_pods(snapshot: Snapshot, node_name: str) -> tuple[Pod, ...]:
    """The pods bound to the node: a snapshot also counts the pending pods nominated to it (room
    promised to them), which the viewer shows as pending, not on the node."""
    return tuple(p for p in snapshot.pods_by_node.get(node_name, ()) if p.node_name)


def node_row(
    sn: StateNode,
    snapshot: Snapshot,
    instance_types: Mapping[str, Sequence[InstanceType]],
    commands: Mapping[str, tuple[int, Command]],
    plan: DisruptionPlan | None,
) -> NodeRow:
    pods = bound_pods(snapshot, sn.name)
    allocatable = sn.allocatable
    labels = sn.labels
    state, reason = _state(sn, commands, plan)
    return NodeRow(
        name=sn.name,
        nodepool=sn.node_pool or NO_NODEPOOL,
        instance_type=labels.get(LABEL_INSTANCE_TYPE, ""),
        capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
        zone=labels.get(LABEL_TOPOLOGY_ZONE, ""),
        price=hourly_price(sn, instance_types),
        age=_age(sn, snapshot.now),
        cpu=(_requested(pods, RESOURCE_CPU), allocatable.get(RESOURCE_CPU, 0)),
        memory=(_requested(pods, RESOURCE_MEMORY), allocatable.get(RESOURCE_MEMORY, 0)),
        pods=(
            sum(1 for p in pods if not p.is_terminal()),
            allocatable.get(RESOURCE_PODS, 0),
        ),
        state=state,
        reason=reason,
        labels=labels,
        registered=sn.registered,
    )


def pending_reasons(snapshot: Snapshot, provisioning: Plan | None) -> dict[str, str]:
    """Each pending pod's reason, in the provisioner's words: why it cannot be scheduled, or
    where its plan puts it (a new node of a type, or room on a node in flight)."""
    reasons: dict[str, str] = {}
    if provisioning is not None:
        for nc in provisioning.new_node_claims:
            text = f"waiting for a new {nc.instance_type.name} node of NodePool {nc.node_pool}"
            reasons.update((p.key, text) for p in nc.pods)
        for placement in provisioning.existing:
            text = f"fits on {placement.node_name}"
            reasons.update((p.key, text) for p in placement.pods)
        reasons.update((e.pod.key, e.reason) for e in provisioning.errors)
    return {
        p.key: reasons.get(p.key, "not yet planned" if provisioning is not None else "")
        for p in snapshot.pending
    }


def _totals(name: str, rows: Sequence[NodeRow], saving: float) -> Totals:
    return Totals(
        name=name,
        nodes=len(rows),
        pods=sum(r.pods[0] for r in rows),
        cpu=(sum(r.cpu[0] for r in rows), sum(r.cpu[1] for r in rows)),
        memory=(sum(r.memory[0] for r in rows), sum(r.memory[1] for r in rows)),
        hourly=sum(r.price for r in rows),
        saving=saving,
    )


def _next_saving(rows: Sequence[NodeRow], commands: Sequence[Command]) -> float:
    """The saving of the first command with a candidate among ``rows``."""
    names = {r.name for r in rows}
    return next(
        (c.savings for c in commands if any(cand.name in names for cand in c.candidates)), 0.0
    )


def sort_key(key: SortKey) -> Callable[[NodeRow], tuple[object, ...]]:
    """Within a NodePool: most expensive, oldest or least utilised first, or by name; ties by
    name."""
    if key == "cost":
        return lambda r: (-r.price, _natural(r.name))
    if key == "age":
        return lambda r: (-(r.age if r.age is not None else -1.0), _natural(r.name))
    if key == "utilisation":
        return lambda r: (r.utilisation, _natural(r.name))
    return lambda r: (_natural(r.name),)


def build_view(
    snapshot: Snapshot,
    instance_types: Mapping[str, Sequence[InstanceType]],
    *,
    disruption: DisruptionPlan | None = None,
    provisioning: Plan | None = None,
    sort: SortKey = "name",
    keep: Filter | None = None,
) -> View:
    """The view of ``snapshot``; ``disruption`` and ``provisioning`` are the latest decisions
    (made on this snapshot or an earlier one)."""
    commands = disruption.decision.commands if disruption is not None else ()
    by_candidate = {
        cand.name: (i, c) for i, c in enumerate(commands, start=1) for cand in c.candidates
    }
    keep = keep or Filter()
    rows = [
        r
        for r in (
            node_row(sn, snapshot, instance_types, by_candidate, disruption)
            for sn in snapshot.nodes
        )
        if keep.keeps(r)
    ]
    order = sort_key(sort)
    rows.sort(key=lambda r: (_natural(r.nodepool), *order(r)))
    groups: dict[str, list[NodeRow]] = {}
    for r in rows:
        groups.setdefault(r.nodepool, []).append(r)
    pending = pending_reasons(snapshot, provisioning)
    by_key = {p.key: p for p in snapshot.pending}
    return View(
        now=snapshot.now,
        nodes=tuple(r for r in rows if r.registered),
        unregistered=tuple(r for r in rows if not r.registered),
        pending=tuple(
            PendingRow(
                key,
                by_key[key].requests.get(RESOURCE_CPU, 0),
                by_key[key].requests.get(RESOURCE_MEMORY, 0),
                reason,
            )
            for key, reason in sorted(pending.items(), key=lambda kv: _natural(kv[0]))
        ),
        pools=tuple(_totals(n, g, _next_saving(g, commands)) for n, g in groups.items()),
        cluster=_totals("cluster", rows, commands[0].savings if commands else 0.0),
        decided_at=disruption.now if disruption is not None else None,
    )


# ----------------------------------------------------------------------------- formatting

_UNITS: Final = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def cpu_text(millicores: int) -> str:
    """Cores with at most one decimal (``3.5``), ``250m`` under one core."""
    if millicores < 1000:
        return f"{millicores}m"
    cores = millicores / 1000
    return f"{cores:.0f}" if millicores % 1000 == 0 else f"{cores:.1f}"


def memory_text(amount: int) -> str:
    """Binary units with at most one decimal (``1.5Gi``)."""
    for suffix, unit in _UNITS:
        if amount >= unit:
            value = amount / unit
            return f"{value:.0f}{suffix}" if amount % unit == 0 else f"{value:.1f}{suffix}"
    return str(amount)


def age_text(seconds: float | None) -> str:
    """kubectl's style: 45s, 12m, 5h, 3d."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


BAR_WIDTH: Final = 10


def bar(used: int, total: int, width: int = BAR_WIDTH) -> str:
    """``████░░░░░░  40%``: used over total, capped at the bar's width."""
    fraction = _fraction(used, total)
    full = min(width, round(fraction * width))
    return "█" * full + "░" * (width - full) + f" {fraction * 100:3.0f}%"


def parse_filter(text: str, nodepools: Iterable[str]) -> Filter:
    """What the ``/`` prompt typed means: a NodePool's name, else a label selector (kubectl's
    ``-l`` syntax); empty shows everything. :class:`SelectorError` when it is neither."""
    text = text.strip()
    if not text:
        return Filter()
    if text in set(nodepools):
        return Filter(nodepool=text)
    return Filter(selector=label_selector_from_string(text))
