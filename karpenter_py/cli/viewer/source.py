"""Where the viewer's snapshots come from: the API server through the controller's own informer
wiring (live), or a cluster dump through ``plan --disruption``'s builder (offline).

Live, each kind the controller's state is built from is reflected into a
:class:`~karpenter_py.state.cluster.Cluster` by the same ingest sinks (``manager.wiring``); a
delivery only raises the ``changed`` flag, so a burst of events costs no redraw of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from karpenter_py.cli.plan import PoolCatalogs
from karpenter_py.controllers.runtime import EVERY_NODECLASS, Watch
from karpenter_py.informer.reflector import Reflector
from karpenter_py.informer.source import ListWatch
from karpenter_py.kube import KubeClient, KubeObject, NotFoundError, Resource
from karpenter_py.manager.wiring import (
    NODECLASS_KINDS,
    nodeclass_kind,
    reflectors,
    state_kinds,
)
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.snapshot import Snapshot


@dataclass(slots=True)
class DumpSource:
    """A cluster read from files: one snapshot, decided at one time (``--now``)."""

    fixed: Snapshot
    catalogs: PoolCatalogs
    changed: bool = True

    def snapshot(self, now: datetime) -> Snapshot:
        return self.fixed

    def synced(self) -> bool:
        return True

    async def run(self) -> None:
        await asyncio.Event().wait()  # nothing to watch; idles until cancelled


@dataclass(slots=True)
class LiveSource:
    """A Cluster kept equal to the API server by reflectors (``open_live``)."""

    cluster: Cluster
    reflectors: list[Reflector]
    catalogs: PoolCatalogs
    changed: bool = True
    _listed: asyncio.Event = field(default_factory=asyncio.Event)

    def snapshot(self, now: datetime) -> Snapshot:
        return self.cluster.snapshot(now)

    def synced(self) -> bool:
        return self._listed.is_set()

    async def wait_synced(self) -> None:
        await self._listed.wait()

    async def run(self) -> None:
        """Run every reflector until cancelled; ``synced()`` once each has listed."""
        async with asyncio.TaskGroup() as tg:
            for r in self.reflectors:
                tg.create_task(r.run())
            for r in self.reflectors:
                await r.wait_synced()
            self._listed.set()
            self.changed = True


async def served_nodeclasses(client: KubeClient) -> list[tuple[str, str]]:
    """The NodeClass kinds whose CRDs the API server serves (a kwok cluster may lack
    EC2NodeClass): reflecting an unserved kind would never list."""
    served = []
    for (group, kind), (resource, _) in NODECLASS_KINDS.items():
        try:
            await client.list_page(resource, limit=1)  # one page: only whether it is served
        except NotFoundError:
            continue
        served.append((group, kind))
    return served


def open_live(
    source: Callable[[Resource], ListWatch],
    catalogs: PoolCatalogs,
    nodeclasses: list[tuple[str, str]],
    *,
    node_overlay: bool = False,
) -> LiveSource:
    """A LiveSource reflecting the controller's kinds (``state_kinds``) from ``source`` (the API
    server's ``KubeListWatch``; the benchmark's files)."""
    cluster = Cluster()
    live = LiveSource(cluster, [], catalogs)
    kinds = state_kinds(
        cluster, [nodeclass_kind(cluster, g, k) for g, k in nodeclasses], node_overlay=node_overlay
    )

    def changed(_: KubeObject) -> None:
        live.changed = True

    def listed(_: object) -> None:
        live.changed = True

    watches = [
        Watch(
            EVERY_NODECLASS if kind.nodeclass else kind.resource,
            upsert=changed,
            delete=changed,
            listed=listed,
        )
        for kind in kinds
    ]
    live.reflectors = reflectors(kinds, watches, source)
    return live
