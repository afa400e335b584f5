"""Where the last round planned each pending pod (``Cluster.pod_plans``), when a plan ends, and
how a written nomination counts in the snapshot."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from karpenter_py.state.cluster import Cluster
from karpenter_py.state.podplans import PodPlans
from karpenter_py.state.snapshot import Snapshot
from tests.factories import node, nodeclaim, pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_plan_moves_and_each_target_lists_its_pods() -> None:
    plans = PodPlans()
    plans.plan("ns/a", "nc1")
    plans.plan("ns/b", "nc1")
    plans.plan("ns/c", "nc2")
    plans.plan("ns/a", "nc2")  # a later round planned it elsewhere

    assert plans.target("ns/a") == "nc2"
    assert plans.pods_for("nc1") == ("ns/b",)
    assert plans.pods_for("nc2") == ("ns/a", "ns/c")
    assert plans.forget_target("nc2") == ("ns/a", "ns/c")
    assert plans.target("ns/c") is None
    assert plans.pods_for("nc2") == ()
    plans.forget_pod("ns/b")
    assert len(plans) == 0
    assert plans.pods_for("nc1") == ()


def cluster_with_plans() -> Cluster:
    """nc1 in flight (no Node yet); nc2 joined to Node ip-2 by provider ID; n3 a plain Node."""
    c = Cluster()
    c.upsert_nodeclaim(nodeclaim("nc1", provider_id="fake://i-1"))
    c.upsert_nodeclaim(nodeclaim("nc2", provider_id="fake://i-2"))
    c.upsert_node(node("ip-2", provider_id="fake://i-2"))
    c.upsert_node(node("n3", provider_id="fake://i-3"))
    for name, target in (("a", "nc1"), ("b", "nc2"), ("c", "n3"), ("d", "gone")):
        c.upsert_pod(pod(name, pending=True))
        c.pod_plans.plan(f"default/{name}", target)
    return c


@pytest.mark.parametrize(
    ("pod_name", "node_name"),
    [
        ("a", ""),  # its NodeClaim has no Node yet
        ("b", "ip-2"),  # the Node joined to its NodeClaim by provider ID
        ("c", "n3"),  # planned onto a node by the node's name
        ("d", ""),  # a target that exists nowhere
        ("e", ""),  # no plan
    ],
)
def test_a_plan_resolves_to_a_node_once_that_node_exists(pod_name: str, node_name: str) -> None:
    assert cluster_with_plans().planned_node(f"default/{pod_name}") == node_name


def test_the_node_of_a_claim_also_resolves_through_status_node_name() -> None:
    c = Cluster()
    c.upsert_nodeclaim(nodeclaim("nc1", provider_id="fake://i-1", node_name="ip-1"))
    c.upsert_node(node("ip-1", provider_id=""))  # the Node without a provider ID yet
    c.upsert_pod(pod("a", pending=True))
    c.pod_plans.plan("default/a", "nc1")

    assert c.planned_node("default/a") == "ip-1"


def test_pods_planned_on_a_node_include_those_planned_on_its_claim() -> None:
    c = cluster_with_plans()
    c.upsert_pod(pod("f", pending=True))
    c.pod_plans.plan("default/f", "ip-2")  # a later round placed it on the registered node

    assert c.pods_planned_on("ip-2") == ("default/b", "default/f")
    assert c.pods_planned_on("n3") == ("default/c",)
    assert c.pods_planned_on("nowhere") == ()


@pytest.mark.parametrize(
    ("change", "left"),
    [
        (lambda c: c.upsert_pod(pod("b", node_name="ip-2")), ("a", "c", "d")),  # bound
        (lambda c: c.upsert_pod(pod("b", phase="Failed")), ("a", "c", "d")),  # ended
        (lambda c: c.upsert_pod(pod("b", pending=True, deleting="t")), ("a", "c", "d")),
        (lambda c: c.delete_pod("default/b"), ("a", "c", "d")),
        (lambda c: c.delete_nodeclaim("nc1"), ("b", "c", "d")),  # launch failed, say
        (lambda c: c.delete_node("n3"), ("a", "b", "d")),
        (lambda c: c.upsert_pod(pod("b", pending=True)), ("a", "b", "c", "d")),  # still pending
    ],
)
def test_a_plan_ends_with_its_pod_pending_life_or_its_target(
    change: Callable[[Cluster], None], left: tuple[str, ...]
) -> None:
    c = cluster_with_plans()
    change(c)

    assert tuple(k for k in ("a", "b", "c", "d") if c.pod_plans.target(f"default/{k}")) == left


def test_pending_pods_count_on_the_node_they_are_nominated_to() -> None:
    c = Cluster()
    c.upsert_node(node("n1", provider_id="fake://n1"))
    c.upsert_node(node("n2", provider_id="fake://n2"))
    c.upsert_pod(pod("bound", node_name="n1"))
    c.upsert_pod(pod("waits", pending=True, nominated="n1"))
    first = c.snapshot(NOW)

    c.upsert_pod(pod("waits", pending=True, nominated="n2"))  # the nomination moved
    moved = c.snapshot(NOW)
    c.upsert_pod(pod("waits", node_name="n1"))  # bound after all, elsewhere than nominated
    bound = c.snapshot(NOW)

    def names(snapshot: Snapshot) -> dict[str, list[str]]:
        return {n: [p.name for p in pods] for n, pods in sorted(snapshot.pods_by_node.items())}

    assert names(first) == {"n1": ["bound", "waits"], "n2": []}
    assert names(moved) == {"n1": ["bound"], "n2": ["waits"]}
    assert names(bound) == {"n1": ["bound", "waits"], "n2": []}
    # Draining a node never sees a pod that merely waits for it.
    c.upsert_pod(pod("late", pending=True, nominated="n2"))
    assert [p.name for p in c.pods_on("n2")] == []
    assert first.pending == moved.pending == ()  # nominated pods are not provisionable


def test_a_node_seen_before_its_claims_launch_status_is_joined_to_it_by_name() -> None:
    c = Cluster()
    c.upsert_nodeclaim(nodeclaim("nc1", launched=False))  # no provider ID in the cache yet
    c.upsert_node(  # a kwok Node, named after its claim, carrying its NodePool
        node("nc1", provider_id="kwok://nc1", labels={"karpenter.sh/nodepool": "default"})
    )
    c.upsert_node(node("nc2", provider_id="kwok://nc2"))  # no NodePool: not the claim's
    c.upsert_nodeclaim(nodeclaim("nc2", launched=False))

    joined = {sn.name: sn.nodeclaim_name for sn in c.state_nodes(NOW) if sn.node is not None}

    assert joined == {"nc1": "nc1", "nc2": ""}
