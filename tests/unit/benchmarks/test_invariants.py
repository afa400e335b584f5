"""The chaos suite's invariants on small clusters worked out by hand: each check names exactly
the objects that break it and nothing else."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from benchmarks.invariants import (
    Instance,
    Observed,
    Violation,
    call_rate,
    check,
    disrupted_taints,
    duplicate_capacity,
    empty_nodes,
    error_tracebacks,
    orphans,
    pods_placed,
    stuck_finalizers,
)
from karpenter_py.model.labels import LABEL_NODEPOOL, TAINT_DISRUPTED_KEY
from tests import factories

Obj = dict[str, Any]
MANAGED = {LABEL_NODEPOOL: "default"}
NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def claim(name: str, **kw: Any) -> Obj:
    return factories.nodeclaim_dict(name, **kw)


def node(name: str, **kw: Any) -> Obj:
    return factories.node_dict(name, labels=kw.pop("labels", MANAGED), **kw)


def pod(name: str, on: str = "", **kw: Any) -> Obj:
    return factories.pod_dict(name, node_name=on, pending=not on, **kw)


def instance(name: str) -> Instance:
    return Instance(f"kwok://{name}", name)


def log(level: str, message: str, error: str | None = None, **fields: str) -> str:
    entry = {"level": level, "message": message, **fields}
    if error is not None:
        entry["error"] = error
    return json.dumps(entry)


TRACE = "Traceback (most recent call last):\n  File x\nValueError: boom"


@pytest.mark.parametrize(
    ("claims", "nodes", "instances", "expected"),
    [
        pytest.param([claim("a")], [node("a")], [instance("a")], [], id="one of each"),
        pytest.param(
            [claim("a")],
            [node("a")],
            [instance("a"), Instance("kwok://a-2", "a")],
            [Violation("two-instances-one-nodeclaim", "a", "2 instances")],
            id="a second launch for one claim",
        ),
        pytest.param(
            [claim("a")],
            [node("a"), node("b", provider_id="kwok://a")],
            [instance("a")],
            [Violation("two-nodes-one-instance", "kwok://a", "2 Nodes")],
            id="two Nodes of one instance",
        ),
        pytest.param(
            [claim("a"), claim("b", provider_id="kwok://a")],
            [node("a")],
            [instance("a")],
            [Violation("two-nodeclaims-one-instance", "kwok://a", "2 NodeClaims")],
            id="two claims naming one instance",
        ),
        pytest.param(
            [claim("a", launched=False), claim("b", launched=False)],
            [],
            [],
            [],
            id="claims not launched yet share no provider ID",
        ),
    ],
)
def test_duplicate_capacity(
    claims: Sequence[Obj], nodes: Sequence[Obj], instances: Sequence[Instance], expected: Any
) -> None:
    assert duplicate_capacity(claims, nodes, instances) == expected


@pytest.mark.parametrize(
    ("claims", "nodes", "instances", "expected"),
    [
        pytest.param([claim("a")], [node("a")], [instance("a")], [], id="claimed"),
        pytest.param(
            [claim("a")],
            [node("a"), node("b")],
            [instance("a"), instance("b")],
            [
                Violation("instance-without-nodeclaim", "kwok://b", "launched for b"),
                Violation("node-without-nodeclaim", "b", "kwok://b"),
            ],
            id="an instance and its Node left after their claim",
        ),
        pytest.param(
            [],
            [node("static", provider_id="aws:///zone/i-1", labels={})],
            [],
            [],
            id="a Node of no instance of ours is not an orphan",
        ),
    ],
)
def test_orphans(
    claims: Sequence[Obj], nodes: Sequence[Obj], instances: Sequence[Instance], expected: Any
) -> None:
    assert orphans(claims, nodes, instances) == expected


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([pod("a", on="n")], [], id="running"),
        pytest.param([pod("a")], [], id="reported unschedulable"),
        pytest.param(
            [factories.pod_dict("a", phase="Pending")],
            [Violation("pod-not-placed", "default/a", "Pending")],
            id="pending without a reason",
        ),
        pytest.param(
            [factories.pod_dict("a", node_name="n", phase="Failed")],
            [Violation("pod-not-placed", "default/a", "Failed")],
            id="failed",
        ),
    ],
)
def test_pods_placed(pods: Sequence[Obj], expected: Any) -> None:
    assert pods_placed(pods) == expected


@pytest.mark.parametrize(
    ("nodes", "pods", "expected"),
    [
        pytest.param([node("a")], [pod("p", on="a")], [], id="used"),
        pytest.param(
            [node("a"), node("b")],
            [pod("p", on="a"), pod("ds", on="b", owner="DaemonSet")],
            [Violation("empty-node", "b", "no pod runs on it and none is pending")],
            id="only a DaemonSet pod",
        ),
        pytest.param(
            [node("a"), node("b")], [pod("p", on="a"), pod("q")], [], id="a pod still pending"
        ),
        pytest.param(
            [node("a"), node("unmanaged", labels={})],
            [pod("p", on="a")],
            [],
            id="a Node no NodePool manages",
        ),
    ],
)
def test_empty_nodes(nodes: Sequence[Obj], pods: Sequence[Obj], expected: Any) -> None:
    assert empty_nodes(nodes, pods) == expected


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        pytest.param([node("a", taints=[{"key": "x", "effect": "NoSchedule"}])], [], id="other"),
        pytest.param(
            [node("a", taints=[{"key": TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}])],
            [Violation("stray-disrupted-taint", "a", "NoSchedule")],
            id="disrupted",
        ),
    ],
)
def test_disrupted_taints(nodes: Sequence[Obj], expected: Any) -> None:
    assert disrupted_taints(nodes) == expected


@pytest.mark.parametrize(
    ("deleting", "expected"),
    [
        pytest.param(None, [], id="not deleted"),
        pytest.param("2026-01-01T00:09:30Z", [], id="30 s ago, within the grace"),
        pytest.param(
            "2026-01-01T00:08:00Z",
            [Violation("stuck-finalizer", "NodeClaim a", "karpenter.sh/termination")],
            id="2 min ago",
        ),
    ],
)
def test_stuck_finalizers(deleting: str | None, expected: Any) -> None:
    assert stuck_finalizers([claim("a", deleting=deleting)], NOW, timedelta(minutes=1)) == expected


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param([log("WARN", "reconcile failed", controller="gc")], [], id="warn"),
        pytest.param([log("ERROR", "no such pool", controller="gc")], [], id="error, no trace"),
        pytest.param(
            [log("ERROR", "reconcile failed", TRACE, controller="gc")],
            [Violation("error-traceback", "gc", "reconcile failed")],
            id="error with a traceback",
        ),
        pytest.param(
            [log("ERROR", "crashed", TRACE, logger="karpenter")],
            [Violation("error-traceback", "karpenter", "crashed")],
            id="no controller: the logger",
        ),
        pytest.param(
            ["Traceback (most recent call last):\n", '  File "x"\n'],
            [Violation("error-traceback", "stderr", "Traceback (most recent call last):")],
            id="a traceback outside the JSON log",
        ),
    ],
)
def test_error_tracebacks(lines: Sequence[str], expected: Any) -> None:
    assert error_tracebacks(lines) == expected


def converged() -> Observed:
    return Observed(
        nodeclaims=[claim("a")],
        nodes=[node("a"), node("b")],
        pods=[pod("p", on="a")],
        instances=[instance("a")],
        log_lines=[log("INFO", "started")],
    )


@pytest.mark.parametrize(
    ("consolidation", "expected"),
    [
        pytest.param(
            False,
            [Violation("empty-node", "b", "no pod runs on it and none is pending")],
            id="consolidation off: an empty node counts",
        ),
        pytest.param(True, [], id="consolidation on: it may be on its way out"),
    ],
)
def test_check_runs_every_invariant(consolidation: bool, expected: Any) -> None:
    seen = converged()
    assert check(seen, NOW, finalizer_grace=timedelta(minutes=1), consolidation=consolidation) == (
        expected
    )


@pytest.mark.parametrize(
    ("calls", "seconds", "expected"),
    [
        (100, 15.0, []),  # 400/min
        (150, 15.0, []),  # 600/min: at the bound
        (151, 15.0, [Violation("call-rate", "ec2", "604 calls/min over 15.0 s (bound 600)")]),
        (0, 0.0, []),
    ],
)
def test_call_rate(calls: int, seconds: float, expected: Any) -> None:
    assert call_rate("ec2", calls, seconds, 600.0) == expected
