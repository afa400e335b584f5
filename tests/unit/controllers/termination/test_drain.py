"""Drain decisions: which pods block, which are evicted and in what order, TGP math."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.controllers.termination.drain import (
    forced_grace_seconds,
    group_by_priority,
    is_evictable,
    is_waiting_eviction,
    plan_drain,
    pod_delete_time,
)
from karpenter_py.controllers.termination.node import cordon_patch
from karpenter_py.model.core import Pod, pod_from_dict
from karpenter_py.model.donotdisrupt import do_not_disrupt_active

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def ts(delta_s: float) -> str:
    return (NOW + timedelta(seconds=delta_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def mk(
    name: str,
    *,
    ds: bool = False,
    critical: bool = False,
    phase: str = "Running",
    deleted: float | None = None,
    created: float = -3600,
    tolerate: bool = False,
    mirror: bool = False,
    dnd: str | None = None,
    tgp: int = 30,
) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    meta["creationTimestamp"] = ts(created)
    if deleted is not None:
        meta["deletionTimestamp"] = ts(deleted)
    if ds:
        meta["ownerReferences"] = [
            {"kind": "DaemonSet", "name": "d", "uid": "u", "controller": True}
        ]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "x"}
    if dnd is not None:
        meta.setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = dnd
    spec: dict[str, Any] = {"nodeName": "n", "terminationGracePeriodSeconds": tgp, "containers": []}
    if critical:
        spec["priorityClassName"] = "system-node-critical"
    if tolerate:
        spec["tolerations"] = [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]
    # Started as soon as it was created: do-not-disrupt durations count from the start.
    status = {"phase": phase, "startTime": ts(created)}
    return pod_from_dict({"metadata": meta, "spec": spec, "status": status})


def names(pods: list[Pod]) -> list[str]:
    return [p.name for p in pods]


def test_groups_in_upstream_order() -> None:
    pods = [
        mk("crit-ds", ds=True, critical=True),
        mk("crit", critical=True),
        mk("ds", ds=True),
        mk("plain"),
    ]
    assert [names(g) for g in group_by_priority(pods)] == [["plain"], ["ds"], ["crit"], ["crit-ds"]]


@pytest.mark.parametrize(
    ("pod", "waiting", "evictable"),
    [
        (mk("running"), True, True),
        (mk("succeeded", phase="Succeeded"), False, False),
        (mk("failed", phase="Failed"), False, False),
        (mk("tolerates", tolerate=True), False, False),
        (mk("mirror", mirror=True), False, False),
        (mk("terminating", deleted=-10), True, False),  # wait for it, do not evict again
        (mk("stuck", deleted=-61), False, False),  # >1 min past its deletion timestamp
        (mk("dnd", dnd="true"), True, False),
        (mk("dnd-expired", dnd="30m", created=-3600), True, True),
        (mk("dnd-active", dnd="2h", created=-3600), True, False),
        (mk("dnd-invalid", dnd="soon"), True, True),
    ],
    ids=lambda v: v.name if isinstance(v, Pod) else str(v),
)
def test_pod_predicates(pod: Pod, waiting: bool, evictable: bool) -> None:
    assert is_waiting_eviction(pod, NOW) is waiting
    assert is_evictable(pod, NOW) is evictable


@pytest.mark.parametrize(
    ("value", "created", "active"),
    [
        ("true", -10, True),
        ("false", -10, False),
        ("1m", -30, True),
        ("1m", -90, False),
        ("-1m", 0, False),
        # Past Go's time.Duration: not a duration, so the annotation is ignored (an
        # OverflowError before, out of every drain and disruption pass).
        ("99999999999999999999h", -10, False),
        ("2562047h", -10, True),
    ],
)
def test_do_not_disrupt_durations(value: str, created: float, active: bool) -> None:
    assert do_not_disrupt_active(mk("p", dnd=value, created=created), NOW) is active


def test_next_group_only_when_previous_is_empty() -> None:
    pods = [mk("ds", ds=True), mk("a"), mk("b"), mk("crit", critical=True)]
    plan = plan_drain(pods, NOW, None)
    assert names(plan.evict) == ["a", "b"]
    assert plan.waiting == 4
    assert not plan.drained
    # The first group is being deleted (terminating): wait for it, evict nothing else yet.
    pods = [mk("ds", ds=True), mk("a", deleted=-5), mk("crit", critical=True)]
    plan = plan_drain(pods, NOW, None)
    assert plan.evict == []
    assert plan.waiting == 3
    # Group 1 empty: DaemonSet pods go next.
    plan = plan_drain([mk("ds", ds=True), mk("crit", critical=True)], NOW, None)
    assert names(plan.evict) == ["ds"]


def test_drained_when_only_ignorable_pods_remain() -> None:
    pods = [
        mk("t", tolerate=True),
        mk("m", mirror=True),
        mk("s", phase="Succeeded"),
        mk("x", deleted=-120),
    ]
    assert plan_drain(pods, NOW, None).drained


def test_do_not_disrupt_blocks_without_deadline() -> None:
    plan = plan_drain([mk("dnd", dnd="true"), mk("other")], NOW, None)
    assert names(plan.evict) == ["other"]
    assert names(plan.blocked) == ["dnd"]
    plan = plan_drain([mk("dnd", dnd="true")], NOW, None)
    assert plan.evict == []
    assert plan.delete == []
    assert not plan.drained


@pytest.mark.parametrize(
    ("deadline_in", "tgp", "forced", "grace"),
    [
        (100, 30, False, None),  # deletes at deadline-30s = +70s: not yet
        (25, 30, True, 25),  # deadline-30s is past: delete with the 25s left
        (0.4, 30, True, 1),  # never less than 1s
        (-50, 30, True, 1),  # past the deadline
        (31, 30, False, None),
    ],
)
def test_tgp_forces_deletion(deadline_in: float, tgp: int, forced: bool, grace: int | None) -> None:
    deadline = NOW + timedelta(seconds=deadline_in)
    pod = mk("dnd", dnd="true", tgp=tgp)
    plan = plan_drain([pod], NOW, deadline)
    assert [(p.name, g) for p, g in plan.delete] == ([("dnd", grace)] if forced else [])


def test_tgp_force_applies_across_groups() -> None:
    deadline = NOW + timedelta(seconds=5)
    # a: must go by deadline-1s (not yet); crit-ds: by deadline-10s (already past), although
    # its group (critical DaemonSet, the last) would otherwise wait for "a".
    pods = [mk("a", tgp=1), mk("crit-ds", ds=True, critical=True, tgp=10)]
    plan = plan_drain(pods, NOW, deadline)
    assert [(p.name, g) for p, g in plan.delete] == [("crit-ds", 5)]
    assert names(plan.evict) == ["a"]


def test_terminating_pod_with_longer_grace_than_the_node_is_shortened() -> None:
    deadline = NOW + timedelta(seconds=20)
    long = mk("long", deleted=60)  # will only be killed in 60s
    short = mk("short", deleted=10)
    plan = plan_drain([long, short], NOW, deadline)
    assert [(p.name, g) for p, g in plan.delete] == [("long", 20)]


def test_delete_time_and_grace_math() -> None:
    deadline = NOW + timedelta(minutes=30)
    assert pod_delete_time(deadline, mk("p", tgp=45 * 60)) == NOW - timedelta(minutes=15)
    assert pod_delete_time(None, mk("p")) is None
    assert forced_grace_seconds(deadline, NOW) == 1800
    assert forced_grace_seconds(NOW, NOW + timedelta(seconds=3)) == 1


@pytest.mark.parametrize(
    ("taints", "labels", "expect_taints"),
    [
        ([], {}, [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
        (
            [
                {"key": "karpenter.sh/disrupted", "effect": "NoExecute"},
                {"key": "x", "effect": "NoSchedule"},
            ],
            {},
            [
                {"key": "x", "effect": "NoSchedule"},
                {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
            ],
        ),
        ([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}], {}, None),
    ],
)
def test_cordon_patch(
    taints: list[dict[str, str]], labels: dict[str, str], expect_taints: Any
) -> None:
    node = {"metadata": {"resourceVersion": "7", "labels": labels}, "spec": {"taints": taints}}
    patch = cordon_patch(node)
    assert patch is not None
    assert patch["metadata"]["labels"] == {
        "node.kubernetes.io/exclude-from-external-load-balancers": "karpenter"
    }
    if expect_taints is None:
        assert "spec" not in patch
    else:
        assert patch["spec"]["taints"] == expect_taints
        assert patch["metadata"]["resourceVersion"] == "7"
    done = {
        "metadata": {
            "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "karpenter"}
        },
        "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]},
    }
    assert cordon_patch(done) is None
