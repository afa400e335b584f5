"""``ExistingMemo``: an unchanged node gives back the same ExistingNode round after round; any
change to what it is derived from gives a fresh one equal to ``existing_node``'s."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from karpenter_py.scheduling.fromstate import ExistingMemo, existing_node
from karpenter_py.scheduling.inputs import ExistingNode
from karpenter_py.state.cluster import Cluster
from tests.factories import daemonset_pod, node, nodeclaim, pod

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)


def cluster() -> Cluster:
    c = Cluster()
    c.upsert_node(node("n1"))
    c.upsert_nodeclaim(nodeclaim("nc-1", node_name="n1"))
    c.upsert_pod(pod("a", node_name="n1"))
    c.upsert_daemonset("kube-system/ds", daemonset_pod("ds", cpu="100m"))
    return c


def fields(ex: ExistingNode) -> tuple[object, ...]:
    # Node and Pod compare by identity: compare what they hold.
    return (
        repr(ex.node),
        repr(ex.pods),
        ex.node_pool,
        ex.initialized,
        ex.in_flight,
        ex.marked_for_deletion,
    )


def built(memo: ExistingMemo, c: Cluster) -> ExistingNode:
    snap = c.snapshot(NOW)
    [sn] = snap.nodes
    return memo.existing_node(sn, snap.pods_by_node[sn.name], snap.daemonsets)


def test_an_unchanged_node_is_the_same_object() -> None:
    c, memo = cluster(), ExistingMemo()
    assert built(memo, c) is built(memo, c)


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.upsert_pod(pod("b", node_name="n1")),
        lambda c: c.delete_pod("default/a"),
        lambda c: c.upsert_node(node("n1", labels={"team": "x"})),
        lambda c: c.upsert_nodeclaim(nodeclaim("nc-1", node_name="n1", labels={"t": "y"})),
        lambda c: c.mark_for_deletion("nc-1"),
        lambda c: c.upsert_daemonset("kube-system/ds2", daemonset_pod("ds2", cpu="200m")),
    ],
)
def test_any_change_builds_afresh(change: object) -> None:
    c, memo = cluster(), ExistingMemo()
    before = built(memo, c)
    change(c)  # type: ignore[operator]
    after = built(memo, c)
    assert after is not before
    snap = c.snapshot(NOW)
    [sn] = snap.nodes
    fresh = existing_node(sn, snap.pods_by_node[sn.name], snap.daemonsets)
    assert fields(after) == fields(fresh)


def many() -> Cluster:
    c = Cluster()
    for n in ("n1", "n2", "n3"):
        c.upsert_node(node(n))
        c.upsert_pod(pod(f"p-{n}", node_name=n))
    c.upsert_daemonset("kube-system/ds", daemonset_pod("ds", cpu="100m"))
    return c


def all_fresh(c: Cluster) -> list[tuple[object, ...]]:
    snap = c.snapshot(NOW)
    return [
        fields(existing_node(sn, snap.pods_by_node[sn.name], snap.daemonsets)) for sn in snap.nodes
    ]


@pytest.mark.parametrize(
    ("change", "rebuilt"),
    [
        (lambda c: None, []),
        (lambda c: c.upsert_pod(pod("b", node_name="n2")), [1]),
        (lambda c: c.delete_pod("default/p-n3"), [2]),
        (lambda c: c.upsert_node(node("n1", labels={"team": "x"})), [0]),  # nodes joined again
        (lambda c: c.upsert_daemonset("kube-system/d2", daemonset_pod("d2")), [0, 1, 2]),
    ],
)
def test_the_existing_tuple_is_rebuilt_where_something_changed(
    change: object, rebuilt: list[int]
) -> None:
    c, memo = many(), ExistingMemo()
    before = memo.existing(c.snapshot(NOW))
    change(c)  # type: ignore[operator]
    after = memo.existing(c.snapshot(NOW))
    assert (after is before) is (not rebuilt)
    assert [k for k in range(3) if after[k] is not before[k]] == rebuilt
    assert [fields(ex) for ex in after] == all_fresh(c)
