"""Capacity reservations (ODCRs and Capacity Blocks) an EC2NodeClass selects, and how many
instances each still has room for.

``capacityReservationSelectorTerms`` become DescribeCapacityReservations calls, one per term
(terms ORed, a term's fields ANDed; an ``id`` term asks for that reservation only). Only
``active`` reservations are asked for, and one whose end date has passed is dropped, so a
used-up or expired reservation leaves ``status.capacityReservations`` on the next resolve.

A Capacity Block is ``expiring`` from 40 minutes before its end: EC2 reclaims its instances
30 minutes before the end and Karpenter starts draining 10 minutes earlier (upstream's
window). An expiring reservation still appears in the status (its nodes are still there) but
offers nothing.

:class:`CapacityReservationProvider` also keeps each reservation's available instance count:
set from every DescribeCapacityReservations answer, one less per launch into it, one more per
termination of an instance in it, so the offerings between two resolves do not promise room the
launches already took. ``version`` changes whenever a count does (the instance-type cache key).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpenter_py.aio.clock import Clock, RealClock
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, paginate
from karpenter_py.cloudprovider.aws.subnets import selector_filters
from karpenter_py.model.api.ec2nodeclass import (
    CapacityReservation,
    CapacityReservationSelectorTerm,
)

RESERVATION_TYPE_DEFAULT: Final = "default"
RESERVATION_TYPE_CAPACITY_BLOCK: Final = "capacity-block"
STATE_ACTIVE: Final = "active"
STATE_EXPIRING: Final = "expiring"
# EC2 starts reclaiming a Capacity Block 30 min before its end; Karpenter drains 10 min earlier.
CAPACITY_BLOCK_EXPIRING_WINDOW: Final = datetime.timedelta(minutes=40)
MATCH_CRITERIA: Final = frozenset({"open", "targeted"})
NOT_FOUND_CODES: Final = frozenset(
    {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"}
)


@dataclass(frozen=True, slots=True)
class ReservationTarget:
    """The reservation a launch template targets."""

    id: str
    reservation_type: str = RESERVATION_TYPE_DEFAULT

    def template_data(self) -> dict[str, Any]:
        """LaunchTemplateData fields that put the instance in this reservation."""
        data: dict[str, Any] = {
            "CapacityReservationSpecification": {
                "CapacityReservationTarget": {"CapacityReservationId": self.id}
            }
        }
        if self.reservation_type == RESERVATION_TYPE_CAPACITY_BLOCK:
            data["InstanceMarketOptions"] = {"MarketType": RESERVATION_TYPE_CAPACITY_BLOCK}
        return data


# A class that selects reservations launches its other on-demand instances with this, so EC2
# never places one in an open reservation the class did not select: such an instance would
# read as drifted (its reservation is not in the status) and be replaced, over and over.
OPT_OUT_OF_OPEN_RESERVATIONS: Final = {
    "CapacityReservationSpecification": {"CapacityReservationPreference": "none"}
}


@dataclass(frozen=True, slots=True)
class Query:
    """One DescribeCapacityReservations call: by ``id``, or by the other fields ANDed."""

    id: str | None = None
    owner_id: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    instance_match_criteria: str | None = None

    def params(self) -> dict[str, Any]:
        state = {"Name": "state", "Values": [STATE_ACTIVE]}
        if self.id is not None:
            # EC2 refuses MaxResults together with CapacityReservationIds.
            return {"CapacityReservationIds": [self.id], "Filters": [state]}
        filters = selector_filters(
            {"owner-id": self.owner_id, "instance-match-criteria": self.instance_match_criteria},
            dict(self.tags) or None,
        )
        return {"Filters": [state, *filters], "MaxResults": 1000}


def queries_for(terms: Sequence[CapacityReservationSelectorTerm]) -> list[Query]:
    """One query per term, duplicates dropped, term order kept."""
    out: dict[Query, None] = {}
    for term in terms:
        if term.id is not None:
            out[Query(id=term.id)] = None
            continue
        out[
            Query(
                owner_id=term.owner_id,
                tags=tuple(sorted((term.tags or {}).items())),
                instance_match_criteria=term.instance_match_criteria,
            )
        ] = None
    return list(out)


def _as_utc(value: object) -> datetime.datetime | None:
    if not isinstance(value, datetime.datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)


def reservation_status(
    raw: Mapping[str, Any], now: datetime.datetime
) -> CapacityReservation | None:
    """The status entry of one DescribeCapacityReservations record; None for a record this
    version cannot use (an instance match criteria it does not know, an end already past)."""
    criteria = str(raw.get("InstanceMatchCriteria", ""))
    if criteria not in MATCH_CRITERIA:
        return None
    end = _as_utc(raw.get("EndDate"))
    if end is not None and end <= now:
        return None
    kind = str(raw.get("ReservationType") or RESERVATION_TYPE_DEFAULT)
    expiring = (
        kind == RESERVATION_TYPE_CAPACITY_BLOCK
        and end is not None
        and now >= end - CAPACITY_BLOCK_EXPIRING_WINDOW
    )
    return CapacityReservation.model_validate(
        {
            "id": str(raw["CapacityReservationId"]),
            "availabilityZone": str(raw["AvailabilityZone"]),
            "instanceType": str(raw["InstanceType"]),
            "ownerID": str(raw["OwnerId"]),
            "instanceMatchCriteria": criteria,
            "reservationType": kind,
            "interruptible": bool(raw.get("Interruptible", False)),
            "state": STATE_EXPIRING if expiring else STATE_ACTIVE,
            "endTime": end,
        }
    )


class CapacityReservationProvider:
    """Resolves selector terms against EC2 and keeps the reservations' free instance counts."""

    def __init__(self, clients: AwsClients, clock: Clock | None = None) -> None:
        self._clients = clients
        self._clock = clock or RealClock()
        self._lock = threading.Lock()  # counts are read from solver threads
        self._available: dict[str, int] = {}
        self.version = 0

    async def resolve(
        self, terms: Sequence[CapacityReservationSelectorTerm]
    ) -> list[CapacityReservation]:
        """The reservations ``terms`` select, sorted by id; their counts are synced. AWS
        errors other than an unknown id propagate."""
        found: dict[str, Mapping[str, Any]] = {}
        for query in queries_for(terms):
            for raw in await self._describe(query):
                found[str(raw.get("CapacityReservationId", ""))] = raw
        self.sync({rid: int(raw.get("AvailableInstanceCount") or 0) for rid, raw in found.items()})
        now = self._clock.now()
        out = [r for raw in found.values() if (r := reservation_status(raw, now)) is not None]
        return sorted(out, key=lambda r: r.id)

    async def expiring(self, reservation_ids: Sequence[str]) -> set[str]:
        """Which of these reservations are expiring Capacity Blocks (the expiration
        controller's question)."""
        terms = [CapacityReservationSelectorTerm.model_validate({"id": r}) for r in reservation_ids]
        return {r.id for r in await self.resolve(terms) if r.state == STATE_EXPIRING}

    async def _describe(self, query: Query) -> list[Mapping[str, Any]]:
        try:
            return await paginate(
                self._clients.ec2,
                "describe_capacity_reservations",
                "CapacityReservations",
                **query.params(),
            )
        except Exception as exc:
            # An id term naming a reservation that is gone (or never was) selects nothing.
            if query.id is not None and error_code(exc) in NOT_FOUND_CODES:
                return []
            raise

    def sync(self, counts: Mapping[str, int]) -> None:
        """EC2's word on the free instances of these reservations."""
        with self._lock:
            changed = {k: v for k, v in counts.items() if self._available.get(k) != v}
            if changed:
                self._available.update(changed)
                self.version += 1

    def available(self, reservation_id: str) -> int:
        """Free instances left in the reservation (0 when never described)."""
        with self._lock:
            return self._available.get(reservation_id, 0)

    def counts(self, reservation_ids: Iterable[str]) -> tuple[tuple[str, int], ...]:
        with self._lock:
            return tuple((r, self._available.get(r, 0)) for r in reservation_ids)

    def mark_launched(self, reservation_id: str) -> None:
        self._adjust(reservation_id, -1)

    def mark_terminated(self, reservation_id: str) -> None:
        self._adjust(reservation_id, +1)

    def _adjust(self, reservation_id: str, delta: int) -> None:
        with self._lock:
            if reservation_id not in self._available:
                return  # not one of ours: nothing to keep count of
            self._available[reservation_id] = max(0, self._available[reservation_id] + delta)
            self.version += 1
