"""Pure drain decisions: which pods to wait for, evict, or force-delete, and in what order.

Upstream's terminator.Drain and pkg/utils/pod. A pod is *waited on* unless it is terminal,
tolerates the ``karpenter.sh/disrupted:NoSchedule`` taint (it would come straight back), is a
mirror pod (the API cannot delete it), or has been terminating for over a minute past its
deletion timestamp (stuck: the kubelet is gone). Waited-on pods drain in four groups —
non-critical non-DaemonSet, non-critical DaemonSet, critical non-DaemonSet, critical DaemonSet —
and a group is evicted only once every earlier group is empty, so DaemonSets (logging, CNI)
outlive the workloads that need them. Pods with an active ``karpenter.sh/do-not-disrupt`` are
never evicted, only waited on, until the termination grace period (TGP) forces them out.

TGP: with a node deadline D, a pod is deleted outright (bypassing PDBs and do-not-disrupt) once
``now > D - pod.terminationGracePeriodSeconds``, with a grace of the time left until D (at least
1 s), so it still gets as much of its own grace period as the node can spare. This applies across
all groups: at the deadline nothing waits for its turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from karpenter_py.model.api.base import parse_time
from karpenter_py.model.core import DISRUPTED_TAINT, Pod
from karpenter_py.model.donotdisrupt import do_not_disrupt_active
from karpenter_py.model.labels import CRITICAL_PRIORITY_CLASSES

STUCK_TERMINATING = timedelta(minutes=1)


def tolerates_disrupted(pod: Pod) -> bool:
    return any(t.tolerates(DISRUPTED_TAINT) for t in pod.tolerations)


def is_stuck_terminating(pod: Pod, now: datetime) -> bool:
    deleted = parse_time(pod.deletion_timestamp)
    return deleted is not None and now - deleted > STUCK_TERMINATING


def is_drainable(pod: Pod, now: datetime) -> bool:
    """Draining the node concerns this pod (upstream's IsDrainable): it does not tolerate the
    disrupted taint, is not a mirror pod and is not stuck terminating. Terminal pods still count
    as drainable; do-not-disrupt pods too (the drain waits for them)."""
    return (
        not tolerates_disrupted(pod)
        and not is_stuck_terminating(pod, now)
        and not pod.is_mirror_pod()
    )


def is_waiting_eviction(pod: Pod, now: datetime) -> bool:
    """The node is not drained while this pod is on it."""
    return not pod.is_terminal() and is_drainable(pod, now)


def is_active(pod: Pod) -> bool:
    return not pod.is_terminal() and not pod.is_terminating()


def is_evictable(pod: Pod, now: datetime) -> bool:
    """The eviction queue may ask the Eviction API to remove this pod now."""
    return (
        is_active(pod)
        and not tolerates_disrupted(pod)
        and not pod.is_mirror_pod()
        and not do_not_disrupt_active(pod, now)
    )


def is_critical(pod: Pod) -> bool:
    return pod.priority_class_name in CRITICAL_PRIORITY_CLASSES


def group_by_priority(pods: Sequence[Pod]) -> list[list[Pod]]:
    """Drain order: non-critical non-DS, non-critical DS, critical non-DS, critical DS."""
    groups: list[list[Pod]] = [[], [], [], []]
    for pod in pods:
        groups[2 * is_critical(pod) + pod.is_daemonset_pod()].append(pod)
    return groups


def pod_delete_time(deadline: datetime | None, pod: Pod) -> datetime | None:
    """When the pod must be deleted to get its whole grace period before the node deadline."""
    if deadline is None:
        return None
    return deadline - timedelta(seconds=pod.termination_grace_period_seconds)


def forced_grace_seconds(deadline: datetime, now: datetime) -> int:
    """Grace for a forced delete: what is left until the node deadline, at least 1 s (0 would
    skip the kubelet's graceful stop entirely)."""
    return max(1, int((deadline - now).total_seconds()))


def needs_forced_delete(pod: Pod, now: datetime, deadline: datetime | None) -> bool:
    if deadline is None:
        return False
    if pod.is_terminating():
        # Deleted earlier with a longer grace than the node has left (upstream's
        # IsPodEligibleForForcedEviction): shorten it.
        deleted = parse_time(pod.deletion_timestamp)
        return deleted is not None and deleted > deadline and now < deadline
    when = pod_delete_time(deadline, pod)
    return when is not None and now > when


@dataclass(frozen=True, slots=True)
class DrainPlan:
    waiting: int = 0  # pods the node still waits for (0: drained)
    evict: list[Pod] = field(default_factory=list)  # give to the eviction queue
    delete: list[tuple[Pod, int]] = field(default_factory=list)  # force-delete, with grace
    blocked: list[Pod] = field(default_factory=list)  # do-not-disrupt pods holding the group

    @property
    def drained(self) -> bool:
        return self.waiting == 0


def plan_drain(pods: Sequence[Pod], now: datetime, deadline: datetime | None) -> DrainPlan:
    waiting = [p for p in pods if is_waiting_eviction(p, now)]
    if not waiting:
        return DrainPlan()
    delete = [
        (p, forced_grace_seconds(deadline, now))
        for p in waiting
        if deadline is not None and needs_forced_delete(p, now, deadline)
    ]
    deleting = {p.key for p, _ in delete}
    for group in group_by_priority(waiting):
        if not group:
            continue
        evict = [p for p in group if p.key not in deleting and is_evictable(p, now)]
        blocked = [
            p
            for p in group
            if p.key not in deleting and is_active(p) and do_not_disrupt_active(p, now)
        ]
        return DrainPlan(waiting=len(waiting), evict=evict, delete=delete, blocked=blocked)
    return DrainPlan()  # unreachable: waiting is non-empty, so some group is
