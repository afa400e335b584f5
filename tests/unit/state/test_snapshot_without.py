"""Cluster state's providerID index and ``Snapshot.without`` (disruption's what-if input)."""

from __future__ import annotations

from datetime import UTC, datetime

from karpenter_py.state.cluster import Cluster
from tests.factories import node, nodeclaim, pod

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)


def cluster_with(*names: str) -> Cluster:
    cluster = Cluster()
    for name in names:
        cluster.upsert_node(node(name))
        cluster.upsert_nodeclaim(nodeclaim(f"nc-{name}", node_name=name))
    return cluster


def test_provider_id_index_follows_every_mutation() -> None:
    cluster = cluster_with("a", "b")
    assert cluster.node_for_provider_id("kwok://a") is cluster.nodes["a"]
    assert cluster.nodeclaim_for_provider_id("kwok://b") is cluster.nodeclaims["nc-b"]
    # The provider ID changes (a relaunch): the old one no longer resolves.
    cluster.upsert_node(node("a", provider_id="kwok://a2"))
    assert cluster.node_for_provider_id("kwok://a") is None
    assert cluster.node_for_provider_id("kwok://a2") is cluster.nodes["a"]
    cluster.delete_nodeclaim("nc-b")
    assert cluster.nodeclaim_for_provider_id("kwok://b") is None
    cluster.delete_node("a")
    cluster.upsert_node(node("c"))
    assert cluster.node_for_provider_id("kwok://a2") is None
    assert cluster.node_for_provider_id("kwok://c") is cluster.nodes["c"]
    cluster.delete_nodeclaim("nc-a")
    cluster.upsert_nodeclaim(nodeclaim("nc-c", node_name="c"))
    assert cluster.nodeclaim_for_provider_id("kwok://c") is cluster.nodeclaims["nc-c"]
    assert cluster.nodeclaim_for_provider_id("kwok://a") is None
    assert cluster.nodeclaim_for_provider_id("") is None


def test_state_nodes_join_by_provider_id() -> None:
    cluster = cluster_with("a")
    cluster.upsert_nodeclaim(nodeclaim("in-flight", node_name="", provider_id=""))
    joined = {(sn.name, sn.nodeclaim_name, sn.in_flight) for sn in cluster.state_nodes(NOW)}
    assert joined == {("a", "nc-a", False), ("in-flight", "in-flight", True)}


def test_without_moves_reschedulable_pods_and_drops_capacity() -> None:
    cluster = cluster_with("a", "b")
    cluster.upsert_pod(pod("web-1", node_name="a"))
    cluster.upsert_pod(pod("ds-1", node_name="a", owner="DaemonSet"))
    cluster.upsert_pod(pod("web-2", node_name="b"))
    cluster.upsert_pod(pod("waiting", pending=True))
    snap = cluster.snapshot(NOW)
    after = snap.without(["a"])
    assert [n.name for n in after.nodes] == ["b"]
    assert set(after.pods_by_node) == {"b"}
    assert [p.key for p in after.reschedulable] == ["default/web-1"]
    assert [p.key for p in after.pending] == ["default/waiting"]
    assert snap.without([]) is snap


def test_without_does_not_count_pods_of_deleting_nodes_twice() -> None:
    cluster = cluster_with("a", "b")
    cluster.upsert_pod(pod("web-1", node_name="a"))
    cluster.mark_for_deletion("nc-a")
    snap = cluster.snapshot(NOW)
    assert [p.key for p in snap.reschedulable] == ["default/web-1"]
    assert [p.key for p in snap.without(["a", "b"]).reschedulable] == ["default/web-1"]
