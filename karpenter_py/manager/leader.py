"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` does it.

Only the leader makes decisions; the other replicas keep their caches warm and wait. The algorithm
is client-go's, with controller-runtime's defaults (lease 15 s, renew deadline 10 s, retry 2 s):

* **acquire**: GET the Lease; create it when missing; otherwise take it over with an
  optimistic-concurrency UPDATE (``metadata.resourceVersion``) once the holder's lease has
  expired or the holder released it (empty ``holderIdentity``). Expiry is judged against *our*
  monotonic clock from the moment we last saw the record change, never against the
  ``renewTime`` written by another machine, so clock skew between nodes does not matter.
  Losing an UPDATE race (409) just means "try again in ``retry_period``" (with jitter).
* **renew**: every ``retry_period`` the leader rewrites ``renewTime`` (straight from its cached
  object; a GET only after a conflict). When no renewal succeeds for ``renew_deadline`` the
  leader stops leading: :meth:`LeaderElector.run` raises :class:`LeadershipLost` so the owning
  TaskGroup tears everything down, the way controller-runtime exits the process.
* **release on cancel** (controller-runtime's ``LeaderElectionReleaseOnCancel``): cancelling
  :meth:`LeaderElector.run` while leading writes an empty holder with
  ``leaseDurationSeconds: 1`` so a standby takes over at its next retry instead of waiting out
  the lease.

Typical wiring in the manager::

    elector = LeaderElector(client, name=..., namespace=..., identity=default_identity())
    async with asyncio.TaskGroup() as tg:
        tg.create_task(elector.run())          # raises LeadershipLost -> whole group stops
        ...                                    # informers, probes: run on every replica
        await elector.leadership.wait_for_leadership()
        tg.create_task(provisioner.run())      # decision makers: leader only
"""

from __future__ import annotations

import asyncio
import random
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, NoReturn, Protocol

from karpenter_py.aio.clock import Clock, RealClock
from karpenter_py.aio.tasks import bounded
from karpenter_py.kube.errors import AlreadyExistsError, ConflictError, KubeError, NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import LEASES, Resource
from karpenter_py.obs.logging import get_logger

JITTER_FACTOR: Final = 1.2  # client-go's wait.JitterUntil factor for acquire retries

log = get_logger(__name__, controller="leader-election")


class LeadershipLost(Exception):  # a state, named as client-go names it
    """This replica was the leader and no longer is (renewal failed past the deadline)."""


class LeaseClient(Protocol):
    """The three calls leader election needs; :class:`karpenter_py.kube.KubeClient` has them."""

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = ...
    ) -> KubeObject: ...

    async def create(
        self, resource: Resource, body: KubeObject, *, namespace: str | None = ...
    ) -> KubeObject: ...

    async def update(
        self, resource: Resource, body: KubeObject, *, namespace: str | None = ...
    ) -> KubeObject: ...


def default_identity() -> str:
    """``<hostname>_<uuid>``, controller-runtime's identity: unique even across restarts."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(when: datetime) -> str:
    """A Kubernetes ``MicroTime`` (RFC 3339 with microseconds, UTC)."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """client-go's ``LeaderElectionRecord``, read from / written to a Lease's spec."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    leader_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: KubeObject) -> LeaseRecord:
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.leader_transitions,
        }
        if self.holder_identity:  # client-go omits an empty holder
            spec["holderIdentity"] = self.holder_identity
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


_SPEC_KEYS: Final = frozenset(
    {"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions"}
)


class Leadership:
    """Whether this replica leads, for the workers that must only act while it does.

    States: ``candidate`` → ``leading`` → ``lost`` (or ``candidate`` → ``lost`` when the elector
    stops before winning). ``lost`` is final: a replica that lost leadership restarts.
    """

    def __init__(self) -> None:
        self._state: Literal["candidate", "leading", "lost"] = "candidate"
        self._changed = asyncio.Event()

    @classmethod
    def unconditional(cls) -> Leadership:
        """Leadership that is simply granted (``DISABLE_LEADER_ELECTION=true``)."""
        leadership = cls()
        leadership._state = "leading"
        return leadership

    @property
    def is_leader(self) -> bool:
        return self._state == "leading"

    @property
    def lost(self) -> bool:
        return self._state == "lost"

    def _transition(self, state: Literal["leading", "lost"]) -> None:
        if self._state == state or self._state == "lost":
            return
        self._state = state
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()  # wakes everyone waiting on the previous state

    async def wait_for_leadership(self) -> None:
        """Return once leading; raises :class:`LeadershipLost` if that can no longer happen."""
        while self._state == "candidate":
            await self._changed.wait()
        if self._state == "lost":
            raise LeadershipLost("leader election stopped before this replica became leader")

    async def wait_lost(self) -> None:
        """Return once this replica has stopped leading (or stopped trying)."""
        while self._state != "lost":
            await self._changed.wait()


class LeaderElector:
    """Acquires and renews one Lease for one identity; see the module docstring."""

    def __init__(
        self,
        client: LeaseClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        clock: Clock | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        rng: random.Random | None = None,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        if not name or not namespace or not identity:
            raise ValueError("leader election needs a lease name, a namespace and an identity")
        if lease_duration < 1:
            raise ValueError("lease_duration must be at least 1s (the Lease stores whole seconds)")
        if not lease_duration > renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if not renew_deadline > JITTER_FACTOR * retry_period:
            raise ValueError(f"renew_deadline must be greater than retry_period*{JITTER_FACTOR}")
        if retry_period <= 0:
            raise ValueError("retry_period must be positive")
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.clock: Clock = clock if clock is not None else RealClock()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.leadership = Leadership()
        self._rng = rng if rng is not None else random.Random()
        self._on_change = on_change
        self._lease: KubeObject | None = None  # last Lease read or written (resourceVersion!)
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0  # clock.monotonic() when _observed last changed
        self._log = log.bind(lease=f"{namespace}/{name}", identity=identity)

    # ------------------------------------------------------------------ public

    @property
    def is_leader(self) -> bool:
        return self.leadership.is_leader

    @property
    def observed_holder(self) -> str:
        """The holder we last saw in the Lease ("" when free or unknown)."""
        return self._observed.holder_identity if self._observed is not None else ""

    async def run(self) -> NoReturn:
        """Campaign, then lead until leadership is lost (raises :class:`LeadershipLost`).

        Cancellation while leading releases the Lease first (bounded by ``renew_deadline``).
        """
        try:
            await self._acquire()
            self._set_leading()
            await self._renew()
        except asyncio.CancelledError:
            if self.leadership.is_leader and self.release_on_cancel:
                await bounded(self._release(), within=self.renew_deadline, what="lease release")
            self._set_lost(reason="stopped")
            raise
        except BaseException:
            self._set_lost(reason="failed")
            raise

    # ------------------------------------------------------------------ state changes

    def _set_leading(self) -> None:
        self.leadership._transition("leading")
        self._log.info("acquired lease")
        if self._on_change is not None:
            self._on_change(True)

    def _set_lost(self, *, reason: str) -> None:
        was_leader = self.leadership.is_leader
        self.leadership._transition("lost")
        if was_leader:
            self._log.info("stopped leading", extra={"reason": reason})
            if self._on_change is not None:
                self._on_change(False)

    # ------------------------------------------------------------------ loops

    async def _acquire(self) -> None:
        self._log.info("attempting to acquire leader lease")
        while True:
            if await self._try_acquire_or_renew(within=self.renew_deadline):
                return
            jittered = self.retry_period * (1.0 + JITTER_FACTOR * self._rng.random())
            await self.clock.sleep(jittered)

    async def _renew(self) -> NoReturn:
        while True:
            await self.clock.sleep(self.retry_period)
            deadline = self.clock.monotonic() + self.renew_deadline
            while True:
                remaining = deadline - self.clock.monotonic()
                if remaining <= 0:
                    self._set_lost(reason="renew deadline exceeded")
                    raise LeadershipLost(
                        f"failed to renew lease {self.namespace}/{self.name} "
                        f"within {self.renew_deadline:g}s"
                    )
                if await self._try_acquire_or_renew(within=remaining):
                    break
                await self.clock.sleep(min(self.retry_period, max(0.0, remaining)))

    # ------------------------------------------------------------------ one attempt

    def _observe(self, record: LeaseRecord) -> None:
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock.monotonic()

    def _lease_valid(self) -> bool:
        if self._observed is None:
            return False
        expires = self._observed_at + self._observed.lease_duration_seconds
        return expires > self.clock.monotonic()

    def _new_record(self, old: LeaseRecord | None) -> LeaseRecord:
        now = _micro_time(self.clock.now())
        duration = max(1, round(self.lease_duration))
        if old is not None and old.holder_identity == self.identity:
            return LeaseRecord(
                holder_identity=self.identity,
                lease_duration_seconds=duration,
                acquire_time=old.acquire_time or now,
                renew_time=now,
                leader_transitions=old.leader_transitions,
            )
        transitions = 0 if old is None else old.leader_transitions + 1
        return LeaseRecord(self.identity, duration, now, now, transitions)

    def _with_record(self, lease: KubeObject, record: LeaseRecord) -> KubeObject:
        old_spec = lease.get("spec") if isinstance(lease.get("spec"), dict) else {}
        kept = {k: v for k, v in (old_spec or {}).items() if k not in _SPEC_KEYS}
        return {**lease, "spec": {**kept, **record.to_spec()}}

    async def _try_acquire_or_renew(self, *, within: float) -> bool:
        """One attempt; True when we hold the Lease afterwards. API errors count as False."""
        try:
            async with asyncio.timeout(within):
                return await self._attempt()
        except TimeoutError:
            self._log.warning("lease request timed out", extra={"timeout_s": round(within, 3)})
        except ConflictError:
            self._log.debug("lost an update race for the lease")
        except KubeError as e:
            self._log.warning("lease request failed", extra={"error": str(e)})
        return False

    async def _attempt(self) -> bool:
        # Fast path: a leader that last saw itself as holder renews from its cached object (no
        # GET); a 409 means someone else wrote the Lease, so re-read it on the slow path.
        if (
            self.leadership.is_leader
            and self._lease is not None
            and self._observed is not None
            and self._observed.holder_identity == self.identity
        ):
            try:
                return await self._write(self._lease, self._new_record(self._observed))
            except ConflictError:
                self._log.debug("renewal conflicted; re-reading the lease")
        try:
            lease = await self.client.get(LEASES, self.name, namespace=self.namespace)
        except NotFoundError:
            return await self._create()
        self._lease = lease
        old = LeaseRecord.from_lease(lease)
        self._observe(old)
        held_by_other = old.holder_identity not in ("", self.identity)
        if held_by_other and self._lease_valid():
            return False
        return await self._write(lease, self._new_record(old))

    async def _create(self) -> bool:
        record = self._new_record(None)
        body: KubeObject = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.to_spec(),
        }
        try:
            created = await self.client.create(LEASES, body, namespace=self.namespace)
        except AlreadyExistsError:
            return False  # another candidate created it first; read it next round
        self._lease = created
        self._observe(record)
        return True

    async def _write(self, lease: KubeObject, record: LeaseRecord) -> bool:
        updated = await self.client.update(
            LEASES, self._with_record(lease, record), namespace=self.namespace
        )
        self._lease = updated
        self._observe(record)
        return True

    async def _release(self) -> None:
        """Hand the Lease back: empty holder, 1 s duration (client-go's ``release``)."""
        if self._lease is None:
            return
        now = _micro_time(self.clock.now())
        transitions = self._observed.leader_transitions if self._observed is not None else 0
        record = LeaseRecord("", 1, now, now, transitions)
        try:
            self._lease = await self.client.update(
                LEASES, self._with_record(self._lease, record), namespace=self.namespace
            )
        except KubeError as e:
            self._log.warning("could not release the lease", extra={"error": str(e)})
            return
        self._observe(record)
        self._log.info("released lease")
