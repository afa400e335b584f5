"""The many-NodePools benchmark at a tiny size: it runs, places every pod, writes its keys."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.nodepools import main, requirement_sets


def test_tiny_run_writes_every_key(tmp_path: Path) -> None:
    out = tmp_path / "nodepools.json"
    assert (
        main(["--pools", "2", "--pools", "4", "--pods", "30", "--no-memory", "--out", str(out)])
        == 0
    )
    result = json.loads(out.read_text())
    assert sorted(result) == [
        "catalog_mb",
        "catalogs",
        "distinct_requirement_sets",
        "errors",
        "growth",
        "hourly_cost",
        "index_mb",
        "index_mb_per_pool",
        "nodeclaims",
        "pods",
        "pools",
        "round_seconds",
        "tables",
        "unplaced",
    ]
    assert [(r["pools"], r["distinct_requirement_sets"], r["pods"]) for r in result["growth"]] == [
        (2, 2, 30),
        (4, 4, 30),
    ]
    assert (result["unplaced"], result["errors"], sorted(result["round_seconds"])) == (
        0,
        [],
        ["cold", "warm"],
    )


def test_requirement_sets_are_distinct_and_stable() -> None:
    sets = requirement_sets(500)
    assert len({repr(s) for s in sets}) == 500
    assert requirement_sets(10) == sets[:10]
