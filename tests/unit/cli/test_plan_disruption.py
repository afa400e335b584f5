"""``karpenter-py plan --disruption``: the bundled example, small inline clusters, the offline
fill-ins (Consolidatable, drift, PDBs; no NodeClaim is made up for a Node), the JSON contract and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.cli.main import main
from karpenter_py.cli.offline import computed_disruptions_allowed
from karpenter_py.model.core import pod_from_dict
from karpenter_py.model.fields import ParseError
from tests import factories
from tests.unit.cli.conftest import Writer, kwok_record, nodepool

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = str(REPO / "examples" / "disruption.yaml")
LATER = "2025-01-02T00:00:00Z"  # a day after the example's nodes were created
T0 = "2026-01-01T00:00:00Z"
NOW = "2026-01-01T01:00:00Z"

C2, C4, C8 = "c-2x-amd64-linux", "c-4x-amd64-linux", "c-8x-amd64-linux"
CATALOG = [
    kwok_record(C2, 2, 4, 0.08),
    kwok_record(C4, 4, 8, 0.16),
    kwok_record(C8, 8, 16, 0.32),
]
ON_DEMAND = [
    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
]


# ----------------------------------------------------------------------------- helpers


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", "--disruption", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = run(capsys, *args, "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    check_contract(data)
    return data


def check_contract(data: Any) -> None:
    assert list(data) == ["commands", "unchanged", "cost"]
    for command in data["commands"]:
        assert list(command) == ["method", "reason", "candidates", "replacements", "savings"]
        assert list(command["savings"]) == ["hourly"]
        for rep in command["replacements"]:
            assert list(rep) == [
                "nodePool",
                "instanceType",
                "instanceTypes",
                "capacityType",
                "zone",
                "price",
            ]
            assert rep["instanceType"] == rep["instanceTypes"][0]
    for row in data["unchanged"]:
        assert list(row) == ["node", "reason"]
    assert list(data["cost"]) == ["before", "after"]
    saved = sum(c["savings"]["hourly"] for c in data["commands"])
    assert data["cost"]["after"] == pytest.approx(data["cost"]["before"] - saved, abs=1e-5)


def named_once(data: Any, nodes: list[str]) -> None:
    """Every node of the input is named exactly once: a candidate of one command, or unchanged."""
    names = [n for c in data["commands"] for n in c["candidates"]]
    names += [row["node"] for row in data["unchanged"]]
    assert sorted(names) == sorted(nodes)


def shapes(data: Any) -> list[tuple[str, str, list[str], list[str], float]]:
    return [
        (
            c["method"],
            c["reason"],
            c["candidates"],
            [r["instanceType"] for r in c["replacements"]],
            c["savings"]["hourly"],
        )
        for c in data["commands"]
    ]


def unchanged(data: Any) -> dict[str, str]:
    return {row["node"]: row["reason"] for row in data["unchanged"]}


@pytest.fixture
def kwok(tmp_path: Path) -> str:
    path = tmp_path / "kwok.json"
    path.write_text(json.dumps(CATALOG), encoding="utf-8")
    return str(path)


def pool(name: str = "default", *, consolidate_after: str = "30s", **spec: Any) -> dict[str, Any]:
    return nodepool(
        name,
        template_spec={"requirements": ON_DEMAND},
        disruption={"consolidateAfter": consolidate_after, "budgets": [{"nodes": "100%"}]},
        **spec,
    )


def node(
    name: str, *, it: str = C4, pool: str | None = "default", zone: str = "zone-a"
) -> dict[str, Any]:
    cpu = {C2: "2", C4: "4", C8: "8"}[it]
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": it,
        "topology.kubernetes.io/zone": zone,
        "karpenter.sh/capacity-type": "on-demand",
    }
    if pool is not None:
        labels |= {
            "karpenter.sh/nodepool": pool,
            "karpenter.sh/registered": "true",
            "karpenter.sh/initialized": "true",
        }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": T0},
        "spec": {"providerID": f"kwok://{name}"},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def bound(
    name: str, node_name: str, *, cpu: str = "500m", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": name}},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


def claim(
    name: str,
    *,
    pool: str = "default",
    node_name: str = "",
    provider_id: str = "",
    conditions: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    **status: Any,
) -> dict[str, Any]:
    lifecycle = [
        {"type": t, "status": "True", "reason": t, "lastTransitionTime": T0}
        for t in ("Launched", "Registered", "Initialized")
    ]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": pool},
            "annotations": annotations or {},
            "creationTimestamp": T0,
        },
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.kwok.sh",
                "kind": "KWOKNodeClass",
                "name": "default",
            },
            "requirements": [],
            "taints": taints or [],
        },
        "status": {
            "nodeName": node_name,
            "providerID": provider_id,
            "conditions": lifecycle + (conditions or []),
            **status,
        },
    }


def managed(
    name: str, *, it: str = C4, pool: str = "default", **claim_kw: Any
) -> tuple[dict[str, Any], ...]:
    """A Node of ``pool`` with the NodeClaim a cluster holds for it (launched, joined by
    nodeName)."""
    size = {"cpu": {C2: "2", C4: "4", C8: "8"}[it], "memory": "8Gi", "pods": "110"}
    nc = claim(f"nc-{name}", pool=pool, node_name=name, capacity=size, allocatable=size, **claim_kw)
    return node(name, it=it, pool=pool), nc


def pdb(name: str, app: str, **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", None)
    doc: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }
    if status is not None:
        doc["status"] = status
    return doc


# ----------------------------------------------------------------------------- the example

EXAMPLE_NODES = ["ip-10-0-1-10", "ip-10-0-2-20", "ip-10-0-3-30", "ip-10-0-1-40", "ip-10-0-2-50"]

EXAMPLE_TABLE = """\
Disruption at 2025-01-02T00:00:00Z: 5 nodes, 3 disrupted by 2 commands

Commands:
1. emptiness (Empty): 1 node empty: deleting saves $0.0960/h
  Candidates (1):
    NODE          NODEPOOL  INSTANCE TYPE  ZONE        CAPACITY   PRICE/H
    ip-10-0-1-10  default   m5.large       us-east-1a  on-demand   0.0960
  Replacements: none
  Saving: $0.0960/h

2. multi-node-consolidation (Underutilized): 2 nodes -> 1 node (c6a.large) saves $0.3534/h
  Candidates (2):
    NODE          NODEPOOL  INSTANCE TYPE  ZONE        CAPACITY   PRICE/H
    ip-10-0-2-20  default   m5.xlarge      us-east-1b  on-demand   0.1920
    ip-10-0-3-30  default   m5.xlarge      us-east-1c  on-demand   0.1920
  Replacements (1):
    NODEPOOL  INSTANCE TYPE  ZONE        CAPACITY  PRICE/H  OPTIONS
    default   c6a.large      us-east-1a  spot      ~0.0306      252
  Saving: $0.3534/h

Unchanged nodes (2):
NODE          REASON
ip-10-0-1-40  pod shop/report has annotation karpenter.sh/do-not-disrupt: "true"
ip-10-0-2-50  PDB shop/db allows 0 disruptions (it covers pod shop/db-0)

Hourly cost: before $0.6720, after $0.2226, saving $0.4494  (~ marks an estimated spot price)
"""


COMPUTED_WARNING = (
    "warning: no NodeClaim in the input carries a Consolidatable condition: each gets one "
    "computed at --now from its NodePool's consolidateAfter\n"
)


def test_example_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "-f", EXAMPLE, "--now", LATER)
    # The example's NodeClaims carry no Consolidatable: it is computed at --now, and said so.
    assert (code, err) == (0, COMPUTED_WARNING)
    assert out == EXAMPLE_TABLE


def test_example_json(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "-f", EXAMPLE, "--now", LATER)
    assert shapes(data) == [
        ("emptiness", "Empty", ["ip-10-0-1-10"], [], 0.096),
        (
            "multi-node-consolidation",
            "Underutilized",
            ["ip-10-0-2-20", "ip-10-0-3-30"],
            ["c6a.large"],
            0.3534,
        ),
    ]
    (rep,) = data["commands"][1]["replacements"]
    assert (rep["nodePool"], rep["capacityType"], rep["zone"], rep["price"]) == (
        "default",
        "spot",
        "us-east-1a",
        0.0306,
    )
    assert len(rep["instanceTypes"]) == 252
    assert "m5.large" in rep["instanceTypes"]
    assert unchanged(data) == {
        "ip-10-0-1-40": 'pod shop/report has annotation karpenter.sh/do-not-disrupt: "true"',
        "ip-10-0-2-50": "PDB shop/db allows 0 disruptions (it covers pod shop/db-0)",
    }
    assert data["cost"] == {"before": 0.672, "after": 0.2226}
    named_once(data, EXAMPLE_NODES)


def test_example_before_consolidate_after(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "-f", EXAMPLE, "--now", "2025-01-01T00:00:10Z")
    waiting = (
        "consolidateAfter 30s not yet passed since initialization "
        "(consolidatable at 00:00:30 UTC, in 20s)"
    )
    assert data["commands"] == []
    assert unchanged(data) == {
        "ip-10-0-1-10": waiting,
        "ip-10-0-1-40": 'pod shop/report has annotation karpenter.sh/do-not-disrupt: "true"',
        "ip-10-0-2-20": waiting,
        "ip-10-0-2-50": "PDB shop/db allows 0 disruptions (it covers pod shop/db-0)",
        "ip-10-0-3-30": waiting,
    }
    assert [row["node"] for row in data["unchanged"]] == sorted(EXAMPLE_NODES)
    assert data["cost"] == {"before": 0.672, "after": 0.672}
    named_once(data, EXAMPLE_NODES)


def test_example_without_now_uses_the_current_time(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "-f", EXAMPLE)
    assert [c["method"] for c in data["commands"]] == ["emptiness", "multi-node-consolidation"]


def test_plain_plan_still_reads_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-f", EXAMPLE, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nodeClaims"] == []


# ----------------------------------------------------------------------------- inline clusters


def test_hand_written_nodes_are_managed_through_their_nodeclaims(
    capsys: pytest.CaptureFixture[str], write: Writer, kwok: str
) -> None:
    docs = (
        pool(),
        *managed("a"),
        bound("pa", "a"),
        *managed("b"),
        bound("pb", "b"),
        node("c", it=C2),  # full; a pod arrived 10 s before --now
        bound("pc", "c", cpu="2"),
        claim("nc-c", node_name="c", lastPodEventTime="2026-01-01T00:59:50Z"),
        node("u", pool=None),
        bound("pu", "u", cpu="4"),
        *managed("o", pool="other"),
        bound("po", "o", cpu="4"),
        node("bare"),  # a NodePool label and no NodeClaim: never disrupted
        bound("pbare", "bare", cpu="4"),
    )
    data = run_json(capsys, "-f", write(*docs), "--instance-types", kwok, "--now", NOW)
    assert shapes(data) == [
        ("multi-node-consolidation", "Underutilized", ["a", "b"], [C2], 0.24),
    ]
    (rep,) = data["commands"][0]["replacements"]
    assert (rep["capacityType"], rep["price"], rep["instanceTypes"]) == ("on-demand", 0.08, [C2])
    assert unchanged(data) == {
        "c": "consolidateAfter 30s not yet passed since last pod event "
        "(consolidatable at 01:00:20 UTC, in 20s)",
        "o": "NodePool 'other' not found",
        "u": "not managed by Karpenter (no NodeClaim)",
        "bare": "node has a karpenter.sh/nodepool label but no NodeClaim (never disrupted)",
    }
    # Nodes of no known NodePool have no catalog to price them with: they cost 0 here.
    assert data["cost"] == {"before": 0.56, "after": 0.32}
    named_once(data, ["a", "b", "c", "u", "o", "bare"])


def test_nodeclaims_from_a_dump_drift_and_in_flight(
    capsys: pytest.CaptureFixture[str], write: Writer, kwok: str
) -> None:
    stale = {
        "karpenter.sh/nodepool-hash": "123",
        "karpenter.sh/nodepool-hash-version": "v3",
    }
    drifted = [
        {
            "type": "Drifted",
            "status": "True",
            "reason": "NodeClassDrifted",
            "lastTransitionTime": T0,
        }
    ]
    docs = (
        pool(),
        node("big", it=C8),
        bound("p-big", "big", cpu="5"),
        # Joined by providerID only; its Consolidatable condition says it may not go yet.
        claim(
            "nc-big",
            provider_id="kwok://big",
            conditions=[
                {
                    "type": "Consolidatable",
                    "status": "False",
                    "reason": "ConsolidateAfterPending",
                    "lastTransitionTime": T0,
                }
            ],
        ),
        node("d"),
        bound("p-d", "d"),
        claim("nc-d", node_name="d", annotations=stale),  # NodePool drift is computed
        node("e"),
        bound("p-e", "e"),
        claim("nc-e", node_name="e", conditions=drifted),  # Drifted honoured
        claim(  # launched, no Node yet; tainted so nothing moves there
            "nc-f",
            taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}],
            capacity={"cpu": "4", "memory": "8Gi", "pods": "110"},
        ),
    )
    data = run_json(capsys, "-f", write(*docs), "--instance-types", kwok, "--now", NOW)
    # The older Drifted transition goes first; each drifted node's pod fits on "big".
    assert shapes(data) == [
        ("drift", "Drifted", ["e"], [], 0.16),
        ("drift", "Drifted", ["d"], [], 0.16),
    ]
    assert unchanged(data) == {
        "big": "consolidateAfter 30s has passed since initialization but the NodeClaim is not "
        "Consolidatable yet",
        "nc-f": "NodeClaim has no Node yet (still launching or registering)",
    }
    named_once(data, ["big", "d", "e", "nc-f"])


CONSOLIDATABLE = {
    "type": "Consolidatable",
    "status": "True",
    "reason": "Consolidatable",
    "lastTransitionTime": T0,
}


@pytest.mark.parametrize(
    ("x_conditions", "commands", "left", "warning"),
    [
        # A dump: one NodeClaim carries Consolidatable, so the other's absence means "not yet"
        # (y stays, and takes x's pod).
        (
            [CONSOLIDATABLE],
            [("single-node-consolidation", "Underutilized", ["x"], [], 0.16)],
            {
                "y": "consolidateAfter 30s has passed since initialization but the NodeClaim "
                "is not Consolidatable yet"
            },
            "",
        ),
        # No NodeClaim carries one (a hand-written file): computed at --now for each, and said.
        (
            [],
            [("multi-node-consolidation", "Underutilized", ["x", "y"], [C2], 0.24)],
            {},
            COMPUTED_WARNING,
        ),
    ],
)
def test_consolidatable_is_computed_only_when_no_nodeclaim_carries_it(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    kwok: str,
    x_conditions: list[dict[str, Any]],
    commands: list[Any],
    left: dict[str, str],
    warning: str,
) -> None:
    docs = (
        pool(),
        *managed("x", conditions=x_conditions),
        bound("px", "x"),
        *managed("y"),
        bound("py", "y"),
    )
    code, out, err = run(
        capsys, "-f", write(*docs), "--instance-types", kwok, "--now", NOW, "-o", "json"
    )
    assert (code, err) == (0, warning)
    data = json.loads(out)
    assert shapes(data) == commands
    assert unchanged(data) == left


def test_pdbs_computed_and_given(
    capsys: pytest.CaptureFixture[str], write: Writer, kwok: str
) -> None:
    docs = (
        pool(consolidate_after="0s"),
        *managed("a", it=C2),
        bound("web-0", "a", labels={"app": "web"}),
        *managed("b", it=C2),
        bound("api-0", "b", labels={"app": "api"}),
        *managed("c", it=C2),
        bound("job-0", "c", labels={"app": "job"}),
        {  # pending: expected by the PDB, not healthy
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "job-1", "labels": {"app": "job"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "9"}}}]},
        },
        pdb("web", "web", maxUnavailable="50%"),  # ceil(0.5) = 1 may go
        pdb("api", "api", minAvailable=1, status={"disruptionsAllowed": 1}),  # status wins
        pdb("job", "job", minAvailable="50%"),  # ceil(1) = 1 of 2 wanted, 1 healthy: 0
    )
    data = run_json(capsys, "-f", write(*docs), "--instance-types", kwok, "--now", NOW)
    (command,) = data["commands"]
    assert command["method"] == "multi-node-consolidation"
    assert command["candidates"] == ["a", "b"]
    assert unchanged(data) == {
        "c": "PDB default/job allows 0 disruptions (it covers pod default/job-0)"
    }
    named_once(data, ["a", "b", "c"])


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"minAvailable": 1}, 2),
        ({"minAvailable": 3}, 0),
        ({"minAvailable": 5}, 0),
        ({"minAvailable": "50%"}, 1),  # ceil(1.5) = 2 of 4 wanted, 3 healthy
        ({"minAvailable": "100%"}, 0),
        ({"maxUnavailable": 1}, 0),  # 4 expected - 1 = 3 wanted, 3 healthy
        ({"maxUnavailable": 2}, 1),
        ({"maxUnavailable": "10%"}, 0),  # ceil(0.4) = 1
        ({"maxUnavailable": "30%"}, 1),  # ceil(1.2) = 2
        ({"maxUnavailable": "100%"}, 3),
        ({}, 0),
    ],
)
def test_computed_disruptions_allowed(spec: dict[str, object], want: int) -> None:
    pods = [
        pod_from_dict({"metadata": {"name": f"p{i}"}, "spec": {"nodeName": "n"}}) for i in range(3)
    ]
    pods.append(pod_from_dict({"metadata": {"name": "pending"}, "spec": {}}))
    assert computed_disruptions_allowed(spec, pods) == want


def test_computed_disruptions_allowed_without_pods() -> None:
    assert computed_disruptions_allowed({"maxUnavailable": "100%"}, []) == 0


@pytest.mark.parametrize(
    ("spec", "path", "problem"),
    [
        ({"minAvailable": 1, "maxUnavailable": 1}, "spec", "cannot both be set"),
        ({"maxUnavailable": "1"}, "spec.maxUnavailable", "an integer or a percentage"),
        ({"minAvailable": "150%"}, "spec.minAvailable", "greater than 100%"),
        ({"minAvailable": -1}, "spec.minAvailable", "greater than or equal to 0"),
    ],
)
def test_invalid_pdb_rules(spec: dict[str, object], path: str, problem: str) -> None:
    with pytest.raises(ParseError) as err:
        computed_disruptions_allowed(spec, [])
    assert err.value.path == path
    assert problem in err.value.problem


def test_table_without_commands(
    capsys: pytest.CaptureFixture[str], write: Writer, kwok: str
) -> None:
    docs = (pool(consolidate_after="Never"), *managed("a"), bound("pa", "a"))
    code, out, err = run(capsys, "-f", write(*docs), "--instance-types", kwok, "--now", NOW)
    assert (code, err) == (0, "")
    assert out == (
        "Disruption at 2026-01-01T01:00:00Z: 1 node, 0 disrupted by 0 commands\n"
        "\n"
        "Commands: none\n"
        "\n"
        "Unchanged nodes (1):\n"
        "NODE  REASON\n"
        "a     NodePool 'default' has consolidateAfter: Never (consolidation is off)\n"
        "\n"
        "Hourly cost: before $0.1600, after $0.1600, saving $0.0000\n"
    )


def test_bound_pod_of_a_missing_node_is_a_warning(
    capsys: pytest.CaptureFixture[str], write: Writer, kwok: str
) -> None:
    path = write(pool(), node("a"), bound("pa", "a"), bound("lost", "gone"))
    code, _, err = run(capsys, "-f", path, "--instance-types", kwok, "--now", NOW)
    assert code == 0
    assert err == (
        f"warning: {path}: document 4 (Pod lost): pod default/lost is bound to node 'gone', "
        "which is not in the input; ignored\n"
    )


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("kind: [unclosed", "document 1: invalid YAML"),
        (
            {"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "g"}},
            "document 1 (Gadget g): kind: unknown kind 'Gadget'",
        ),
        (
            pdb("db", "db", maxUnavailable="half"),
            "document 1 (PodDisruptionBudget db): spec.maxUnavailable: must be an integer or a "
            "percentage (e.g. '50%'), got 'half'",
        ),
        (
            {**pdb("db", "db", minAvailable=1), "apiVersion": "policy/v1beta1"},
            "document 1 (PodDisruptionBudget db): apiVersion: PodDisruptionBudget is served as "
            "policy/v1, not 'policy/v1beta1'",
        ),
        (
            pdb("db", "db", status={"disruptionsAllowed": "one"}),
            "document 1 (PodDisruptionBudget db): status.disruptionsAllowed: expected a count "
            "(>= 0), got 'one'",
        ),
        (
            {**node("a"), "metadata": {**node("a")["metadata"], "creationTimestamp": "soon"}},
            "document 1 (Node a): metadata.creationTimestamp: not an RFC 3339 time: 'soon'",
        ),
    ],
)
def test_input_errors_name_file_document_and_field(
    capsys: pytest.CaptureFixture[str], write: Writer, kwok: str, doc: object, message: str
) -> None:
    path = write(doc, pool())
    code, out, err = run(capsys, "-f", path, "--instance-types", kwok, "--now", NOW)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {path}: {message}")
    assert err.count("\n") == 1


HUGE = "99999999999999999999h"  # passes the CRD pattern, past Go's time.Duration


@pytest.mark.parametrize(
    ("bad_pool", "field"),
    [
        (pool("bad", consolidate_after=HUGE), "spec.disruption.consolidateAfter"),
        (
            nodepool(
                "bad",
                disruption={
                    "consolidateAfter": "30s",
                    "budgets": [{"nodes": "1", "schedule": "@daily", "duration": HUGE}],
                },
            ),
            "spec.disruption.budgets[0].duration",
        ),
    ],
    ids=["consolidateAfter", "budget-duration"],
)
def test_an_unreadable_nodepool_is_named_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    kwok: str,
    bad_pool: dict[str, Any],
    field: str,
) -> None:
    path = write(pool(), *managed("a"), bad_pool, *managed("b", pool="bad"))
    code, out, err = run(capsys, "-f", path, "--instance-types", kwok, "--now", NOW)
    assert (code, out) == (2, "")
    assert err == (
        f"error: {path}: document 4 (NodePool bad): {field}: invalid duration {HUGE!r}: "
        f"out of range (at most 2562047h47m16.854775807s) (got {HUGE!r})\n"
    )


def test_bad_now_and_now_without_disruption(
    capsys: pytest.CaptureFixture[str], write: Writer
) -> None:
    path = write(pool())
    code, out, err = run(capsys, "-f", path, "--now", "yesterday")
    assert (code, out) == (2, "")
    assert err == (
        "error: --now 'yesterday': not an RFC 3339 time with a time zone "
        "(e.g. 2026-01-01T12:00:00Z)\n"
    )
    assert main(["plan", "-f", path, "--now", NOW]) == 2
    assert capsys.readouterr().err == "error: --now needs --disruption\n"


NO_POOL_TABLE = """\
Disruption at 2026-01-01T01:00:00Z: 2 nodes, 0 disrupted by 0 commands

Commands: none

Unchanged nodes (2):
NODE      REASON
managed   NodePool 'gone' not found
worker-1  not managed by Karpenter (no NodeClaim)

Hourly cost: before $0.0000, after $0.0000, saving $0.0000
"""
NO_POOL_WARNING = (
    "warning: no NodePool found; no node is a disruption candidate (nodes no NodePool manages "
    "are left alone)\n"
)


def _no_pool_input(write: Writer) -> str:
    """Nodes but no NodePool: a plain node with a pod and a Karpenter node whose NodePool is gone."""
    return write(
        node("worker-1", it=C2, pool=None), *managed("managed", pool="gone"), bound("a", "worker-1")
    )


def test_nodes_without_a_nodepool_are_left_alone(
    capsys: pytest.CaptureFixture[str], write: Writer, kwok: str
) -> None:
    path = _no_pool_input(write)
    code, out, err = run(capsys, "-f", path, "--instance-types", kwok, "--now", NOW)
    assert (code, out, err) == (0, NO_POOL_TABLE, NO_POOL_WARNING)
    code, out, err = run(capsys, "-f", path, "--instance-types", kwok, "--now", NOW, "-o", "json")
    assert (code, err) == (0, NO_POOL_WARNING)
    assert json.loads(out) == {
        "commands": [],
        "unchanged": [
            {"node": "managed", "reason": "NodePool 'gone' not found"},
            {"node": "worker-1", "reason": "not managed by Karpenter (no NodeClaim)"},
        ],
        "cost": {"before": 0.0, "after": 0.0},
    }


def test_neither_nodepool_nor_node_is_an_error(
    capsys: pytest.CaptureFixture[str], write: Writer, kwok: str
) -> None:
    code, out, err = run(capsys, "-f", write(), "--instance-types", kwok, "--now", NOW)
    assert (code, out) == (2, "")
    assert err == (
        "error: no NodePool or Node found; plan needs a NodePool to launch nodes for, or Nodes "
        "to place pods on\n"
    )


def test_help_documents_the_offline_rules(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in (
        "--disruption",
        "--now RFC3339",
        "karpenter.sh/nodepool label and no NodeClaim is never disrupted",
        "Consolidatable condition gets one at --now",
        "karpenter.sh/nodepool-hash",
        "status.disruptionsAllowed",
        "percentages rounded up",
    ):
        assert phrase in text


# ----------------------------------------------------------------------------- NodeOverlay


@pytest.mark.parametrize(
    ("gates", "commands", "cost", "left"),
    [
        # Gate off: the overlay is ignored and the 4-cpu node is replaced by the 2-cpu type.
        (
            "NodeOverlay=false",
            [("single-node-consolidation", "Underutilized", ["a"], [C2], 0.08)],
            {"before": 0.16, "after": 0.08},
            {},
        ),
        # On: the node's own type now costs 0.05, below any replacement: nothing to do.
        (
            "NodeOverlay=true",
            [],
            {"before": 0.05, "after": 0.05},
            {
                "a": "no cheaper replacement: cheapest option c-4x-amd64-linux at $0.0500/h >= "
                "current $0.0500/h"
            },
        ),
    ],
)
def test_an_overlay_price_is_what_consolidation_compares(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    kwok: str,
    gates: str,
    commands: list[Any],
    cost: dict[str, float],
    left: dict[str, str],
) -> None:
    overlay = factories.nodeoverlay_dict(
        "savings-plan",
        requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [C4]}
        ],
        price="0.05",
    )
    docs = (pool(), *managed("a"), bound("pa", "a"), overlay)
    data = run_json(
        capsys, "-f", write(*docs), "--instance-types", kwok, "--now", NOW, "--feature-gates", gates
    )
    assert shapes(data) == commands
    assert data["cost"] == cost
    assert unchanged(data) == left
