"""How many NodeClaims each capacity reservation can still back within one solve (upstream's
``ReservationManager``).

A reserved offering says how many instances its reservation still has room for
(``Offering.reservation_capacity``), but a round plans many NodeClaims at once: without counting,
all of them would price and label themselves into a reservation with room for two. The ledger
starts from each reservation's room (the least any offering of it reports, should pools see
different counts) and a NewClaim holds every reservation its options could launch into, as
upstream does: the launch may pick any of its types, so each one it might use is spoken for. A
claim that cannot get a reservation excludes it (a ``NotIn`` on the reservation-id label, which
picks offerings like a zone does) and so prices and launches as on-demand or spot; a claim whose
options narrow away from a reservation gives its room back.

Pure and per solve: built from the pools' indexes, mutated only by the solve that made it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from karpenter_py.model.labels import AWS_LABEL_CAPACITY_RESERVATION_ID, CAPACITY_TYPE_RESERVED
from karpenter_py.scheduling.instances import PoolIndex
from karpenter_py.scheduling.requirements import Req, Requirements

# The offering label naming an offering's reservation (AWS is the only provider with reserved
# offerings; upstream's core reads the provider's ``ReservationIDLabel`` the same way).
RESERVATION_ID: Final = AWS_LABEL_CAPACITY_RESERVATION_ID


class ReservationLedger:
    """Reservation id -> room left this solve, and what each claim (by hostname) holds."""

    __slots__ = ("held", "room")

    def __init__(self, room: dict[str, int]) -> None:
        self.room = room
        self.held: dict[str, frozenset[str]] = {}

    @staticmethod
    def of(indexes: Sequence[PoolIndex]) -> ReservationLedger | None:
        """The ledger of the reservations the pools' available offerings name; None without
        any, so a solve with no reserved capacity pays nothing for it."""
        room: dict[str, int] = {}
        for idx in indexes:
            table = idx.table
            for cls, per_type in table.class_prices.items():
                if cls.capacity_type != CAPACITY_TYPE_RESERVED:
                    continue
                rid = dict(cls.labels).get(RESERVATION_ID)
                if rid is None or not table.class_masks[cls] & idx.all:
                    continue
                least = min(o.reservation_capacity for o in per_type.values())
                room[rid] = min(room.get(rid, least), least)
        return ReservationLedger(room) if room else None

    def compatible(self, idx: PoolIndex, reqs: Requirements, mask: int) -> frozenset[str]:
        """The reservations of the offerings ``reqs`` allows on the types in ``mask``."""
        masks = idx.table.class_masks
        return frozenset(
            rid
            for cls in idx.allowed_classes(reqs)
            if cls.capacity_type == CAPACITY_TYPE_RESERVED
            and masks[cls] & mask
            and (rid := dict(cls.labels).get(RESERVATION_ID)) is not None
        )

    def fit(
        self, idx: PoolIndex, hostname: str, reqs: Requirements, mask: int
    ) -> tuple[Requirements, int, frozenset[str]]:
        """A claim's requirements and options once the reservations it can neither keep nor get
        are excluded, and the reservations it would then hold. Changes nothing (see ``hold``)."""
        wanted = self.compatible(idx, reqs, mask)
        held = self.held.get(hostname, frozenset())
        kept = frozenset(r for r in wanted if r in held or self.room[r] > 0)
        if len(kept) == len(wanted):
            return reqs, mask, kept
        reqs = reqs.with_req(Req(RESERVATION_ID, complement=True, values=wanted - kept))
        # A type whose only allowed offerings were in those reservations is no option any more.
        return reqs, mask & idx.offering_mask(reqs), kept

    def hold(self, hostname: str, kept: frozenset[str]) -> None:
        """The claim now holds ``kept``: take room for what it newly holds, give back what it
        let go."""
        held = self.held.get(hostname, frozenset())
        if held == kept:
            return
        for rid in held - kept:
            self.room[rid] += 1
        for rid in kept - held:
            self.room[rid] -= 1
        self.held[hostname] = kept
