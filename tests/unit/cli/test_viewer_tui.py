"""The live viewer's keys on the example dump, through textual's test pilot: rows appear sorted,
c/n re-sort them, / filters, Enter opens a node's pods, q quits."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from textual.widgets import DataTable

from karpenter_py.cli.disruption import load_dump
from karpenter_py.cli.viewer.source import DumpSource
from karpenter_py.cli.viewer.tui import PodsScreen, Viewer

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = str(REPO / "examples" / "disruption.yaml")
AT = datetime(2025, 1, 2, tzinfo=UTC)


def viewer() -> Viewer:
    snapshot, catalogs = load_dump([EXAMPLE], AT, stderr=io.StringIO())
    return Viewer(DumpSource(snapshot, catalogs), clock=lambda: AT, redraw=0.05, every_command=True)


def column(table: DataTable[object], index: int) -> list[str]:
    return [str(table.get_row_at(i)[index]) for i in range(table.row_count)]


async def test_keys_sort_filter_and_open_a_node() -> None:
    app = viewer()
    async with app.run_test(size=(240, 40)) as pilot:
        nodes = app.query_one("#nodes", DataTable)
        while app.decisions is None or app.stale or nodes.row_count == 0:
            await pilot.pause(0.05)
        assert column(nodes, 0) == [
            "ip-10-0-1-10",
            "ip-10-0-1-40",
            "ip-10-0-2-20",
            "ip-10-0-2-50",
            "ip-10-0-3-30",
        ]
        assert column(nodes, 10) == ["Next", "Consolidatable", "Next", "Consolidatable", "Next"]
        assert column(nodes, 11)[1] == (
            'pod shop/report has annotation karpenter.sh/do-not-disrupt: "true"'
        )

        await pilot.press("c")
        assert column(nodes, 0) == [
            "ip-10-0-2-20",
            "ip-10-0-3-30",
            "ip-10-0-1-10",
            "ip-10-0-1-40",
            "ip-10-0-2-50",
        ]
        await pilot.press("n")
        assert column(nodes, 0)[0] == "ip-10-0-1-10"

        await pilot.press("slash")
        await pilot.press(*"topology.kubernetes.io/zone=us-east-1b", "enter")
        assert column(nodes, 0) == ["ip-10-0-2-20", "ip-10-0-2-50"]
        totals = app.query_one("#totals", DataTable)
        assert [str(c) for c in totals.get_row_at(totals.row_count - 1)[:3]] == [
            "cluster",
            "2",
            "5",
        ]

        await pilot.press("enter")
        pods = app.screen
        assert isinstance(pods, PodsScreen)
        assert pods.row.name == "ip-10-0-2-20"
        assert sorted(p.key for p in pods.pods) == [
            "kube-system/node-agent-x2",
            "shop/web-7d4b9c-abcde",
        ]
        await pilot.press("escape")
        assert app.screen is not pods
        await pilot.press("q")
    assert app.return_code == 0
