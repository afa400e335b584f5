"""``plan`` and ``plan --disruption`` reach the solver by one road: the objects of the input go
into a ``state.Cluster`` (``cli.offline.build_cluster``), then ``snapshot()`` and
``fromstate.solve_input``, as in the controller. On a cluster dump both see the same pods."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pytest

from karpenter_py.cli.main import main
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.snapshot import Snapshot
from tests.unit.cli.conftest import Captured, Writer, node, nodeclaim, nodepool, pod, workload

NOW = "2026-01-01T01:00:00Z"


@dataclass
class Snapshots:
    taken: list[Snapshot]


@pytest.fixture
def snapshots(monkeypatch: pytest.MonkeyPatch) -> Snapshots:
    """Record every snapshot a command takes of its cluster."""
    box = Snapshots([])
    original = Cluster.snapshot

    def snapshot(self: Cluster, now: datetime) -> Snapshot:
        taken = original(self, now)
        box.taken.append(taken)
        return taken

    monkeypatch.setattr(Cluster, "snapshot", snapshot)
    return box


def pods_seen(snap: Snapshot) -> tuple[list[str], dict[str, list[str]]]:
    """(pending pod keys, node -> bound pod keys)."""
    return (
        [p.key for p in snap.pending],
        {name: [p.key for p in pods] for name, pods in snap.pods_by_node.items()},
    )


DUMP = (
    nodepool(),
    node("node-1"),
    node("node-2", pool=""),
    nodeclaim("default-landed", node_name="node-1"),
    nodeclaim("default-flying"),
    pod("web-0", nodeName="node-1"),
    pod("web-1", nodeName="node-2"),
    pod("web-2", nodeName="default-flying"),
    pod("pending-0"),
    pod("pending-1", "shop"),
)


def test_plan_and_disruption_see_the_same_pods_of_a_dump(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    captured: Captured,
    snapshots: Snapshots,
) -> None:
    path = write(*DUMP)
    assert main(["plan", "-f", path, "--instance-types", catalog_file]) == 0
    args = ["plan", "--disruption", "-f", path, "--instance-types", catalog_file, "--now", NOW]
    assert main(args) == 0
    assert capsys.readouterr().err == ""
    planned, disrupted = snapshots.taken
    expected = (
        ["default/pending-0", "shop/pending-1"],
        {
            "node-1": ["default/web-0"],
            "node-2": ["default/web-1"],
            "default-flying": ["default/web-2"],
        },
    )
    assert pods_seen(planned) == expected
    assert pods_seen(disrupted) == expected
    # plan hands the solver exactly what the controller's road makes of its snapshot.
    again = solve_input(
        planned, instance_types=captured.input.instance_types, options=SolveOptions()
    )
    assert [p.key for p in captured.input.pods] == [p.key for p in again.pods]
    assert [e.node.name for e in captured.input.existing] == [e.node.name for e in again.existing]
    assert [p.name for p in captured.input.pools] == [p.name for p in again.pools] == ["default"]


def test_workload_pods_are_planned_but_not_disrupted(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    captured: Captured,
    snapshots: Snapshots,
) -> None:
    # plan expands a Deployment into the pods its controllers would make; a dump lists those pods
    # itself, so plan --disruption does not expand it.
    path = write(*DUMP, workload("Deployment", "api", replicas=2))
    assert main(["plan", "-f", path, "--instance-types", catalog_file]) == 0
    args = ["plan", "--disruption", "-f", path, "--instance-types", catalog_file, "--now", NOW]
    assert main(args) == 0
    capsys.readouterr()
    planned, disrupted = snapshots.taken
    assert pods_seen(planned)[0] == [
        "default/pending-0",
        "shop/pending-1",
        "default/api-0",
        "default/api-1",
    ]
    assert pods_seen(disrupted)[0] == ["default/pending-0", "shop/pending-1"]
