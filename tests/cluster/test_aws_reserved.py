"""Reserved capacity through the whole controller (``CLOUD_PROVIDER=aws``, gate
ReservedCapacity on by default): the local control plane + moto's server, with the capacity
reservation moto lacks seeded by tests/aws/motoreservations.

An EC2NodeClass selecting a reservation gets it in ``status.capacityReservations`` (through the
CRD's schema) and ``CapacityReservationsReady``; a pending pod of a NodePool that allows
``reserved`` and ``on-demand`` launches into the reservation, and its NodeClaim carries
upstream's labels.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpenter_py.kube import DEPLOYMENTS, EC2NODECLASSES, NODEPOOLS, KubeClient, PatchType
from tests.aws.motoreservations import (
    available_count,
    capacity_reservations,
    seed_capacity_reservation,
)
from tests.cluster.awskubelet import running_kubelet
from tests.cluster.harness import (
    claims_of,
    deployment,
    eventually,
    is_true,
    prepared_client,
    running,
    running_pods,
)
from tests.cluster.test_aws import aws_pool, wait_ready, world
from tests.clusterfixture import ClusterHandle
from tests.motofixture import MotoServer

pytestmark = pytest.mark.cluster

RESERVATION = "cr-0c1a55e5"
ZONE = "us-west-2b"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


async def test_a_pending_pod_launches_into_the_selected_reservation(
    client: KubeClient, aws_env: MotoServer
) -> None:
    with capacity_reservations():
        seed_capacity_reservation(
            RESERVATION, instance_type="m5.large", zone=ZONE, available=1, tags={"team": "web"}
        )
        async with world(client, aws_env) as w, w.stack() as stack:
            await client.patch(
                EC2NODECLASSES,
                w.nodeclass,
                {"spec": {"capacityReservationSelectorTerms": [{"tags": {"team": "web"}}]}},
                patch_type=PatchType.MERGE,
            )
            pool = aws_pool(w.pool, w.nodeclass, ("reserved", "on-demand"))
            await client.patch(
                NODEPOOLS, w.pool, {"spec": pool["spec"]}, patch_type=PatchType.MERGE
            )
            app = w.app(stack)
            dep = deployment("reserved", w.ns, w.pool, replicas=1, cpu="1500m", memory="3Gi")
            async with running(app), running_kubelet(w.kubelet(stack)):
                await wait_ready(w)

                async def selected() -> list[dict[str, Any]] | None:
                    nc = await client.get(EC2NODECLASSES, w.nodeclass)
                    found = nc.get("status", {}).get("capacityReservations") or []
                    return found if found and is_true(nc, "CapacityReservationsReady") else None

                reservations = await eventually(selected, within=90, what="reservation in status")
                assert reservations == [
                    {
                        "id": RESERVATION,
                        "availabilityZone": ZONE,
                        "instanceType": "m5.large",
                        "ownerID": "123456789012",
                        "instanceMatchCriteria": "targeted",
                        "reservationType": "default",
                        "state": "active",
                    }
                ]

                def cached() -> bool:
                    # Launch decisions read the controller's cache: wait until it has the status.
                    nc = stack.nodeclasses.get(w.nodeclass)
                    return nc is not None and bool(nc.status.capacity_reservations)

                await eventually(cached, within=30, what="cached reservation status")
                await client.create(DEPLOYMENTS, dep)

                async def running_one() -> list[dict[str, Any]]:
                    return await running_pods(client, w.ns)

                await eventually(running_one, within=120, what="the pod to run in the reservation")
                [claim] = await claims_of(client, w.pool)
                labels = claim["metadata"]["labels"]
                assert (
                    labels["karpenter.sh/capacity-type"],
                    labels["karpenter.k8s.aws/capacity-reservation-id"],
                    labels["karpenter.k8s.aws/capacity-reservation-type"],
                    labels["node.kubernetes.io/instance-type"],
                    labels["topology.kubernetes.io/zone"],
                ) == ("reserved", RESERVATION, "default", "m5.large", ZONE)
                [instance] = await w.instances("running")
                assert instance["CapacityReservationId"] == RESERVATION
                assert available_count(RESERVATION) == 0
