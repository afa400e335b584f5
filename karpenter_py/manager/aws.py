"""The AWS side of the object graph (``CLOUD_PROVIDER=aws``), opened before the App is built.

Opening resolves what a controller cannot run without, so a wrong environment is one clear
message and exit 2 rather than a crash loop: the region (``AWS_REGION``), the cluster endpoint
(``CLUSTER_ENDPOINT`` or EKS DescribeCluster) and, when ``INTERRUPTION_QUEUE`` is set, the
queue's URL. Instance types and prices load on first use and refresh in the background.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from karpenter_py.aio.clock import RealClock
from karpenter_py.cloudprovider.aws.capacityreservations import CapacityReservationProvider
from karpenter_py.cloudprovider.aws.clients import (
    AwsClients,
    AwsConfigError,
    resolve_region,
)
from karpenter_py.cloudprovider.aws.cluster import ClusterInfo, ClusterInfoError, resolve_cluster
from karpenter_py.cloudprovider.aws.instance import InstanceProvider
from karpenter_py.cloudprovider.aws.instancetypes import InstanceTypeProvider
from karpenter_py.cloudprovider.aws.launchtemplates import LaunchTemplateProvider
from karpenter_py.cloudprovider.aws.pricing import PricingProvider
from karpenter_py.cloudprovider.aws.provider import AwsCloudProvider, NodeClassStore
from karpenter_py.cloudprovider.aws.sqs import InterruptionQueue, QueueError
from karpenter_py.launcher.launch import UnavailableOfferings
from karpenter_py.manager.settings import Settings, SettingsError

log = logging.getLogger("karpenter.manager.aws")


@dataclass(slots=True)
class AwsStack:
    clients: AwsClients
    cluster: ClusterInfo
    nodeclasses: NodeClassStore
    pricing: PricingProvider
    instance_types: InstanceTypeProvider
    launch_templates: LaunchTemplateProvider
    instances: InstanceProvider
    provider: AwsCloudProvider
    queue: InterruptionQueue | None
    # The insufficient-capacity cache the provider was built with; the launcher shares it.
    offerings: UnavailableOfferings
    # Capacity reservations and their free counts; None with the ReservedCapacity gate off.
    reservations: CapacityReservationProvider | None = None


@contextlib.asynccontextmanager
async def open_aws(
    settings: Settings, *, endpoint_url: str | None = None
) -> AsyncIterator[AwsStack]:
    """Open clients and build the provider; ``SettingsError`` for an unusable environment."""
    try:
        region = resolve_region()
    except AwsConfigError as e:
        raise SettingsError(str(e)) from e
    async with AwsClients.open(region, endpoint_url=endpoint_url) as clients:
        try:
            cluster = await resolve_cluster(
                clients,
                name=settings.cluster_name,
                endpoint=settings.cluster_endpoint,
                ca_bundle=settings.cluster_ca_bundle,
            )
        except ClusterInfoError as e:
            raise SettingsError(str(e)) from e
        queue = None
        if settings.interruption_queue:
            queue = InterruptionQueue(clients, settings.interruption_queue)
            try:
                await queue.url()
            except QueueError as e:  # every AWS failure of the lookup comes as one
                raise SettingsError(
                    f"INTERRUPTION_QUEUE={settings.interruption_queue!r}: cannot resolve the "
                    f"queue URL ({e})"
                ) from e
        pricing = PricingProvider(clients, isolated_vpc=settings.isolated_vpc)
        reservations = (
            CapacityReservationProvider(clients)
            if settings.feature_gates.reserved_capacity
            else None
        )
        instance_types = InstanceTypeProvider(
            clients,
            pricing,
            vm_memory_overhead_percent=settings.vm_memory_overhead_percent,
            reserved_enis=settings.reserved_enis,
            reservations=reservations,
        )
        launch_templates = LaunchTemplateProvider(clients, cluster)
        nodeclasses = NodeClassStore()
        failed: list[AwsCloudProvider] = []  # the provider, once built (the sink comes first)
        instances = InstanceProvider(
            clients,
            cluster,
            launch_templates,
            on_unavailable=lambda offerings: failed[0].offerings_failed(offerings),
            reserved_capacity=settings.feature_gates.reserved_capacity,
        )
        offerings = UnavailableOfferings(clock=RealClock())
        provider = AwsCloudProvider(
            cluster,
            nodeclasses,
            instance_types,
            instances,
            offerings=offerings,
            reservations=reservations,
        )
        failed.append(provider)
        log.info(
            "aws provider ready",
            extra={
                "region": region,
                "cluster": cluster.name,
                "endpoint": cluster.endpoint,
                "interruption_queue": settings.interruption_queue or None,
            },
        )
        yield AwsStack(
            clients=clients,
            cluster=cluster,
            nodeclasses=nodeclasses,
            pricing=pricing,
            instance_types=instance_types,
            launch_templates=launch_templates,
            instances=instances,
            provider=provider,
            queue=queue,
            offerings=offerings,
            reservations=reservations,
        )
