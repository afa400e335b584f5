"""The reflector: keep a store (and sinks) equal to one resource in the apiserver.

client-go's ListAndWatch, translated:

* **list** (paged, consistent read by default): the first one goes to the store and the sinks
  a page at a time (``Sink.listed``), later ones are diffed against the store
  (``store.replace``); the list's resourceVersion (RV) becomes the watch start;
* **watch** from that RV with bookmarks and a server timeout jittered in ``watch_timeout`` (so
  many informers do not reconnect in lock-step); every event and bookmark advances the RV, and
  when the server ends the stream we simply watch again from the last RV;
* **410 Gone** — on the watch request or as an ERROR event inside the stream — means our RV fell
  out of the server's history: relist and ``replace``, delivering to sinks only the difference
  (deletes for objects that vanished, upserts for new or changed ones);
* **anything else** (connection reset, 5xx, 429, a watch that closes at once): wait with jittered
  exponential backoff (0.8 s doubling to 30 s) and resume from the last RV, without relisting.
  Backoff resets once a watch delivers data again (events or bookmarks), not merely after a
  list, so a list-then-410 loop keeps slowing down.

A ``transform`` (client-go's SetTransform) is applied to each listed object as its page arrives
and to each watched object, before the store and the sinks see it: a 100,000-pod list then never
holds more than a page of whole API objects. The store may keep less still (``Store(keep=...)``).

Errors raised by sinks are bugs and propagate (the owning TaskGroup sees them). Cancellation is
the only way to stop :meth:`Reflector.run`; the watch connection is closed on the way out.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from karpenter_py.aio.backoff import Backoff
from karpenter_py.informer.events import Sink
from karpenter_py.informer.source import ListWatch
from karpenter_py.informer.store import Store
from karpenter_py.kube.errors import GoneError, KubeError, TooManyRequestsError, TransportError
from karpenter_py.kube.objects import (
    ADDED,
    BOOKMARK,
    DELETED,
    MODIFIED,
    KubeObject,
    Transform,
    WatchEvent,
    resource_version_of,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReflectorStatistics:
    synced: bool
    resource_version: str | None
    lists: int
    relists: int  # lists after the first, i.e. recoveries from 410
    watches: int
    events: int
    bookmarks: int
    errors: int
    last_error: str | None


class Reflector:
    def __init__(
        self,
        source: ListWatch,
        *,
        name: str,
        store: Store | None = None,
        sinks: Sequence[Sink] = (),
        page_size: int | None = 500,
        transform: Transform | None = None,
        list_resource_version: str | None = None,
        watch_timeout: tuple[float, float] = (300.0, 600.0),
        min_watch_duration: float = 1.0,
        backoff: Backoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        """``list_resource_version=None`` makes every list a consistent read (served from the
        watch cache on current apiservers); ``"0"`` accepts any cached state, as client-go's
        first list does, at the price of possibly stale data."""
        self.name = name
        self.store = store if store is not None else Store()
        self._source = source
        self._sinks = tuple(sinks)
        self._page_size = page_size
        self._transform = transform
        self._list_rv = list_resource_version
        self._watch_timeout = watch_timeout
        self._min_watch_duration = min_watch_duration
        self._backoff = backoff if backoff is not None else Backoff(initial=0.8, maximum=30.0)
        self._sleep = sleep
        self._monotonic = monotonic
        self._rng = rng if rng is not None else random.Random()
        self._synced = asyncio.Event()
        self._rv: str | None = None  # last RV seen (list, event or bookmark)
        self._needs_list = True
        self._listed_any = False  # a first list began: later lists must diff, even if unsynced
        self._gone_streak = 0
        self._lists = self._watches = self._events = self._bookmarks = self._errors = 0
        self._last_error: str | None = None

    # ------------------------------------------------------------------ observation

    @property
    def synced(self) -> bool:
        """True once the first list has been applied to the store and the sinks."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def resource_version(self) -> str | None:
        return self._rv

    def statistics(self) -> ReflectorStatistics:
        return ReflectorStatistics(
            synced=self.synced,
            resource_version=self._rv,
            lists=self._lists,
            relists=max(0, self._lists - 1),
            watches=self._watches,
            events=self._events,
            bookmarks=self._bookmarks,
            errors=self._errors,
            last_error=self._last_error,
        )

    # ------------------------------------------------------------------ loop

    async def run(self) -> None:
        """List and watch until cancelled. Calling it again later resumes from the last RV."""
        while True:
            try:
                if self._needs_list:
                    await self._list()
                await self._watch()
            except GoneError as e:
                # Our RV (or a continue token) is older than the server's history: relist.
                self._needs_list = True
                self._gone_streak += 1
                log.info(
                    "%s: resourceVersion %s expired (%s); relisting", self.name, self._rv, e.message
                )
                if self._gone_streak > 1:  # 410 again right after a relist: do not spin
                    await self._sleep(self._backoff.next())
            except TooManyRequestsError as e:
                await self._failed(e, floor=e.retry_after or 0.0)
            except KubeError as e:
                await self._failed(e)

    async def _failed(self, error: KubeError, *, floor: float = 0.0) -> None:
        self._errors += 1
        self._last_error = f"{type(error).__name__}: {error}"
        delay = max(floor, self._backoff.next())
        log.warning(
            "%s: %s; retrying in %.1fs from resourceVersion %s",
            self.name,
            self._last_error,
            delay,
            self._rv,
        )
        await self._sleep(delay)

    async def _list(self) -> None:
        if self._listed_any:
            await self._relist()
        else:
            await self._first_list()
        self._lists += 1
        self._needs_list = False
        if not self._synced.is_set():
            self._synced.set()
            for sink in self._sinks:
                sink.synced()
            log.info(
                "%s: synced %d objects at resourceVersion %s",
                self.name,
                len(self.store),
                self._rv,
            )

    async def _first_list(self) -> None:
        """Page by page into an empty store and sinks: only one page of whole API objects is
        alive at a time. If the list fails part way (an expired continue token), what arrived
        stays, and the next list diffs against it."""
        self._listed_any = True
        rv: str | None = None
        async for page in self._source.pages(resource_version=self._list_rv, limit=self._page_size):
            items = self._transformed(page.items)
            for obj in items:
                self.store.upsert(obj)
            for sink in self._sinks:
                sink.listed(items)
            rv = page.resource_version
        self.store.resource_version = self._rv = rv

    async def _relist(self) -> None:
        """The whole list, then only the difference from the store goes to the sinks."""
        items: list[KubeObject] = []
        rv: str | None = None
        async for page in self._source.pages(resource_version=self._list_rv, limit=self._page_size):
            items.extend(self._transformed(page.items))
            rv = page.resource_version
        diff = self.store.replace(items, rv)
        self._rv = rv
        del items
        for obj in diff.deleted:
            for sink in self._sinks:
                sink.delete(obj)
        for obj in diff.upserted:
            for sink in self._sinks:
                sink.upsert(obj)
        log.info(
            "%s: relisted at resourceVersion %s: %d deleted, %d upserted, %d unchanged",
            self.name,
            self._rv,
            len(diff.deleted),
            len(diff.upserted),
            diff.unchanged,
        )

    def _transformed(self, objs: list[KubeObject]) -> list[KubeObject]:
        return objs if self._transform is None else [self._transform(o) for o in objs]

    async def _watch(self) -> None:
        if self._rv is None:
            raise RuntimeError("watch before list")
        lo, hi = self._watch_timeout
        timeout = max(1, int(self._rng.uniform(lo, hi)))
        started = self._monotonic()
        seen = 0
        async with self._source.watch(resource_version=self._rv, timeout_seconds=timeout) as stream:
            self._watches += 1
            async for event in stream:
                if seen == 0:  # data flows: the connection is healthy again
                    self._backoff.reset()
                    self._gone_streak = 0
                seen += 1
                self._apply(event)
        if seen == 0 and self._monotonic() - started < self._min_watch_duration:
            # A server that closes watches at once would otherwise make us spin.
            raise TransportError(f"{self.name}: watch closed immediately without events")

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        rv = resource_version_of(obj)
        if event.type == BOOKMARK:
            self._bookmarks += 1
        elif self._transform is not None:
            obj = self._transform(obj)
        if event.type in (ADDED, MODIFIED):
            self._events += 1
            self.store.upsert(obj)
            for sink in self._sinks:
                sink.upsert(obj)
        elif event.type == DELETED:
            self._events += 1
            self.store.delete(obj)
            for sink in self._sinks:
                sink.delete(obj)
        if rv:
            self._rv = rv
            self.store.resource_version = rv
