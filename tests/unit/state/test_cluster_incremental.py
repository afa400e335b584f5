"""What the cluster keeps up to date so a snapshot of a large cluster does not rescan it: the
pending pods and each node's pods (rebuilt only when one of them changed)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from karpenter_py.state.cluster import Cluster
from tests.factories import node, pdb, pod

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)


def keys(pods: object) -> list[str]:
    return [p.key for p in pods]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("changes", "pending"),
    [
        ([("upsert", "a", {"pending": True})], ["default/a"]),
        # Bound by the scheduler: no longer pending.
        ([("upsert", "a", {"pending": True}), ("upsert", "a", {"node_name": "n1"})], []),
        ([("upsert", "a", {"pending": True}), ("delete", "a", {})], []),
        # A pod that becomes unschedulable later.
        (
            [
                ("upsert", "a", {"phase": "Pending"}),
                ("upsert", "b", {"pending": True}),
                ("upsert", "a", {"pending": True}),
            ],
            ["default/a", "default/b"],
        ),
        # Terminating pods are not provisioned for.
        ([("upsert", "a", {"pending": True, "deletionTimestamp": "2026-01-01T00:00:00Z"})], []),
    ],
)
def test_pending_pods_follow_every_change(
    changes: list[tuple[str, str, dict[str, object]]], pending: list[str]
) -> None:
    cluster = Cluster()
    for op, name, kw in changes:
        if op == "delete":
            cluster.delete_pod(f"default/{name}")
            continue
        deleting = str(kw.pop("deletionTimestamp", ""))
        cluster.upsert_pod(replace(pod(name, **kw), deletion_timestamp=deleting))  # type: ignore[arg-type]
    assert sorted(keys(cluster.snapshot(NOW).pending)) == pending


def test_a_nodes_pods_are_the_same_tuple_until_one_of_them_changes() -> None:
    cluster = Cluster()
    cluster.upsert_node(node("n1"))
    cluster.upsert_node(node("n2"))
    for name, where in (("b", "n1"), ("a", "n1"), ("c", "n2")):
        cluster.upsert_pod(pod(name, node_name=where))
    first = cluster.snapshot(NOW).pods_by_node
    assert keys(first["n1"]) == ["default/a", "default/b"]
    second = cluster.snapshot(NOW).pods_by_node
    assert second["n1"] is first["n1"]
    # "a" moves to n2: both nodes' tuples are rebuilt.
    cluster.upsert_pod(pod("a", node_name="n2"))
    third = cluster.snapshot(NOW).pods_by_node
    assert keys(third["n1"]) == ["default/b"]
    assert keys(third["n2"]) == ["default/a", "default/c"]
    cluster.delete_pod("default/c")
    assert keys(cluster.snapshot(NOW).pods_by_node["n2"]) == ["default/a"]
    assert cluster.snapshot(NOW).pods_by_node["n1"] is third["n1"]


def test_a_snapshot_groups_pdbs_by_namespace_in_key_order() -> None:
    cluster = Cluster()
    for name, ns in (("b", "shop"), ("a", "shop"), ("c", "db")):
        cluster.upsert_pdb(pdb(name, {"app": name}, namespace=ns))
    snap = cluster.snapshot(NOW)
    assert [p.key for p in snap.pdbs_in("shop")] == ["shop/a", "shop/b"]
    assert [p.key for p in snap.pdbs_in("db")] == ["db/c"]
    assert snap.pdbs_in("other") == ()
    # What-if copies keep the grouping.
    assert [p.key for p in snap.without(["n1"]).pdbs_in("shop")] == ["shop/a", "shop/b"]


def _nodes_cluster() -> Cluster:
    cluster = Cluster()
    cluster.upsert_node(node("n1"))
    cluster.upsert_node(node("n2"))
    cluster.upsert_pod(pod("a", node_name="n1"))
    return cluster


@pytest.mark.parametrize(
    ("change", "same"),
    [
        (lambda c: None, True),
        # Pods change a node's pods, not the node.
        (lambda c: c.upsert_pod(pod("b", node_name="n2")), True),
        (lambda c: c.delete_pod("default/a"), True),
        (lambda c: c.upsert_node(node("n3")), False),
        (lambda c: c.delete_node("n2"), False),
        (lambda c: c.upsert_node(node("n1", labels={"team": "x"})), False),
        (lambda c: c.mark_for_deletion("nc-1"), False),
        (lambda c: c.nominate("n1", NOW + timedelta(seconds=20)), False),
        (lambda c: c.reserve("nc-1", {"cpu": 1000}), False),
    ],
)
def test_the_state_nodes_are_joined_again_only_after_a_node_side_change(
    change: object, same: bool
) -> None:
    cluster = _nodes_cluster()
    before = cluster.state_nodes(NOW)
    change(cluster)  # type: ignore[operator]
    assert (cluster.state_nodes(NOW) is before) is same


def test_a_nomination_expiring_joins_the_nodes_again() -> None:
    cluster = _nodes_cluster()
    cluster.nominate("n1", NOW + timedelta(seconds=20))
    assert [n.nominated for n in cluster.state_nodes(NOW)] == [True, False]
    held = cluster.state_nodes(NOW + timedelta(seconds=19))
    assert held is cluster.state_nodes(NOW)
    assert [n.nominated for n in cluster.state_nodes(NOW + timedelta(seconds=20))] == [False, False]


def test_a_snapshot_sees_pods_that_changed_since_the_last_one() -> None:
    cluster = _nodes_cluster()
    first = cluster.snapshot(NOW)
    cluster.upsert_pod(pod("b", node_name="n2"))
    cluster.delete_pod("default/a")
    second = cluster.snapshot(NOW)
    assert second.nodes is first.nodes
    assert {k: keys(v) for k, v in first.pods_by_node.items()} == {"n1": ["default/a"], "n2": []}
    assert {k: keys(v) for k, v in second.pods_by_node.items()} == {"n1": [], "n2": ["default/b"]}
