"""The view as text (``viewer --once``), and the cells both it and the live UI show.

Rich lays the tables out; on a terminal it colours the states, elsewhere (a pipe, CI) the output
is plain text, the same words without escape codes.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime
from typing import Final, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from karpenter_py.cli.plan import _money
from karpenter_py.cli.viewer.model import (
    NodeRow,
    NodeState,
    PendingRow,
    Totals,
    View,
    age_text,
    bar,
    cpu_text,
    memory_text,
)

NODE_COLUMNS: Final = (
    "NODE",
    "NODEPOOL",
    "INSTANCE TYPE",
    "CAPACITY",
    "ZONE",
    "$/H",
    "AGE",
    "CPU",
    "MEMORY",
    "PODS",
    "STATE",
    "REASON",
)
TOTAL_COLUMNS: Final = (
    "NODEPOOL",
    "NODES",
    "PODS",
    "CPU",
    "MEMORY",
    "$/H",
    "$/MONTH",
    "NEXT SAVING",
)
PENDING_COLUMNS: Final = ("POD", "CPU", "MEMORY", "REASON")
STATE_STYLES: Final = {
    NodeState.DISRUPTING: "bold red",
    NodeState.NEXT: "bold yellow",
    NodeState.DRIFTED: "magenta",
    NodeState.CONSOLIDATABLE: "cyan",
    NodeState.LEFT_ALONE: "",
    NodeState.UNDECIDED: "dim",
}
# A pipe is not a terminal: rich would wrap (or cut cells) at 80 columns; a whole line per row
# serves scripts better, so the width is only a bound no table reaches.
PLAIN_WIDTH: Final = 4096


def usage(used: int, total: int, text: str) -> str:
    return f"{bar(used, total)} {text}"


def node_cells(row: NodeRow) -> tuple[str, ...]:
    """A node's cells, in ``NODE_COLUMNS`` order."""
    return (
        row.name,
        row.nodepool,
        row.instance_type or "-",
        row.capacity_type or "-",
        row.zone or "-",
        _money(row.price),
        age_text(row.age),
        usage(*row.cpu, f"{cpu_text(row.cpu[0])}/{cpu_text(row.cpu[1])}"),
        usage(*row.memory, f"{memory_text(row.memory[0])}/{memory_text(row.memory[1])}"),
        f"{row.pods[0]}/{row.pods[1]}",
        row.state.value,
        row.reason,
    )


def total_cells(t: Totals) -> tuple[str, ...]:
    return (
        t.name,
        str(t.nodes),
        str(t.pods),
        usage(*t.cpu, f"{cpu_text(t.cpu[0])}/{cpu_text(t.cpu[1])}"),
        usage(*t.memory, f"{memory_text(t.memory[0])}/{memory_text(t.memory[1])}"),
        _money(t.hourly),
        _money(t.monthly),
        _money(t.saving),
    )


def pending_cells(p: PendingRow) -> tuple[str, ...]:
    return (p.pod, cpu_text(p.cpu), memory_text(p.memory), p.reason)


def headline(now: datetime, cluster: Totals, decided_at: datetime | None) -> str:
    """When the view was taken, the cluster's size and cost, and how old the disruption
    decision shown is."""
    when = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    if decided_at is None:
        decision = "disruption: deciding"
    else:
        decision = f"disruption decided {age_text(decision_age(now, decided_at))} ago"
    return (
        f"{when}  {cluster.nodes} nodes, {cluster.pods} pods, ${_money(cluster.hourly)}/h "
        f"(${_money(cluster.monthly)}/month)  {decision}"
    )


def decision_age(now: datetime, decided_at: datetime) -> float:
    return max(0.0, (now - decided_at).total_seconds())


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str | Text]]) -> Table:
    table = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table


def _node_rows(rows: Sequence[NodeRow]) -> list[list[str | Text]]:
    out: list[list[str | Text]] = []
    for row in rows:
        cells: list[str | Text] = list(node_cells(row))
        cells[10] = Text(row.state.value, style=STATE_STYLES[row.state])
        out.append(cells)
    return out


def render(view: View, console: Console) -> None:
    """The whole view: the headline, nodes, NodeClaims not registered, pending pods, totals."""
    console.print(headline(view.now, view.cluster, view.decided_at), highlight=False)
    console.print()
    console.print(_table(f"Nodes ({len(view.nodes)})", NODE_COLUMNS, _node_rows(view.nodes)))
    if view.unregistered:
        console.print()
        title = f"NodeClaims not registered ({len(view.unregistered)})"
        console.print(_table(title, NODE_COLUMNS, _node_rows(view.unregistered)))
    if view.pending:
        console.print()
        rows = [pending_cells(p) for p in view.pending]
        console.print(_table(f"Pending pods ({len(rows)})", PENDING_COLUMNS, rows))
    console.print()
    totals = [total_cells(t) for t in (*view.pools, view.cluster)]
    console.print(_table("Totals", TOTAL_COLUMNS, totals))


def console_for(out: TextIO) -> Console:
    """Colours and the terminal's width on a terminal; plain text, one line per row, elsewhere."""
    terminal = out.isatty()
    return Console(
        file=out,
        width=None if terminal else PLAIN_WIDTH,
        no_color=not terminal,
        force_terminal=terminal,
        highlight=False,
    )


def render_text(view: View, out: TextIO) -> None:
    """The view on ``out``: a terminal's, or plain lines without the padding rich adds."""
    if out.isatty():
        render(view, console_for(out))
        return
    buffer = io.StringIO()
    render(view, console_for(buffer))
    out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
