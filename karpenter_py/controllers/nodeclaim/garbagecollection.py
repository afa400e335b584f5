"""``nodeclaim.garbagecollection``: reconcile NodeClaims with the instances that really exist.

Two directions, every ``interval`` (upstream: 2 minutes):

* a registered NodeClaim whose provider ID is no longer in ``CloudProvider.list()`` and whose
  Node is missing or not Ready lost its instance (terminated behind our back): delete it
  (metric reason ``garbage_collected``), which runs the normal termination path;
* an instance no NodeClaim claims (a crash between launch and the status write, or a NodeClaim
  force-removed) is terminated once it has been unclaimed for ``orphan_grace`` seconds (upstream
  AWS: 30 s), long enough for a fresh launch's status write to land in our cache.

Each item is collected on its own, up to ``PARALLELISM`` at once (as upstream): one that
fails (a TerminateInstances error, an API error) is logged, counted in
``karpenter_cloudprovider_errors_total{controller="nodeclaim.garbagecollection",method="Delete"}``
when the cloud refused, and retried after its own backoff (``retry_base`` doubling up to
``interval``); the loop wakes for the earliest retry. The others are collected in the same pass.
The provider batches the concurrent deletes (AWS: one TerminateInstances for a window of them).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from karpenter_py.aio.backoff import Backoff
from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.controllers.nodeclaim.common import delete_nodeclaim
from karpenter_py.controllers.runtime import Deps, Watch, sweep_forever
from karpenter_py.model.api.nodeclaim import CONDITION_REGISTERED, NodeClaim

log = logging.getLogger("karpenter.nodeclaim.garbagecollection")

GC_INTERVAL = 120.0
ORPHAN_GRACE = 30.0
RETRY_BASE = 1.0  # first retry of a failed item; doubles (jittered) up to the interval
PARALLELISM = 100  # items collected at once (upstream's)


@dataclass(slots=True)
class CollectResult:
    nodeclaims_deleted: list[str] = field(default_factory=list)
    instances_deleted: list[str] = field(default_factory=list)  # provider IDs
    failed: list[str] = field(default_factory=list)  # NodeClaim names / provider IDs, retried
    backing_off: list[str] = field(default_factory=list)  # skipped: their retry is not due


class NodeClaimGarbageCollector:
    name = "nodeclaim.garbagecollection"

    def __init__(
        self,
        deps: Deps,
        *,
        interval: float = GC_INTERVAL,
        orphan_grace: float = ORPHAN_GRACE,
        retry_base: float = RETRY_BASE,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        self.deps = deps
        self.interval = interval
        self.orphan_grace = orphan_grace
        self.retry_base = min(retry_base, interval)
        self.jitter = jitter
        self._rng = rng if rng is not None else random.Random()
        self._unclaimed_since: dict[str, float] = {}  # provider ID -> monotonic first seen
        # Items whose last attempt failed: their backoff and when (monotonic) to try again.
        self._backoffs: dict[str, Backoff] = {}
        self._retry_at: dict[str, float] = {}

    def watches(self) -> Sequence[Watch]:
        return ()  # a periodic sweep: nothing wakes it

    async def run(self) -> None:
        await sweep_forever(self.deps, self.collect, self.next_pass_in, log, "garbage collection")

    def next_pass_in(self) -> float:
        """Seconds to the next pass: the interval, or sooner when a failed item's retry is due."""
        if not self._retry_at:
            return self.interval
        soonest = min(self._retry_at.values()) - self.deps.clock.monotonic()
        return min(self.interval, max(0.0, soonest))

    async def collect(self) -> CollectResult:
        out = CollectResult()
        cluster, cloud = self.deps.cluster, self.deps.cloud
        instances = await cloud.list()
        live = {i.status.provider_id for i in instances if i.status.provider_id}
        now = self.deps.clock.monotonic()
        work: dict[str, Callable[[], Awaitable[None]]] = {}  # item key -> its collection
        for nc in list(cluster.nodeclaims.values()):
            if self._instance_vanished(nc, live):
                work[f"nodeclaim/{nc.name}"] = partial(self._delete_nodeclaim, nc, out)
        claimed_ids = {nc.status.provider_id for nc in cluster.nodeclaims.values()}
        unclaimed: dict[str, float] = {}
        for inst in instances:
            pid = inst.status.provider_id
            # A NodeClaim of the same name is mid-launch: its status has no provider ID yet.
            if not pid or pid in claimed_ids or inst.name in cluster.nodeclaims:
                continue
            since = unclaimed[pid] = self._unclaimed_since.get(pid, now)
            if now - since >= self.orphan_grace:
                work[f"instance/{pid}"] = partial(self._terminate, inst, out)
        self._unclaimed_since = unclaimed
        await self._run_each(work, now, out)
        return out

    async def _run_each(
        self, work: dict[str, Callable[[], Awaitable[None]]], now: float, out: CollectResult
    ) -> None:
        """Run every due item concurrently, each on its own: a failure is logged and backs off
        that item alone. Items no longer to collect forget their backoff."""
        for key in set(self._retry_at) - set(work):
            self._forget(key)
        due: dict[str, Callable[[], Awaitable[None]]] = {}
        for key, step in work.items():
            if self._retry_at.get(key, now) > now:
                out.backing_off.append(key.split("/", 1)[1])
            else:
                due[key] = step

        limit = asyncio.Semaphore(PARALLELISM)

        async def attempt(key: str, step: Callable[[], Awaitable[None]]) -> None:
            try:
                async with limit:
                    await step()
            except Exception as exc:
                self._failed(key, exc, out)
            else:
                self._forget(key)

        async with asyncio.TaskGroup() as tg:
            for key, step in due.items():
                tg.create_task(attempt(key, step))

    def _failed(self, key: str, exc: Exception, out: CollectResult) -> None:
        backoff = self._backoffs.get(key)
        if backoff is None:
            backoff = self._backoffs[key] = Backoff(
                initial=self.retry_base, maximum=self.interval, jitter=self.jitter, rng=self._rng
            )
        delay = backoff.next()
        self._retry_at[key] = self.deps.clock.monotonic() + delay
        kind, name = key.split("/", 1)
        out.failed.append(name)
        log.warning(
            "garbage collection of one item failed; the others go on",
            extra={kind: name, "error": repr(exc), "attempts": backoff.attempts, "retry_in": delay},
        )

    def _forget(self, key: str) -> None:
        self._backoffs.pop(key, None)
        self._retry_at.pop(key, None)

    async def _delete_nodeclaim(self, nc: NodeClaim, out: CollectResult) -> None:
        await delete_nodeclaim(self.deps, nc, "garbage_collected")
        out.nodeclaims_deleted.append(nc.name)

    def _instance_vanished(self, nc: NodeClaim, live: set[str]) -> bool:
        pid = nc.status.provider_id
        if nc.metadata.deletion_timestamp is not None or not pid or pid in live:
            return False
        if not nc.status.is_true(CONDITION_REGISTERED):
            return False  # liveness owns NodeClaims that never registered
        node = self.deps.cluster.node_for_provider_id(pid)
        return node is None or not node.ready

    async def _terminate(self, inst: NodeClaim, out: CollectResult) -> None:
        pid = inst.status.provider_id
        try:
            await self.deps.cloud.delete(inst)
        except NodeClaimNotFoundError:
            pass  # gone already: what we wanted
        except Exception as exc:
            if self.deps.metrics is not None:
                self.deps.metrics.cloudprovider_errors.labels(
                    controller=self.name,
                    method="Delete",
                    provider=self.deps.cloud.name,
                    error=type(exc).__name__,
                ).inc()
            raise
        else:
            log.info("garbage collected instance without nodeclaim", extra={"provider_id": pid})
        self._unclaimed_since.pop(pid, None)
        out.instances_deleted.append(pid)
