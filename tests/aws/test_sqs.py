"""The interruption queue client against moto's SQS over HTTP."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.cloudprovider.aws.messages import QueueMessage
from karpenter_py.cloudprovider.aws.sqs import InterruptionQueue, QueueError, QueueNotFoundError

QUEUE = "karpenter-interruption"


async def make_queue(aws: AwsClients, name: str = QUEUE) -> str:
    out = await aws.sqs.create_queue(QueueName=name)
    return str(out["QueueUrl"])


async def test_url_is_looked_up_once(aws: AwsClients) -> None:
    url = await make_queue(aws)
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=0)
    urls = await asyncio.gather(*(queue.url() for _ in range(5)))
    assert urls == [url] * 5
    # Cached: the lookup is not repeated, so a queue deleted behind our back still answers.
    await aws.sqs.delete_queue(QueueUrl=url)
    assert await queue.url() == url


async def test_missing_queue_is_a_typed_error(aws: AwsClients) -> None:
    queue = InterruptionQueue(aws, "no-such-queue", wait_seconds=0)
    with pytest.raises(QueueNotFoundError) as info:
        await queue.url()
    assert str(info.value) == "looking up queue 'no-such-queue': the queue does not exist"
    assert info.value.code in {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}
    with pytest.raises(QueueNotFoundError):
        await queue.receive()


def test_a_queue_needs_a_name() -> None:
    with pytest.raises(ValueError, match="an interruption queue needs a name"):
        InterruptionQueue(None, "")  # type: ignore[arg-type]


async def test_receive_returns_bodies_ids_and_sent_time(aws: AwsClients) -> None:
    url = await make_queue(aws)
    before = datetime.now(UTC) - timedelta(seconds=5)
    sent = {}
    for body in ("one", "two", "three"):
        out = await aws.sqs.send_message(QueueUrl=url, MessageBody=body)
        sent[out["MessageId"]] = body
    after = datetime.now(UTC) + timedelta(seconds=5)
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=1, visibility_seconds=30)
    got: list[QueueMessage] = []
    while len(got) < 3:
        batch = await queue.receive()
        assert batch
        got.extend(batch)
    assert {m.id: m.body for m in got} == sent
    assert all(m.receipt_handle for m in got)
    assert all(m.sent_at is not None and before <= m.sent_at <= after for m in got)
    # In flight for the visibility timeout: nothing more to receive now.
    assert await InterruptionQueue(aws, QUEUE, wait_seconds=0).receive() == []


async def test_at_most_ten_per_receive(aws: AwsClients) -> None:
    url = await make_queue(aws)
    entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
    await aws.sqs.send_message_batch(QueueUrl=url, Entries=entries)
    await aws.sqs.send_message_batch(QueueUrl=url, Entries=entries[:5])
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=0, visibility_seconds=30)
    sizes = []
    while batch := await queue.receive():
        sizes.append(len(batch))
    assert max(sizes) <= 10
    assert sum(sizes) == 15


async def test_deleted_messages_do_not_come_back(aws: AwsClients) -> None:
    url = await make_queue(aws)
    for body in ("keep", "drop"):
        await aws.sqs.send_message(QueueUrl=url, MessageBody=body)
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=0, visibility_seconds=1)
    first: list[QueueMessage] = []
    while len(first) < 2:
        first.extend(await queue.receive())
    await queue.delete(next(m for m in first if m.body == "drop"))
    await asyncio.sleep(1.5)  # past the visibility timeout: the undeleted one reappears
    again = await InterruptionQueue(aws, QUEUE, wait_seconds=1).receive()
    assert [m.body for m in again] == ["keep"]


async def test_receive_after_the_queue_is_gone(aws: AwsClients) -> None:
    url = await make_queue(aws)
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=0)
    assert await queue.receive() == []
    await aws.sqs.delete_queue(QueueUrl=url)
    with pytest.raises(QueueError) as info:
        await queue.receive()
    assert isinstance(info.value, QueueNotFoundError)
    # The cached URL was dropped: a recreated queue is found again.
    new_url = await make_queue(aws)
    assert await queue.receive() == []
    assert await queue.url() == new_url


async def test_concurrent_deletes_share_batch_calls(aws: AwsClients) -> None:
    url = await make_queue(aws)
    entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
    await aws.sqs.send_message_batch(QueueUrl=url, Entries=entries)
    await aws.sqs.send_message_batch(QueueUrl=url, Entries=entries[:3])
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=0, visibility_seconds=1)
    got: list[QueueMessage] = []
    while len(got) < 13:
        got.extend(await queue.receive())
    calls = []
    real = aws.sqs.delete_message_batch

    async def counting(**kw: object) -> object:
        calls.append(len(kw["Entries"]))  # type: ignore[arg-type]
        return await real(**kw)

    aws.sqs.delete_message_batch = counting
    try:
        await asyncio.gather(*(queue.delete(m) for m in got))
    finally:
        aws.sqs.delete_message_batch = real
    assert calls == [10, 3]
    await asyncio.sleep(1.5)  # nothing reappears after the visibility timeout
    assert await InterruptionQueue(aws, QUEUE, wait_seconds=0).receive() == []


async def test_a_bad_receipt_handle_fails_only_its_own_delete(aws: AwsClients) -> None:
    url = await make_queue(aws)
    await aws.sqs.send_message(QueueUrl=url, MessageBody="real")
    queue = InterruptionQueue(aws, QUEUE, wait_seconds=1, visibility_seconds=1)
    (real,) = await queue.receive()
    bogus = QueueMessage(id="bogus", receipt_handle="not-a-handle", body="", sent_at=None)
    results = await asyncio.gather(queue.delete(real), queue.delete(bogus), return_exceptions=True)
    assert results[0] is None
    assert isinstance(results[1], QueueError)
    assert str(results[1]).startswith("deleting message bogus on queue 'karpenter-interruption': ")
    await asyncio.sleep(1.5)
    assert await InterruptionQueue(aws, QUEUE, wait_seconds=0).receive() == []
