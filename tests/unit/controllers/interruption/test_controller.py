"""The interruption worker with a fake queue and API: what each message kind does to NodeClaims,
offerings, events, metrics and the queue, and how failures are contained."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from karpenter_py.aio.backoff import Backoff
from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.aws.messages import QueueMessage
from karpenter_py.controllers.interruption import Interruption, Outcome
from karpenter_py.controllers.interruption.controller import instance_id_of
from karpenter_py.kube.errors import ServerError
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.launcher.launch import UnavailableOfferings
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import KINDS, Cluster
from tests import factories
from tests.unit.cloudprovider.aws import interruption_samples as s
from tests.unit.fakes import FakeKube, deps, wire

ZONE = "us-west-2a"


# ----------------------------------------------------------------------------- fakes


@dataclass
class FakeQueue:
    batches: list[list[QueueMessage] | Exception] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    fail_delete: set[str] = field(default_factory=set)
    receives: int = 0

    async def receive(self) -> list[QueueMessage]:
        self.receives += 1
        if not self.batches:
            await asyncio.Event().wait()  # an idle long poll
        item = self.batches.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    async def delete(self, msg: QueueMessage) -> None:
        if msg.id in self.fail_delete:
            raise RuntimeError("AccessDenied")
        self.deleted.append(msg.id)


@dataclass
class World:
    clock: FakeClock
    cluster: Cluster
    queue: FakeQueue
    client: FakeKube
    unavailable: UnavailableOfferings
    recorder: EventRecorder
    metrics: Metrics
    worker: Interruption

    async def events(self) -> set[tuple[str, str, str]]:
        """(kind, name, reason) of every event recorded so far."""
        await self.recorder.flush()
        return {
            (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
            for e in self.client.events
        }

    def deleted(self) -> list[tuple[str, str | None]]:
        """(name, uid precondition) of the NodeClaims the API deleted."""
        return [(c.name, c.uid) for c in self.client.calls_of("delete", NODECLAIMS, ok=True)]

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        value = self.metrics.registry.get_sample_value(name, labels or {})
        return 0.0 if value is None else value


def claim(name: str, instance_id: str, *, capacity_type: str = "spot", **meta: Any) -> NodeClaim:
    nc = factories.nodeclaim(
        name,
        provider_id=f"aws:///{ZONE}/{instance_id}",
        labels={
            LABEL_INSTANCE_TYPE: "m5.large",
            LABEL_TOPOLOGY_ZONE: ZONE,
            LABEL_CAPACITY_TYPE: capacity_type,
        },
    )
    if not meta:
        return nc
    raw = nc.model_dump(by_alias=True, mode="json", exclude_none=True)
    raw["metadata"].update(meta)
    return NodeClaim.model_validate(raw)


def world(*, replace_on_rebalance: bool = False, synced: bool = True) -> World:
    clock = FakeClock()
    cluster = Cluster()
    if synced:
        for kind in KINDS:
            cluster.mark_synced(kind)
    # nc-a runs on a Node, nc-b is still registering, nc-c is already being deleted.
    claims = (
        claim("nc-a", "i-0aaa"),
        claim("nc-b", "i-0bbb", capacity_type="on-demand"),
        claim("nc-c", "i-0ccc", deletionTimestamp=factories.T0),
        claim("nc-r", "i-0rrr", capacity_type="reserved"),
    )
    for nc in claims:
        cluster.upsert_nodeclaim(nc)
    cluster.upsert_node(factories.node("node-a", provider_id=f"aws:///{ZONE}/i-0aaa"))
    queue = FakeQueue()
    client = FakeKube(*((NODECLAIMS, wire(nc)) for nc in claims))
    unavailable = UnavailableOfferings(clock=clock)
    recorder = EventRecorder(client, clock=clock)
    metrics = Metrics()
    worker = Interruption(
        deps(client=client, cluster=cluster, recorder=recorder, clock=clock, metrics=metrics),
        queue,
        unavailable,
        replace_on_rebalance=replace_on_rebalance,
        backoff=Backoff(initial=1.0, maximum=4.0, jitter=0.0),
    )
    return World(clock, cluster, queue, client, unavailable, recorder, metrics, worker)


def qmsg(
    body: Any, *, msg_id: str = "m1", sent_ago: float | None = None, clock: FakeClock | None = None
) -> QueueMessage:
    text = body if isinstance(body, str) else json.dumps(body)
    sent_at = None
    if sent_ago is not None:
        assert clock is not None
        sent_at = clock.now() - timedelta(seconds=sent_ago)
    return QueueMessage(id=msg_id, receipt_handle=f"rh-{msg_id}", body=text, sent_at=sent_at)


NC_A_EVENTS = {("NodeClaim", "nc-a"), ("Node", "node-a")}


def on(objects: set[tuple[str, str]], *reasons: str) -> set[tuple[str, str, str]]:
    return {(k, n, r) for k, n in objects for r in reasons}


# ----------------------------------------------------------------------------- per kind


@pytest.mark.parametrize(
    ("body", "replace", "deleted", "unavailable", "events", "kind"),
    [
        (
            s.spot("i-0aaa"),
            False,
            [("nc-a", "nc-uid-nc-a")],
            {("m5.large", ZONE, "spot")},
            on(NC_A_EVENTS, "SpotInterrupted", "TerminatingOnInterruption"),
            "spot_interrupted",
        ),
        (
            s.rebalance("i-0aaa"),
            False,
            [],
            set(),
            on(NC_A_EVENTS, "SpotRebalanceRecommendation"),
            "rebalance_recommendation",
        ),
        (
            s.rebalance("i-0aaa"),
            True,
            [("nc-a", "nc-uid-nc-a")],
            set(),
            on(NC_A_EVENTS, "SpotRebalanceRecommendation", "TerminatingOnInterruption"),
            "rebalance_recommendation",
        ),
        (
            s.state_change("i-0aaa", "stopping"),
            False,
            [("nc-a", "nc-uid-nc-a")],
            set(),
            on(NC_A_EVENTS, "InstanceStopping", "TerminatingOnInterruption"),
            "instance_stopped",
        ),
        (
            s.state_change("i-0aaa", "stopped"),
            False,
            [("nc-a", "nc-uid-nc-a")],
            set(),
            on(NC_A_EVENTS, "InstanceStopping", "TerminatingOnInterruption"),
            "instance_stopped",
        ),
        (
            s.state_change("i-0bbb", "shutting-down"),
            False,
            [("nc-b", "nc-uid-nc-b")],
            set(),
            on({("NodeClaim", "nc-b")}, "InstanceTerminating", "TerminatingOnInterruption"),
            "instance_terminated",
        ),
        (
            s.state_change("i-0aaa", "terminated"),
            False,
            [("nc-a", "nc-uid-nc-a")],
            set(),
            on(NC_A_EVENTS, "InstanceTerminating", "TerminatingOnInterruption"),
            "instance_terminated",
        ),
        (s.state_change("i-0aaa", "running"), False, [], set(), set(), "no_op"),
        (
            s.scheduled_change("i-0aaa", "i-0bbb", "i-0zzz"),
            False,
            [("nc-a", "nc-uid-nc-a"), ("nc-b", "nc-uid-nc-b")],
            set(),
            on(
                NC_A_EVENTS | {("NodeClaim", "nc-b")},
                "InstanceUnhealthy",
                "TerminatingOnInterruption",
            ),
            "scheduled_change",
        ),
        (s.scheduled_change("i-0aaa", service="RDS"), False, [], set(), set(), "no_op"),
        (
            s.capacity_reservation("i-0rrr"),
            False,
            [("nc-r", "nc-uid-nc-r")],
            {("m5.large", ZONE, "reserved")},
            on(
                {("NodeClaim", "nc-r")},
                "CapacityReservationInstanceInterrupted",
                "TerminatingOnInterruption",
            ),
            "capacity_reservation_interrupted",
        ),
        # Already deleting: the event is still recorded (and the offering marked), no delete.
        (
            s.spot("i-0ccc"),
            False,
            [],
            {("m5.large", ZONE, "spot")},
            on({("NodeClaim", "nc-c")}, "SpotInterrupted"),
            "spot_interrupted",
        ),
        # Not ours: handled and deleted, nothing else.
        (s.spot("i-0unknown"), False, [], set(), set(), "spot_interrupted"),
    ],
)
async def test_message_kinds(
    body: dict[str, Any],
    replace: bool,
    deleted: list[tuple[str, str]],
    unavailable: set[tuple[str, str, str]],
    events: set[tuple[str, str, str]],
    kind: str,
) -> None:
    w = world(replace_on_rebalance=replace)
    msg = qmsg(body, sent_ago=7.5, clock=w.clock)
    assert await w.worker.handle(msg) == Outcome.HANDLED
    assert w.deleted() == deleted
    assert set(w.unavailable.entries()) == unavailable
    assert await w.events() == events
    assert w.queue.deleted == ["m1"]
    received = "karpenter_interruption_received_messages_total"
    assert w.sample(received, {"message_type": kind}) == 1.0
    assert w.sample("karpenter_interruption_deleted_messages_total") == 1.0
    assert w.sample("karpenter_interruption_message_queue_duration_seconds_sum") == 7.5
    disrupted = sum(
        w.sample(
            "karpenter_nodeclaims_disrupted_total",
            {"reason": kind, "nodepool": "default", "capacity_type": ct},
        )
        for ct in ("spot", "on-demand", "reserved")
    )
    assert disrupted == len(deleted)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "not JSON: Expecting value: line 1 column 1 (char 0)"),
        (json.dumps({**s.spot("i-0aaa"), "version": "2"}), "version is '2', want \"0\""),
        (
            json.dumps({**s.spot("i-0aaa"), "source": "aws.health"}),
            "detail-type 'EC2 Spot "
            "Instance Interruption Warning' comes from 'aws.ec2', not 'aws.health'",
        ),
        # Once an OverflowError out of the parser: left on the queue, received forever.
        (
            json.dumps({**s.spot("i-0aaa"), "time": "9999-12-31T23:59:59+14:00"}),
            "message.time '9999-12-31T23:59:59+14:00' is out of range",
        ),
    ],
)
async def test_unparseable_messages_are_deleted_untouched(
    text: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    w = world()
    with caplog.at_level("WARNING", logger="karpenter.interruption"):
        assert await w.worker.handle(qmsg(text, msg_id="bad")) == Outcome.UNPARSEABLE
    assert w.queue.deleted == ["bad"]
    assert w.deleted() == []
    assert await w.events() == set()
    record = next(
        r for r in caplog.records if r.msg == "deleting an unparseable interruption message"
    )
    assert (record.__dict__["message_id"], record.__dict__["reason"]) == ("bad", reason)
    assert w.sample("karpenter_interruption_deleted_messages_total") == 1.0
    assert w.sample("karpenter_interruption_message_queue_duration_seconds_count") == 0.0


# ----------------------------------------------------------------------------- failures


async def test_failed_delete_leaves_the_message_for_a_retry() -> None:
    w = world()
    w.client.fail("delete", "nc-a", ServerError(status=500, verb="delete", name="nc-a"))
    assert await w.worker.handle(qmsg(s.spot("i-0aaa"))) == Outcome.FAILED
    assert w.queue.deleted == []
    assert w.sample("karpenter_interruption_deleted_messages_total") == 0.0
    # The offering was still marked: that signal does not depend on the delete.
    assert set(w.unavailable.entries()) == {("m5.large", ZONE, "spot")}


async def test_one_failing_instance_does_not_stop_the_others() -> None:
    w = world()
    w.client.fail("delete", "nc-a", ServerError(status=500, verb="delete", name="nc-a"))
    outcome = await w.worker.handle(qmsg(s.scheduled_change("i-0aaa", "i-0bbb")))
    assert outcome == Outcome.FAILED
    assert w.deleted() == [("nc-b", "nc-uid-nc-b")]
    assert w.queue.deleted == []


async def test_a_nodeclaim_already_gone_counts_as_handled() -> None:
    w = world()
    w.client.remove(NODECLAIMS, "nc-a")
    assert await w.worker.handle(qmsg(s.spot("i-0aaa"))) == Outcome.HANDLED
    assert w.queue.deleted == ["m1"]
    assert await w.events() == on(NC_A_EVENTS, "SpotInterrupted")


async def test_queue_delete_failure_is_contained() -> None:
    w = world()
    w.queue.fail_delete.add("m1")
    assert await w.worker.handle(qmsg(s.rebalance("i-0aaa"))) == Outcome.DELETE_FAILED
    assert w.sample("karpenter_interruption_deleted_messages_total") == 0.0


async def test_receive_errors_back_off_then_reset() -> None:
    w = world()
    w.queue.batches = [
        RuntimeError("throttled"),
        RuntimeError("throttled"),
        [qmsg(s.rebalance("i-0aaa"))],
        RuntimeError("throttled"),
    ]
    delays = []
    for _ in range(4):
        task = asyncio.create_task(w.worker.poll_once())
        for _ in range(5):
            await asyncio.sleep(0)
        if w.clock.sleepers:
            delays.append(w.worker.backoff.attempts)
            w.clock.step(10)
        await task
    # attempts 1 and 2 backed off; the success reset; the next failure starts over at 1
    assert delays == [1, 2, 1]
    assert w.queue.deleted == ["m1"]
    assert w.worker.outcomes[Outcome.HANDLED] == 1


async def test_backoff_delays_grow_to_the_cap() -> None:
    w = world()
    w.queue.batches = [RuntimeError("x")] * 4
    waited = []
    for _ in range(4):
        task = asyncio.create_task(w.worker.poll_once())
        for _ in range(5):
            await asyncio.sleep(0)
        t0 = w.clock.monotonic()
        while w.clock.sleepers:
            w.clock.step(0.5)
            await asyncio.sleep(0)
        waited.append(w.clock.monotonic() - t0)
        await task
    assert waited == [1.0, 2.0, 4.0, 4.0]


# ----------------------------------------------------------------------------- batches and loop


async def test_a_batch_is_handled_in_parallel() -> None:
    w = world()
    w.client.gate = asyncio.Event()
    batch = [qmsg(s.state_change("i-0aaa", "terminated"), msg_id=f"m{i}") for i in range(10)]
    task = asyncio.create_task(w.worker.handle_batch(batch))
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(w.client.calls_of("delete")) == 10  # all ten are in their API call at once
    w.client.gate.set()
    assert await task == [Outcome.HANDLED] * 10
    assert sorted(w.queue.deleted) == sorted(f"m{i}" for i in range(10))


async def test_a_crashing_handler_does_not_take_the_batch_down() -> None:
    w = world()

    async def boom(msg: QueueMessage) -> Outcome:
        if msg.id == "m0":
            raise KeyError("bug")
        return Outcome.HANDLED

    w.worker.handle = boom  # type: ignore[method-assign]
    batch = [qmsg("{}", msg_id=f"m{i}") for i in range(3)]
    assert await w.worker.handle_batch(batch) == [Outcome.FAILED, Outcome.HANDLED, Outcome.HANDLED]


async def test_run_waits_for_the_cluster_to_sync() -> None:
    w = world(synced=False)
    w.queue.batches = [[qmsg(s.spot("i-0aaa"))]]
    task = asyncio.create_task(w.worker.run())
    await asyncio.sleep(0.25)
    assert w.queue.receives == 0
    for kind in KINDS:
        w.cluster.mark_synced(kind)
    await asyncio.sleep(0.25)
    assert w.queue.receives == 2  # the batch, then an idle long poll
    assert w.queue.deleted == ["m1"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_index_follows_the_cluster() -> None:
    w = world()
    assert await w.worker.handle(qmsg(s.spot("i-0new"))) == Outcome.HANDLED
    assert w.deleted() == []
    w.cluster.upsert_nodeclaim(claim("nc-new", "i-0new"))
    w.client.put(NODECLAIMS, wire(claim("nc-new", "i-0new")))
    assert await w.worker.handle(qmsg(s.spot("i-0new"), msg_id="m2")) == Outcome.HANDLED
    assert w.deleted() == [("nc-new", "nc-uid-nc-new")]
    w.cluster.delete_nodeclaim("nc-new")
    assert w.worker.index.nodeclaims("i-0new") == []


@pytest.mark.parametrize(
    ("provider_id", "instance_id"),
    [
        ("aws:///us-west-2a/i-0abc", "i-0abc"),
        ("aws:///us-west-2a/i-0abc/", "i-0abc"),
        ("kwok://node-1", "node-1"),
        ("", ""),
    ],
)
def test_instance_id_of(provider_id: str, instance_id: str) -> None:
    assert instance_id_of(provider_id) == instance_id
