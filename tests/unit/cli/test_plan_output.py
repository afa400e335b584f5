"""The two renderings of a Plan: the ``-o json`` contract and the ``-o table`` report."""

from __future__ import annotations

import json

import pytest

from karpenter_py.cli import plan as plan_cli
from karpenter_py.cli.main import main
from karpenter_py.cli.plan import plan_json, render_json, render_table
from karpenter_py.model.core import Pod, SelectorRequirement, Taint
from karpenter_py.model.instancetype import InstanceType, Offering, make_instance_type
from karpenter_py.scheduling.inputs import SolveInput
from karpenter_py.scheduling.plan import ExistingPlacement, NewNodeClaim, Plan, PodError
from tests.unit.cli.conftest import Writer, nodepool, pod


def instance_type(name: str, cpu: int, offerings: list[Offering]) -> InstanceType:
    return make_instance_type(
        name=name,
        requirements={"kubernetes.io/arch": "amd64"},
        capacity={"cpu": cpu * 1000, "memory": cpu * 4 * 2**30, "pods": 110},
        offerings=offerings,
    )


SPOT_A = Offering(zone="zone-a", capacity_type="spot", price=0.0312345678, price_estimated=True)
OD_B = Offering(zone="zone-b", capacity_type="on-demand", price=0.096)
SMALL = instance_type("m.large", 2, [SPOT_A])
LARGE = instance_type("m.xlarge", 4, [OD_B])


def claim(
    pool: str,
    it: InstanceType,
    offering: Offering,
    pods: list[Pod],
    *,
    options: tuple[InstanceType, ...] = (),
    taints: tuple[Taint, ...] = (),
) -> NewNodeClaim:
    return NewNodeClaim(
        node_pool=pool,
        hostname=f"hostname-placeholder-{pool}",
        instance_types=options or (it,),
        requirements=(SelectorRequirement("karpenter.sh/nodepool", "In", (pool,)),),
        labels={
            "node.kubernetes.io/instance-type": it.name,
            "karpenter.sh/nodepool": pool,
            "topology.kubernetes.io/zone": offering.zone,
        },
        taints=taints,
        startup_taints=(),
        pods=tuple(pods),
        requests={"cpu": 1000},
        instance_type=it,
        offering=offering,
    )


def p(name: str, namespace: str = "default") -> Pod:
    return Pod(namespace=namespace, name=name)


PLAN = Plan(
    new_node_claims=(
        claim(
            "default",
            SMALL,
            SPOT_A,
            [p("inflate-10"), p("inflate-2"), p("inflate-1")],
            options=(SMALL, LARGE),
            taints=(Taint(key="dedicated", effect="NoSchedule"), Taint("gpu", "NoExecute", "true")),
        ),
        claim("batch", LARGE, OD_B, [p("job-0", "jobs")]),
    ),
    existing=(
        ExistingPlacement("node-b", (p("web-1"),)),
        ExistingPlacement("node-a", (p("web-0"),)),
        ExistingPlacement("node-c", ()),
    ),
    errors=(PodError(p("huge"), "no instance type has enough cpu (requested 200)"),),
)


def test_json_contract_shape() -> None:
    data = plan_json(PLAN)
    assert list(data) == ["nodeClaims", "existingNodes", "unschedulable", "cost"]
    claims = data["nodeClaims"]
    assert isinstance(claims, list)
    expected_keys = [
        "nodePool",
        "instanceType",
        "instanceTypes",
        "capacityType",
        "zone",
        "price",
        "labels",
        "taints",
        "pods",
    ]
    for nc in claims:
        assert list(nc) == expected_keys
        assert isinstance(nc["price"], float)
        assert isinstance(nc["instanceTypes"], list)
        assert nc["instanceType"] in nc["instanceTypes"]
        assert all(isinstance(v, str) for v in nc["labels"].values())
    first = claims[0]
    assert first["nodePool"] == "default"
    assert first["instanceType"] == "m.large"
    assert first["instanceTypes"] == ["m.large", "m.xlarge"]
    assert (first["capacityType"], first["zone"]) == ("spot", "zone-a")
    assert first["price"] == 0.031235  # rounded to 6 decimals
    assert first["labels"]["karpenter.sh/nodepool"] == "default"
    assert first["taints"] == [
        {"key": "dedicated", "value": "", "effect": "NoSchedule"},  # "value" always present
        {"key": "gpu", "value": "true", "effect": "NoExecute"},
    ]
    assert first["pods"] == ["default/inflate-1", "default/inflate-2", "default/inflate-10"]
    assert claims[1]["pods"] == ["jobs/job-0"]
    # Only nodes that receive pods, in name order.
    assert data["existingNodes"] == [
        {"name": "node-a", "pods": ["default/web-0"]},
        {"name": "node-b", "pods": ["default/web-1"]},
    ]
    assert data["unschedulable"] == [
        {"pod": "default/huge", "reason": "no instance type has enough cpu (requested 200)"}
    ]
    assert data["cost"] == {"hourly": round(0.0312345678 + 0.096, 6)}


def test_json_of_an_empty_plan() -> None:
    assert plan_json(Plan((), (), ())) == {
        "nodeClaims": [],
        "existingNodes": [],
        "unschedulable": [],
        "cost": {"hourly": 0.0},
    }


def test_render_json_is_stable_and_parseable() -> None:
    text = render_json(PLAN)
    assert text == render_json(PLAN)
    assert text.endswith("\n")
    assert json.loads(text) == plan_json(PLAN)
    assert text.startswith('{\n  "nodeClaims": [')


def test_table_lists_nodes_placements_errors_and_cost() -> None:
    text = render_table(PLAN)
    lines = text.splitlines()
    assert lines[0] == "7 pending pods: 4 on new nodes, 2 on existing nodes, 1 unschedulable"
    header = next(line for line in lines if line.startswith("NODEPOOL"))
    rows = [line for line in lines if line.startswith(("default ", "batch "))]
    assert len(rows) == 2
    # Aligned: every column of every row starts where its header does.
    for column in ("INSTANCE TYPE", "ZONE", "CAPACITY"):
        start = header.index(column)
        for row in rows:
            assert row[start - 2 : start] == "  "
            assert row[start] != " "
    assert rows[0].split()[:5] == ["default", "m.large", "zone-a", "spot", "~0.0312"]
    assert rows[0].split()[-2:] == ["3", "2"]  # pods, instance type options
    assert rows[1].split()[:5] == ["batch", "m.xlarge", "zone-b", "on-demand", "0.0960"]
    assert "Existing nodes receiving pods (2):" in text
    assert "node-c" not in text
    assert "default/huge  no instance type has enough cpu (requested 200)" in lines
    assert lines[-1] == "Total hourly cost: $0.1272  (~ marks an estimated spot price)"


def test_table_of_an_empty_plan() -> None:
    text = render_table(Plan((), (), ()), pending=0)
    assert "0 pending pods" in text
    assert "New nodes: none" in text
    assert text.rstrip().endswith("Total hourly cost: $0.0000")


@pytest.mark.parametrize("output", ["table", "json"])
def test_main_renders_solver_output(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    write: Writer,
    catalog_file: str,
    output: str,
) -> None:
    monkeypatch.setattr(plan_cli, "load_solver", lambda: lambda inp, **_: PLAN)
    code = main(
        ["plan", "-f", write(nodepool(), pod("x")), "--instance-types", catalog_file, "-o", output]
    )
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    if output == "json":
        assert json.loads(out) == plan_json(PLAN)
    else:
        assert "Total hourly cost: $0.1272" in out


def test_table_is_the_default(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    write: Writer,
    catalog_file: str,
) -> None:
    seen: list[SolveInput] = []

    def solve(inp: SolveInput, **_: object) -> Plan:
        seen.append(inp)
        return PLAN

    monkeypatch.setattr(plan_cli, "load_solver", lambda: solve)
    assert main(["plan", "-f", write(nodepool(), pod("x")), "--instance-types", catalog_file]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 pending pod: ")
    assert "NODEPOOL" in out
    assert len(seen) == 1
