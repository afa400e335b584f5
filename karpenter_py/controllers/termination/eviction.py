"""The eviction queue: asks the Eviction API to remove pods, retrying refusals with backoff.

Upstream's pkg/controllers/node/termination/terminator/eviction.go. Each pod is evicted with a
UID precondition, so a same-named successor is never hit. Answers:

* 200 — the pod is being deleted (event ``Evicted`` on the pod);
* 404 / 409 — the pod is gone, or is not the pod we meant: done;
* 429 — a PodDisruptionBudget said no (event ``FailedDraining`` on the node): retry;
* 500 — the pod matches several PDBs (the API refuses to choose): retry, with the same event;
* anything else — retry.

Retries back off per pod from 100 ms doubling to 10 s. A pod already queued (or backing off) is
not queued again, so the node termination controller may offer the same pods on every pass
without defeating the backoff. Nor is a pod evicted in the last ``recent_seconds``: until the
watch shows it terminating, the cache still lists it as running, and a second eviction would
only repeat the first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from karpenter_py.controllers.runtime import Watch
from karpenter_py.informer.ratelimit import ItemExponentialRateLimiter
from karpenter_py.informer.workqueue import QueueClosedError, WorkQueue
from karpenter_py.kube.errors import (
    ConflictError,
    KubeError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from karpenter_py.kube.events import WARNING, EventRecorder, Reason, object_ref
from karpenter_py.model.core import Pod
from karpenter_py.obs.metrics import Metrics

log = logging.getLogger("karpenter.eviction-queue")


class Evictor(Protocol):
    async def evict(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class EvictionKey:
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, pod: Pod) -> EvictionKey:
        return cls(pod.namespace, pod.name, pod.uid)


class EvictionQueue:
    name = "eviction-queue"

    def __init__(
        self,
        client: Evictor,
        recorder: EventRecorder,
        *,
        metrics: Metrics | None = None,
        base: float = 0.1,
        maximum: float = 10.0,
        workers: int = 20,
        recent_seconds: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._recent = recent_seconds
        self._monotonic = monotonic
        self._evicted: dict[EvictionKey, float] = {}  # key -> when its eviction succeeded
        self._recorder = recorder
        self._metrics = metrics
        self.workers = workers
        self.queue = WorkQueue[EvictionKey](
            rate_limiter=ItemExponentialRateLimiter[EvictionKey](base=base, maximum=maximum),
            name=self.name,
        )
        self._node_of: dict[EvictionKey, str] = {}  # queued keys -> node being drained

    def add(self, node_name: str, pods: Iterable[Pod]) -> int:
        """Queue pods of ``node_name`` not queued yet; returns how many were new."""
        added = 0
        now = self._monotonic()
        if len(self._evicted) > 1024:
            self._evicted = {k: t for k, t in self._evicted.items() if now - t < self._recent}
        for pod in pods:
            key = EvictionKey.of(pod)
            if key in self._node_of:
                continue
            evicted = self._evicted.get(key)
            if evicted is not None and now - evicted < self._recent:
                continue
            self._node_of[key] = node_name
            self.queue.add(key)
            added += 1
        return added

    def __contains__(self, pod: Pod) -> bool:
        return EvictionKey.of(pod) in self._node_of

    def __len__(self) -> int:
        return len(self._node_of)

    def watches(self) -> Sequence[Watch]:
        return ()  # fed by node termination's drains

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for _ in range(self.workers):
                tg.create_task(self._worker())

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueClosedError:
                return
            try:
                done = await self.evict(key)
            except Exception:  # a bug must not kill the queue's other workers
                log.exception(
                    "eviction attempt failed", extra={"pod": f"{key.namespace}/{key.name}"}
                )
                done = False
            finally:
                self.queue.done(key)
            if done:
                self.queue.forget(key)
                self._node_of.pop(key, None)
            else:
                self.queue.add_rate_limited(key)

    async def evict(self, key: EvictionKey) -> bool:
        """One eviction attempt; True when the pod needs no further attempts."""
        node = self._node_of.get(key, "")
        try:
            await self._client.evict(key.name, namespace=key.namespace, uid=key.uid or None)
        except (NotFoundError, ConflictError) as e:
            self._count(e.status)
            return True
        except TooManyRequestsError as e:
            self._count(e.status)
            self._failed_draining(node, key, "evicting pod violates a PDB")
            return False
        except ServerError as e:
            self._count(e.status)
            self._failed_draining(node, key, f"evicting pod failed: {e.message or e.reason}")
            return False
        except KubeError as e:
            log.warning(
                "eviction failed",
                extra={"pod": f"{key.namespace}/{key.name}", "node": node, "error": str(e)},
            )
            return False
        self._count(200)
        self._evicted[key] = self._monotonic()
        self._recorder.record(
            object_ref("v1", "Pod", key.name, namespace=key.namespace, uid=key.uid or None),
            Reason.EVICTED,
            "Evicted pod",
        )
        return True

    def _count(self, code: int) -> None:
        if self._metrics is not None:
            self._metrics.pods_eviction_requests.labels(code=str(code)).inc()

    def _failed_draining(self, node: str, key: EvictionKey, why: str) -> None:
        if not node:
            return
        self._recorder.record(
            object_ref("v1", "Node", node),
            Reason.FAILED_DRAINING,
            f"Failed to drain node, {why} (Pod={key.namespace}/{key.name})",
            event_type=WARNING,
        )
