"""The vocabulary of disruption decisions: reasons, candidates, commands.

Everything in ``controllers.disruption`` except ``controller`` and ``queue`` is pure: it takes a
snapshot, instance types and ``now`` and returns data, so ``karpenter-py plan --disruption`` and
the controller run the same decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.plan import ExistingPlacement, NewNodeClaim
from karpenter_py.state.statenode import StateNode

if TYPE_CHECKING:
    # A pass hands itself to each method; the context in turn is built from these types.
    from karpenter_py.controllers.disruption.context import PassContext


class Reason(StrEnum):
    """Upstream's disruption reasons (budget ``reasons``, metric labels, DisruptionReason)."""

    EMPTY = "Empty"
    DRIFTED = "Drifted"
    UNDERUTILIZED = "Underutilized"


class Method(Protocol):
    """One way to disrupt nodes (upstream's ``Method``), one module each (``emptiness``,
    ``drift``, ``multinode``, ``singlenode``); ``decide.METHODS`` runs them in upstream's order.

    A method carries the facts everyone else needs about it, so none is kept in a table keyed by
    method: the label it shows under, the reason its budgets are looked up by, its metric labels,
    its disruption class and whether its commands are re-validated. A pass shares what methods
    learn (why a node stays, how many candidates each considered, which hit their time limit)
    through the :class:`~karpenter_py.controllers.disruption.context.PassContext` it hands them.
    """

    @property
    def name(self) -> str:
        """The method label (``/debug/disruption``, ``plan --disruption``), e.g. ``emptiness``."""
        ...

    @property
    def reason(self) -> Reason:
        """The disruption reason: budgets are looked up by it, ``DisruptionReason`` carries it."""
        ...

    @property
    def reason_label(self) -> str:
        """The ``reason`` (and evaluation ``method``) metric label, e.g. ``underutilized``."""
        ...

    @property
    def consolidation_type(self) -> str:
        """Upstream's ``consolidation_type`` metric label (``""`` for drift)."""
        ...

    @property
    def eventual(self) -> bool:
        """Upstream's eventual disruption class: candidates whose NodeClaim has a
        terminationGracePeriod ignore pod-level blocks."""
        ...

    @property
    def validates(self) -> bool:
        """Whether a command waits ``COMMAND_VALIDATION_DELAY`` and is re-checked first."""
        ...

    def block(self, candidate: Candidate, now: datetime) -> str | None:
        """Why this method may not disrupt ``candidate`` (upstream's ShouldDisrupt), or None."""
        ...

    def compute_command(self, ctx: PassContext) -> Command | None:
        """The command this method takes now, or None; why each other node stays goes to
        ``ctx`` (upstream's ComputeCommand)."""
        ...

    def revalidate(self, ctx: PassContext, command: Command) -> tuple[Command | None, str]:
        """Re-check ``command`` against the fresh facts of ``ctx``: the command to run, or None
        and why it was rejected."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class Candidate:
    """A managed, initialized node that disruption may act on, with what it costs to move it."""

    node: StateNode
    nodepool: NodePool
    instance_type: InstanceType | None  # the type it runs, from its pool's instance types
    capacity_type: str
    zone: str
    price: float  # hourly price of the offering it runs on (0.0 when unknown)
    pods: tuple[Pod, ...]  # the pods that would have to move (reschedulable ones)
    disruption_cost: float  # sum of pod eviction costs x lifetime remaining (upstream's rule)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def nodeclaim_name(self) -> str:
        return self.node.nodeclaim_name

    @property
    def pool_name(self) -> str:
        return self.nodepool.metadata.name or ""

    @property
    def instance_type_name(self) -> str:
        return self.instance_type.name if self.instance_type is not None else ""


@dataclass(frozen=True, slots=True, eq=False)
class Command:
    """One disruption decision: delete ``candidates`` after launching ``replacements``."""

    method: Method
    candidates: tuple[Candidate, ...]
    replacements: tuple[NewNodeClaim, ...] = ()
    # Human-readable why, e.g. "3 nodes -> 1 m5.xlarge saves $0.1920/h".
    explanation: str = ""
    # Where the candidates' pods go on nodes that stay (from the simulation).
    placements: tuple[ExistingPlacement, ...] = ()

    @property
    def reason(self) -> Reason:
        return self.method.reason

    @property
    def savings(self) -> float:
        """Hourly saving: the candidates' prices minus the replacements' launch prices."""
        return sum(c.price for c in self.candidates) - sum(r.price for r in self.replacements)

    @property
    def decision(self) -> str:
        """Upstream's decision label: delete or replace."""
        return "replace" if self.replacements else "delete"


@dataclass(frozen=True, slots=True)
class Timeout:
    """A method that hit its time limit and returned the best command found so far: how far it
    got, so a person can tell a search cut short from one that finished."""

    method: Method
    limit: float  # seconds (Facts.multi_node_timeout / single_node_timeout)
    examined: int  # candidates at least one of the method's trials included
    unexamined: int  # candidates the method meant to try and never reached
    nodepools: tuple[str, ...]  # sorted pools whose candidates the cut-off search concerned

    @property
    def explanation(self) -> str:
        """The one wording of a timeout (event, log line, ``plan --disruption`` warning)."""
        total = self.examined + self.unexamined
        return (
            f"{self.method.name} stopped at its time limit of {self.limit:g}s with "
            f"{self.unexamined} of {total} candidates unexamined"
        )


@dataclass(frozen=True, slots=True)
class Decision:
    """What one evaluation of every method found: the commands to run (at most one acts per
    controller loop; the offline plan shows them all in order) and why each other node stays."""

    commands: tuple[Command, ...] = ()
    unchanged: dict[str, str] = field(
        default_factory=dict
    )  # node name -> reason a person can act on
    timed_out: tuple[Timeout, ...] = ()  # methods that hit their time limit (best found returned)
    eligible: dict[Method, int] = field(default_factory=dict)  # candidates each method considered
    # The earliest moment a node left alone for a time-based reason (a nomination, a
    # consolidateAfter not yet passed, a budget window) may be disrupted: the controller looks
    # again then.
    recheck_at: datetime | None = None
    # Hourly price of the empty nodes emptiness would have deleted had a budget allowed it: the
    # saving is exact (deleting an empty node saves its whole price). Non-empty candidates a
    # budget keeps are not counted: their saving would need a simulation no method ran.
    budget_blocked: float = 0.0
