"""The viewer benchmark at 1 % size: the scale world reaches the viewer's own source and every
node and pending pod gets a row (timings are not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.viewer import main


def test_viewer_benchmark_at_one_percent(tmp_path: Path) -> None:
    out = tmp_path / "viewer.json"
    args = ["--nodes", "50", "--pods", "1000", "--pending", "100", "--events", "100"]
    assert main([*args, "--redraws", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert (result["nodes_listed"], result["pods_listed"]) == (50, 1000)
    assert (result["rows"], result["pending_rows"]) == (50, 100)
    assert result["commands"] == 1
    for key in ("ingest_seconds", "event_us", "redraw_ms", "redraw_decided_ms", "decide_seconds"):
        assert isinstance(result[key], float)
