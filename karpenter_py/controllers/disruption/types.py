"""The vocabulary of disruption decisions: reasons, candidates, commands.

Everything in ``controllers.disruption`` except ``controller`` and ``queue`` is pure: it takes a
snapshot, instance types and ``now`` and returns data, so ``karpenter-py plan --disruption`` and
the controller run the same decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.plan import ExistingPlacement, NewNodeClaim
from karpenter_py.state.statenode import StateNode


class Reason(StrEnum):
    """Upstream's disruption reasons (budget ``reasons``, metric labels, DisruptionReason)."""

    EMPTY = "Empty"
    DRIFTED = "Drifted"
    UNDERUTILIZED = "Underutilized"


class Method(StrEnum):
    """The methods in the order the loop tries them; the metric label upstream uses."""

    EMPTINESS = "emptiness"
    DRIFT = "drift"
    MULTI_NODE = "multi-node-consolidation"
    SINGLE_NODE = "single-node-consolidation"


# Which reason each method disrupts for (budgets are looked up by reason).
METHOD_REASON: dict[Method, Reason] = {
    Method.EMPTINESS: Reason.EMPTY,
    Method.DRIFT: Reason.DRIFTED,
    Method.MULTI_NODE: Reason.UNDERUTILIZED,
    Method.SINGLE_NODE: Reason.UNDERUTILIZED,
}


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
        return METHOD_REASON[self.method]

    @property
    def savings(self) -> float:
        """Hourly saving: the candidates' prices minus the replacements' launch prices."""
        return sum(c.price for c in self.candidates) - sum(r.price for r in self.replacements)

    @property
    def decision(self) -> str:
        """Upstream's decision label: delete or replace."""
        return "replace" if self.replacements else "delete"


@dataclass(frozen=True, slots=True)
class Decision:
    """What one evaluation of every method found: the commands to run (at most one acts per
    controller loop; the offline plan shows them all in order) and why each other node stays."""

    commands: tuple[Command, ...] = ()
    unchanged: dict[str, str] = field(
        default_factory=dict
    )  # node name -> reason a person can act on
    timed_out: tuple[Method, ...] = ()  # methods that hit their time limit (best found returned)
    eligible: dict[Method, int] = field(default_factory=dict)  # candidates each method considered
