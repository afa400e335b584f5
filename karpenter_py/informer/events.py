"""The Sink role: where a reflector delivers what it learns, synchronously and in order.

Sinks are plain sync methods, so one event is applied atomically (no awaits, no locks) and no
DeltaFIFO is needed between the watch and its consumers. ``state`` satisfies this Protocol
structurally, so it never imports ``informer``.

Delivery contract (per reflector, in this order):

1. first list: ``listed(objects)`` once per page as the pages arrive (the sink held nothing
   before the first page; each page adds to what it holds), then ``synced()`` once;
2. watch events: ``upsert(obj)`` for ADDED/MODIFIED, ``delete(final obj)`` for DELETED;
3. relist after a 410 (or any later list): deltas only — ``delete(last known obj)`` for each
   object that vanished while we were not watching, ``upsert(obj)`` for each new object or one
   whose resourceVersion changed. Unchanged objects are not re-delivered, so nothing is lost and
   nothing is duplicated.

Objects are the decoded wire dicts shared with the store: treat them as read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from karpenter_py.kube.objects import KubeObject


class Sink(Protocol):
    def upsert(self, obj: KubeObject) -> None: ...

    def delete(self, obj: KubeObject) -> None: ...

    def listed(self, objs: Sequence[KubeObject]) -> None: ...

    def synced(self) -> None: ...


def _ignore(_: KubeObject) -> None:
    return None


def _ignore_many(_: Sequence[KubeObject]) -> None:
    return None


def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class CallbackSink:
    """A Sink from plain functions, for consumers that only care about some deliveries
    (e.g. a provisioning trigger that only needs upserts). ``listed`` defaults to upserting
    each object, which is what a trigger-style consumer wants on the first list."""

    on_upsert: Callable[[KubeObject], None] = _ignore
    on_delete: Callable[[KubeObject], None] = _ignore
    on_listed: Callable[[Sequence[KubeObject]], None] | None = None
    on_synced: Callable[[], None] = _nothing

    def upsert(self, obj: KubeObject) -> None:
        self.on_upsert(obj)

    def delete(self, obj: KubeObject) -> None:
        self.on_delete(obj)

    def listed(self, objs: Sequence[KubeObject]) -> None:
        if self.on_listed is not None:
            self.on_listed(objs)
        else:
            for obj in objs:
                self.on_upsert(obj)

    def synced(self) -> None:
        self.on_synced()
