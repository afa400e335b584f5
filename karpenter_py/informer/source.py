"""What a reflector lists and watches: one resource, optionally narrowed by namespace/selectors.

The reflector depends on the :class:`ListWatch` role, not on the HTTP client, so its logic (relist
diffing, resume, backoff) is unit-testable against an in-process fake; :class:`KubeListWatch`
binds the real client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.objects import Page, WatchEvent
from karpenter_py.kube.resources import Resource


class ListWatch(Protocol):
    def pages(self, *, resource_version: str | None, limit: int | None) -> AsyncIterator[Page]:
        """One consistent list, a page at a time; the last page has no continue token."""
        ...

    def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AbstractAsyncContextManager[AsyncIterator[WatchEvent]]: ...


@dataclass(frozen=True, slots=True)
class KubeListWatch:
    client: KubeClient
    resource: Resource
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    def pages(self, *, resource_version: str | None, limit: int | None) -> AsyncIterator[Page]:
        return self.client.pages(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=limit,
            resource_version=resource_version,
        )

    def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AbstractAsyncContextManager[AsyncIterator[WatchEvent]]:
        return self.client.watch(
            self.resource,
            namespace=self.namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=True,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
