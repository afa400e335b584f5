"""Which nodes disruption may act on, what moving their pods costs, and in what order to try them.

``build_candidates`` turns a Snapshot into Candidates, and gives every other node a reason a
person can act on. The rules are upstream's (statenode.go, disruption/types.go):

* node level: managed (a NodeClaim and a ``karpenter.sh/nodepool`` label), has a Node,
  initialized, not marked for deletion, not nominated, no node annotation
  ``karpenter.sh/do-not-disrupt: "true"``, not already queued, its NodePool exists;
* pod level (``pod_block``): no active pod protected by ``karpenter.sh/do-not-disrupt``
  (``"true"``, or a duration the pod has not yet run for), every PDB covering an evictable pod
  allows a disruption, and no pod is covered by two PDBs.

Pod-level blocks are waived for the *eventual* disruption class (drift) when the NodeClaim has
``spec.terminationGracePeriod``: termination will get the node out within that bound anyway. So
``build_candidates`` takes ``eventual=True`` for the drift method (as upstream builds candidates
per method class), and ``pod_block`` is public for anyone who needs the check on its own.

Method filters then say why a candidate does not suit one method (``consolidation_block``,
``emptiness_block``, ``drift_block``) and the ``order_for_*`` functions sort what remains.

Costs, as upstream's pkg/utils/disruption and disruption/types.go (v1.14); the pod and NodeClaim
parts (``eviction_cost``, ``lifetime_remaining``) live in ``model.disruptioncost``:

* ``reschedule_cost(pods)`` = 1 (the node itself) + Σ max(0, eviction cost) over reschedulable
  pods; a node is *empty* when that is <= 1.0, i.e. no pod that must move has a positive cost;
* ``disruption_cost(pods, nodeclaim, now)`` = Σ eviction costs * fraction of lifetime left
  (``Candidate.disruption_cost``; upstream computes it over all the node's pods).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from karpenter_py.controllers.disruption.types import Candidate
from karpenter_py.model.api.base import as_utc
from karpenter_py.model.api.common import parse_nillable_duration
from karpenter_py.model.api.meta import CONDITION_TRUE
from karpenter_py.model.api.nodeclaim import (
    CONDITION_CONSOLIDATABLE,
    CONDITION_DRIFTED,
    CONDITION_INITIALIZED,
)
from karpenter_py.model.api.nodepool import CONSOLIDATION_WHEN_EMPTY, NodePool
from karpenter_py.model.core import Pod
from karpenter_py.model.disruptioncost import disruption_cost, eviction_cost
from karpenter_py.model.donotdisrupt import do_not_disrupt_active, do_not_disrupt_until
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    ANNOTATION_DO_NOT_DISRUPT,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.state.snapshot import Snapshot, is_reschedulable
from karpenter_py.state.statenode import StateNode

PER_NODE_BASE_COST: Final = 1.0

# ----------------------------------------------------------------------------- costs


def reschedule_cost(pods: Iterable[Pod]) -> float:
    """1 for the node itself plus each reschedulable pod's eviction cost, negative ones counted
    as 0 (a cheap pod cannot make a node cheaper than empty). Never below 1.0."""
    return PER_NODE_BASE_COST + sum(max(0.0, eviction_cost(p)) for p in pods if is_reschedulable(p))


def is_empty(pods: Iterable[Pod]) -> bool:
    """Upstream's emptiness: the reschedule cost is <= 1.0, i.e. no reschedulable pod (not
    terminal, not terminating, not a daemonset or mirror pod) has a positive eviction cost.
    Pods whose cost clamps to <= 0 still leave the node empty."""
    return reschedule_cost(pods) <= PER_NODE_BASE_COST


def savings_ratio(candidate: Candidate) -> float:
    """Hourly price per unit of reschedule cost: what disrupting the node saves per pod moved.
    Upstream's consolidation sort key (higher first)."""
    return candidate.price / reschedule_cost(candidate.pods)


# ----------------------------------------------------------------------------- pod-level check


def _is_active(pod: Pod) -> bool:
    return not pod.is_terminal() and not pod.is_terminating()


def pod_block(pods: Candidate | Iterable[Pod], snapshot: Snapshot) -> str | None:
    """Why the pods keep their node from being disrupted gracefully, or None.

    ``pods`` is a node's pods, or a Candidate (its node's pods are looked up in the snapshot, so
    daemonset and mirror pods count too). Blocks: an active pod whose
    ``karpenter.sh/do-not-disrupt`` protects it at the snapshot's time (``"true"``, or a
    duration the pod has not yet run for; daemonset and mirror pods included, as upstream);
    an evictable pod (active, not a mirror pod) covered by a PDB that allows 0 disruptions, or
    by more than one PDB (the eviction API refuses those).
    """
    if isinstance(pods, Candidate):
        pods = snapshot.pods_by_node.get(pods.name, ())
    pod_list = list(pods)
    for pod in pod_list:
        if _is_active(pod) and do_not_disrupt_active(pod, snapshot.now):
            return _do_not_disrupt_reason(pod)
    for pod in pod_list:
        if not _is_active(pod) or pod.is_mirror_pod():
            continue
        covering = [pdb for pdb in snapshot.pdbs_in(pod.namespace) if pdb.covers(pod)]
        if len(covering) > 1:
            keys = ", ".join(pdb.key for pdb in covering)
            return (
                f"pod {pod.key} is covered by {len(covering)} PDBs ({keys}); "
                "eviction supports only one"
            )
        if covering and covering[0].disruptions_allowed < 1:
            pdb = covering[0]
            return (
                f"PDB {pdb.key} allows {pdb.disruptions_allowed} disruptions "
                f"(it covers pod {pod.key})"
            )
    return None


def _do_not_disrupt_reason(pod: Pod) -> str:
    value = pod.annotations[ANNOTATION_DO_NOT_DISRUPT]
    reason = f'pod {pod.key} has annotation {ANNOTATION_DO_NOT_DISRUPT}: "{value}"'
    if value == "true":
        return reason
    until = do_not_disrupt_until(pod)
    if until is None:
        return f"{reason} (the pod has not started)"
    return f"{reason} (protected until {until:%H:%M:%S} UTC)"


# ----------------------------------------------------------------------------- candidates


def node_block(node: StateNode, queued: Collection[str] = ()) -> str | None:
    """Why the node itself cannot be a candidate (upstream's order of checks), or None.

    ``queued`` holds what the orchestration queue already works on: node names, NodeClaim
    names or provider IDs (any of the three matches).
    """
    if node.nodeclaim is None:
        if node.node is not None and node.node.labels.get(LABEL_NODEPOOL):
            # Upstream disrupts only what a NodeClaim manages: a label alone is no claim.
            return f"node has a {LABEL_NODEPOOL} label but no NodeClaim (never disrupted)"
        return "not managed by Karpenter (no NodeClaim)"
    if node.node is None:
        return "NodeClaim has no Node yet (still launching or registering)"
    if not node.initialized:
        return "node is not initialized yet"
    if node.marked_for_deletion:
        return "node is already being deleted"
    if node.nominated:
        return "node is nominated for pending pods"
    if node.do_not_disrupt:
        return f'node has annotation {ANNOTATION_DO_NOT_DISRUPT}: "true"'
    if not node.node_pool:
        return f"node has no {LABEL_NODEPOOL} label"
    if queued and any(
        key and key in queued for key in (node.name, node.nodeclaim_name, node.provider_id)
    ):
        return "node is already queued for disruption"
    return None


def _offering(
    instance_type: InstanceType, zone: str, capacity_type: str, labels: Mapping[str, str]
) -> Offering | None:
    """The offering a node runs on: same zone and capacity type; with several (reservations),
    those whose own labels the node carries, cheapest first."""
    matching = [
        o for o in instance_type.offerings if o.zone == zone and o.capacity_type == capacity_type
    ]
    exact = [o for o in matching if all(labels.get(k) == v for k, v in o.labels.items())]
    pool = exact or matching
    return min(pool, key=lambda o: o.price) if pool else None


def _price(instance_type: InstanceType | None, node: StateNode) -> float:
    if instance_type is None:
        return 0.0
    labels = node.labels
    offering = _offering(
        instance_type,
        labels.get(LABEL_TOPOLOGY_ZONE, ""),
        labels.get(LABEL_CAPACITY_TYPE, ""),
        labels,
    )
    if offering is None or not math.isfinite(offering.price):
        return 0.0
    return offering.price


def _instance_type(
    node: StateNode, instance_types: Mapping[str, Sequence[InstanceType]]
) -> InstanceType | None:
    name = node.labels.get(LABEL_INSTANCE_TYPE, "")
    if not name:
        return None
    for it in instance_types.get(node.node_pool, ()):
        if it.name == name:
            return it
    return None


def hourly_price(node: StateNode, instance_types: Mapping[str, Sequence[InstanceType]]) -> float:
    """What a node costs per hour: the offering of its NodePool's instance type it runs on (zone,
    capacity type, reservation labels), 0 when none prices it. The one price of a node: candidates,
    ``plan --disruption`` and the cost metrics all read it here."""
    return _price(_instance_type(node, instance_types), node)


def make_candidate(
    node: StateNode,
    nodepool: NodePool,
    instance_types: Mapping[str, Sequence[InstanceType]],
    pods: Sequence[Pod],
    now: datetime,
) -> Candidate:
    """A Candidate for a node that passed the checks; ``pods`` are all the node's pods."""
    assert node.nodeclaim is not None
    instance_type = _instance_type(node, instance_types)
    labels = node.labels
    return Candidate(
        node=node,
        nodepool=nodepool,
        instance_type=instance_type,
        capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
        zone=labels.get(LABEL_TOPOLOGY_ZONE, ""),
        price=_price(instance_type, node),
        pods=tuple(p for p in pods if is_reschedulable(p)),
        disruption_cost=disruption_cost(pods, node.nodeclaim, now),
    )


def build_candidates(
    snapshot: Snapshot,
    instance_types: Mapping[str, Sequence[InstanceType]],
    *,
    now: datetime,
    queued: Collection[str] = (),
    eventual: bool = False,
) -> tuple[list[Candidate], dict[str, str]]:
    """The snapshot's disruption candidates, and for every other node why it is not one.

    ``instance_types`` maps NodePool name to the types it may launch (for the price). ``queued``
    is what the orchestration queue already holds (see ``node_block``). ``eventual=True`` is
    for the eventual disruption class (drift): pod-level blocks are then waived for nodes whose
    NodeClaim sets ``spec.terminationGracePeriod``. Candidates keep snapshot order; the second
    value maps node name to a reason (unmanaged nodes and in-flight NodeClaims included).
    """
    candidates: list[Candidate] = []
    reasons: dict[str, str] = {}
    for node in snapshot.nodes:
        blocked = node_block(node, queued)
        nodepool = snapshot.nodepools.get(node.node_pool)
        if blocked is None and nodepool is None:
            blocked = f"NodePool {node.node_pool!r} not found"
        pods = snapshot.pods_by_node.get(node.name, ())
        if blocked is None:
            waived = (
                eventual
                and node.nodeclaim is not None
                and node.nodeclaim.spec.termination_grace_period is not None
            )
            blocked = None if waived else pod_block(pods, snapshot)
        if blocked is not None:
            reasons[node.name] = blocked
            continue
        assert nodepool is not None
        candidates.append(make_candidate(node, nodepool, instance_types, pods, now))
    return candidates, reasons


# ----------------------------------------------------------------------------- method filters


def _static_block(candidate: Candidate) -> str | None:
    if candidate.nodepool.spec.replicas is not None:
        return f"NodePool {candidate.pool_name!r} is static (spec.replicas is set)"
    return None


def _price_block(candidate: Candidate) -> str | None:
    labels = candidate.node.labels
    type_name = labels.get(LABEL_INSTANCE_TYPE, "")
    if not type_name:
        return f"node has no {LABEL_INSTANCE_TYPE} label"
    if not candidate.capacity_type:
        return f"node has no {LABEL_CAPACITY_TYPE} label"
    if not candidate.zone:
        return f"node has no {LABEL_TOPOLOGY_ZONE} label"
    if candidate.instance_type is None:
        return f"instance type {type_name} is not offered by NodePool {candidate.pool_name!r}"
    offering = _offering(candidate.instance_type, candidate.zone, candidate.capacity_type, labels)
    if offering is None:
        return (
            f"no {candidate.capacity_type} offering of {type_name} in {candidate.zone} "
            "to price the node with"
        )
    if not math.isfinite(offering.price):
        return f"the {candidate.capacity_type} price of {type_name} in {candidate.zone} is unknown"
    return None


def _consolidate_after(candidate: Candidate) -> tuple[timedelta | None, str | None]:
    """The pool's consolidateAfter (None = Never), or why it cannot be read."""
    raw = candidate.nodepool.spec.disruption.consolidate_after
    try:
        return parse_nillable_duration(raw), None
    except ValueError:
        return None, f"NodePool {candidate.pool_name!r} has an invalid consolidateAfter {raw!r}"


def _consolidatable_from(candidate: Candidate, after: timedelta) -> tuple[datetime, str] | None:
    """When ``consolidateAfter`` (``after``) has passed for the candidate, and what it counts
    from (the last pod event, else initialization); None while the NodeClaim is not
    initialized."""
    nodeclaim = candidate.node.nodeclaim
    assert nodeclaim is not None
    status = nodeclaim.status
    initialized = status.get_condition(CONDITION_INITIALIZED)
    if status.last_pod_event_time is not None:
        since, what = status.last_pod_event_time, "last pod event"
    elif initialized is not None and initialized.status == CONDITION_TRUE:
        since, what = initialized.last_transition_time, "initialization"
    else:
        return None
    return as_utc(since) + after, what


def _consolidatable_block(candidate: Candidate, after: timedelta, now: datetime) -> str | None:
    nodeclaim = candidate.node.nodeclaim
    assert nodeclaim is not None
    if nodeclaim.status.is_true(CONDITION_CONSOLIDATABLE):
        return None
    raw = candidate.nodepool.spec.disruption.consolidate_after
    ready = _consolidatable_from(candidate, after)
    if ready is None:
        return f"NodeClaim is not {CONDITION_CONSOLIDATABLE} yet"
    ready_at, what = ready
    if ready_at > as_utc(now):
        left = int((ready_at - as_utc(now)).total_seconds())
        return (
            f"consolidateAfter {raw} not yet passed since {what} "
            f"(consolidatable at {ready_at:%H:%M:%S} UTC, in {left}s)"
        )
    return (
        f"consolidateAfter {raw} has passed since {what} but the NodeClaim is not "
        f"{CONDITION_CONSOLIDATABLE} yet"
    )


def _consolidation_enabled(candidate: Candidate) -> tuple[timedelta | None, str]:
    """The pool's consolidateAfter, or None and why consolidation is off for it (a static
    pool, an unreadable value, or ``Never``)."""
    blocked = _static_block(candidate)
    if blocked is not None:
        return None, blocked
    after, problem = _consolidate_after(candidate)
    if problem is not None:
        return None, problem
    if after is None:
        return None, (
            f"NodePool {candidate.pool_name!r} has consolidateAfter: Never (consolidation is off)"
        )
    return after, ""


def consolidation_block(
    candidate: Candidate, now: datetime, *, empty_ok: bool = False
) -> str | None:
    """Why consolidation (multi- or single-node) may not act on the candidate, or None.

    Checks: the pool is not static; instance-type, capacity-type and zone labels are known and
    priced; ``consolidateAfter`` is not ``Never``; the node is not empty; policy ``WhenEmpty``
    lets nothing else through; the NodeClaim is ``Consolidatable``. Empty nodes belong to the
    emptiness method alone, as upstream: otherwise a budget of 0 for reason ``Empty`` would
    not keep them, since consolidation would delete them under ``Underutilized``.
    ``empty_ok`` is for re-validation: a candidate whose pods went while its command waited
    (a scale-in) still goes with the command, as upstream's re-check allows; rejecting the
    command for it cost a whole command cycle in a 10,000-pod scale-in.
    """
    blocked = _price_block(candidate)
    if blocked is not None:
        return blocked
    after, blocked = _consolidation_enabled(candidate)
    if after is None:
        return blocked
    if is_empty(candidate.pods) and not empty_ok:
        return "node is empty: only emptiness deletes it"
    policy = candidate.nodepool.spec.disruption.consolidation_policy
    if policy == CONSOLIDATION_WHEN_EMPTY and not is_empty(candidate.pods):
        return (
            f"NodePool {candidate.pool_name!r} has consolidationPolicy {CONSOLIDATION_WHEN_EMPTY} "
            f"and the node is not empty ({_plural(len(candidate.pods), 'pod')} to move)"
        )
    return _consolidatable_block(candidate, after, now)


def emptiness_block(candidate: Candidate, now: datetime) -> str | None:
    """Why the emptiness method may not delete the candidate, or None: the pool is not static,
    ``consolidateAfter`` is not ``Never``, the node is empty and ``Consolidatable``. Price and
    policy do not matter: every policy deletes empty nodes."""
    after, blocked = _consolidation_enabled(candidate)
    if after is None:
        return blocked
    if not is_empty(candidate.pods):
        return f"node is not empty ({_plural(len(candidate.pods), 'pod')} to move)"
    return _consolidatable_block(candidate, after, now)


def recheck_at(
    nodes: Iterable[StateNode], candidates: Iterable[Candidate], now: datetime
) -> datetime | None:
    """The earliest moment after ``now`` at which a reason that keeps a node from disruption
    runs out by the clock alone: a nomination expiring, or ``consolidateAfter`` passing for a
    candidate that is not ``Consolidatable`` yet. None when no such moment is ahead.

    A pass that found nothing looks again then, since time passing is not a cluster change
    that would wake it (upstream waits for its forced 5-minute re-check)."""
    at = as_utc(now)
    ahead: list[datetime] = [
        as_utc(n.nominated_until)
        for n in nodes
        if n.nominated_until is not None and n.nodeclaim is not None and not n.marked_for_deletion
    ]
    for c in candidates:
        assert c.node.nodeclaim is not None
        if c.node.nodeclaim.status.is_true(CONDITION_CONSOLIDATABLE):
            continue
        after, _ = _consolidation_enabled(c)
        ready = _consolidatable_from(c, after) if after is not None else None
        if ready is not None:
            ahead.append(ready[0])
    return min((t for t in ahead if t > at), default=None)


def do_not_disrupt_expiry(snapshot: Snapshot) -> datetime | None:
    """The earliest moment after the snapshot's time at which a pod's do-not-disrupt duration
    runs out on a managed node (its node may then become a candidate), or None."""
    at = as_utc(snapshot.now)
    ahead = []
    for node in snapshot.nodes:
        if node.nodeclaim is None:
            continue
        for pod in snapshot.pods_by_node.get(node.name, ()):
            if ANNOTATION_DO_NOT_DISRUPT not in pod.annotations:
                continue
            until = do_not_disrupt_until(pod)
            if until is not None and until > at:
                ahead.append(until)
    return min(ahead, default=None)


def drift_block(candidate: Candidate, *, static: bool = False) -> str | None:
    """Why the drift method may not replace the candidate, or None: its NodeClaim must be
    ``Drifted=True``. Static pools are left to static drift: ``static=False`` (the drift
    method) rejects them, ``static=True`` (static drift) accepts only them."""
    is_static = candidate.nodepool.spec.replicas is not None
    if is_static and not static:
        return f"NodePool {candidate.pool_name!r} is static (spec.replicas is set); static drift replaces its nodes"
    if static and not is_static:
        return f"NodePool {candidate.pool_name!r} is not static"
    nodeclaim = candidate.node.nodeclaim
    if nodeclaim is None or not nodeclaim.status.is_true(CONDITION_DRIFTED):
        return "NodeClaim is not drifted"
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ----------------------------------------------------------------------------- ordering


def order_for_consolidation(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Upstream's consolidation order (v1.14 code; its docs still describe an older rule):
    savings ratio = price ÷ reschedule cost, highest first, so expensive nodes with little to
    move go first. Ties by node name. (``Candidate.disruption_cost`` no longer orders.)"""
    return sorted(candidates, key=lambda c: (-savings_ratio(c), c.name))


_NEVER_DRIFTED: Final = datetime.max.replace(tzinfo=UTC)


def _drifted_since(candidate: Candidate) -> datetime:
    nodeclaim = candidate.node.nodeclaim
    condition = nodeclaim.status.get_condition(CONDITION_DRIFTED) if nodeclaim else None
    if condition is None or condition.status != CONDITION_TRUE:
        return _NEVER_DRIFTED
    return as_utc(condition.last_transition_time)


def order_for_drift(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Empty nodes first, then the rest; within each, the oldest ``Drifted`` transition first
    (ties by node name). Candidates that are not drifted sort last."""
    return sorted(candidates, key=lambda c: (not is_empty(c.pods), _drifted_since(c), c.name))
