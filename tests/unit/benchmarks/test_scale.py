"""The scale benchmark at 1 % size: it builds the world it claims, through the controller's
own reflectors, and every stage decides what it should (timings are not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.scale import main


def test_scale_benchmark_at_one_percent(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    args = ["--nodes", "50", "--pods", "1000", "--pending", "200", "--events", "100"]
    assert main([*args, "--warm-rounds", "3", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["world"] == {
        "nodepools": 10,
        "kwoknodeclasses": 1,
        "nodes": 50,
        "nodeclaims": 50,
        "pods": 1000,
        "daemonsets": 2,
        "poddisruptionbudgets": 9,
        "namespaces": 52,
        "persistentvolumeclaims": 0,
        "persistentvolumes": 0,
        "storageclasses": 0,
        "pod_json_bytes": 4104,
    }
    # Everything listed reached the cluster state.
    assert (result["nodes"], result["pods"], result["pending_pods"]) == (50, 1000, 200)
    assert result["disruption_candidates"] == 50
    # Every pending pod has a place: on an existing node or a new NodeClaim.
    assert result["provision_unschedulable"] == 0
    assert result["provision_on_existing"] + result["provision_on_new"] == 200
    assert result["saving_hourly"] > 0
    assert result["saving_hourly"] >= result["saving_upstream_style_hourly"]
    for key in ("ingest_seconds", "event_us", "disruption_pass_seconds", "warm_round_ms"):
        assert isinstance(result[key], float)
