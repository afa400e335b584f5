"""The live viewer: a textual App over a snapshot source.

Kept responsive at thousands of nodes by doing little per event: deliveries only raise the
source's ``changed`` flag; at most once per ``redraw`` interval the rows are rebuilt from a fresh
snapshot and only the cells that changed are written (rows are keyed by node name; a re-sort
moves rows without rebuilding them). The decisions (disruption and provisioning, seconds on a
big cluster) run in a worker thread, on a snapshot taken on the event loop, every ``decide``
interval or sooner after a change, and the headline says how old the one shown is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ClassVar, Final, Protocol

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Static

from karpenter_py.cli import plan as plan_cli
from karpenter_py.cli.plan import PoolCatalogs, _natural
from karpenter_py.cli.viewer.decide import Decisions, decide
from karpenter_py.cli.viewer.model import (
    Filter,
    NodeRow,
    SortKey,
    View,
    bound_pods,
    build_view,
    cpu_text,
    memory_text,
    parse_filter,
)
from karpenter_py.cli.viewer.text import (
    NODE_COLUMNS,
    PENDING_COLUMNS,
    STATE_STYLES,
    TOTAL_COLUMNS,
    headline,
    node_cells,
    pending_cells,
    total_cells,
)
from karpenter_py.model.core import SelectorError
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.snapshot import Snapshot

REDRAW_SECONDS: Final = 1.0
DECIDE_SECONDS: Final = 15.0
# After a change, decide again this soon at the earliest (a burst of changes costs one pass).
DECIDE_AFTER_CHANGE_SECONDS: Final = 3.0
STATE_COLUMN: Final = NODE_COLUMNS.index("STATE")


class Source(Protocol):
    catalogs: PoolCatalogs
    changed: bool

    def snapshot(self, now: datetime) -> Snapshot: ...

    def synced(self) -> bool: ...

    async def run(self) -> None: ...


class PodsScreen(ModalScreen[None]):
    """One node's pods."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "back"),
        Binding("q", "dismiss", "back"),
    ]

    def __init__(self, row: NodeRow, snapshot: Snapshot) -> None:
        super().__init__()
        self.row = row
        self.pods = bound_pods(snapshot, row.name)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Pods on {self.row.name} ({len(self.pods)})  [escape: back]")
            table: DataTable[str] = DataTable(cursor_type="row")
            table.add_columns("POD", "CPU", "MEMORY", "PHASE")
            for pod in sorted(self.pods, key=lambda p: _natural(p.key)):
                table.add_row(
                    pod.key,
                    cpu_text(pod.requests.get("cpu", 0)),
                    memory_text(pod.requests.get("memory", 0)),
                    pod.phase,
                )
            yield table


class KeyedTable:
    """A DataTable whose rows are keyed by their first cell: an update writes only the cells
    that changed, adds and removes rows, and re-sorts only when the order differs."""

    def __init__(self, table: DataTable[str | Text], columns: Sequence[str]) -> None:
        self.table = table
        self.columns = tuple(columns)
        self.shown: dict[str, tuple[str, ...]] = {}
        for column in columns:
            table.add_column(column, key=column)

    def update(
        self,
        cells_of_rows: Sequence[tuple[str, ...]],
        style: Callable[[int, str], str | Text] = lambda _, cell: cell,
    ) -> None:
        rows = [(cells[0], cells) for cells in cells_of_rows]
        wanted = dict(rows)
        for key in [k for k in self.shown if k not in wanted]:
            self.table.remove_row(key)
            del self.shown[key]
        for key, cells in rows:
            old = self.shown.get(key)
            if old is None:
                self.table.add_row(*(style(i, c) for i, c in enumerate(cells)), key=key)
            elif old != cells:
                for i, (was, cell) in enumerate(zip(old, cells, strict=True)):
                    if was != cell:
                        self.table.update_cell(
                            key, self.columns[i], style(i, cell), update_width=True
                        )
            self.shown[key] = cells
        order = [key for key, _ in rows]
        if list(self.shown) != order:
            position = {key: i for i, key in enumerate(order)}
            self.shown = {key: self.shown[key] for key in order}
            self.table.sort(self.columns[0], key=lambda value: position[str(value)])


def _state_style(i: int, cell: str) -> str | Text:
    if i != STATE_COLUMN:
        return cell
    styles = {state.value: style for state, style in STATE_STYLES.items()}
    return Text(cell, style=styles.get(cell, ""))


class Viewer(App[None]):
    """``karpenter-py viewer``."""

    TITLE = "karpenter-py viewer"
    CSS = """
    #nodes { height: 3fr; }
    #pending { height: 1fr; }
    #totals { height: auto; max-height: 12; }
    #filter { display: none; }
    #filter.shown { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "sort('cost')", "cost"),
        Binding("a", "sort('age')", "age"),
        Binding("u", "sort('utilisation')", "utilisation"),
        Binding("n", "sort('name')", "name"),
        Binding("slash", "filter", "filter"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        source: Source,
        *,
        clock: Callable[[], datetime],
        options: SolveOptions | None = None,
        redraw: float = REDRAW_SECONDS,
        decide_every: float = DECIDE_SECONDS,
        every_command: bool = False,
    ) -> None:
        """``every_command``: list every command disruption would take (a dump, as
        ``plan --disruption``), not only the controller's next one (live)."""
        super().__init__()
        self.every_command = every_command
        self.source = source
        self.clock = clock
        self.options = options
        self.redraw = redraw
        self.decide_every = decide_every
        self.sort_by: SortKey = "name"
        self.keep = Filter()
        # What was typed (or --filter): a NodePool's name or a selector, told apart against
        # the NodePools of each snapshot (live, none are known before the first list).
        self.filter_text = ""
        self.decisions: Decisions | None = None
        self.deciding = False
        self.decided_mono: float | None = None  # loop time of the last decision started
        self.changed_since_decision = True
        self.stale = True  # the view needs rebuilding (sort, filter or a decision changed)
        self.view: View | None = None
        self.snapshot: Snapshot | None = None

    def compose(self) -> ComposeResult:
        yield Static("waiting for the informers to list the cluster", id="headline")
        yield Input(
            placeholder="NodePool or label selector (a=b,c in (d)); empty: all", id="filter"
        )
        yield DataTable(id="nodes", cursor_type="row")
        yield DataTable(id="pending", cursor_type="row")
        yield DataTable(id="totals", cursor_type="none")
        yield Footer()

    def on_mount(self) -> None:
        self.nodes = KeyedTable(self.query_one("#nodes", DataTable), NODE_COLUMNS)
        self.pending = KeyedTable(
            self.query_one("#pending", DataTable), ("POD / NODECLAIM", *PENDING_COLUMNS[1:])
        )
        self.totals = KeyedTable(self.query_one("#totals", DataTable), TOTAL_COLUMNS)
        self.query_one("#nodes", DataTable).focus()  # keys sort; the filter box waits for /
        self.run_worker(self.source.run(), name="informers", exit_on_error=True)
        self.set_interval(self.redraw, self.tick)

    # ------------------------------------------------------------------ the cadence
    def tick(self) -> None:
        if not self.source.synced():
            return
        if self.source.changed:
            self.source.changed = False
            self.changed_since_decision = True
            self.stale = True
        self._maybe_decide()
        if self.stale:
            self.stale = False
            self._rebuild()
        elif self.view is not None:
            self._headline(self.view)

    def _maybe_decide(self) -> None:
        if self.deciding:
            return
        now = asyncio.get_running_loop().time()
        since = None if self.decided_mono is None else now - self.decided_mono
        due = (
            since is None
            or since >= self.decide_every
            or (self.changed_since_decision and since >= DECIDE_AFTER_CHANGE_SECONDS)
        )
        if not due:
            return
        self.deciding = True
        self.decided_mono = now
        self.changed_since_decision = False
        snapshot = self.source.snapshot(self.clock())
        self.run_worker(self._decide(snapshot), name="decide", group="decide")

    async def _decide(self, snapshot: Snapshot) -> None:
        try:
            self.decisions = await asyncio.to_thread(
                functools.partial(decide, every_command=self.every_command),
                snapshot,
                self.source.catalogs,
                self.options,
            )
        finally:
            self.deciding = False
        self.stale = True

    # ------------------------------------------------------------------ drawing
    def _rebuild(self) -> None:
        snapshot = self.source.snapshot(self.clock())
        self.snapshot = snapshot
        with contextlib.suppress(SelectorError):  # checked when it was typed
            self.keep = parse_filter(self.filter_text, snapshot.nodepools)
        decisions = self.decisions
        instance_types = (
            decisions.instance_types
            if decisions is not None
            else plan_cli.pool_instance_types(snapshot, self.source.catalogs)
        )
        view = build_view(
            snapshot,
            instance_types,
            disruption=decisions.disruption if decisions is not None else None,
            provisioning=decisions.provisioning if decisions is not None else None,
            sort=self.sort_by,
            keep=self.keep,
        )
        self.view = view
        self.nodes.update([node_cells(r) for r in view.nodes], _state_style)
        claims = [self._claim_cells(r) for r in view.unregistered]
        self.pending.update([*claims, *(pending_cells(p) for p in view.pending)])
        self.totals.update([total_cells(t) for t in (*view.pools, view.cluster)])
        self._headline(view)

    @staticmethod
    def _claim_cells(row: NodeRow) -> tuple[str, ...]:
        where = f"{row.instance_type or '-'} in {row.zone or '-'}"
        return (
            f"nodeclaim {row.name}",
            cpu_text(row.cpu[1]),
            memory_text(row.memory[1]),
            f"not registered yet: {where}",
        )

    def _headline(self, view: View) -> None:
        text = headline(self.clock(), view.cluster, view.decided_at)
        shown = f"sort: {self.sort_by}"
        if self.filter_text:
            shown += f"  filter: {self.filter_text}"
        self.query_one("#headline", Static).update(f"{text}  {shown}")

    # ------------------------------------------------------------------ keys
    def action_sort(self, key: SortKey) -> None:
        self.sort_by = key
        self.stale = True
        self.tick()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        pools = self.snapshot.nodepools if self.snapshot is not None else {}
        try:
            parse_filter(event.value, pools)
        except SelectorError as err:
            self.notify(str(err), severity="error")
            return
        self.filter_text = event.value
        event.input.remove_class("shown")
        self.query_one("#nodes", DataTable).focus()
        self.stale = True
        self.tick()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "nodes" or self.view is None or self.snapshot is None:
            return
        name = str(event.row_key.value)
        row = next((r for r in self.view.nodes if r.name == name), None)
        if row is not None:
            self.push_screen(PodsScreen(row, self.snapshot))
