"""``capacityreservation.expiration``: NodeClaims in a Capacity Block that is about to end are
deleted 40 minutes before its end (10 minutes before EC2 starts reclaiming the instances, as
upstream's AWS provider does), so their pods move while the nodes are still there rather than
being cut off when EC2 takes the capacity back.

Once a minute (after the cluster state synced) it asks the cloud which of the reservations the
NodeClaims run in (``karpenter.k8s.aws/capacity-reservation-id``) are expiring and deletes those
NodeClaims; termination then drains them as for any deletion. Upstream runs it only with the
ReservedCapacity gate on; the manager does the same.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Protocol

from karpenter_py.controllers.nodeclaim.common import delete_nodeclaim
from karpenter_py.controllers.runtime import Deps, Watch, sweep_forever
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.labels import AWS_LABEL_CAPACITY_RESERVATION_ID

log = logging.getLogger("karpenter.capacityreservation.expiration")

INTERVAL: Final = 60.0
REASON: Final = "capacity_block_expiring"


class ExpiringReservations(Protocol):
    async def expiring(self, reservation_ids: Sequence[str]) -> set[str]:
        """Which of these reservations are Capacity Blocks within 40 minutes of their end."""
        ...


def reservation_ids(nodeclaims: Iterable[NodeClaim]) -> list[str]:
    """The reservations live NodeClaims run in, sorted, each once."""
    return sorted(
        {
            rid
            for nc in nodeclaims
            if nc.metadata.deletion_timestamp is None
            and (rid := nc.metadata.labels.get(AWS_LABEL_CAPACITY_RESERVATION_ID))
        }
    )


def to_delete(nodeclaims: Mapping[str, NodeClaim], expiring: set[str]) -> list[NodeClaim]:
    """Live NodeClaims whose reservation is expiring, by name."""
    return [
        nc
        for _, nc in sorted(nodeclaims.items())
        if nc.metadata.deletion_timestamp is None
        and nc.metadata.labels.get(AWS_LABEL_CAPACITY_RESERVATION_ID) in expiring
    ]


class CapacityBlockExpiration:
    name = "capacityreservation.expiration"

    def __init__(
        self, deps: Deps, reservations: ExpiringReservations, *, interval: float = INTERVAL
    ) -> None:
        self.deps = deps
        self.reservations = reservations
        self.interval = interval

    def watches(self) -> Sequence[Watch]:
        return ()  # a periodic sweep: nothing wakes it

    async def run(self) -> None:
        await sweep_forever(
            self.deps, self.sweep, lambda: self.interval, log, "capacity block expiration"
        )

    async def sweep(self) -> list[str]:
        """Delete the NodeClaims of expiring Capacity Blocks; their names."""
        claims = dict(self.deps.cluster.nodeclaims)
        ids = reservation_ids(claims.values())
        if not ids:
            return []
        expiring = await self.reservations.expiring(ids)
        deleted = []
        for nc in to_delete(claims, expiring):
            log.info(
                "deleting nodeclaim: its capacity block is expiring",
                extra={
                    "nodeclaim": nc.name,
                    "capacity_reservation_id": nc.metadata.labels[
                        AWS_LABEL_CAPACITY_RESERVATION_ID
                    ],
                },
            )
            await delete_nodeclaim(self.deps, nc, REASON)
            deleted.append(nc.name)
        return deleted
