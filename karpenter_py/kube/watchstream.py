"""Decoding a watch response: newline-delimited JSON events from a chunked HTTP body.

We split lines ourselves instead of ``StreamReader.readline``: aiohttp caps a line at its buffer
high-water mark (128 KiB), and a single big object (a CRD, a pod with large annotations) exceeds
that. ERROR events are raised as typed errors (410 -> :class:`GoneError`) so that a 410 delivered
inside the stream and a 410 on the request look the same to callers.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, cast, get_args

import aiohttp
import orjson

from karpenter_py.kube.errors import TransportError, error_from_watch_status, transport_errors
from karpenter_py.kube.objects import ERROR, EventType, WatchEvent

_EVENT_TYPES = frozenset(get_args(EventType))


class WatchStream:
    """Async iterator of :class:`WatchEvent` over one open watch response.

    Ends (StopAsyncIteration) when the server closes the stream, normally at ``timeoutSeconds``.
    Raises :class:`TransportError` if the connection breaks or the client-side deadline passes,
    and the typed :class:`ApiError` of an in-stream ERROR event.
    """

    def __init__(
        self, resp: aiohttp.ClientResponse, *, resource: str, deadline: float | None
    ) -> None:
        self._resp = resp
        self._resource = resource
        self._what = f"watch {resource}"
        self._deadline = deadline  # loop time; the server should have closed the stream by then
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already searched for a newline
        self._lines: deque[bytes] = deque()
        self._eof = False
        self.events = 0

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> WatchEvent:
        while not self._lines:
            if self._eof:
                raise StopAsyncIteration
            await self._fill()
        event = self._decode(self._lines.popleft())
        self.events += 1
        return event

    def abort(self) -> None:
        """Drop the connection now (sync, idempotent); a pending read fails with TransportError."""
        self._resp.close()

    async def _fill(self) -> None:
        with transport_errors(self._what, "no end of stream by the deadline"):
            async with asyncio.timeout_at(self._deadline):
                chunk = await self._resp.content.readany()
        if not chunk:
            if self._resp.connection is None and not self._resp.content.is_eof():
                raise TransportError(f"watch {self._resource}: connection closed mid-stream")
            self._eof = True
            if self._buf.strip():
                self._lines.append(bytes(self._buf))
            self._buf.clear()
            return
        self._buf += chunk
        start = 0
        while (nl := self._buf.find(b"\n", self._scanned)) != -1:
            line = self._buf[start:nl]
            if line.strip():
                self._lines.append(bytes(line))
            start = self._scanned = nl + 1
        del self._buf[:start]
        self._scanned = len(self._buf)

    def _decode(self, line: bytes) -> WatchEvent:
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise TransportError(f"watch {self._resource}: undecodable event ({e})") from e
        if not isinstance(raw, dict):
            raise TransportError(f"watch {self._resource}: event is not an object")
        etype, obj = raw.get("type"), raw.get("object")
        if etype not in _EVENT_TYPES or not isinstance(obj, dict):
            raise TransportError(f"watch {self._resource}: malformed event of type {etype!r}")
        if etype == ERROR:
            raise error_from_watch_status(obj, resource=self._resource)
        return WatchEvent(type=cast(EventType, etype), object=cast(dict[str, Any], obj))
