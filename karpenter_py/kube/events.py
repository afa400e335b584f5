"""Publishing core/v1 Events, as upstream Karpenter's recorder does: fire-and-forget, de-duplicated.

Controllers call :meth:`EventRecorder.record` (sync, never blocks, never raises) from inside a
reconcile; :meth:`EventRecorder.run` is the one task, owned by the manager's TaskGroup, that
drains the queue and talks to the apiserver. An event that fails to publish is logged and
dropped: an Event is a hint for humans, never a reason to stall or fail a reconcile.

De-duplication: the same (object, reason, message) recorded again within ``dedupe_window``
seconds (upstream's DedupeTimeout, 2 minutes) is skipped, so a drain retried every 100 ms does not
write an Event per retry; a reason upstream gives a longer timeout passes its own window to
:meth:`EventRecorder.record`. The queue is bounded; when it overflows, the oldest pending event
goes.

Reason strings are upstream's (``pkg/events/reason.go`` and friends) and listed in :class:`Reason`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from typing import Final, Literal, Protocol

from karpenter_py.aio.clock import Clock
from karpenter_py.kube.errors import AlreadyExistsError, KubeError
from karpenter_py.kube.objects import KubeObject, metadata, new_event

log = logging.getLogger("karpenter.events")

EventType = Literal["Normal", "Warning"]
NORMAL: Final = "Normal"
WARNING: Final = "Warning"


class Reason:
    """Upstream event reasons used by the lifecycle and termination controllers."""

    # NodeClaim / Node
    INSUFFICIENT_CAPACITY: Final = "InsufficientCapacityError"
    NODECLASS_NOT_READY: Final = "NodeClassNotReady"
    UNREGISTERED_TAINT_MISSING: Final = "UnregisteredTaintMissing"
    FAILED_DRAINING: Final = "FailedDraining"
    TERMINATION_GRACE_PERIOD_EXPIRING: Final = "TerminationGracePeriodExpiring"
    DISRUPTION_BLOCKED: Final = "DisruptionBlocked"
    NODE_REPAIR_BLOCKED: Final = "NodeRepairBlocked"
    # Pod
    EVICTED: Final = "Evicted"
    DISRUPTED: Final = "Disrupted"  # forced delete at the termination grace period


class EventWriter(Protocol):
    """What the recorder needs from the API client (``KubeClient`` satisfies it)."""

    async def create_event(
        self, event: KubeObject, *, namespace: str | None = None
    ) -> KubeObject: ...


def object_ref(
    api_version: str,
    kind: str,
    name: str,
    *,
    namespace: str | None = None,
    uid: str | None = None,
) -> KubeObject:
    """A minimal object for :meth:`EventRecorder.record` when the caller holds a model, not a dict."""
    meta: dict[str, str] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if uid:
        meta["uid"] = uid
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


DedupeKey = tuple[str, str, str, str, str, str]


class EventRecorder:
    def __init__(
        self,
        client: EventWriter,
        *,
        clock: Clock,
        component: str = "karpenter",
        host: str | None = None,
        dedupe_window: float = 120.0,
        max_pending: int = 1000,
    ) -> None:
        self._client = client
        self._clock = clock
        self._component = component
        self._host = host
        self._window = dedupe_window
        self._pending: deque[KubeObject] = deque()
        self._max_pending = max_pending
        # window -> (key -> monotonic time last published, oldest first): pruning stops at the
        # first key still inside its window, so it costs what it drops, not what it keeps (a
        # whole-dict sweep on every record was O(n^2) when 10,000 pods were nominated within the
        # window). One order per window keeps that true when windows differ.
        self._seen: dict[float, OrderedDict[DedupeKey, float]] = {}
        self._wake: asyncio.Event | None = None
        self.published = 0
        self.suppressed = 0
        self.dropped = 0
        self.failed = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def record(
        self,
        involved: KubeObject,
        reason: str,
        message: str,
        *,
        event_type: EventType = NORMAL,
        dedupe: bool = True,
        dedupe_values: tuple[str, ...] | None = None,
        dedupe_window: float | None = None,
    ) -> None:
        """Queue an Event about ``involved`` (a wire object or :func:`object_ref`).

        De-duplication compares the object, the reason and the message, or ``dedupe_values``
        instead of the message when given (upstream's DedupeValues: an event whose message
        carries a changing count is still "the same" event), within ``dedupe_window`` seconds
        (the recorder's window unless given).
        """
        now = self._clock.monotonic()
        if dedupe:
            window = self._window if dedupe_window is None else dedupe_window
            seen = self._seen.setdefault(window, OrderedDict())
            detail = message if dedupe_values is None else "\x00".join(dedupe_values)
            key = _dedupe_key(involved, reason, detail)
            last = seen.get(key)
            if last is not None and now - last < window:
                self.suppressed += 1
                return
            seen[key] = now
            seen.move_to_end(key)
            if len(seen) > 4 * self._max_pending:
                _prune(seen, window, now)
        event = new_event(
            involved=involved,
            reason=reason,
            message=message,
            now=self._clock.now(),
            event_type=event_type,
            component=self._component,
            host=self._host,
        )
        if len(self._pending) >= self._max_pending:
            self._pending.popleft()
            self.dropped += 1
        self._pending.append(event)
        if self._wake is not None:
            self._wake.set()

    @property
    def remembered(self) -> int:
        """How many (object, reason, message) keys de-duplication remembers now."""
        return sum(len(seen) for seen in self._seen.values())

    async def run(self) -> None:
        """Publish queued events until cancelled (pending ones are dropped then)."""
        self._wake = asyncio.Event()
        while True:
            while self._pending:
                await self._publish(self._pending.popleft())
            self._wake.clear()
            await self._wake.wait()

    async def flush(self) -> None:
        """Publish everything queued now (for callers without a running :meth:`run`)."""
        while self._pending:
            await self._publish(self._pending.popleft())

    async def _publish(self, event: KubeObject) -> None:
        try:
            try:
                await self._client.create_event(event)
            except AlreadyExistsError:
                # Two events for one object in the same nanosecond (a fake clock): rename once.
                metadata(event)["name"] = f"{metadata(event)['name']}.{self.published:x}"
                await self._client.create_event(event)
        except KubeError as e:
            self.failed += 1
            log.warning(
                "failed to publish event",
                extra={"reason": event.get("reason"), "error": str(e)},
            )
            return
        self.published += 1


def _prune(seen: OrderedDict[DedupeKey, float], window: float, now: float) -> None:
    while seen:
        key, published = next(iter(seen.items()))
        if now - published < window:
            return
        del seen[key]


def _dedupe_key(involved: KubeObject, reason: str, detail: str) -> DedupeKey:
    meta = metadata(involved)
    return (
        str(involved.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        reason,
        detail,
    )
