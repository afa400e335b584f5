"""The interruption queue: SQS long polling over the shared aiobotocore client.

The queue is named in the settings (``INTERRUPTION_QUEUE``); its URL is looked up once with
GetQueueUrl and kept. Failures surface as :class:`QueueError` (the AWS error code in ``code``) so
the worker can log and back off without knowing botocore. Deletes issued together (the worker
finishing a batch of ten in parallel) go out as one DeleteMessageBatch instead of ten calls.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, Final

from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, is_aws_error
from karpenter_py.cloudprovider.aws.messages import QueueMessage

log = logging.getLogger("karpenter.interruption")

MAX_MESSAGES: Final = 10  # SQS's ceiling per ReceiveMessage
WAIT_SECONDS: Final = 20  # long poll: SQS's ceiling, so an idle queue costs 3 calls a minute
VISIBILITY_SECONDS: Final = 20  # a message whose handling failed reappears after this
SENT_TIMESTAMP: Final = "SentTimestamp"
# How long the first of several concurrent deletes waits for the rest to join its batch call.
DELETE_LINGER: Final = 0.005
NOT_FOUND_CODES: Final = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


class QueueError(Exception):
    """An SQS call failed; ``code`` is the AWS error code ("" for transport failures)."""

    def __init__(self, message: str, *, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class QueueNotFoundError(QueueError):
    """The configured queue does not exist (or this identity may not see it)."""


class InterruptionQueue:
    """Receive and delete on one named SQS queue. Safe to share between tasks."""

    def __init__(
        self,
        clients: AwsClients,
        name: str,
        *,
        wait_seconds: int = WAIT_SECONDS,
        visibility_seconds: int = VISIBILITY_SECONDS,
        max_messages: int = MAX_MESSAGES,
        delete_linger: float = DELETE_LINGER,
    ) -> None:
        if not name:
            raise ValueError("an interruption queue needs a name")
        self._sqs = clients.sqs
        self.name = name
        self.wait_seconds = wait_seconds
        self.visibility_seconds = visibility_seconds
        self.max_messages = max_messages
        self.delete_linger = delete_linger
        self._url: str | None = None
        self._lock = asyncio.Lock()
        self._pending: list[_PendingDelete] = []
        self._flushing = False

    async def url(self) -> str:
        """The queue's URL, looked up on first use (concurrent callers share one lookup)."""
        if self._url is not None:
            return self._url
        async with self._lock:
            if self._url is None:
                try:
                    out = await self._sqs.get_queue_url(QueueName=self.name)
                except Exception as e:
                    if not is_aws_error(e):
                        raise
                    raise _queue_error(e, f"looking up queue {self.name!r}") from e
                url = out.get("QueueUrl") if isinstance(out, dict) else None
                if not isinstance(url, str) or not url:
                    raise QueueError(f"GetQueueUrl for {self.name!r} returned no URL")
                self._url = url
            return self._url

    async def receive(self) -> list[QueueMessage]:
        """Up to ``max_messages`` messages, waiting up to ``wait_seconds`` for the first."""
        url = await self.url()
        try:
            out = await self._sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=self.max_messages,
                WaitTimeSeconds=self.wait_seconds,
                VisibilityTimeout=self.visibility_seconds,
                AttributeNames=[SENT_TIMESTAMP],
                MessageAttributeNames=[SENT_TIMESTAMP],
            )
        except Exception as e:
            if not is_aws_error(e):
                raise
            raise self._failed(e, "receiving") from e
        return [m for raw in out.get("Messages") or [] if (m := _message(raw)) is not None]

    async def delete(self, msg: QueueMessage) -> None:
        """Delete one message. Deletes issued together (a batch finishing its handling) share
        DeleteMessageBatch calls of up to ten: the first caller waits ``delete_linger`` for the
        others, then sends for everyone waiting. Each caller still learns its own result."""
        url = await self.url()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((msg, done))
        if not self._flushing:
            await self._flush(url)
        await done

    async def _flush(self, url: str) -> None:
        self._flushing = True
        try:
            await asyncio.sleep(self.delete_linger)
            while self._pending:
                chunk = self._pending[:MAX_MESSAGES]
                del self._pending[:MAX_MESSAGES]
                try:
                    await self._delete_chunk(url, chunk)
                finally:
                    _abandon(chunk)
        finally:
            self._flushing = False
            # Cancelled mid-flush: whoever is still waiting must not wait forever. Their
            # messages stay on the queue and reappear, which handling tolerates.
            pending, self._pending = self._pending, []
            _abandon(pending)

    async def _delete_chunk(self, url: str, chunk: list[_PendingDelete]) -> None:
        entries = [
            {"Id": str(i), "ReceiptHandle": m.receipt_handle} for i, (m, _) in enumerate(chunk)
        ]
        try:
            out = await self._sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        except Exception as e:
            for m, done in chunk:
                if done.done():
                    continue
                if is_aws_error(e):
                    done.set_exception(self._failed(e, f"deleting message {m.id}"))
                else:
                    done.set_exception(QueueError(f"deleting message {m.id}: {e!r}"))
            return
        failed = {str(f.get("Id")): f for f in out.get("Failed") or [] if isinstance(f, dict)}
        for i, (m, done) in enumerate(chunk):
            if done.done():
                continue
            why = failed.get(str(i))
            if why is None:
                done.set_result(None)
            else:
                code = str(why.get("Code") or "")
                done.set_exception(
                    QueueError(
                        f"deleting message {m.id} on queue {self.name!r}: {code}: "
                        f"{why.get('Message') or ''}",
                        code=code,
                    )
                )

    def _failed(self, exc: Exception, doing: str) -> QueueError:
        err = _queue_error(exc, f"{doing} on queue {self.name!r}")
        if isinstance(err, QueueNotFoundError):
            self._url = None  # recreated queues get a new URL; look it up again next time
        return err


_PendingDelete = tuple[QueueMessage, "asyncio.Future[None]"]


def _abandon(entries: list[_PendingDelete]) -> None:
    for m, done in entries:
        if not done.done():
            done.set_exception(QueueError(f"deleting message {m.id}: abandoned (cancelled)"))


def _queue_error(exc: Exception, doing: str) -> QueueError:
    code = error_code(exc)
    if code in NOT_FOUND_CODES:
        return QueueNotFoundError(f"{doing}: the queue does not exist", code=code)
    return QueueError(f"{doing}: {exc}", code=code)


def _message(raw: Any) -> QueueMessage | None:
    """A received message; None (logged) for one SQS should never send."""
    if not isinstance(raw, dict):
        return None
    receipt = raw.get("ReceiptHandle")
    if not isinstance(receipt, str) or not receipt:
        log.warning(
            "received a message without a receipt handle", extra={"id": raw.get("MessageId")}
        )
        return None
    body = raw.get("Body")
    attrs = raw.get("Attributes") or {}
    return QueueMessage(
        id=str(raw.get("MessageId") or ""),
        receipt_handle=receipt,
        body=body if isinstance(body, str) else "",
        sent_at=_sent_at(attrs.get(SENT_TIMESTAMP) if isinstance(attrs, dict) else None),
    )


def _sent_at(value: Any) -> datetime | None:
    """SentTimestamp is epoch milliseconds as a string."""
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None
