"""Running object reconcilers: N workers pulling keys from a coalescing work queue.

Shared by every controller package (they never import each other). A reconciler returns a
``Result`` (requeue after a delay, or nothing); an exception requeues the key with per-key
exponential backoff, as controller-runtime does, and is logged once per failure.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

from karpenter_py.informer.ratelimit import default_controller_rate_limiter
from karpenter_py.informer.workqueue import QueueClosedError, WorkQueue
from karpenter_py.kube.errors import ConflictError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Result:
    requeue_after: float | None = None


class Reconciler(Protocol):
    @property
    def name(self) -> str: ...

    async def reconcile(self, key: str) -> Result | None: ...


def new_queue(name: str, *, base: float = 0.1, maximum: float = 10.0) -> WorkQueue[str]:
    """A queue whose failed keys back off from ``base`` to ``maximum`` seconds."""
    return WorkQueue[str](
        rate_limiter=default_controller_rate_limiter(base=base, maximum=maximum), name=name
    )


async def run_workers(reconciler: Reconciler, queue: WorkQueue[str], *, workers: int = 10) -> None:
    """Process keys until the queue closes or the caller is cancelled."""

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except QueueClosedError:
                return
            try:
                result = await reconciler.reconcile(key)
            except asyncio.CancelledError:
                raise
            except ConflictError:
                # Our cached copy was stale; the watch will catch up. Retry soon, quietly.
                queue.add_rate_limited(key)
            except Exception:
                log.exception("reconcile failed", extra={"controller": reconciler.name, "key": key})
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
                if result is not None and result.requeue_after is not None:
                    queue.add_after(key, result.requeue_after)
            finally:
                queue.done(key)

    async with asyncio.TaskGroup() as tg:
        for _ in range(workers):
            tg.create_task(worker())
