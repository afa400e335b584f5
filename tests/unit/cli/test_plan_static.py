"""``plan`` shows a static NodePool's nodes through the static.capacity controller's own decision:
the NodeClaims it would launch for the ones missing, the NodeClaims it would remove over its
replicas; with the StaticCapacity gate off (upstream's default) nothing keeps the pool at its
replicas, and it says so."""

from __future__ import annotations

import json
from typing import Any

import pytest

from karpenter_py.cli.main import main
from tests import factories
from tests.unit.cli.conftest import Writer, pod

C2 = "c-2x-amd64-linux"


def static_pool(replicas: int, limit: str | None = None) -> dict[str, Any]:
    return factories.nodepool_dict(
        "static",
        uid="",
        requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [C2]}
        ],
        limits={"nodes": limit} if limit is not None else None,
        replicas=replicas,
    )


def member(name: str) -> list[dict[str, Any]]:
    """A NodeClaim of the static pool and its Node."""
    labels = factories.node_labels("static", C2, zone="zone-a")
    return [
        factories.nodeclaim_dict(
            name,
            pool="static",
            labels=labels,
            capacity={"cpu": "2", "memory": "4Gi", "pods": "110"},
        ),
        factories.node_dict(name, labels=labels),
    ]


def run(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog: str, docs: list[Any], *extra: str
) -> tuple[int, str, str]:
    code = main(["plan", "-f", write(*docs), "--instance-types", catalog, *extra])
    out, err = capsys.readouterr()
    return code, out, err


GATE_ON = ("--feature-gates", "StaticCapacity=true")


def test_missing_nodes_are_launched(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    code, out, err = run(
        capsys, write, catalog_file, [static_pool(3, "4"), *member("static-a")], *GATE_ON
    )
    assert (code, err) == (0, "")
    assert out.split("\n\n")[-1] == (
        "Static NodePools (1):\n"
        "NODEPOOL  REPLICAS  NODES  DELETING  LAUNCH                                REMOVE  NOTE\n"
        f"static           3      1         0  2 {C2}, {C2}  0\n"
    )


def test_extra_nodes_are_removed_empty_first(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    docs = [
        static_pool(1),
        *member("static-a"),
        *member("static-b"),
        pod("web", nodeName="static-a"),
    ]
    code, out, err = run(capsys, write, catalog_file, docs, *GATE_ON, "-o", "json")
    assert (code, err) == (0, "")
    assert json.loads(out)["staticNodePools"] == [
        {
            "nodePool": "static",
            "replicas": 1,
            "nodes": 2,
            "deleting": 0,
            "launch": [],
            "remove": ["static-b"],
            "heldBack": "",
        }
    ]


def test_limits_nodes_holds_launches_back(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    code, out, err = run(capsys, write, catalog_file, [static_pool(3, "2")], *GATE_ON, "-o", "json")
    (pool,) = json.loads(out)["staticNodePools"]
    assert (code, err, [nc["instanceType"] for nc in pool["launch"]], pool["heldBack"]) == (
        0,
        "",
        [C2, C2],
        "limits.nodes 2 allows 2 of the 3 missing",
    )


def test_gate_off_keeps_nothing_at_its_replicas(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    code, out, err = run(capsys, write, catalog_file, [static_pool(2), pod("web")])
    assert (code, err) == (0, "")
    sections = out.split("\n\n")
    assert sections[0] == "1 pending pod: 0 on new nodes, 0 on existing nodes, 1 unschedulable"
    assert sections[-1] == (
        "Static NodePools (1):\n"
        "NODEPOOL  REPLICAS  NODES  DELETING  LAUNCH  REMOVE  NOTE\n"
        "static           2      0         0  0       0       StaticCapacity gate off: nothing "
        "keeps the pool at its replicas\n"
    )


def test_feature_gates_come_from_the_environment_as_for_the_controller(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FEATURE_GATES", "StaticCapacity=true")
    code, out, _ = run(capsys, write, catalog_file, [static_pool(1)], "-o", "json")
    (pool,) = json.loads(out)["staticNodePools"]
    assert (code, [nc["instanceType"] for nc in pool["launch"]]) == (0, [C2])


def test_a_bad_feature_gate_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    code, out, err = run(
        capsys, write, catalog_file, [static_pool(1)], "--feature-gates", "Static=true"
    )
    assert (code, out) == (2, "")
    assert err.startswith('error: --feature-gates="Static=true": unknown feature gate "Static"')


def test_no_static_section_without_static_pools(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    docs = [factories.nodepool_dict("dynamic", uid=""), pod("web")]
    code, out, _ = run(capsys, write, catalog_file, docs, *GATE_ON, "-o", "json")
    assert (code, "staticNodePools" in json.loads(out)) == (0, False)
