"""Launching instances for NodeClaims: ``CloudProvider.create`` once per NodeClaim UID.

Two pieces live here:

* :class:`Launcher` — calls ``create`` at most once per NodeClaim UID while it holds a result for
  it. The lifecycle controller reads NodeClaims from a cache that can lag behind its own status
  write; without the UID-keyed results, a reconcile on a stale copy (Launched not yet visible)
  would launch a second instance. Errors are classified into a :class:`LaunchOutcome`.
* :class:`UnavailableOfferings` — the insufficient-capacity (ICE) cache: (instance type, zone,
  capacity type) triples that failed recently, each for ``ttl`` seconds (upstream: 3 minutes;
  marking again extends it). The provisioner consults it so the next round picks another
  offering. API for callers of ``CloudProvider.get_instance_types``::

      types = ice.apply(await cloud.get_instance_types(nodepool))   # offerings masked
      ice.is_unavailable("m-4x-amd64-linux", "test-zone-a", "spot")
      ice.seq_num          # bumps on every change: cache derived data keyed on it
      ice.entries()        # {(type, zone, capacity type): seconds left}
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from karpenter_py.aio.clock import Clock
from karpenter_py.cloudprovider.errors import (
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
)
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.launcher.failures import log_failure
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.instancetype import InstanceType, OfferingKey
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.obs.metrics import Metrics

log = logging.getLogger("karpenter.launcher")

ICE_TTL = 180.0  # upstream's UnavailableOfferingsTTL
RESULT_TTL = 3600.0  # launch results outlive any plausible cache lag by far


class UnavailableOfferings:
    """A TTL set of offerings that recently failed with insufficient capacity."""

    def __init__(self, *, clock: Clock, ttl: float = ICE_TTL) -> None:
        self._clock = clock
        self.ttl = ttl
        self._expires: dict[OfferingKey, float] = {}  # key -> monotonic expiry
        self.seq_num = 0
        # id(input list) -> (input, seq_num, masked copy): ``apply`` hands back the same object
        # while neither the input nor the marks changed, so solver indexes keyed on it survive.
        self._applied: dict[int, tuple[Sequence[InstanceType], int, list[InstanceType]]] = {}

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> None:
        self._expires[(instance_type, zone, capacity_type)] = self._clock.monotonic() + self.ttl
        self.seq_num += 1

    def mark_all(self, offerings: Iterable[OfferingKey]) -> None:
        for it, zone, ct in offerings:
            self.mark_unavailable(it, zone, ct)

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        key = (instance_type, zone, capacity_type)
        expires = self._expires.get(key)
        if expires is None:
            return False
        if expires <= self._clock.monotonic():
            del self._expires[key]
            self.seq_num += 1
            return False
        return True

    def entries(self) -> dict[OfferingKey, float]:
        """Live entries and the seconds each has left (expired ones are dropped)."""
        now = self._clock.monotonic()
        expired = [k for k, t in self._expires.items() if t <= now]
        for key in expired:
            del self._expires[key]
        if expired:
            self.seq_num += 1
        return {k: t - now for k, t in self._expires.items()}

    def apply(self, instance_types: Sequence[InstanceType]) -> list[InstanceType]:
        """Copies of ``instance_types`` whose ICE'd offerings say ``available=False``. The same
        list comes back for the same input while the marks are unchanged (do not mutate it)."""
        live = self.entries()
        held = self._applied.get(id(instance_types))
        if held is not None and held[0] is instance_types and held[1] == self.seq_num:
            return held[2]
        out = self._mask(instance_types, live)
        self._applied[id(instance_types)] = (instance_types, self.seq_num, out)
        while len(self._applied) > 64:
            del self._applied[next(iter(self._applied))]
        return out

    @staticmethod
    def _mask(
        instance_types: Sequence[InstanceType], live: Mapping[OfferingKey, float]
    ) -> list[InstanceType]:
        if not live:
            return list(instance_types)
        out = []
        for it in instance_types:
            if not any(
                (it.name, o.zone, o.capacity_type) in live and o.available for o in it.offerings
            ):
                out.append(it)
                continue
            offerings = tuple(
                replace(o, available=False) if (it.name, o.zone, o.capacity_type) in live else o
                for o in it.offerings
            )
            out.append(replace(it, offerings=offerings))
        return out


class LaunchStatus(StrEnum):
    LAUNCHED = "launched"  # ``nodeclaim`` holds the provider's answer
    DELETE = "delete"  # the NodeClaim cannot launch: delete it (``reason`` is the metric reason)
    RETRY = "retry"  # transient: Launched=Unknown with ``reason``, try again after ``retry_after``


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    status: LaunchStatus
    nodeclaim: NodeClaim | None = None
    reason: str = ""  # condition reason (RETRY) or upstream metric reason (DELETE)
    message: str = ""
    event_reason: str = ""  # upstream event reason to publish, if any
    retry_after: float = 0.0


# Upstream's metric reasons for NodeClaims deleted at launch.
REASON_INSUFFICIENT_CAPACITY = "insufficient_capacity"
REASON_NODECLASS_NOT_READY = "nodeclass_not_ready"


@dataclass(slots=True)
class _Result:
    nodeclaim: NodeClaim
    at: float


class Launcher:
    def __init__(
        self,
        cloud: CloudProvider,
        *,
        clock: Clock,
        unavailable: UnavailableOfferings | None = None,
        metrics: Metrics | None = None,
        retry_base: float = 1.0,
        retry_max: float = 60.0,
    ) -> None:
        self.cloud = cloud
        self.clock = clock
        self.unavailable = (
            unavailable if unavailable is not None else UnavailableOfferings(clock=clock)
        )
        self.metrics = metrics
        self._results: dict[str, _Result] = {}  # NodeClaim UID -> provider answer
        self._failures: dict[str, int] = {}  # NodeClaim UID -> consecutive transient failures
        self._retry_base = retry_base
        self._retry_max = retry_max
        self.creates = 0  # calls to CloudProvider.create (tests assert "exactly once")

    def result(self, uid: str) -> NodeClaim | None:
        held = self._results.get(uid)
        return held.nodeclaim if held is not None else None

    def forget(self, uid: str) -> None:
        """The NodeClaim is gone: drop what we keep for it."""
        self._results.pop(uid, None)
        self._failures.pop(uid, None)

    async def launch(self, nodeclaim: NodeClaim) -> LaunchOutcome:
        uid = nodeclaim.metadata.uid
        if not uid:
            raise ValueError("launch needs a NodeClaim read from the API (metadata.uid is empty)")
        held = self._results.get(uid)
        if held is not None:
            return LaunchOutcome(LaunchStatus.LAUNCHED, nodeclaim=held.nodeclaim)
        self._prune()
        self.creates += 1
        started = self.clock.monotonic()
        try:
            created = await self.cloud.create(nodeclaim)
        except InsufficientCapacityError as e:
            self._cloud_error("InsufficientCapacityError")
            offerings = e.offerings or _offerings_of(nodeclaim)
            self.unavailable.mark_all(offerings)
            log.info(
                "insufficient capacity",
                extra={"nodeclaim": nodeclaim.name, "offerings": len(offerings), "error": str(e)},
            )
            return _deleted(REASON_INSUFFICIENT_CAPACITY, e, "InsufficientCapacityError")
        except NodeClassNotReadyError as e:
            self._cloud_error("NodeClassNotReadyError")
            return _deleted(REASON_NODECLASS_NOT_READY, e, "NodeClassNotReady")
        except CreateError as e:
            self._cloud_error("CreateError")
            return self._retry(uid, e.reason, str(e))
        except Exception as e:  # a provider bug or transport failure: retry, never crash
            self._cloud_error(type(e).__name__)
            log_failure(log, "launch failed", e, {"nodeclaim": nodeclaim.name})
            return self._retry(uid, "LaunchFailed", str(e) or type(e).__name__)
        finally:
            if self.metrics is not None:
                self.metrics.cloudprovider_duration.labels(
                    controller="nodeclaim.lifecycle", method="Create", provider=self.cloud.name
                ).observe(self.clock.monotonic() - started)
        self._failures.pop(uid, None)
        self._results[uid] = _Result(created, self.clock.monotonic())
        return LaunchOutcome(LaunchStatus.LAUNCHED, nodeclaim=created)

    def _retry(self, uid: str, reason: str, message: str) -> LaunchOutcome:
        n = self._failures.get(uid, 0)
        self._failures[uid] = n + 1
        delay = min(self._retry_max, self._retry_base * 2.0 ** min(n, 16))
        return LaunchOutcome(LaunchStatus.RETRY, reason=reason, message=message, retry_after=delay)

    def _cloud_error(self, error: str) -> None:
        if self.metrics is not None:
            self.metrics.cloudprovider_errors.labels(
                controller="nodeclaim.lifecycle",
                method="Create",
                provider=self.cloud.name,
                error=error,
            ).inc()

    def _prune(self) -> None:
        # Forget results of NodeClaims whose deletion we never heard of (a missed watch event).
        now = self.clock.monotonic()
        if len(self._results) < 1024:
            return
        self._results = {k: r for k, r in self._results.items() if now - r.at < RESULT_TTL}


def _deleted(reason: str, error: Exception, event_reason: str) -> LaunchOutcome:
    """The NodeClaim can never launch as it is: delete it, saying why (metric reason, event)."""
    return LaunchOutcome(
        LaunchStatus.DELETE, reason=reason, message=str(error), event_reason=event_reason
    )


def _offerings_of(nodeclaim: NodeClaim) -> tuple[OfferingKey, ...]:
    """Offerings a NodeClaim pinned by single-valued requirements (when the error names none)."""
    single: dict[str, str] = {}
    for r in nodeclaim.spec.requirements:
        if r.operator == "In" and len(r.values) == 1:
            single[r.key] = r.values[0]
    labels = nodeclaim.metadata.labels
    it = single.get(LABEL_INSTANCE_TYPE) or labels.get(LABEL_INSTANCE_TYPE)
    zone = single.get(LABEL_TOPOLOGY_ZONE) or labels.get(LABEL_TOPOLOGY_ZONE)
    ct = single.get(LABEL_CAPACITY_TYPE) or labels.get(LABEL_CAPACITY_TYPE)
    return ((it, zone, ct),) if it and zone and ct else ()
