"""``hold_pods``: pods an earlier round placed stay on their nodes when they still fit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from karpenter_py.scheduling.fromstate import hold_pods
from karpenter_py.scheduling.inputs import SolveInput
from tests.unit.scheduling._helpers import existing, make_node, pod, pool, standard_types

PODS = (pod("p1", "1"), pod("p2", "1"), pod("p3", "2"), pod("q", "1"))


def solve_input() -> SolveInput:
    """Node a: 4 CPU, empty; b: 4 CPU, 3 taken by a bound pod; c: empty, being deleted."""
    nodes = (
        existing(make_node("a"), in_flight=True, initialized=False),
        existing(make_node("b"), [pod("bound", "3")], in_flight=True, initialized=False),
        replace(existing(make_node("c"), in_flight=True), marked_for_deletion=True),
    )
    return SolveInput(
        pods=PODS,
        pools=(pool(),),
        instance_types={"default": standard_types()},
        existing=nodes,
    )


@pytest.mark.parametrize(
    ("holds", "held", "rest"),
    [
        pytest.param({}, {}, ["p1", "p2", "p3", "q"], id="no holds"),
        pytest.param(
            {"p1": "a", "p3": "a"}, {"a": ["p1", "p3"]}, ["p2", "q"], id="held where placed"
        ),
        pytest.param(
            {"p1": "a", "p2": "b", "p3": "a"},
            {"a": ["p1", "p3"], "b": ["p2"]},
            ["q"],
            id="each on its own node, beside the pods bound there",
        ),
        pytest.param(
            {"p1": "b", "p2": "b"},
            {},
            ["p1", "p2", "p3", "q"],
            id="a node they no longer all fit on holds none",
        ),
        pytest.param({"p1": "c"}, {}, ["p1", "p2", "p3", "q"], id="a node being deleted"),
        pytest.param({"p1": "gone"}, {}, ["p1", "p2", "p3", "q"], id="a node that is gone"),
    ],
)
def test_hold_pods(holds: dict[str, str], held: dict[str, list[str]], rest: list[str]) -> None:
    inp = solve_input()
    out, placements = hold_pods(inp, {f"default/{k}": v for k, v in holds.items()})
    assert {p.node_name: [x.name for x in p.pods] for p in placements} == held
    assert [p.name for p in out.pods] == rest
    # The held pods are on their nodes for the solve, after the pods bound there.
    on = {ex.node.name: [p.name for p in ex.pods] for ex in out.existing}
    assert on == {
        "a": held.get("a", []),
        "b": ["bound", *held.get("b", [])],
        "c": [],
    }
    if not held:
        assert out is inp


def test_a_node_there_twice_holds_its_pods_once() -> None:
    """A kwok Node can reach the state before its NodeClaim's launch status joins them: the
    snapshot then has the node twice under one name, and its pods go on the first only."""
    inp = solve_input()
    twice = replace(inp, existing=(*inp.existing, existing(make_node("a"), in_flight=True)))
    out, placements = hold_pods(twice, {"default/p1": "a", "default/p2": "a"})
    assert [(p.node_name, [x.name for x in p.pods]) for p in placements] == [("a", ["p1", "p2"])]
    assert [[p.name for p in ex.pods] for ex in out.existing] == [["p1", "p2"], ["bound"], [], []]
    assert [p.name for p in out.pods] == ["p3", "q"]
