"""``capacityreservation.capacitytype``: a reserved NodeClaim whose instance left its
reservation (an ODCR that ended or was cancelled leaves its instances running as plain
on-demand) is relabelled ``karpenter.sh/capacity-type=on-demand`` without the reservation
labels, on the NodeClaim and its Node, as upstream's AWS provider does. From then on it is
priced and disrupted as on-demand; a NodePool that allows only ``reserved`` sees it drift.

Once a minute (after the cluster state synced) it lists the cloud's instances and compares
what each reserved NodeClaim's instance reports. Upstream runs it only with the
ReservedCapacity gate on; the manager does the same.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_py.controllers.runtime import Deps, Watch, sweep_forever
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.resources import NODECLAIMS, NODES
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.labels import (
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
    AWS_LABEL_CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
)

log = logging.getLogger("karpenter.capacityreservation.capacitytype")

INTERVAL: Final = 60.0
# What a NodeClaim out of its reservation loses and gains (None deletes in a merge patch).
DEMOTED_LABELS: Final[Mapping[str, str | None]] = {
    LABEL_CAPACITY_TYPE: CAPACITY_TYPE_ON_DEMAND,
    AWS_LABEL_CAPACITY_RESERVATION_ID: None,
    AWS_LABEL_CAPACITY_RESERVATION_TYPE: None,
    AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: None,
}


def demoted(nodeclaims: Sequence[NodeClaim], instances: Sequence[NodeClaim]) -> list[NodeClaim]:
    """Live reserved NodeClaims whose instance now reads as on-demand (by name). A NodeClaim
    whose instance is gone is garbage collection's."""
    reads = {i.status.provider_id: i.metadata.labels.get(LABEL_CAPACITY_TYPE) for i in instances}
    return sorted(
        (
            nc
            for nc in nodeclaims
            if nc.metadata.deletion_timestamp is None
            and nc.metadata.labels.get(LABEL_CAPACITY_TYPE) == CAPACITY_TYPE_RESERVED
            and reads.get(nc.status.provider_id) == CAPACITY_TYPE_ON_DEMAND
        ),
        key=lambda nc: nc.name,
    )


class ReservationCapacityType:
    name = "capacityreservation.capacitytype"

    def __init__(self, deps: Deps, *, interval: float = INTERVAL) -> None:
        self.deps = deps
        self.interval = interval

    def watches(self) -> Sequence[Watch]:
        return ()  # a periodic sweep: nothing wakes it

    async def run(self) -> None:
        await sweep_forever(
            self.deps, self.sweep, lambda: self.interval, log, "reservation capacity type"
        )

    async def sweep(self) -> list[str]:
        """Relabel the NodeClaims (and Nodes) that left their reservation; their names."""
        claims = list(self.deps.cluster.nodeclaims.values())
        if not any(
            nc.metadata.labels.get(LABEL_CAPACITY_TYPE) == CAPACITY_TYPE_RESERVED for nc in claims
        ):
            return []
        out = []
        for nc in demoted(claims, await self.deps.cloud.list()):
            patch: dict[str, Any] = {"metadata": {"labels": dict(DEMOTED_LABELS)}}
            try:
                await self.deps.client.patch(NODECLAIMS, nc.name, patch, patch_type=PatchType.MERGE)
            except NotFoundError:
                continue
            # No Node yet: registration copies the NodeClaim's labels.
            if nc.status.node_name:
                with contextlib.suppress(NotFoundError):
                    await self.deps.client.patch(
                        NODES, nc.status.node_name, patch, patch_type=PatchType.MERGE
                    )
            log.info(
                "nodeclaim left its capacity reservation: now on-demand",
                extra={
                    "nodeclaim": nc.name,
                    "capacity_reservation_id": nc.metadata.labels.get(
                        AWS_LABEL_CAPACITY_RESERVATION_ID, ""
                    ),
                },
            )
            out.append(nc.name)
        return out
