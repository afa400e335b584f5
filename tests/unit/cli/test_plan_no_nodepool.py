"""``plan`` with Nodes but no NodePool plans as the controller would: pods that fit the existing
nodes go there, the rest are unschedulable because no NodePool could launch a node for them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from karpenter_py.cli.main import main
from tests.unit.cli.conftest import Writer, node, pod

NO_POOL = "no NodePools can launch nodes (none are defined, or none has a ready NodeClass)"


def _plan(capsys: pytest.CaptureFixture[str], path: str, *extra: str) -> tuple[int, str, str]:
    code = main(["plan", "-f", path, *extra])
    out, err = capsys.readouterr()
    return code, out, err


TABLE = """\
3 pending pods: 0 on new nodes, 2 on existing nodes, 1 unschedulable

New nodes: none

Existing nodes receiving pods (1):
NODE      NEW PODS
worker-1         2

Unschedulable pods (1):
POD           REASON
default/huge  no NodePools can launch nodes (none are defined, or none has a ready NodeClass)

Total hourly cost: $0.0000
"""


def test_table(capsys: pytest.CaptureFixture[str], write: Writer) -> None:
    path = write(
        node("worker-1", cpu="2", memory="4Gi", pool=""),
        pod("a", cpu="500m"),
        pod("b", cpu="1"),
        pod("huge", cpu="3"),
    )
    assert _plan(capsys, path) == (0, TABLE, "")


def test_json(capsys: pytest.CaptureFixture[str], write: Writer) -> None:
    path = write(
        node("worker-1", cpu="2", memory="4Gi", pool=""),
        pod("a", cpu="500m"),
        pod("b", cpu="1"),
        pod("huge", cpu="3"),
    )
    code, out, err = _plan(capsys, path, "-o", "json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "nodeClaims": [],
        "existingNodes": [{"name": "worker-1", "pods": ["default/a", "default/b"]}],
        "unschedulable": [{"pod": "default/huge", "reason": NO_POOL}],
        "cost": {"hourly": 0},
    }


def _selector(value: str) -> dict[str, Any]:
    return {"nodeSelector": {"example.com/team": value}}


@pytest.mark.parametrize(
    ("docs", "existing", "unschedulable"),
    [
        pytest.param(
            [node("worker-1", cpu="4", pool=""), pod("a"), pod("b"), pod("c")],
            [{"name": "worker-1", "pods": ["default/a", "default/b", "default/c"]}],
            [],
            id="all-fit",
        ),
        pytest.param(
            [node("worker-1", cpu="1", pool=""), pod("a", cpu="600m"), pod("b", cpu="600m")],
            [{"name": "worker-1", "pods": ["default/a"]}],
            ["default/b"],
            id="second-does-not-fit",
        ),
        pytest.param(
            [
                node("worker-1", cpu="2", pool=""),
                node("worker-2", cpu="2", pool="", zone="zone-b"),
                pod("a", cpu="1500m"),
                pod("b", cpu="1500m"),
                pod("c", cpu="1500m"),
            ],
            [
                {"name": "worker-1", "pods": ["default/a"]},
                {"name": "worker-2", "pods": ["default/b"]},
            ],
            ["default/c"],
            id="spread-over-nodes-then-full",
        ),
        pytest.param(
            [node("worker-1", cpu="4", pool=""), pod("a", **_selector("x"))],
            [],
            ["default/a"],
            id="selector-no-node-has",
        ),
        pytest.param(
            # A Karpenter node whose NodePool is not in the input still takes pods.
            [node("managed", cpu="4", pool="gone"), pod("a")],
            [{"name": "managed", "pods": ["default/a"]}],
            [],
            id="node-of-an-absent-nodepool",
        ),
        pytest.param([node("worker-1", pool="")], [], [], id="nodes-only"),
    ],
)
def test_existing_nodes_only(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    docs: list[dict[str, object]],
    existing: list[dict[str, object]],
    unschedulable: list[str],
) -> None:
    code, out, err = _plan(capsys, write(*docs), "-o", "json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert data["nodeClaims"] == []
    assert sorted(data["existingNodes"], key=lambda n: n["name"]) == existing
    assert data["unschedulable"] == [{"pod": p, "reason": NO_POOL} for p in unschedulable]


def test_neither_nodepool_nor_node_is_an_error(
    capsys: pytest.CaptureFixture[str], write: Writer
) -> None:
    code, out, err = _plan(capsys, write(pod("a")))
    assert (code, out) == (2, "")
    assert err == (
        "error: no NodePool or Node found; plan needs a NodePool to launch nodes for, or Nodes "
        "to place pods on\n"
    )
