"""The disruption decision core on small clusters of kwok types: which command, and why not."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.controllers.disruption.candidates import hourly_price
from karpenter_py.controllers.disruption.decide import (
    METHODS,
    Facts,
    apply_command,
    evaluate,
    next_command,
    revalidate,
    validate,
)
from karpenter_py.controllers.disruption.drift import DRIFT
from karpenter_py.controllers.disruption.emptiness import EMPTINESS
from karpenter_py.controllers.disruption.types import Command
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.core import LabelSelector
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.pdb import PodDisruptionBudget
from tests.factories import (
    KWOK_NODECLASS_KEY,
    condition,
    node,
    node_labels,
    nodeclaim,
    nodepool,
    pod,
)

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
TYPES = kwok_catalog()
PRICES = {(t.name, o.zone, o.capacity_type): o.price for t in TYPES for o in t.offerings}
OD = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
LINUX = [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]
LIFECYCLE = [condition(t) for t in ("Launched", "Registered", "Initialized")]
CONSOLIDATABLE = [*LIFECYCLE, condition("Consolidatable")]
C4 = "c-4x-amd64-linux"
C4_ALLOC = {"cpu": "3900m", "memory": "7Gi", "pods": "110"}


def build(
    nodes: list[tuple[str, str, list[str]]],
    *,
    disruption: dict[str, Any] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    capacity_type: str = "on-demand",
    conditions: list[dict[str, Any]] | None = None,
    pod_annotations: dict[str, dict[str, str]] | None = None,
    tgp: str | None = None,
    pool: str = "default",
    into: Cluster | None = None,
) -> Cluster:
    """Nodes of ``pool`` as (name, instance type, [pod cpu requests]), in a new cluster or
    added to ``into``."""
    c = into if into is not None else Cluster()
    c.upsert_nodepool(
        nodepool(
            pool,
            requirements=requirements if requirements is not None else [*LINUX, *OD],
            disruption=disruption or {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]},
        )
    )
    c.upsert_nodeclass(KWOK_NODECLASS_KEY, True)
    for name, it, cpus in nodes:
        labels = node_labels(pool, it, capacity_type=capacity_type)
        c.upsert_node(node(name, labels=labels, allocatable=C4_ALLOC))
        c.upsert_nodeclaim(
            nodeclaim(
                f"nc-{name}",
                pool=pool,
                node_name=name,
                conditions=conditions or CONSOLIDATABLE,
                termination_grace_period=tgp,
            )
        )
        for i, cpu in enumerate(cpus):
            pname = f"{name}-p{i}"
            c.upsert_pod(
                pod(
                    pname,
                    node_name=name,
                    cpu=cpu,
                    memory="256Mi",
                    annotations=(pod_annotations or {}).get(pname),
                )
            )
    return c


def facts(c: Cluster, **kw: Any) -> Facts:
    """The cluster's facts at NOW, every pool offering the kwok catalog."""
    snap = c.snapshot(NOW)
    return Facts(snapshot=snap, instance_types=dict.fromkeys(snap.nodepools, TYPES), now=NOW, **kw)


def shape(cmd: Command) -> tuple[str, list[str], list[str], float]:
    return (
        cmd.method.name,
        [x.name for x in cmd.candidates],
        [r.instance_type.name for r in cmd.replacements],
        round(cmd.savings, 4),
    )


def price(it: str, ct: str = "on-demand") -> float:
    return PRICES[(it, "test-zone-a", ct)]


# --------------------------------------------------------------------------------- methods
def test_methods_run_in_upstream_order_and_carry_upstream_labels() -> None:
    # (name, budget reason, metric reason label, consolidation_type, eventual, validates)
    assert [
        (m.name, m.reason.value, m.reason_label, m.consolidation_type, m.eventual, m.validates)
        for m in METHODS
    ] == [
        ("emptiness", "Empty", "empty", "empty", False, True),
        ("static-drift", "Drifted", "drifted", "", True, False),
        ("drift", "Drifted", "drifted", "", True, False),
        ("multi-node-consolidation", "Underutilized", "underutilized", "multi", False, True),
        ("single-node-consolidation", "Underutilized", "underutilized", "single", False, True),
    ]


@pytest.mark.parametrize(
    ("nodes", "want"),
    [
        # An empty node goes first, alone, whatever else could consolidate.
        ([("a", C4, []), ("b", C4, ["1"])], ("emptiness", ["a"], [], round(price(C4), 4))),
        # One underused node: replaced by the cheapest type that holds its pod.
        (
            [("a", C4, ["1"])],
            (
                "single-node-consolidation",
                ["a"],
                ["c-2x-amd64-linux"],
                round(price(C4) - price("c-2x-amd64-linux"), 4),
            ),
        ),
        # Two underused nodes: both go for one node of another type at the same price
        # (another type, so no same-type swap), saving one node.
        (
            [("a", C4, ["1"]), ("b", C4, ["1"])],
            ("multi-node-consolidation", ["a", "b"], ["c-4x-arm64-linux"], round(price(C4), 4)),
        ),
    ],
)
def test_the_first_method_that_acts(nodes: Any, want: Any) -> None:
    decision = next_command(facts(build(nodes)))
    (cmd,) = decision.commands
    assert shape(cmd) == want


def test_extended_search_beats_the_prefix_search() -> None:
    """Three nodes at 1.5/3.9 cpu: upstream's longest prefix is 3 -> 1 c-8x; the greedy search
    finds 2 -> 1 c-2x, leaving the third node to hold a pod: cheaper in sum."""
    c = build([("a", C4, ["1.5"]), ("b", C4, ["1.5"]), ("c", C4, ["1.5"])])
    up = evaluate(facts(c, search="upstream"))
    ours = evaluate(facts(c, search="extended"))
    assert [shape(x) for x in up.commands] == [
        (
            "multi-node-consolidation",
            ["a", "b", "c"],
            ["c-8x-amd64-linux"],
            round(3 * price(C4) - price("c-8x-amd64-linux"), 4),
        )
    ]
    assert [shape(x) for x in ours.commands] == [
        (
            "multi-node-consolidation",
            ["a", "b"],
            ["c-2x-amd64-linux"],
            round(2 * price(C4) - price("c-2x-amd64-linux"), 4),
        )
    ]
    assert ours.unchanged == {
        "c": f"no cheaper replacement: cheapest option {C4} at ${price(C4):.4f}/h >= current "
        f"${price(C4):.4f}/h"
    }
    assert sum(x.savings for x in ours.commands) > sum(x.savings for x in up.commands)


# --------------------------------------------------------------------------------- reasons
@pytest.mark.parametrize(
    ("kwargs", "nodes", "reason"),
    [
        (
            {"pod_annotations": {"a-p0": {"karpenter.sh/do-not-disrupt": "true"}}},
            [("a", C4, ["1"])],
            'pod default/a-p0 has annotation karpenter.sh/do-not-disrupt: "true"',
        ),
        (
            {"disruption": {"consolidateAfter": "Never"}},
            [("a", C4, ["1"])],
            "NodePool 'default' has consolidateAfter: Never (consolidation is off)",
        ),
        (
            {"disruption": {"consolidateAfter": "0s", "consolidationPolicy": "WhenEmpty"}},
            [("a", C4, ["1"])],
            "NodePool 'default' has consolidationPolicy WhenEmpty and the node is not empty "
            "(1 pod to move)",
        ),
        (
            {"disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "0"}]}},
            [("a", C4, ["1"])],
            "budget 0 for Underutilized",
        ),
        (
            {"capacity_type": "spot", "requirements": LINUX},
            [("a", C4, ["1"])],
            "spot-to-spot consolidation is disabled (feature gate SpotToSpotConsolidation)",
        ),
        (
            {},
            [("a", "c-1x-amd64-linux", ["500m"])],
            "no cheaper replacement: cheapest option c-1x-amd64-linux at "
            f"${price('c-1x-amd64-linux'):.4f}/h >= current ${price('c-1x-amd64-linux'):.4f}/h",
        ),
    ],
)
def test_every_node_left_alone_has_a_reason(kwargs: Any, nodes: Any, reason: str) -> None:
    decision = next_command(facts(build(nodes, **kwargs)))
    assert decision.commands == ()
    assert {k: v.split(" (")[0] if "budget" in v else v for k, v in decision.unchanged.items()} == {
        "a": reason.split(" (")[0] if "budget" in reason else reason
    }


# --------------------------------------------------------------------------------- look again
C1 = "c-1x-amd64-linux"  # with a 500m pod: no cheaper replacement, so the pass finds nothing
NOT_YET = {"disruption": {"consolidateAfter": "90m"}, "conditions": LIFECYCLE}  # ready 01:30
PASSED = {"disruption": {"consolidateAfter": "30m"}, "conditions": LIFECYCLE}  # ready 00:30


def window(schedule: str) -> dict[str, str]:
    """A budget allowing 0 for an hour from each ``schedule`` hit."""
    return {"nodes": "0", "schedule": schedule, "duration": "1h"}


@pytest.mark.parametrize(
    ("kwargs", "nominated", "recheck"),
    [
        ({}, {"a": NOW + timedelta(seconds=12)}, NOW + timedelta(seconds=12)),
        ({}, {"nc-a": NOW + timedelta(seconds=12)}, NOW + timedelta(seconds=12)),
        ({}, {"a": NOW - timedelta(seconds=1)}, None),  # ran out already
        (NOT_YET, {}, NOW + timedelta(minutes=30)),
        (NOT_YET, {"a": NOW + timedelta(seconds=12)}, NOW + timedelta(seconds=12)),
        # Nominated past its consolidateAfter: nothing changes before the nomination ends.
        (NOT_YET, {"a": NOW + timedelta(minutes=40)}, NOW + timedelta(minutes=40)),
        # Passed, the condition not written yet: its write is a cluster change, not a time.
        (PASSED, {}, None),
        ({"disruption": {"consolidateAfter": "Never"}, "conditions": LIFECYCLE}, {}, None),
        # A budget window of the candidate's pool closing (00:30-01:30) or opening (at 02:00).
        (
            {"disruption": {"consolidateAfter": "0s", "budgets": [window("30 0 * * *")]}},
            {},
            NOW + timedelta(minutes=30),
        ),
        (
            {"disruption": {"consolidateAfter": "0s", "budgets": [window("0 2 * * *")]}},
            {},
            NOW + timedelta(hours=1),
        ),
    ],
)
def test_a_time_based_reason_names_when_to_look_again(
    kwargs: Any, nominated: dict[str, datetime], recheck: datetime | None
) -> None:
    c = build([("a", C1, ["500m"])], **kwargs)
    for name, until in nominated.items():
        c.nominate(name, until)
    decision = next_command(facts(c))
    assert decision.commands == ()
    assert decision.recheck_at == recheck
    assert evaluate(facts(c)).recheck_at == recheck


def test_a_pdb_with_no_allowance_blocks() -> None:
    c = build([("a", C4, ["1"])])
    c.upsert_pdb(PodDisruptionBudget("default", "web", LabelSelector(), 0))
    decision = next_command(facts(c))
    assert decision.unchanged == {
        "a": "PDB default/web allows 0 disruptions (it covers pod default/a-p0)"
    }


def test_spot_to_spot_with_the_gate_needs_fifteen_cheaper_types() -> None:
    c = build([("a", C4, ["1"])], capacity_type="spot", requirements=LINUX)
    decision = next_command(facts(c, spot_to_spot=True))
    assert decision.commands == ()
    assert decision.unchanged["a"].startswith("only ")
    assert decision.unchanged["a"].endswith(
        "cheaper spot types (15 needed for spot-to-spot consolidation)"
    )


def test_on_demand_candidates_get_a_spot_pinned_replacement() -> None:
    c = build([("a", C4, ["1"])], requirements=LINUX)  # the pool allows spot and on-demand
    (cmd,) = next_command(facts(c)).commands
    (rep,) = cmd.replacements
    assert rep.offering.capacity_type == "spot"
    ct = {r.key: r.values for r in rep.requirements}["karpenter.sh/capacity-type"]
    assert tuple(ct) == ("spot",)


# --------------------------------------------------------------------------------- drift
def drifted(tgp: str | None = None) -> list[dict[str, Any]]:
    return [*CONSOLIDATABLE, condition("Drifted", reason="NodePoolDrifted")]


def test_drift_replaces_one_node_even_at_the_same_price() -> None:
    c = build([("a", C4, ["3"])], conditions=drifted(), disruption={"consolidateAfter": "Never"})
    (cmd,) = next_command(facts(c)).commands
    assert shape(cmd) == ("drift", ["a"], [C4], 0.0)


def test_drift_with_termination_grace_period_ignores_pod_blocks() -> None:
    kw: dict[str, Any] = {
        "conditions": drifted(),
        "pod_annotations": {"a-p0": {"karpenter.sh/do-not-disrupt": "true"}},
    }
    blocked = next_command(facts(build([("a", C4, ["3"])], **kw)))
    assert blocked.commands == ()
    (cmd,) = next_command(facts(build([("a", C4, ["3"])], tgp="1h", **kw))).commands
    assert cmd.method is DRIFT


# --------------------------------------------------------------------------------- validation
def test_revalidation_accepts_an_unchanged_cluster_and_rejects_a_changed_candidate() -> None:
    c = build([("a", C4, ["1"]), ("b", C4, ["1"])])
    (cmd,) = next_command(facts(c)).commands
    assert validate(cmd, facts(c)) is None
    c.upsert_pod(pod("late", node_name="a", cpu="3", memory="256Mi"))
    why = validate(cmd, facts(c))
    assert why is not None
    assert why.startswith("re-simulation: ")


def test_a_candidate_emptied_while_its_command_waited_still_goes_with_it() -> None:
    c = build([("a", C4, ["1"]), ("b", C4, ["1"])])
    (cmd,) = next_command(facts(c)).commands
    assert shape(cmd)[:3] == ("multi-node-consolidation", ["a", "b"], ["c-4x-arm64-linux"])
    c.delete_pod("default/a-p0")  # the scale-in took a's pod during the validation delay
    again, why = revalidate(cmd, facts(c))
    assert (again, why) == (cmd, "")
    # A new pass still leaves the empty node to emptiness.
    (first,) = next_command(facts(c)).commands
    assert shape(first)[:2] == ("emptiness", ["a"])


@pytest.mark.parametrize(
    ("gone", "want"),
    [
        # Both pods went while the command waited: the two nodes go with no new node at all.
        (["default/a-p0", "default/b-p0"], ("multi-node-consolidation", ["a", "b"], [], 0.2172)),
        # One went: a's pod still needs the replacement; the command runs as it was.
        (
            ["default/b-p0"],
            ("multi-node-consolidation", ["a", "b"], ["c-4x-arm64-linux"], 0.1086),
        ),
    ],
)
def test_a_re_simulation_needing_fewer_replacements_runs_instead(
    gone: list[str], want: tuple[str, list[str], list[str], float]
) -> None:
    c = build([("a", C4, ["1"]), ("b", C4, ["1"])])
    (cmd,) = next_command(facts(c)).commands
    assert shape(cmd) == ("multi-node-consolidation", ["a", "b"], ["c-4x-arm64-linux"], 0.1086)
    for key in gone:
        c.delete_pod(key)
    again, why = revalidate(cmd, facts(c))
    assert again is not None
    assert (shape(again), why) == (want, "")


@pytest.mark.parametrize(
    ("kept", "want"),
    [
        # c got a do-not-disrupt pod meanwhile: a and b still go, their pods onto c.
        (["c"], (("multi-node-consolidation", ["a", "b"], [], 0.2172), "")),
        # Only one candidate would be left: that is a single-node command's search, not this one.
        (
            ["b", "c"],
            (
                None,
                "candidate b no longer qualifies: "
                'pod default/late-b has annotation karpenter.sh/do-not-disrupt: "true"',
            ),
        ),
    ],
)
def test_a_multi_node_command_goes_on_without_the_candidates_that_no_longer_qualify(
    kept: list[str], want: tuple[tuple[str, list[str], list[str], float] | None, str]
) -> None:
    c = build([("a", C4, ["1"]), ("b", C4, ["1"]), ("c", C4, ["1"])])
    (cmd,) = next_command(facts(c)).commands
    assert shape(cmd) == (
        "multi-node-consolidation",
        ["a", "b", "c"],
        ["c-4x-arm64-linux"],
        0.2172,
    )
    for name in kept:
        c.upsert_pod(
            pod(
                f"late-{name}",
                node_name=name,
                cpu="100m",
                memory="256Mi",
                annotations={"karpenter.sh/do-not-disrupt": "true"},
            )
        )
    again, why = revalidate(cmd, facts(c))
    assert (None if again is None else shape(again), why) == want


def test_emptiness_revalidation_keeps_the_still_empty_subset() -> None:
    c = build([("a", C4, []), ("b", C4, []), ("x", C4, ["3"])])
    (cmd,) = next_command(facts(c)).commands
    assert shape(cmd)[:2] == ("emptiness", ["a", "b"])
    c.upsert_pod(pod("late", node_name="b", cpu="1", memory="256Mi"))
    again, why = revalidate(cmd, facts(c))
    assert again is not None
    assert why == ""
    assert [x.name for x in again.candidates] == ["a"]


# --------------------------------------------------------------------------------- evaluate
def test_evaluate_names_every_node_once() -> None:
    c = build(
        [("a", C4, []), ("b", C4, ["1"]), ("c", C4, ["1"]), ("d", C4, ["3.5"])],
        pod_annotations={"d-p0": {"karpenter.sh/do-not-disrupt": "true"}},
    )
    d = evaluate(facts(c))
    named = [x.name for cmd in d.commands for x in cmd.candidates] + list(d.unchanged)
    assert sorted(named) == ["a", "b", "c", "d"]
    assert d.commands[0].method is EMPTINESS


def test_evaluate_spends_budgets_across_commands() -> None:
    c = build(
        [("a", C4, []), ("b", C4, []), ("c", C4, ["1"])],
        disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "1"}]},
    )
    d = evaluate(facts(c))
    assert [shape(x)[:2] for x in d.commands] == [("emptiness", ["a"])]
    assert set(d.unchanged) == {"b", "c"}
    assert d.unchanged["b"].startswith("budget 1 for Empty")


@pytest.mark.parametrize(
    ("nodes", "budget", "want"),
    [
        pytest.param([("a", C4, []), ("b", C4, [])], "100%", 0.0, id="budget allows all"),
        pytest.param([("a", C4, []), ("b", C4, []), ("c", C4, [])], "1", 2, id="two kept"),
        pytest.param([("a", C4, []), ("b", C4, [])], "0", 2, id="all kept"),
        # The non-empty node a budget keeps is not counted: its saving was never simulated.
        pytest.param([("a", C4, []), ("b", C4, ["1"])], "0", 1, id="only empty nodes count"),
    ],
)
def test_budget_blocked_is_the_price_of_the_empty_nodes_a_budget_kept(
    nodes: list[tuple[str, str, list[str]]], budget: str, want: float
) -> None:
    c = build(nodes, disruption={"consolidateAfter": "0s", "budgets": [{"nodes": budget}]})
    assert next_command(facts(c)).budget_blocked == want * price(C4)
    assert evaluate(facts(c)).budget_blocked == want * price(C4)


def test_hourly_price_reads_the_offering_of_the_node() -> None:
    c = build([("a", C4, [])])
    (sn,) = c.snapshot(NOW).nodes
    assert hourly_price(sn, {"default": TYPES}) == price(C4)
    assert hourly_price(replace(sn, node=None), {}) == 0.0


def test_with_one_type_the_pair_cannot_swap_and_one_node_is_deleted() -> None:
    only = [*OD, {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [C4]}]
    c = build([("a", C4, ["1"]), ("b", C4, ["1"])], requirements=only)
    (cmd,) = next_command(facts(c)).commands
    assert shape(cmd) == ("single-node-consolidation", ["a"], [], round(price(C4), 4))
    assert [(p.node_name, [x.key for x in p.pods]) for p in cmd.placements] == [
        ("b", ["default/a-p0"])
    ]


def test_replacements_of_successive_commands_keep_distinct_names() -> None:
    """The solver's placeholder hostnames restart every solve; applied commands must not
    overwrite each other's replacement nodes (pods would vanish from later steps)."""
    c = build([("a", C4, ["1"])])
    snap = c.snapshot(NOW)
    (cmd,) = next_command(facts(c)).commands
    assert len(cmd.replacements) == 1
    once = apply_command(snap, cmd, tag="0")
    twice = apply_command(once, cmd, tag="1")
    assert sorted(n.name for n in twice.nodes) == ["replacement-0-0", "replacement-1-0"]
    assert {k: [p.key for p in v] for k, v in twice.pods_by_node.items()} == {
        "replacement-0-0": ["default/a-p0"],
        "replacement-1-0": ["default/a-p0"],
    }


def test_three_small_nodes_merge_although_no_two_can() -> None:
    """Three c-2x nodes with a 1-cpu pod each: two pods need a c-4x, which costs what two c-2x
    cost, so no pair saves and upstream's binary search stops; all three fit one c-4x."""
    c2 = "c-2x-amd64-linux"
    amd64 = [*LINUX, *OD, {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    nodes = [("a", c2, ["1"]), ("b", c2, ["1"]), ("c", c2, ["1"])]
    c = build(nodes, requirements=amd64)
    for name in ("a", "b", "c"):  # c-2x allocatable, so no pod fits beside another
        c.upsert_node(
            node(
                name,
                labels=node_labels("default", c2),
                allocatable={"cpu": "1900m", "memory": "3Gi", "pods": "110"},
            )
        )
    assert next_command(facts(c, search="upstream")).commands == ()
    (cmd,) = next_command(facts(c)).commands
    assert shape(cmd) == (
        "multi-node-consolidation",
        ["a", "b", "c"],
        [C4],
        round(3 * price(c2) - price(C4), 4),
    )


# --------------------------------------------------------------------------------- emptiness owns
# Consolidation never takes an empty node: emptiness owns them, so a budget of 0 for reason
# Empty keeps them while underutilized consolidation still runs elsewhere.
EMPTY_FROZEN = {
    "consolidateAfter": "0s",
    "budgets": [{"nodes": "0", "reasons": ["Empty"]}, {"nodes": "100%"}],
}


@pytest.mark.parametrize(
    ("nodes", "commands", "unchanged"),
    [
        # Alone, the empty node is left to emptiness, whose budget is 0.
        ([("a", C4, [])], [], {"a": "budget 0 for Empty"}),
        # Beside an underused node, only that one is consolidated: deleted, its pod moving to
        # the empty node, which consolidation may fill but never delete.
        (
            [("a", C4, []), ("b", C4, ["1"])],
            [("single-node-consolidation", ["b"], [], round(price(C4), 4))],
            {"a": "budget 0 for Empty"},
        ),
    ],
)
def test_consolidation_leaves_empty_nodes_to_emptiness(
    nodes: Any, commands: list[Any], unchanged: dict[str, str]
) -> None:
    decision = next_command(facts(build(nodes, disruption=EMPTY_FROZEN)))
    assert [shape(x) for x in decision.commands] == commands
    assert {k: v.split(" (")[0] for k, v in decision.unchanged.items()} == unchanged


# --------------------------------------------------------------------------------- terminating
@pytest.mark.parametrize(
    ("owner", "want"),
    [
        # A terminating ReplicaSet pod needs no room: the node is empty.
        ("ReplicaSet", ("emptiness", ["a"], [], round(price(C4), 4))),
        # A terminating StatefulSet pod does (its replacement starts once it is gone): the node
        # is not empty, and consolidation finds the pod a smaller home.
        (
            "StatefulSet",
            (
                "single-node-consolidation",
                ["a"],
                ["c-2x-amd64-linux"],
                round(price(C4) - price("c-2x-amd64-linux"), 4),
            ),
        ),
    ],
)
def test_a_terminating_statefulset_pod_keeps_its_node_from_being_empty(
    owner: str, want: Any
) -> None:
    c = build([("a", C4, [])])
    terminating = pod("a-p0", node_name="a", cpu="1", memory="256Mi", owner=owner)
    c.upsert_pod(replace(terminating, deletion_timestamp="2026-01-01T00:59:00Z"))
    (cmd,) = next_command(facts(c)).commands
    assert shape(cmd) == want


# --------------------------------------------------------------------------------- nominated
@pytest.mark.parametrize(
    ("nominated_to", "want"),
    [
        ("", ("emptiness", ["a"], [], round(price(C4), 4))),
        # A pending pod the kube-scheduler nominated to the node (it preempted there) keeps
        # the node: it is no candidate while the pod waits.
        ("a", None),
        ("elsewhere", ("emptiness", ["a"], [], round(price(C4), 4))),
    ],
)
def test_a_node_pending_pods_are_nominated_to_is_not_a_candidate(
    nominated_to: str, want: Any
) -> None:
    c = build([("a", C4, [])])
    c.upsert_pod(replace(pod("waiting", pending=True, cpu="1"), nominated_node_name=nominated_to))
    decision = next_command(facts(c))
    assert [shape(x) for x in decision.commands] == ([want] if want else [])
    assert decision.unchanged == ({} if want else {"a": "node is nominated for pending pods"})


# --------------------------------------------------------------------------------- drift, empty
@pytest.mark.parametrize(
    ("nodes", "want"),
    [
        # An empty drifted node is deleted without a replacement.
        ([("b", C4, [])], [("drift", ["b"], [], round(price(C4), 4))]),
        # Empty nodes first (b before a, which sorts first by name at the same drift time),
        # then the rest, each replaced.
        (
            [("a", C4, ["3"]), ("b", C4, [])],
            [("drift", ["b"], [], round(price(C4), 4)), ("drift", ["a"], [C4], 0.0)],
        ),
    ],
)
def test_drift_deletes_empty_nodes_first_without_replacements(nodes: Any, want: Any) -> None:
    # consolidateAfter Never: emptiness is off, so drift alone acts.
    off = {"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}
    c = build(nodes, conditions=drifted(), disruption=off)
    assert [shape(x) for x in evaluate(facts(c)).commands] == want


@pytest.mark.parametrize(
    ("value", "recheck"),
    [
        ("30m", NOW + timedelta(minutes=20)),  # started 00:50: protected until 01:20
        ("5m", None),  # ran out at 00:55
        ("true", None),  # no end
        ("soon", None),  # ignored
    ],
)
def test_a_do_not_disrupt_duration_names_when_to_look_again(
    value: str, recheck: datetime | None
) -> None:
    c = build([("a", C1, [])])
    protected = pod(
        "a-p0",
        node_name="a",
        cpu="500m",
        memory="256Mi",
        annotations={"karpenter.sh/do-not-disrupt": value},
    )
    c.upsert_pod(replace(protected, start_time="2026-01-01T00:50:00Z"))
    decision = next_command(facts(c))
    assert decision.commands == ()
    assert decision.recheck_at == recheck
