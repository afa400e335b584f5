"""``node.health``: what node repair writes for an unhealthy Node, and what it leaves alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.protocol import RepairPolicy
from karpenter_py.controllers.nodeclaim.health import NodeHealth, snake_case
from karpenter_py.controllers.runtime import Result
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import ServerError
from karpenter_py.kube.resources import NODECLAIMS, NODEPOOLS, NODES
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import node_from_dict
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.unit.fakes import FakeCloudProvider, FakeKube, deps, into_cluster
from tests.unit.obs.exposition import scrape, series, value

POLICIES = [
    RepairPolicy("Ready", "False", 30 * 60.0),
    RepairPolicy("Ready", "Unknown", 30 * 60.0),
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * 60.0),
]
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STAMP = "karpenter.sh/nodeclaim-termination-timestamp"


def ago(minutes: float) -> str:
    return (NOW - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def unhealthy(minutes: float, type_: str = "Ready", status: str = "False") -> list[dict[str, Any]]:
    """Conditions of a Node whose ``type_`` has been ``status`` for ``minutes``."""
    out = [factories.condition(type_, status, at=ago(minutes))]
    if type_ != "Ready":
        out.append(factories.condition("Ready", "True", at=ago(600)))
    return out


HEALTHY = [factories.condition("Ready", "True", at=ago(600))]


class World:
    """A cluster of NodePools, Nodes and their NodeClaims, in the API and in the state."""

    def __init__(self, *pools: str) -> None:
        self.cluster = Cluster()
        self.client = FakeKube(on_write=into_cluster(self.cluster))
        self.metrics = Metrics()
        self.clock = FakeClock(NOW)
        for pool in pools:
            np = factories.nodepool_dict(pool)
            self.client.put(NODEPOOLS, np)
            self.cluster.upsert_nodepool(NodePool.model_validate(np))
        self.controller = NodeHealth(
            deps(
                client=self.client,
                cluster=self.cluster,
                cloud=FakeCloudProvider(policies=POLICIES),
                clock=self.clock,
                metrics=self.metrics,
            )
        )

    def node(
        self,
        name: str,
        conditions: list[dict[str, Any]],
        *,
        pool: str = "default",
        claim: bool = True,
        **claim_fields: Any,
    ) -> None:
        labels = factories.node_labels(pool, "m5.large", capacity_type="spot") if pool else {}
        node = factories.node_dict(name, labels=labels, conditions=conditions)
        self.client.put(NODES, node)
        self.cluster.upsert_node(node_from_dict(node))
        if claim:
            nc = factories.nodeclaim_dict(
                f"nc-{name}", pool=pool, node_name=name, labels=labels, **claim_fields
            )
            nc["status"]["imageID"] = "ami-1"
            self.client.put(NODECLAIMS, nc)
            self.cluster.upsert_nodeclaim(NodeClaim.model_validate(nc))

    def writes(self) -> list[tuple[str, str, str, Any]]:
        """(verb, resource, name, body) of every write but events."""
        return [
            (c.verb, c.plural, c.name, c.body)
            for c in self.client.calls
            if c.verb in ("patch", "delete", "create", "update") and c.plural != "events"
        ]

    async def events(self) -> list[tuple[str, str, str, str]]:
        """(kind, name, reason, message) of the events published."""
        await self.controller.deps.recorder.flush()
        return [
            (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"], e["message"])
            for e in self.client.events
        ]


async def test_a_node_unhealthy_past_its_toleration_is_force_terminated() -> None:
    world = World("default")
    world.node("n1", unhealthy(31))
    world.node("n2", HEALTHY)

    assert await world.controller.reconcile("n1") is None

    assert world.writes() == [
        ("patch", "nodeclaims", "nc-n1", {"metadata": {"annotations": {STAMP: ago(0)}}}),
        ("delete", "nodeclaims", "nc-n1", None),
    ]
    assert world.client.calls_of("patch")[0].patch_type is PatchType.MERGE
    assert world.client.calls_of("delete")[0].uid == "nc-uid-nc-n1"
    samples = scrape(world.metrics)
    assert series(samples, "karpenter_nodeclaims_disrupted_total") == {
        frozenset(
            {"reason": "unhealthy", "nodepool": "default", "capacity_type": "spot"}.items()
        ): 1
    }
    assert series(samples, "karpenter_nodeclaims_unhealthy_disrupted_total") == {
        frozenset(
            {
                "condition": "ready",
                "nodepool": "default",
                "capacity_type": "spot",
                "image_id": "ami-1",
            }.items()
        ): 1
    }
    assert await world.events() == [
        (
            "NodeClaim",
            "nc-n1",
            "Disrupted",
            "Disrupting NodeClaim: Unhealthy (Ready=False since 2026-03-01T11:29:00Z, past its "
            "toleration)",
        )
    ]


async def test_a_pass_on_a_cache_that_has_not_seen_the_delete_yet_repairs_nothing_again() -> None:
    world = World("default")
    world.node("n1", unhealthy(31))
    stale = world.cluster.nodeclaims["nc-n1"]
    assert await world.controller.reconcile("n1") is None
    world.cluster.upsert_nodeclaim(stale)  # the watch has not delivered the delete yet

    assert await world.controller.reconcile("n1") is None

    assert [w[:3] for w in world.writes()] == [
        ("patch", "nodeclaims", "nc-n1"),
        ("delete", "nodeclaims", "nc-n1"),
    ]
    assert (
        value(
            scrape(world.metrics),
            "karpenter_nodeclaims_disrupted_total",
            reason="unhealthy",
            nodepool="default",
            capacity_type="spot",
        )
        == 1
    )


async def test_a_failed_delete_is_retried() -> None:
    world = World("default")
    world.node("n1", unhealthy(31))
    world.client.fail("delete", "nc-n1", ServerError(status=500, verb="delete", name="nc-n1"))

    with pytest.raises(ServerError):
        await world.controller.reconcile("n1")
    assert await world.controller.reconcile("n1") is None

    assert [w[:3] for w in world.writes()][-2:] == [
        ("delete", "nodeclaims", "nc-n1"),
        ("delete", "nodeclaims", "nc-n1"),
    ]
    assert world.client.stored(NODECLAIMS, "nc-n1")["metadata"]["deletionTimestamp"]


async def test_a_node_within_its_toleration_is_requeued_for_the_moment_it_runs_out() -> None:
    world = World("default")
    world.node("n1", unhealthy(9, "AcceleratedHardwareReady"))

    assert await world.controller.reconcile("n1") == Result(requeue_after=60.0)
    assert world.writes() == []


async def test_more_than_a_fifth_of_the_pool_unhealthy_blocks_repair_with_an_event() -> None:
    world = World("default", "other")
    world.node("n1", unhealthy(45))
    world.node("n2", unhealthy(5, status="Unknown"))  # within its toleration, still unhealthy
    for i in range(3, 6):
        world.node(f"n{i}", HEALTHY)
    for i in range(6):
        world.node(f"o{i}", HEALTHY, pool="other")  # other pools do not dilute the share

    assert await world.controller.reconcile("n1") == Result(requeue_after=300.0)
    assert world.writes() == []
    message = (
        "Node n1: Ready=False since 2026-03-01T11:15:00Z; repair blocked: 2 of 5 nodes in "
        'NodePool "default" are unhealthy, more than the 20% (1) node repair allows'
    )
    assert await world.events() == [
        ("Node", "n1", "NodeRepairBlocked", message),
        ("NodeClaim", "nc-n1", "NodeRepairBlocked", message),
        ("NodePool", "default", "NodeRepairBlocked", message),
    ]
    assert {e["type"] for e in world.client.events} == {"Warning"}

    # Retried five minutes later: still blocked, and the events stay de-duplicated for 15.
    world.clock.step(300)
    assert await world.controller.reconcile("n1") == Result(requeue_after=300.0)
    assert len(await world.events()) == 3
    assert world.writes() == []


async def test_a_nodeclaim_without_a_pool_counts_the_whole_cluster() -> None:
    world = World("default")
    world.node("n1", unhealthy(31), pool="")
    world.node("n2", unhealthy(31), claim=False)  # not Karpenter's: counted, never repaired
    for i in range(3, 6):
        world.node(f"n{i}", HEALTHY)

    assert await world.controller.reconcile("n2") is None
    assert await world.controller.reconcile("n1") == Result(requeue_after=300.0)
    assert world.writes() == []
    message = (
        "Node n1: Ready=False since 2026-03-01T11:29:00Z; repair blocked: 2 of 5 nodes in the "
        "cluster (the NodeClaim has no NodePool) are unhealthy, more than the 20% (1) node "
        "repair allows"
    )
    assert await world.events() == [
        ("Node", "n1", "NodeRepairBlocked", message),
        ("NodeClaim", "nc-n1", "NodeRepairBlocked", message),
    ]

    world.node("n6", HEALTHY)  # 2 of 6: within 20% rounded up
    assert await world.controller.reconcile("n1") is None
    assert [w[:3] for w in world.writes()] == [
        ("patch", "nodeclaims", "nc-n1"),
        ("delete", "nodeclaims", "nc-n1"),
    ]


async def test_a_deleting_nodeclaim_only_gets_its_deadline_moved_to_now() -> None:
    world = World("default")
    world.node("n1", unhealthy(31), deleting=ago(1), annotations={STAMP: ago(-60)})

    assert await world.controller.reconcile("n1") is None

    assert world.writes() == [
        ("patch", "nodeclaims", "nc-n1", {"metadata": {"annotations": {STAMP: ago(0)}}}),
    ]
    assert value(scrape(world.metrics), "karpenter_nodeclaims_disrupted_total") is None


async def test_an_earlier_deadline_is_kept() -> None:
    world = World("default")
    world.node("n1", unhealthy(31), annotations={STAMP: ago(2)})

    assert await world.controller.reconcile("n1") is None

    assert world.writes() == [("delete", "nodeclaims", "nc-n1", None)]


async def test_healthy_unknown_and_unmanaged_nodes_are_left_alone() -> None:
    world = World("default")
    world.node("healthy", HEALTHY)
    world.node("foreign", unhealthy(31), claim=False)

    assert await world.controller.reconcile("healthy") is None
    assert await world.controller.reconcile("foreign") is None
    assert await world.controller.reconcile("gone") is None
    assert world.writes() == []
    assert await world.events() == []


def test_only_unhealthy_nodes_are_queued() -> None:
    world = World("default")
    world.node("healthy", HEALTHY)
    world.node("sick", unhealthy(1))

    world.controller.on_node(world.client.stored(NODES, "healthy"))
    world.controller.on_node(world.client.stored(NODES, "sick"))
    world.controller.on_node({"metadata": {"name": "unknown"}})

    assert len(world.controller.queue) == 1


def test_the_report_says_why_each_unhealthy_node_is_or_is_not_repaired() -> None:
    world = World("default")
    world.node("due", unhealthy(31))
    world.node("waiting", unhealthy(3, "AcceleratedHardwareReady"))
    world.node("foreign", unhealthy(31), pool="", claim=False)
    for i in range(7):
        world.node(f"ok{i}", HEALTHY)

    assert world.controller.report() == {
        "policies": [
            {"condition": "Ready=False", "tolerationSeconds": 1800.0},
            {"condition": "Ready=Unknown", "tolerationSeconds": 1800.0},
            {"condition": "AcceleratedHardwareReady=False", "tolerationSeconds": 600.0},
        ],
        "nodes": {
            "due": {
                "action": "repair",
                "reason": "Ready=False since 2026-03-01T11:29:00Z, past its toleration of 30m",
                "condition": "Ready=False",
                "repairAt": "2026-03-01T11:59:00Z",
                "unhealthy": {"count": 2, "of": 9, "allowed": 2},
                "nodeclaim": "nc-due",
            },
            "foreign": {"action": "none", "reason": "no NodeClaim: not Karpenter's"},
            "waiting": {
                "action": "wait",
                "reason": "AcceleratedHardwareReady=False since 2026-03-01T11:57:00Z; repair "
                "at 2026-03-01T12:07:00Z (toleration 10m)",
                "condition": "AcceleratedHardwareReady=False",
                "repairAt": "2026-03-01T12:07:00Z",
                "nodeclaim": "nc-waiting",
            },
        },
    }


def test_condition_labels_are_snake_case() -> None:
    assert [snake_case(t) for t in ("Ready", "AcceleratedHardwareReady", "KernelReady")] == [
        "ready",
        "accelerated_hardware_ready",
        "kernel_ready",
    ]
