"""The interruption worker against moto's SQS over HTTP: 10,000 fuzzed messages, each deleted
(unparseable, or handled) or left on the queue (handling failed) exactly as the rules say, and
the worker keeps running throughout."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterator

import pytest

from karpenter_py.aio.clock import RealClock
from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.messages import (
    MessageParseError,
    NoOp,
    RebalanceRecommendation,
    parse_message,
)
from karpenter_py.cloudprovider.aws.sqs import InterruptionQueue
from karpenter_py.controllers.interruption import Interruption, Outcome
from karpenter_py.kube.errors import ServerError
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import Resource
from karpenter_py.launcher.launch import UnavailableOfferings
from karpenter_py.model.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import KINDS, Cluster
from tests import factories
from tests.aws.motosqs import fast_sqs  # noqa: F401 - a fixture
from tests.motofixture import ZONES
from tests.unit.cloudprovider.aws.interruption_samples import fuzz_bodies, scheduled_change, spot
from tests.unit.fakes import FakeKube, deps

QUEUE = "karpenter-interruption"
OK_IDS = tuple(f"i-0{n:03x}ok" for n in range(20))
FAILING_IDS = ("i-0000fail",)  # its NodeClaim's deletes answer 500
UNKNOWN_IDS = tuple(f"i-0{n:03x}gone" for n in range(9))  # no NodeClaim
VISIBILITY = 3  # seconds before a message whose handling failed comes back
# What SQS accepts in a body (XML 1.0 characters); anything else is replaced before sending.
_NOT_SQS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
BATCH_CHARS = 240_000  # SendMessageBatch caps the sum of its bodies


class FailingClient(FakeKube):
    """A NodeClaim API where the deletes of some names always fail with a 500 (the shared fake's
    planned failures answer a given number of calls; these fail every time)."""

    def __init__(self, failing: set[str]) -> None:
        super().__init__()
        self.failing = failing
        self.deleted: list[str] = []

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> KubeObject:
        if name in self.failing:
            raise ServerError(status=500, verb="delete", resource=resource.plural, name=name)
        self.deleted.append(name)
        return {}


class DroppingWriter:
    async def create_event(self, event: KubeObject, *, namespace: str | None = None) -> KubeObject:
        return event


def sqs_body(text: str) -> str:
    return _NOT_SQS.sub("?", text) or " "


def stays(body: str) -> bool:
    """The rules: unparseable → deleted; handled → deleted; a NodeClaim delete that fails →
    left on the queue. Only deleting kinds naming a failing instance fail here."""
    try:
        msg = parse_message(body)
    except MessageParseError:
        return False
    if isinstance(msg, NoOp | RebalanceRecommendation):  # rebalance: events only by default
        return False
    return any(i in FAILING_IDS for i in msg.instance_ids)


def cluster_with_nodeclaims() -> Cluster:
    cluster = Cluster()
    for kind in KINDS:
        cluster.mark_synced(kind)
    for n, iid in enumerate(OK_IDS + FAILING_IDS):
        zone = ZONES[n % len(ZONES)]
        labels = {
            LABEL_INSTANCE_TYPE: "m5.large",
            LABEL_TOPOLOGY_ZONE: zone,
            LABEL_CAPACITY_TYPE: "spot",
        }
        nc = factories.nodeclaim(f"nc-{iid}", provider_id=f"aws:///{zone}/{iid}", labels=labels)
        cluster.upsert_nodeclaim(nc)
    return cluster


def batches(bodies: list[str]) -> Iterator[list[tuple[int, str]]]:
    """(index, body) groups of at most 10 and BATCH_CHARS."""
    group: list[tuple[int, str]] = []
    size = 0
    for i, body in enumerate(bodies):
        if group and (len(group) == 10 or size + len(body) > BATCH_CHARS):
            yield group
            group, size = [], 0
        group.append((i, body))
        size += len(body)
    if group:
        yield group


class Feeder:
    """Sends the bodies ten at a time while the worker runs, keeping at most ``window``
    deletable messages queued: moto scans the whole queue on every call, so a short queue is
    what keeps 10,000 messages fast (it is also what a healthy interruption queue looks like)."""

    def __init__(self, aws: AwsClients, url: str, bodies: list[str], stay: set[int]) -> None:
        self.aws = aws
        self.url = url
        self.bodies = bodies
        self.stay = stay
        self.index_of: dict[str, int] = {}  # SQS message id -> index into bodies
        self.stays_sent = 0

    async def run(self, deleted: Callable[[], float], *, window: int = 40) -> None:
        for group in batches(self.bodies):
            # Progress lives in a metric, which signals nothing: poll it.
            while len(self.index_of) - self.stays_sent - deleted() > window:  # noqa: ASYNC110
                await asyncio.sleep(0.002)
            out = await self.aws.sqs.send_message_batch(
                QueueUrl=self.url, Entries=[{"Id": str(i), "MessageBody": b} for i, b in group]
            )
            assert not out.get("Failed"), out.get("Failed")
            for ok in out["Successful"]:
                self.index_of[ok["MessageId"]] = int(ok["Id"])
            self.stays_sent += sum(1 for i, _ in group if i in self.stay)


async def drain(queue: InterruptionQueue) -> list[str]:
    """The ids of every message still on the queue (received once, not deleted)."""
    out: list[str] = []
    while batch := await queue.receive():
        out.extend(m.id for m in batch)
    return out


@pytest.fixture
def quiet_logs() -> Iterator[None]:
    """Thousands of per-message warnings (and moto's request lines) are expected here; keep
    them out of the capture."""
    loggers = [logging.getLogger(n) for n in ("karpenter.interruption", "werkzeug")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def worker_for(
    queue: InterruptionQueue, cluster: Cluster, client: FailingClient, metrics: Metrics
) -> Interruption:
    clock = RealClock()
    return Interruption(
        deps(
            client=client,  # the worker only deletes NodeClaims
            cluster=cluster,
            recorder=EventRecorder(DroppingWriter(), clock=clock),
            clock=clock,
            metrics=metrics,
        ),
        queue,
        UnavailableOfferings(clock=clock),
    )


@pytest.mark.usefixtures("quiet_logs", "fast_sqs")
async def test_ten_thousand_fuzzed_messages(aws: AwsClients) -> None:
    url = (await aws.sqs.create_queue(QueueName=QUEUE))["QueueUrl"]
    bodies = [
        sqs_body(b) for b in fuzz_bodies(10_000, seed=8, ids=OK_IDS + FAILING_IDS + UNKNOWN_IDS)
    ]
    expected_stay = {i for i, b in enumerate(bodies) if stays(b)}
    expected_deleted = len(bodies) - len(expected_stay)
    assert 20 < len(expected_stay) < 500  # the run exercises both outcomes

    cluster = cluster_with_nodeclaims()
    client = FailingClient(failing={f"nc-{i}" for i in FAILING_IDS})
    metrics = Metrics()
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=1, visibility_seconds=VISIBILITY)
    worker = worker_for(queue, cluster, client, metrics)
    feeder = Feeder(aws, url, bodies, expected_stay)

    def deleted() -> float:
        value = metrics.registry.get_sample_value("karpenter_interruption_deleted_messages_total")
        return 0.0 if value is None else value

    started = time.monotonic()
    async with asyncio.timeout(150), asyncio.TaskGroup() as tg:
        run = tg.create_task(worker.run())
        await feeder.run(deleted)
        while deleted() < expected_deleted and not run.done():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        assert not run.done()  # the worker never stopped
        run.cancel()
    elapsed = time.monotonic() - started
    print(f"10,000 messages through the worker in {elapsed:.1f}s")
    assert len(feeder.index_of) == 10_000
    assert deleted() == expected_deleted
    assert worker.outcomes[Outcome.DELETE_FAILED] == 0
    assert worker.outcomes[Outcome.UNPARSEABLE] + worker.outcomes[Outcome.HANDLED] == (
        expected_deleted
    )
    assert worker.outcomes[Outcome.FAILED] >= len(expected_stay)

    # What is left is exactly what failed: wait out the visibility timeout and look.
    await asyncio.sleep(VISIBILITY + 0.5)
    left = await drain(InterruptionQueue(aws, QUEUE, wait_seconds=0, visibility_seconds=60))
    assert sorted(feeder.index_of[m] for m in left) == sorted(expected_stay)
    # Handled deletes reached the API for known, healthy instances only.
    assert set(client.deleted) <= {f"nc-{i}" for i in OK_IDS}
    assert elapsed < 90, f"took {elapsed:.1f}s"


async def test_a_spot_interruption_end_to_end(aws: AwsClients) -> None:
    """One real-looking message: the NodeClaim is deleted, the offering marked, the message
    gone from the queue, and a health event naming two instances acts on both."""
    url = (await aws.sqs.create_queue(QueueName=QUEUE))["QueueUrl"]
    import json

    await aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(spot(OK_IDS[0])))
    await aws.sqs.send_message(
        QueueUrl=url, MessageBody=json.dumps(scheduled_change(OK_IDS[1], OK_IDS[2]))
    )
    cluster = cluster_with_nodeclaims()
    client = FailingClient(failing=set())
    metrics = Metrics()
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=1, visibility_seconds=VISIBILITY)
    worker = worker_for(queue, cluster, client, metrics)
    while worker.outcomes[Outcome.HANDLED] < 2:
        await worker.poll_once()
    assert sorted(client.deleted) == sorted(f"nc-{i}" for i in OK_IDS[:3])
    assert set(worker.unavailable.entries()) == {("m5.large", ZONES[0], "spot")}
    left = await drain(InterruptionQueue(aws, QUEUE, wait_seconds=0))
    assert left == []
    received = metrics.registry.get_sample_value
    assert (
        received(
            "karpenter_interruption_received_messages_total", {"message_type": "spot_interrupted"}
        )
        == 1.0
    )
    assert (
        received(
            "karpenter_interruption_received_messages_total", {"message_type": "scheduled_change"}
        )
        == 1.0
    )
    assert received("karpenter_interruption_message_queue_duration_seconds_count") == 2.0
