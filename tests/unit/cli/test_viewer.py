"""``karpenter-py viewer``: the view model (states, reasons, totals, sorting, filters) and the
plain text ``--once`` prints for a dump (``-f``), on the road ``plan --disruption`` takes."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from karpenter_py.cli.main import main
from karpenter_py.cli.viewer.model import (
    Filter,
    NodeState,
    age_text,
    bar,
    build_view,
    cpu_text,
    memory_text,
    parse_filter,
)
from karpenter_py.model.core import SelectorError, label_selector_from_string
from karpenter_py.model.labels import TAINT_DISRUPTED_KEY
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.unit.kube.fakeplugin import write_kubeconfig

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = str(REPO / "examples" / "disruption.yaml")
NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)


def test_once_on_the_example_dump_prints_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["viewer", "-f", EXAMPLE, "--once", "--now", "2025-01-02T00:00:00Z", "--sort", "cost"]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    assert out.splitlines()[0] == (
        "2025-01-02T00:00:00Z  5 nodes, 10 pods, $0.6720/h ($490.56/month)  "
        "disruption decided 0s ago"
    )
    assert "\x1b[" not in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("ip-")}
    assert list(rows) == [
        "ip-10-0-2-20",
        "ip-10-0-3-30",
        "ip-10-0-1-10",
        "ip-10-0-1-40",
        "ip-10-0-2-50",
    ]
    assert rows["ip-10-0-1-10"].endswith(
        "Next            #1 emptiness (Empty): delete, saves $0.0960/h"
    )
    assert rows["ip-10-0-1-40"].endswith(
        'Consolidatable  pod shop/report has annotation karpenter.sh/do-not-disrupt: "true"'
    )
    assert rows["ip-10-0-2-50"].endswith(
        "Consolidatable  PDB shop/db allows 0 disruptions (it covers pod shop/db-0)"
    )
    assert out.splitlines()[-1] == (
        "cluster   5      10    ███░░░░░░░  32% 4.4/13.6  █░░░░░░░░░  14% 6.6Gi/47.9Gi  "
        "0.6720  490.56   0.0960"
    )


def _cluster() -> Cluster:
    cluster = Cluster()
    cluster.upsert_nodepool(factories.nodepool("a"))
    cluster.upsert_nodepool(factories.nodepool("b"))
    for name, pool, taints in (
        ("n-2", "a", None),
        ("n-10", "a", [{"key": TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}]),
        ("n-1", "b", None),
    ):
        cluster.upsert_nodeclaim(factories.nodeclaim(name, pool=pool))
        cluster.upsert_node(
            factories.node(name, labels=factories.node_labels(pool, "c-4x"), taints=taints)
        )
    cluster.upsert_pod(factories.pod("p1", node_name="n-2", cpu="2", memory="4Gi"))
    cluster.upsert_pod(factories.pod("p2", node_name="n-1", cpu="500m", memory="1Gi"))
    cluster.upsert_pod(factories.pod("waiting", pending=True))
    return cluster


@pytest.mark.parametrize(
    ("sort", "keep", "names"),
    [
        ("name", Filter(), ["n-2", "n-10", "n-1"]),  # grouped by pool, natural order
        ("utilisation", Filter(), ["n-10", "n-2", "n-1"]),
        ("name", Filter(nodepool="b"), ["n-1"]),
        ("name", Filter(selector=label_selector_from_string("karpenter.sh/nodepool!=a")), ["n-1"]),
    ],
)
def test_rows_are_grouped_sorted_and_filtered(sort: str, keep: Filter, names: list[str]) -> None:
    snapshot = _cluster().snapshot(NOW)
    view = build_view(snapshot, {}, sort=sort, keep=keep)  # type: ignore[arg-type]
    assert [r.name for r in view.nodes] == names


def test_states_totals_and_pending_before_any_decision() -> None:
    view = build_view(_cluster().snapshot(NOW), {})
    rows = {r.name: r for r in view.nodes}
    assert rows["n-10"].state == NodeState.DISRUPTING
    assert rows["n-10"].reason == f"tainted {TAINT_DISRUPTED_KEY}"
    assert rows["n-2"].state == NodeState.UNDECIDED
    assert rows["n-2"].cpu == (2000, 4000)
    assert rows["n-2"].memory == (4 * 2**30, 16 * 2**30)
    assert rows["n-2"].pods == (1, 110)
    assert rows["n-2"].age == 3600.0
    assert [(t.name, t.nodes, t.pods, t.cpu) for t in view.pools] == [
        ("a", 2, 1, (2000, 8000)),
        ("b", 1, 1, (500, 4000)),
    ]
    assert (view.cluster.nodes, view.cluster.pods, view.cluster.cpu) == (3, 2, (2500, 12000))
    assert [(p.pod, p.cpu, p.reason) for p in view.pending] == [("default/waiting", 1000, "")]
    assert view.decided_at is None


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a==b,c", {"a": "b"}, False),
        ("a in (x, y),!d", {"a": "y"}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("a!=x", {}, True),
    ],
)
def test_label_selector_strings(text: str, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_from_string(text).matches(labels) is expected


def test_filter_text_is_a_nodepool_else_a_selector() -> None:
    assert parse_filter("a", ["a", "b"]) == Filter(nodepool="a")
    assert parse_filter("", ["a"]) == Filter()
    assert parse_filter("x=y", ["a"]) == Filter(selector=label_selector_from_string("x=y"))
    with pytest.raises(SelectorError, match="not a label selector term: 'a b'"):
        parse_filter("a b", ["a"])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (cpu_text(250), "250m"),
        (cpu_text(1500), "1.5"),
        (cpu_text(4000), "4"),
        (memory_text(3 * 2**29), "1.5Gi"),
        (memory_text(512 * 2**20), "512Mi"),
        (age_text(59), "59s"),
        (age_text(7200), "2h"),
        (age_text(None), "-"),
        (bar(1, 4), "██░░░░░░░░  25%"),
        (bar(5, 4), "██████████ 125%"),
    ],
)
def test_formatting(value: str, text: str) -> None:
    assert value == text


def test_a_cluster_that_cannot_be_reached_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a port nothing listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = write_kubeconfig(tmp_path / "kc", {"token": "t"}, server=f"https://127.0.0.1:{port}")
    assert main(["viewer", "--once", "--kubeconfig", str(kc)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: cannot list the cluster: ")
    assert err.count("\n") == 1
    assert f"127.0.0.1:{port}" in err
