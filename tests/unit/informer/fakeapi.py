"""An in-process stand-in for one resource in the apiserver, for reflector logic tests.

It keeps objects, a numbered event history and live watchers, and can: compact history (so old
resourceVersions get 410, on the request or inside the stream), pause live delivery (events still
enter the history, as if the connection were silently dead), end every watch (server timeout),
break every watch (connection reset) and inject errors on the next watch requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Literal

from karpenter_py.kube.errors import GoneError, TransportError
from karpenter_py.kube.objects import KubeObject, Page, WatchEvent

_END = object()
_BREAK = object()


class FakeStream:
    def __init__(self, queue: asyncio.Queue[object]) -> None:
        self._queue = queue

    def __aiter__(self) -> FakeStream:
        return self

    async def __anext__(self) -> WatchEvent:
        item = await self._queue.get()
        if item is _END:
            raise StopAsyncIteration
        if item is _BREAK:
            raise TransportError("connection reset by fake")
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, WatchEvent)
        return item


class FakeApi:
    def __init__(self, *, gone: Literal["http", "stream"] = "http") -> None:
        self.rv = 100
        self.objects: dict[str, KubeObject] = {}
        self.history: list[tuple[int, WatchEvent]] = []
        self.oldest = 0  # watches from an RV below this get 410
        self.gone = gone
        self.deliver = True
        self.watchers: list[asyncio.Queue[object]] = []
        self.list_calls: list[str | None] = []
        self.watch_calls: list[str] = []
        self.watch_errors: list[BaseException] = []
        # Raised by the next lists, each after the list has served that many pages.
        self.list_errors: list[tuple[int, BaseException]] = []
        self.watch_opened = asyncio.Event()
        self._uid = 0

    # ------------------------------------------------------------------ mutations

    def _event(self, etype: str, obj: KubeObject) -> None:
        event = WatchEvent(type=etype, object=copy.deepcopy(obj))  # type: ignore[arg-type]
        self.history.append((self.rv, event))
        if self.deliver:
            for q in self.watchers:
                q.put_nowait(event)

    def create(self, name: str, data: str = "") -> KubeObject:
        assert name not in self.objects
        self.rv += 1
        self._uid += 1
        obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"u{self._uid}",
                "resourceVersion": str(self.rv),
            },
            "data": {"v": data},
        }
        self.objects[name] = obj
        self._event("ADDED", obj)
        return obj

    def update(self, name: str, data: str) -> None:
        self.rv += 1
        obj = self.objects[name]
        obj["data"] = {"v": data}
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._event("MODIFIED", obj)

    def delete(self, name: str) -> None:
        self.rv += 1
        obj = self.objects.pop(name)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._event("DELETED", obj)

    def bookmark(self) -> None:
        self.rv += 1  # other kinds changed: the RV moves without events for us
        event = WatchEvent(
            type="BOOKMARK",
            object={"kind": "ConfigMap", "metadata": {"resourceVersion": str(self.rv)}},
        )
        for q in self.watchers:
            q.put_nowait(event)

    def compact(self) -> None:
        self.oldest = self.rv
        self.history.clear()

    def end_watches(self) -> None:
        for q in self.watchers:
            q.put_nowait(_END)

    def break_watches(self) -> None:
        for q in self.watchers:
            q.put_nowait(_BREAK)

    # ------------------------------------------------------------------ ListWatch

    async def pages(
        self, *, resource_version: str | None, limit: int | None
    ) -> AsyncIterator[Page]:
        """The objects in pages of ``limit``, all at the list's resourceVersion."""
        self.list_calls.append(resource_version)
        await asyncio.sleep(0)
        items = [copy.deepcopy(o) for o in self.objects.values()]
        size = limit or max(1, len(items))
        chunks = [items[i : i + size] for i in range(0, len(items), size)] or [[]]
        fail = self.list_errors.pop(0) if self.list_errors else None
        for n, chunk in enumerate(chunks, start=1):
            if fail is not None and n > fail[0]:
                raise fail[1]
            token = None if n == len(chunks) else str(n)
            yield Page(items=chunk, resource_version=str(self.rv), continue_token=token)

    @contextlib.asynccontextmanager
    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[FakeStream]:
        self.watch_calls.append(resource_version)
        await asyncio.sleep(0)
        if self.watch_errors:
            raise self.watch_errors.pop(0)
        since = int(resource_version)
        queue: asyncio.Queue[object] = asyncio.Queue()
        if since < self.oldest:
            gone = GoneError(
                status=410, reason="Expired", message=f"too old resource version: {since}"
            )
            if self.gone == "http":
                raise gone
            queue.put_nowait(gone)  # the apiserver's way: 200, then an ERROR event
        else:
            for rv, event in self.history:
                if rv > since:
                    queue.put_nowait(event)
        self.watchers.append(queue)
        self.watch_opened.set()
        try:
            yield FakeStream(queue)
        finally:
            self.watchers.remove(queue)
