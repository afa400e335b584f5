"""Node repair decisions (upstream's ``node.health``, feature gate ``NodeRepair``): pure, ``now``
is an argument, so the controller and ``/debug/disruption`` give the same answer.

* A Node is *unhealthy* while one of its conditions matches one of the cloud provider's
  :class:`RepairPolicy` (condition type and status), however long it has held.
* Its repair is *due* once the matching condition has held for the policy's toleration, counted
  from the condition's ``lastTransitionTime``. With several matches, the one due first decides, as
  upstream's. A condition without a readable transition time counts from the Node's creation
  (upstream's zero time would make it due at once).
* A due repair is *blocked* while more of the nodes in scope are unhealthy than 20% of them,
  rounded up (as PodDisruptionBudget percentages round): the scope is the NodeClaim's NodePool,
  or the whole cluster for a NodeClaim without one. A zonal outage must not make Karpenter delete
  everything; upstream retries a blocked repair every 5 minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from karpenter_py.cloudprovider.protocol import RepairPolicy
from karpenter_py.model.api.base import format_time, parse_time
from karpenter_py.model.core import Node, NodeCondition

UNHEALTHY_THRESHOLD_PERCENT: Final = 20
BLOCKED_RETRY_SECONDS: Final = 300.0


@dataclass(frozen=True, slots=True)
class Match:
    """A Node condition matching a repair policy since ``since``."""

    condition: NodeCondition
    policy: RepairPolicy
    since: datetime

    @property
    def due(self) -> datetime:
        """When the policy's toleration runs out."""
        return self.since + timedelta(seconds=self.policy.toleration_seconds)


@dataclass(frozen=True, slots=True)
class Health:
    """How many of the nodes in a repair scope are unhealthy."""

    unhealthy: int
    total: int

    @property
    def allowed(self) -> int:
        """Unhealthy nodes the scope tolerates: 20% of its nodes, rounded up."""
        return -(-self.total * UNHEALTHY_THRESHOLD_PERCENT // 100)

    @property
    def tripped(self) -> bool:
        return self.unhealthy > self.allowed


class Action(StrEnum):
    HEALTHY = "healthy"
    WAIT = "wait"  # unhealthy, toleration not over yet
    BLOCKED = "blocked"  # due, but too much of the scope is unhealthy
    REPAIR = "repair"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What node repair does about one Node, and why (``reason`` is the sentence users read)."""

    action: Action
    reason: str
    match: Match | None = None
    health: Health | None = None  # of the scope, read only once the repair is due

    def seconds_until_due(self, now: datetime) -> float:
        assert self.match is not None
        return max(0.0, (self.match.due - now) / timedelta(seconds=1))


def matches(node: Node, policies: Sequence[RepairPolicy]) -> list[Match]:
    """Every policy one of the Node's conditions matches, the one due first first (policy order
    breaks ties)."""
    created = parse_time(node.creation_timestamp)
    out: list[Match] = []
    for policy in policies:
        condition = node.condition(policy.condition_type)
        if condition is None or condition.status != policy.condition_status:
            continue
        since = parse_time(condition.since) or created
        if since is None:
            continue  # no time to count from: never act on one we cannot read
        out.append(Match(condition, policy, since))
    out.sort(key=lambda m: m.due)
    return out


def is_unhealthy(node: Node, policies: Sequence[RepairPolicy]) -> bool:
    """A condition matches a policy, whatever for how long (what the threshold counts)."""
    return any(
        (c := node.condition(p.condition_type)) is not None and c.status == p.condition_status
        for p in policies
    )


def health_of(nodes: Iterable[Node], policies: Sequence[RepairPolicy]) -> Health:
    unhealthy = total = 0
    for node in nodes:
        total += 1
        unhealthy += is_unhealthy(node, policies)
    return Health(unhealthy, total)


def decide(
    node: Node,
    policies: Sequence[RepairPolicy],
    now: datetime,
    *,
    nodepool: str,
    scope: Callable[[], Health],
) -> Verdict:
    """Node repair's verdict on ``node``, whose NodeClaim belongs to ``nodepool`` ("" for none).
    ``scope`` gives the health of the NodePool's nodes (every node's without a pool); it is read
    only once a repair is due, so a waiting node costs no count."""
    found = matches(node, policies)
    if not found:
        return Verdict(Action.HEALTHY, "no condition matches a repair policy")
    first = found[0]
    held = f"{describe(first)} since {format_time(first.since)}"
    if first.due > now:
        return Verdict(
            Action.WAIT,
            f"{held}; repair at {format_time(first.due)} "
            f"(toleration {_minutes(first.policy.toleration_seconds)})",
            first,
        )
    health = scope()
    if health.tripped:
        where = (
            f'NodePool "{nodepool}"' if nodepool else "the cluster (the NodeClaim has no NodePool)"
        )
        return Verdict(
            Action.BLOCKED,
            f"{held}; repair blocked: {health.unhealthy} of {health.total} nodes in {where} are "
            f"unhealthy, more than the {UNHEALTHY_THRESHOLD_PERCENT}% ({health.allowed}) "
            "node repair allows",
            first,
            health,
        )
    return Verdict(
        Action.REPAIR,
        f"{held}, past its toleration of {_minutes(first.policy.toleration_seconds)}",
        first,
        health,
    )


def describe(match: Match) -> str:
    return f"{match.condition.type}={match.condition.status}"


def verdict_report(verdict: Verdict) -> dict[str, Any]:
    """A verdict as ``/debug/disruption`` shows it."""
    out: dict[str, Any] = {"action": verdict.action.value, "reason": verdict.reason}
    if verdict.match is not None:
        out["condition"] = describe(verdict.match)
        out["repairAt"] = format_time(verdict.match.due)
    if verdict.health is not None:
        h = verdict.health
        out["unhealthy"] = {"count": h.unhealthy, "of": h.total, "allowed": h.allowed}
    return out


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g}m"
