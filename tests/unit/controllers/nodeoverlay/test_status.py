"""The nodeoverlay controller writes each overlay's ValidationSucceeded and Ready from the same
resolution the decisions apply: applied, Conflict, RuntimeValidation; nothing when unchanged."""

from __future__ import annotations

from typing import Any

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.nodeoverlay import RESYNC_SECONDS, NodeOverlayStatus
from karpenter_py.controllers.runtime import Result
from karpenter_py.kube.resources import NODEOVERLAYS
from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import NodeOverlaySink
from tests import factories
from tests.unit.fakes import FakeCloudProvider, FakeKube, deps
from tests.unit.scheduling._helpers import itype

T = "2026-01-01T00:00:00Z"  # FakeClock's start


def _conditions(client: FakeKube, name: str) -> list[tuple[str, str, str, str]]:
    stored: dict[str, Any] = client.stored(NODEOVERLAYS, name)
    return [
        (c["type"], c["status"], c["reason"], c["message"])
        for c in stored.get("status", {}).get("conditions", [])
    ]


async def test_conditions_follow_the_resolution() -> None:
    overlays = [
        factories.nodeoverlay_dict("a", weight=10, price="4"),
        factories.nodeoverlay_dict("b", weight=10, price="5"),
        factories.nodeoverlay_dict("c", weight=1, capacity={"example.com/fuse": 1}),
        factories.nodeoverlay_dict(
            "bad",
            requirements=[{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n"]}],
            price="1",
        ),
    ]
    client = FakeKube(*((NODEOVERLAYS, o) for o in overlays))
    cluster = Cluster()
    cluster.upsert_nodepool(factories.nodepool())
    cluster.upsert_nodeclass(factories.KWOK_NODECLASS_KEY, True)
    for o in overlays:
        cluster.upsert_overlay(NodeOverlay.model_validate(o))
    cloud = FakeCloudProvider(instance_types=[itype("small", 2, 4)])
    ctrl = NodeOverlayStatus(deps(client=client, cluster=cluster, cloud=cloud, clock=FakeClock()))

    result = await ctrl.reconcile("nodeoverlays")

    assert result == Result(requeue_after=RESYNC_SECONDS)
    applied = [
        ("ValidationSucceeded", "True", "ValidationSucceeded", ""),
        ("Ready", "True", "Ready", ""),
    ]
    assert _conditions(client, "b") == applied
    assert _conditions(client, "c") == applied
    assert _conditions(client, "a") == [
        ("ValidationSucceeded", "False", "Conflict", "conflict with another overlay"),
        ("Ready", "False", "UnhealthyDependents", "ValidationSucceeded=False"),
    ]
    assert _conditions(client, "bad") == [
        (
            "ValidationSucceeded",
            "False",
            "RuntimeValidation",
            'requirements: label "kubernetes.io/hostname" is restricted: every node gets its '
            "own hostname",
        ),
        ("Ready", "False", "UnhealthyDependents", "ValidationSucceeded=False"),
    ]
    patches = [(c.name, c.subresource) for c in client.calls_of("patch")]
    assert sorted(patches) == [("a", "status"), ("b", "status"), ("bad", "status"), ("c", "status")]

    # The cache now holds what was written: the next pass writes nothing.
    for o in overlays:
        cluster.upsert_overlay(
            NodeOverlay.model_validate(client.stored(NODEOVERLAYS, o["metadata"]["name"]))
        )
    client.calls.clear()
    await ctrl.reconcile("nodeoverlays")
    assert client.calls_of("patch") == []


async def test_an_unreadable_overlay_gets_validation_failed_and_one_warning_event() -> None:
    good = factories.nodeoverlay_dict("good", weight=10, price="4")
    broken = factories.nodeoverlay_dict("broken", weight=-5, price="4")
    broken["metadata"]["uid"] = "ov-uid"
    client = FakeKube((NODEOVERLAYS, good), (NODEOVERLAYS, broken))
    cluster = Cluster()
    cluster.upsert_nodepool(factories.nodepool())
    cluster.upsert_nodeclass(factories.KWOK_NODECLASS_KEY, True)
    sink = NodeOverlaySink(cluster)  # as the informer delivers them: "broken" is set aside
    sink.upsert(good)
    sink.upsert(broken)
    cloud = FakeCloudProvider(instance_types=[itype("small", 2, 4)])
    ctrl = NodeOverlayStatus(deps(client=client, cluster=cluster, cloud=cloud, clock=FakeClock()))

    await ctrl.reconcile("nodeoverlays")

    error = "spec.weight: Input should be greater than or equal to 1"
    assert _conditions(client, "broken") == [
        ("ValidationSucceeded", "False", "RuntimeValidation", error),
        ("Ready", "False", "UnhealthyDependents", "ValidationSucceeded=False"),
    ]
    assert _conditions(client, "good")[0] == (
        "ValidationSucceeded",
        "True",
        "ValidationSucceeded",
        "",
    )
    await ctrl.deps.recorder.flush()
    events = [
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["involvedObject"]["uid"])
        for e in client.events
    ]
    assert events == [("NodeOverlay", "broken", "ov-uid")]
    assert [(e["type"], e["reason"], e["message"]) for e in client.events] == [
        ("Warning", "RuntimeValidation", error)
    ]

    # Reported once: with the cache caught up, the next pass writes and publishes nothing.
    for name in ("good", "broken"):
        sink.upsert(client.stored(NODEOVERLAYS, name))
    client.calls.clear()
    await ctrl.reconcile("nodeoverlays")
    await ctrl.deps.recorder.flush()
    assert client.calls_of("patch") == []
    assert len(client.events) == 1
