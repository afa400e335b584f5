"""EventRecorder: sync record, owned async publishing, de-duplication, failures swallowed."""

from __future__ import annotations

import asyncio

from karpenter_py.aio.clock import FakeClock
from karpenter_py.kube.errors import AlreadyExistsError, ForbiddenError
from karpenter_py.kube.events import EventRecorder, object_ref
from tests.unit.fakes import FakeKube


def fake_writer(*failures: Exception) -> FakeKube:
    """An API whose next event creations fail with ``failures``, in order."""
    client = FakeKube()
    client.fail("create", "*", *failures)
    return client


NODE = object_ref("v1", "Node", "n1", uid="u1")
POD = object_ref("v1", "Pod", "p1", namespace="ns", uid="u2")


async def test_events_are_deduplicated_within_the_window() -> None:
    clock = FakeClock()
    writer = fake_writer()
    rec = EventRecorder(writer, clock=clock, dedupe_window=120)
    rec.record(NODE, "FailedDraining", "pdb", event_type="Warning")
    rec.record(NODE, "FailedDraining", "pdb", event_type="Warning")  # skipped
    rec.record(NODE, "FailedDraining", "other message")  # different message: published
    rec.record(POD, "Evicted", "Evicted pod")
    rec.record(NODE, "FailedDraining", "3 pods", dedupe_values=("n1",))
    rec.record(NODE, "FailedDraining", "2 pods", dedupe_values=("n1",))  # same values: skipped
    clock.step(121)
    rec.record(NODE, "FailedDraining", "pdb", event_type="Warning")  # window passed
    assert rec.pending == 5
    assert rec.suppressed == 2
    await rec.flush()
    assert [e["message"] for e in writer.events] == [
        "pdb",
        "other message",
        "Evicted pod",
        "3 pods",
        "pdb",
    ]
    first = writer.events[0]
    assert first["type"] == "Warning"
    assert first["metadata"]["namespace"] == "default"  # cluster-scoped objects' events
    assert first["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": "u1",
    }
    assert writer.events[2]["metadata"]["namespace"] == "ns"
    assert first["source"] == {"component": "karpenter"}


async def test_run_publishes_and_failures_are_logged_not_raised() -> None:
    writer = fake_writer(ForbiddenError(status=403), AlreadyExistsError(status=409))
    rec = EventRecorder(writer, clock=FakeClock())
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(rec.run())
        rec.record(NODE, "A", "dropped: forbidden")
        rec.record(NODE, "B", "renamed once after a name collision")
        async with asyncio.timeout(5):
            while True:
                if rec.published + rec.failed == 2:
                    break
                await asyncio.sleep(0.01)
        task.cancel()
    assert rec.failed == 1
    assert [e["reason"] for e in writer.events] == ["B"]


def test_queue_is_bounded() -> None:
    rec = EventRecorder(fake_writer(), clock=FakeClock(), max_pending=3)
    for i in range(5):
        rec.record(NODE, "R", f"m{i}")
    assert (rec.pending, rec.dropped) == (3, 2)


def test_dedupe_memory_forgets_expired_keys_oldest_first() -> None:
    """Past 4 x max_pending keys, keys older than the window are forgotten; a key published
    again counts from its new time (it must not pin the older ones behind it)."""
    clock = FakeClock()
    rec = EventRecorder(fake_writer(), clock=clock, dedupe_window=10, max_pending=1)
    for message in ("a", "b", "c"):
        rec.record(NODE, "R", message)  # t=0
    clock.step(6)
    rec.record(NODE, "R", "d")
    rec.record(NODE, "R", "e")  # t=6: 5 keys, none expired
    assert rec.remembered == 5
    clock.step(4)
    rec.record(NODE, "R", "a")  # t=10: a is published again; b and c are forgotten
    assert rec.remembered == 3
    clock.step(2)
    rec.record(NODE, "R", "a")  # t=12: within a's new window
    rec.record(NODE, "R", "b")  # t=12: forgotten, so published
    queued = rec.pending + rec.dropped  # the queue holds one (max_pending=1)
    assert (queued, rec.suppressed, rec.remembered) == (7, 1, 4)


def test_a_reason_may_keep_its_own_longer_window() -> None:
    """Upstream dedupes NodeRepairBlocked for 15 minutes against the usual 2: the longer window
    holds for that call's key, the recorder's window for the rest, and each forgets on its own
    schedule."""
    clock = FakeClock()
    rec = EventRecorder(fake_writer(), clock=clock, dedupe_window=120, max_pending=1)
    rec.record(NODE, "NodeRepairBlocked", "5 of 10", dedupe_values=("n1",), dedupe_window=900)
    rec.record(NODE, "FailedDraining", "pdb")
    clock.step(121)
    rec.record(NODE, "NodeRepairBlocked", "6 of 10", dedupe_values=("n1",), dedupe_window=900)
    rec.record(NODE, "FailedDraining", "pdb")  # the recorder's window passed: published
    assert (rec.suppressed, rec.remembered) == (1, 2)
    clock.step(780)  # 901 s after the first NodeRepairBlocked
    rec.record(NODE, "NodeRepairBlocked", "7 of 10", dedupe_values=("n1",), dedupe_window=900)
    assert (rec.pending + rec.dropped, rec.suppressed) == (4, 1)
