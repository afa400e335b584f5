"""The chaos suite's invariants on small clusters worked out by hand: each check names exactly
the objects that break it and nothing else."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from benchmarks.invariants import (
    Availability,
    Instance,
    Observed,
    Violation,
    available_pods,
    bounded_call_rate,
    call_rate,
    check,
    disrupted_taints,
    duplicate_capacity,
    empty_nodes,
    error_tracebacks,
    orphans,
    pdb_respected,
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
    ("times", "window", "expected"),
    [
        ([], (10.0, 20.0), 0.0),
        ([10.0, 12.0, 20.0], (10.0, 20.0), 18.0),  # both ends count: 3 calls in 10 s
        ([9.9, 15.0, 20.1], (10.0, 20.0), 6.0),
        ([10.0, 11.0], (10.0, 10.0), 0.0),  # an empty window has no rate
    ],
)
def test_call_rate(times: list[float], window: tuple[float, float], expected: float) -> None:
    assert call_rate(times, window) == expected


@pytest.mark.parametrize(
    ("calls", "bound", "expected"),
    [
        (30, 180.0, []),  # 30 calls in 10 s: 180 per minute, at the bound
        (
            31,
            180.0,
            [Violation("call-rate", "apiserver", "186 calls/min while faulted (bound 180)")],
        ),
    ],
)
def test_bounded_call_rate(calls: int, bound: float, expected: list[Violation]) -> None:
    times = [100.0 + i * 10.0 / calls for i in range(calls)]
    assert bounded_call_rate("apiserver", times, (100.0, 110.0), bound) == expected


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


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([pod("a", on="n", ready=True), pod("b", on="n", ready=True)], 2, id="ready"),
        pytest.param(
            [pod("a", on="n", ready=True), pod("b", on="n", ready=False)], 1, id="not ready"
        ),
        pytest.param([pod("a", on="n")], 0, id="running, no Ready condition yet"),
        pytest.param(
            [pod("a", on="n", ready=True, deleting="2026-01-01T00:09:00Z")],
            0,
            id="evicted: being deleted",
        ),
        pytest.param([pod("a", ready=False)], 0, id="pending"),
    ],
)
def test_available_pods(pods: Sequence[Obj], expected: int) -> None:
    assert available_pods(pods) == expected


def samples(*counts: int) -> list[Availability]:
    return [Availability(float(i), n) for i, n in enumerate(counts)]


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        pytest.param(samples(), [], id="no samples"),
        pytest.param(samples(5, 4, 5, 4, 5), [], id="one at a time"),
        pytest.param(
            samples(5, 4, 3, 4, 5),
            [Violation("pdb-violated", "at 2 s", "down to 3 available, the PDB keeps 4")],
            id="two at once",
        ),
        pytest.param(
            samples(5, 3, 2, 3, 4, 1),
            [
                Violation("pdb-violated", "at 1 s", "down to 2 available, the PDB keeps 4"),
                Violation("pdb-violated", "at 5 s", "down to 1 available, the PDB keeps 4"),
            ],
            id="one violation per stretch, with its lowest count",
        ),
    ],
)
def test_pdb_respected(seen: Sequence[Availability], expected: Any) -> None:
    assert pdb_respected(seen, 4) == expected


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
