"""Running controllers: what wakes them, and N workers pulling keys from a coalescing work queue.

Shared by every controller package (they never import each other). A :class:`Controller` is what
the manager keeps in its one flat list: a name, the kinds it watches (:class:`Watch`: which
deliveries of a kind's reflector it hears and how each maps to its work) and a leader-only
``run``. Most are a :class:`QueueController`: triggers put keys on its queue, workers reconcile
them once the cluster state has synced.

A reconciler returns a ``Result`` (requeue after a delay, or nothing); an exception requeues the
key with per-key exponential backoff, as controller-runtime does, and is logged once per failure:
one WARN line with the next retry's delay when the failure is transient (``failures``), ERROR
with the traceback otherwise.

With a :class:`WorkerMetrics` (``obs.metrics.Metrics`` is one), every reconcile is counted and
timed by result (``controller_runtime_reconcile_*``), and the queue reports its depth, adds,
retries and in-progress work (``workqueue_*``) every ``report_interval`` seconds and on exit.
Result values are controller-runtime's: ``success``, ``requeue_after`` (a ``Result`` with a
delay), ``requeue`` (a write conflict, retried quietly) and ``error`` (any other exception).
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from karpenter_py.aio.clock import Clock
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.informer.ratelimit import default_controller_rate_limiter
from karpenter_py.informer.workqueue import QueueClosedError, WorkQueue
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.errors import ConflictError
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import Resource
from karpenter_py.launcher.failures import log_failure
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Result:
    requeue_after: float | None = None


class Reconciler(Protocol):
    @property
    def name(self) -> str: ...

    async def reconcile(self, key: str) -> Result | None: ...


class WorkerMetrics(Protocol):
    """Where :func:`run_workers` reports; ``obs.metrics.Metrics`` satisfies it."""

    def observe_reconcile(self, controller: str, result: str, seconds: float) -> None: ...

    def observe_workqueue(
        self,
        name: str,
        *,
        depth: int,
        adds: int,
        retries: int,
        unfinished_seconds: float,
        longest_running_seconds: float,
    ) -> None: ...


def new_queue(name: str, *, base: float = 0.1, maximum: float = 10.0) -> WorkQueue[str]:
    """A queue whose failed keys back off from ``base`` to ``maximum`` seconds."""
    return WorkQueue[str](
        rate_limiter=default_controller_rate_limiter(base=base, maximum=maximum), name=name
    )


async def _reconcile_one(reconciler: Reconciler, queue: WorkQueue[str], key: str) -> str:
    """Reconcile ``key`` and requeue it as its outcome asks; returns the outcome's name."""
    try:
        result = await reconciler.reconcile(key)
    except asyncio.CancelledError:
        raise
    except ConflictError:
        # Our cached copy was stale; the watch will catch up. Retry soon, quietly.
        queue.add_rate_limited(key)
        return "requeue"
    except Exception as exc:
        delay = queue.add_rate_limited(key)
        fields = {"controller": reconciler.name, "key": key, "retry_in_s": round(delay, 3)}
        log_failure(log, "reconcile failed", exc, fields)
        return "error"
    queue.forget(key)
    if result is not None and result.requeue_after is not None:
        queue.add_after(key, result.requeue_after)
        return "requeue_after"
    return "success"


class _QueueReport:
    """What one queue's workers tell :class:`WorkerMetrics`: each reconcile as it ends, and the
    queue's state (in-progress work included) on :meth:`report`."""

    def __init__(self, name: str, queue: WorkQueue[str], metrics: WorkerMetrics) -> None:
        self.name = name
        self.queue = queue
        self.metrics = metrics
        self.started: dict[int, float] = {}  # worker slot -> when its current reconcile began
        self.retries = 0  # rate-limited re-adds since the last report
        self.adds_reported = 0

    def begin(self, slot: int) -> None:
        self.started[slot] = time.perf_counter()

    def end(self, slot: int, outcome: str) -> None:
        began = self.started.pop(slot)
        if outcome in ("error", "requeue"):
            self.retries += 1
        self.metrics.observe_reconcile(self.name, outcome, time.perf_counter() - began)

    def report(self) -> None:
        stats = self.queue.statistics()
        now = time.perf_counter()
        running = [now - t for t in self.started.values()]
        self.metrics.observe_workqueue(
            self.name,
            depth=stats.queued,
            adds=stats.adds - self.adds_reported,
            retries=self.retries,
            unfinished_seconds=sum(running),
            longest_running_seconds=max(running, default=0.0),
        )
        self.adds_reported, self.retries = stats.adds, 0

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.report()


async def run_workers(
    reconciler: Reconciler,
    queue: WorkQueue[str],
    *,
    workers: int = 10,
    metrics: WorkerMetrics | None = None,
    report_interval: float = 1.0,
) -> None:
    """Process keys until the queue closes or the caller is cancelled."""
    report = _QueueReport(reconciler.name, queue, metrics) if metrics is not None else None

    async def worker(slot: int) -> None:
        while True:
            try:
                key = await queue.get()
            except QueueClosedError:
                return
            if report is not None:
                report.begin(slot)
            try:
                outcome = await _reconcile_one(reconciler, queue, key)
            finally:
                queue.done(key)
            if report is not None:
                report.end(slot, outcome)

    async with asyncio.TaskGroup() as tg:
        ticker = tg.create_task(report.run(report_interval)) if report is not None else None
        async with asyncio.TaskGroup() as pool:
            for slot in range(workers):
                pool.create_task(worker(slot))
        if ticker is not None:
            ticker.cancel()  # the queue closed and every worker returned
    if report is not None:
        report.report()


# ----------------------------------------------------------------------------- what wakes a controller

# Stands for every NodeClass kind the cloud provider supports (which ones is the manager's to know).
EVERY_NODECLASS: Final[Literal["nodeclasses"]] = "nodeclasses"

ObjectHandler = Callable[[KubeObject], None]


@dataclass(frozen=True, slots=True)
class Watch:
    """One kind a controller watches, and what each delivery of it does (usually: which keys go
    on the controller's queue).

    The manager calls the handlers synchronously from the kind's reflector, always *after* the
    cluster state has taken in the same delivery, so a handler may read the object (or anything
    it changed) back from state. ``listed`` takes each page of the first list; without it each listed object goes
    to ``upsert``. Objects are the shared wire dicts: read-only.
    """

    kind: Resource | Literal["nodeclasses"]
    upsert: ObjectHandler | None = None
    delete: ObjectHandler | None = None
    listed: Callable[[Sequence[KubeObject]], None] | None = None


class Controller(Protocol):
    """What the manager runs: its kinds are watched on every replica, ``run`` only on the leader."""

    @property
    def name(self) -> str: ...

    def watches(self) -> Sequence[Watch]: ...

    async def run(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Background:
    """A leader-only loop that watches nothing (the event recorder, a price refresh), so it can
    stand in the controller list beside the rest."""

    name: str
    loop: Callable[[], Awaitable[None]]

    def watches(self) -> Sequence[Watch]:
        return ()

    async def run(self) -> None:
        await self.loop()


def name_of(obj: KubeObject) -> str:
    """``metadata.name`` of a wire object ("" when it has none)."""
    return str(metadata(obj).get("name") or "")


async def wait_synced(cluster: Cluster, *, poll: float = 0.1) -> None:
    """Hold decisions until every informer has listed once (architecture rule): before that an
    object may merely not be seen yet. Polls the loop, not the injected clock: this is plumbing,
    not a decision timer (cluster mutators are sync and signal nothing, hence a poll)."""
    while True:
        if cluster.synced():
            return
        await asyncio.sleep(poll)


async def sweep_forever(
    deps: Deps,
    sweep: Callable[[], Awaitable[object]],
    next_pass_in: Callable[[], float],
    logger: logging.Logger,
    what: str,
) -> None:
    """A periodic controller's loop: once the cluster state synced, ``sweep``, then sleep
    ``next_pass_in()`` seconds on the injected clock, forever. A failed pass (a cloud or API
    hiccup) is logged as ``<what> pass failed`` and the loop goes on."""
    await wait_synced(deps.cluster)
    while True:
        try:
            await sweep()
        except Exception:
            logger.exception("%s pass failed", what)
        await deps.clock.sleep(next_pass_in())


@dataclass(frozen=True, slots=True)
class Deps:
    """What controllers share, built once by the manager and handed to each: the API client, the
    cluster state, the cloud provider, the event recorder, the clock and the metrics. A
    controller's constructor takes this and only what is its own."""

    client: KubeClient
    cluster: Cluster
    cloud: CloudProvider
    recorder: EventRecorder
    clock: Clock
    metrics: Metrics | None = None


class QueueController(ABC):
    """A controller whose triggers put keys on its own work queue and whose ``run`` reconciles
    them with ``workers`` workers (``default_workers`` unless given) once the cluster state has
    synced.

    Subclasses set ``name`` and ``default_workers``, declare :meth:`watches` and implement
    :meth:`reconcile`; one that needs more than the shared :class:`Deps` takes it in its own
    ``__init__``. The queue's failed keys back off from ``backoff_base`` to ``backoff_max``
    seconds."""

    name: str = ""
    default_workers: int = 10
    backoff_base: float = 0.1
    backoff_max: float = 10.0

    def __init__(self, deps: Deps, *, workers: int | None = None) -> None:
        self.deps = deps
        self.workers = workers if workers is not None else self.default_workers
        self.queue = new_queue(self.name, base=self.backoff_base, maximum=self.backoff_max)

    def watches(self) -> Sequence[Watch]:
        return ()

    def enqueue(self, obj: KubeObject) -> None:
        """The trigger most watches use: the object's own name is the key."""
        name = name_of(obj)
        if name:
            self.queue.add(name)

    async def run(self) -> None:
        await wait_synced(self.deps.cluster)
        await run_workers(self, self.queue, workers=self.workers, metrics=self.deps.metrics)

    @abstractmethod
    async def reconcile(self, key: str) -> Result | None: ...
