"""The interruption queue: SQS long polling over the shared aiobotocore client.

The queue is named in the settings (``INTERRUPTION_QUEUE``); its URL is looked up once with
GetQueueUrl and kept. Failures surface as :class:`QueueError` (the AWS error code in ``code``) so
the worker can log and back off without knowing botocore.
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
    ) -> None:
        if not name:
            raise ValueError("an interruption queue needs a name")
        self._sqs = clients.sqs
        self.name = name
        self.wait_seconds = wait_seconds
        self.visibility_seconds = visibility_seconds
        self.max_messages = max_messages
        self._url: str | None = None
        self._lock = asyncio.Lock()

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
        url = await self.url()
        try:
            await self._sqs.delete_message(QueueUrl=url, ReceiptHandle=msg.receipt_handle)
        except Exception as e:
            if not is_aws_error(e):
                raise
            raise self._failed(e, f"deleting message {msg.id}") from e

    def _failed(self, exc: Exception, doing: str) -> QueueError:
        err = _queue_error(exc, f"{doing} on queue {self.name!r}")
        if isinstance(err, QueueNotFoundError):
            self._url = None  # recreated queues get a new URL; look it up again next time
        return err


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
