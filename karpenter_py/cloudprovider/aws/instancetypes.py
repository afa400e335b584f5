"""Live EC2 instance types: DescribeInstanceTypes + DescribeInstanceTypeOfferings, per node class.

``InstanceTypeProvider.refresh`` loads what EC2 describes (hvm, x86_64 or arm64, as upstream
discovers types) and where each type is offered (by availability zone). ``list(nodeclass)`` turns
that into ``InstanceType``s with the instance-type arithmetic (``instancetype_math.build_instance_type``)
under the class's knobs (``knobs.knobs_for``: AMI family, kubelet maxPods / podsPerCore /
kubeReserved / systemReserved / evictionHard / evictionSoft, root volume size, RAID0 instance
store, VM_MEMORY_OVERHEAD_PERCENT, RESERVED_ENIS) and offerings in the zones that have one of the
class's subnets:

- on-demand at the Pricing API price; a type without one has its on-demand offerings unavailable;
- spot (when the type supports it) at the zone's spot price, or the on-demand price until a spot
  price is known (upstream's behaviour; such offerings say ``price_estimated=True``);
- reserved (ReservedCapacity gate on), one per reservation in the class's
  ``status.capacityReservations`` for its type, in the reservation's zone, at the on-demand
  price / 10,000,000 (upstream's "near free" that keeps the on-demand order, so consolidation
  can still move to a smaller reserved type; 0 when the on-demand price is unknown), labelled
  with the reservation id, type and interruptible flag, and available while the reservation
  has a free instance, is not expiring and its zone is one of the type's;
- every offering carries ``topology.k8s.aws/zone-id`` when the subnet status has the zone id.

Types offered in none of the class's zones stay in the list with no offerings (as upstream), so a
node of that type can still be looked up by name.

``list`` returns the same list object while nothing it depends on changed (instance data,
prices, the class's zones and knobs): the solver caches indexes by list identity.

Concurrent ``refresh`` calls share one load (``aio.SingleFlight``): every launch in flight at
start-up asks for the catalogue before the first load lands, and one DescribeInstanceTypes +
DescribeInstanceTypeOfferings pass serves them all.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from karpenter_py.aio.singleflight import SingleFlight
from karpenter_py.cloudprovider.aws.capacityreservations import CapacityReservationProvider
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, is_aws_error, paginate
from karpenter_py.cloudprovider.aws.instancetype_math import (
    Accelerator,
    InstanceTypeFacts,
    NeuronDevice,
    NodeKnobs,
    build_instance_type,
)

# The class knobs live in knobs.py (pure, shared with ``karpenter-py plan``); re-exported here
# for the callers that always imported them from this module.
from karpenter_py.cloudprovider.aws.knobs import ephemeral_storage_for, knobs_for
from karpenter_py.cloudprovider.aws.pricing import PricingProvider
from karpenter_py.model.api.ec2nodeclass import CapacityReservation, EC2NodeClass
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
    AWS_LABEL_CAPACITY_RESERVATION_TYPE,
    AWS_LABEL_TOPOLOGY_ZONE_ID,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
)

__all__ = [
    "DISCOVERED_ARCHITECTURES",
    "REFRESH_INTERVAL",
    "InstanceTypeProvider",
    "PriceSource",
    "discovered",
    "ephemeral_storage_for",
    "facts_from_ec2",
    "knobs_for",
    "offerings_for",
    "resolve_instance_types",
]

log = logging.getLogger("karpenter.aws.instancetypes")

REFRESH_INTERVAL: Final = datetime.timedelta(hours=12)
# Until the first successful load the run loop retries sooner than the 12 h period.
RETRY_INTERVAL: Final = datetime.timedelta(minutes=1)
CALL_TIMEOUT: Final = datetime.timedelta(minutes=5)
DISCOVERED_ARCHITECTURES: Final = ("x86_64", "arm64")
_CACHE_SIZE: Final = 64


class PriceSource(Protocol):
    """What offerings need from the pricing provider."""

    def on_demand(self, instance_type: str) -> float | None: ...

    def spot(self, instance_type: str, zone: str) -> float | None: ...


# --------------------------------------------------------------------------- pure parts


def discovered(info: Mapping[str, Any]) -> bool:
    """Upstream's DescribeInstanceTypes selection: hvm, and an x86_64 or arm64 processor."""
    virtualization = info.get("SupportedVirtualizationTypes") or []
    architectures = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    return "hvm" in virtualization and any(a in DISCOVERED_ARCHITECTURES for a in architectures)


def _mbps(gbps: float) -> int:
    return int(gbps * 1000 + 0.5)


def _accelerators(items: Sequence[Mapping[str, Any]]) -> tuple[Accelerator, ...]:
    return tuple(
        Accelerator(
            name=str(a.get("Name", "")),
            manufacturer=str(a.get("Manufacturer", "")),
            count=int(a.get("Count", 0)),
            memory_mib=int((a.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
        )
        for a in items
    )


def _neuron(items: Sequence[Mapping[str, Any]]) -> tuple[NeuronDevice, ...]:
    return tuple(
        NeuronDevice(
            name=str(d.get("Name", "")),
            count=int(d.get("Count", 0)),
            cores=int((d.get("CoreInfo") or {}).get("Count", 0)),
            memory_mib=int((d.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
        )
        for d in items
    )


def _network(network: Mapping[str, Any]) -> dict[str, Any]:
    cards = network.get("NetworkCards") or []
    default_index = network.get("DefaultNetworkCardIndex", 0)
    default_card = next(
        (c for c in cards if c.get("NetworkCardIndex", 0) == default_index),
        {"MaximumNetworkInterfaces": network.get("MaximumNetworkInterfaces", 0)},
    )
    bandwidth = (
        _mbps(sum(c["BaselineBandwidthInGbps"] for c in cards))
        if cards and all("BaselineBandwidthInGbps" in c for c in cards)
        else None
    )
    return {
        "max_enis": int(default_card.get("MaximumNetworkInterfaces", 0)),
        "ipv4_per_eni": int(network.get("Ipv4AddressesPerInterface", 0)),
        "efa_supported": bool(network.get("EfaSupported", False)),
        "max_efa_interfaces": int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)),
        "encryption_in_transit": bool(network.get("EncryptionInTransitSupported", False)),
        "network_performance": str(network.get("NetworkPerformance", "")),
        "network_bandwidth_mbps": bandwidth,
    }


def facts_from_ec2(info: Mapping[str, Any], zones: Sequence[str] = ()) -> InstanceTypeFacts:
    """The facts of one DescribeInstanceTypes entry (the fields the instance-type arithmetic reads).

    Prices are not part of EC2's answer: ``on_demand_price`` is None (offerings are priced from
    the pricing provider when a node class lists the types).
    """
    processor = info.get("ProcessorInfo") or {}
    ebs = info.get("EbsInfo") or {}
    storage = info.get("InstanceStorageInfo") or {}
    clock = processor.get("SustainedClockSpeedInGhz")
    return InstanceTypeFacts(
        name=str(info["InstanceType"]),
        vcpu=int(info["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(info["MemoryInfo"]["SizeInMiB"]),
        architectures=tuple(processor.get("SupportedArchitectures") or ()),
        on_demand_price=None,
        usage_classes=tuple(sorted(info.get("SupportedUsageClasses") or ())),
        zones=tuple(sorted(zones)),
        hypervisor=str(info.get("Hypervisor", "")),
        bare_metal=bool(info.get("BareMetal", False)),
        cpu_manufacturer=str(processor.get("Manufacturer", "")),
        sustained_clock_ghz=float(clock) if clock is not None else None,
        gpus=_accelerators((info.get("GpuInfo") or {}).get("Gpus") or ()),
        inference_accelerators=_accelerators(
            (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or ()
        ),
        neuron_devices=_neuron((info.get("NeuronInfo") or {}).get("NeuronDevices") or ()),
        instance_storage_gb=(int(storage["TotalSizeInGB"]) if "TotalSizeInGB" in storage else None),
        instance_storage_nvme=str(storage.get("NvmeSupport", "unsupported")),
        ebs_bandwidth_mbps=(ebs.get("EbsOptimizedInfo") or {}).get("MaximumBandwidthInMbps"),
        ebs_optimized_support=str(ebs.get("EbsOptimizedSupport", "unsupported")),
        **_network(info.get("NetworkInfo") or {}),
    )


def _capacity_types(facts: InstanceTypeFacts) -> list[str]:
    return [c for c in (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT) if c in facts.usage_classes]


# Reserved capacity is paid for already: priced near zero, in the on-demand order (upstream's).
RESERVED_PRICE_DIVISOR: Final = 10_000_000.0

# A reservation the class selected and how many instances it still has room for.
ReservationRoom = tuple[CapacityReservation, int]


def reserved_offerings(
    facts: InstanceTypeFacts,
    zones: Sequence[tuple[str, str]],
    on_demand: float | None,
    reservations: Sequence[ReservationRoom],
) -> list[Offering]:
    """One ``reserved`` offering per reservation of this type (see the module docstring)."""
    zone_ids = dict(zones)
    out: list[Offering] = []
    for reservation, room in reservations:
        if reservation.instance_type != facts.name:
            continue
        zone = reservation.availability_zone
        labels = {
            AWS_LABEL_CAPACITY_RESERVATION_ID: reservation.id,
            AWS_LABEL_CAPACITY_RESERVATION_TYPE: reservation.reservation_type,
            AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: str(reservation.interruptible).lower(),
        }
        if zone_ids.get(zone):
            labels[AWS_LABEL_TOPOLOGY_ZONE_ID] = zone_ids[zone]
        out.append(
            Offering(
                zone=zone,
                capacity_type=CAPACITY_TYPE_RESERVED,
                price=on_demand / RESERVED_PRICE_DIVISOR if on_demand is not None else 0.0,
                available=room > 0 and zone in zone_ids and reservation.state == "active",
                labels=labels,
                reservation_capacity=room,
            )
        )
    return out


def offerings_for(
    facts: InstanceTypeFacts,
    zones: Sequence[tuple[str, str]],
    pricing: PriceSource,
    reservations: Sequence[ReservationRoom] = (),
) -> list[Offering]:
    """One offering per (zone, capacity type), then the reserved ones; ``zones`` are (zone,
    zone id or "") pairs."""
    on_demand = pricing.on_demand(facts.name)
    out: list[Offering] = []
    for zone, zone_id in zones:
        labels = {AWS_LABEL_TOPOLOGY_ZONE_ID: zone_id} if zone_id else {}
        for capacity_type in _capacity_types(facts):
            price, estimated = on_demand, False
            if capacity_type == CAPACITY_TYPE_SPOT:
                spot = pricing.spot(facts.name, zone)
                price, estimated = (spot, False) if spot is not None else (on_demand, True)
            out.append(
                Offering(
                    zone=zone,
                    capacity_type=capacity_type,
                    price=price if price is not None else 0.0,
                    available=price is not None,
                    labels=labels,
                    price_estimated=estimated and price is not None,
                )
            )
    out.extend(reserved_offerings(facts, zones, on_demand, reservations))
    return out


def resolve_instance_types(
    facts: Sequence[InstanceTypeFacts],
    subnet_zones: Mapping[str, str],
    *,
    region: str,
    knobs: NodeKnobs,
    pricing: PriceSource,
    reservations: Sequence[ReservationRoom] = (),
) -> list[InstanceType]:
    """Every type in ``facts`` (sorted by name) for a class whose subnets are in
    ``subnet_zones`` (zone -> zone id, "" when unknown); ``reservations``: the class's
    reservations with their free instance counts (empty with the ReservedCapacity gate off)."""
    out: list[InstanceType] = []
    for item in sorted(facts, key=lambda f: f.name):
        offered = set(item.zones)
        zones = [(z, subnet_zones[z]) for z in sorted(subnet_zones) if z in offered]
        offerings = offerings_for(item, zones, pricing, reservations)
        capacity_types = _capacity_types(item)
        if any(o.capacity_type == CAPACITY_TYPE_RESERVED for o in offerings):
            capacity_types.append(CAPACITY_TYPE_RESERVED)
        out.append(
            build_instance_type(
                item,
                offerings,
                zones=[z for z, _ in zones],
                capacity_types=capacity_types,
                region=region,
                knobs=knobs,
                zone_ids=[zone_id for _, zone_id in zones if zone_id],
            )
        )
    return out


def _cache_key(nodeclass: EC2NodeClass, kubelet: Mapping[str, object] | None) -> tuple[object, ...]:
    spec = nodeclass.spec
    zones = tuple(sorted({(s.zone, s.zone_id) for s in nodeclass.status.subnets}))
    mappings = [m.model_dump(mode="json") for m in spec.block_device_mappings or ()]
    return (
        zones,
        json.dumps(spec.kubelet if kubelet is None else kubelet, sort_keys=True, default=str),
        json.dumps(mappings, sort_keys=True),
        spec.resolved_ami_family(),
        spec.instance_store_policy,
    )


# --------------------------------------------------------------------------- provider


class InstanceTypeProvider:
    """The EC2 instance type data of the region, and the per-node-class instance types."""

    def __init__(
        self,
        clients: AwsClients,
        pricing: PricingProvider,
        *,
        vm_memory_overhead_percent: float = 0.075,
        reserved_enis: int = 0,
        reservations: CapacityReservationProvider | None = None,
        refresh_interval: datetime.timedelta = REFRESH_INTERVAL,
        retry_interval: datetime.timedelta = RETRY_INTERVAL,
        call_timeout: datetime.timedelta = CALL_TIMEOUT,
    ) -> None:
        if not 0.0 <= vm_memory_overhead_percent < 1.0:
            raise ValueError(
                f"vm_memory_overhead_percent must be in [0, 1), got {vm_memory_overhead_percent}"
            )
        if reserved_enis < 0:
            raise ValueError(f"reserved_enis must be >= 0, got {reserved_enis}")
        self._clients = clients
        self._pricing = pricing
        self._vm_overhead = vm_memory_overhead_percent
        self._reserved_enis = reserved_enis
        # Given with the ReservedCapacity gate on: classes' reservations become offerings.
        self._reservations = reservations
        self._interval = refresh_interval.total_seconds()
        self._retry = retry_interval.total_seconds()
        self._timeout = call_timeout.total_seconds()
        self._facts: tuple[InstanceTypeFacts, ...] = ()
        self._by_name: dict[str, InstanceTypeFacts] = {}
        self._loaded = False
        self.seq_num = 0
        self._cache: OrderedDict[tuple[object, ...], list[InstanceType]] = OrderedDict()
        # list() may run in solver threads; one build per key.
        self._lock = threading.Lock()
        self._loads = SingleFlight[str, None]()

    @property
    def loaded(self) -> bool:
        return self._loaded

    def facts(self, instance_type: str) -> InstanceTypeFacts | None:
        """What EC2 said about ``instance_type`` (ENI limits etc.), if it was discovered."""
        return self._by_name.get(instance_type)

    async def refresh(self) -> None:
        """Reload types and offerings; a failure keeps the previous data (and is raised only
        while nothing has ever loaded, so the first call surfaces it). Callers that come while
        a reload runs wait for it and share its outcome."""
        await self._loads.do("instance-types", self._refresh)

    async def _refresh(self) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                facts = await self._describe()
        except Exception as exc:
            if not (is_aws_error(exc) or isinstance(exc, TimeoutError | KeyError | ValueError)):
                raise
            log.warning(
                "instance type refresh failed; keeping previous data",
                extra={"error": str(exc), "code": error_code(exc), "loaded": self._loaded},
            )
            if not self._loaded:
                raise
            return
        if facts != self._facts:
            with self._lock:
                self._facts = facts
                self._by_name = {f.name: f for f in facts}
                self.seq_num += 1
                self._cache.clear()
        self._loaded = True
        log.info(
            "instance types refreshed",
            extra={"types": len(facts), "region": self._clients.region, "seq_num": self.seq_num},
        )

    async def run(self) -> None:
        """Refresh now and every refresh interval (every retry interval until the first
        success), forever; failures are logged, never raised."""
        while True:
            try:
                await self.refresh()
            except Exception as exc:
                if not (is_aws_error(exc) or isinstance(exc, TimeoutError | KeyError | ValueError)):
                    raise
            delay = self._interval if self._loaded else self._retry
            await asyncio.sleep(delay)

    async def _describe(self) -> tuple[InstanceTypeFacts, ...]:
        ec2 = self._clients.ec2
        infos = await paginate(
            ec2,
            "describe_instance_types",
            "InstanceTypes",
            Filters=[
                {"Name": "supported-virtualization-type", "Values": ["hvm"]},
                {"Name": "processor-info.supported-architecture", "Values": ["x86_64", "arm64"]},
            ],
            MaxResults=100,
        )
        offerings = await paginate(
            ec2,
            "describe_instance_type_offerings",
            "InstanceTypeOfferings",
            LocationType="availability-zone",
            MaxResults=1000,
        )
        zones: dict[str, set[str]] = {}
        for offering in offerings:
            zones.setdefault(str(offering["InstanceType"]), set()).add(str(offering["Location"]))
        described: list[InstanceTypeFacts] = []
        for info in infos:
            # The filters are applied again here: EC2 look-alikes may ignore them.
            if not discovered(info):
                continue
            name = str(info.get("InstanceType", ""))
            try:
                described.append(facts_from_ec2(info, sorted(zones.get(name, ()))))
            except (KeyError, TypeError, ValueError) as exc:
                # One malformed record must not hide every other type.
                log.warning(
                    "instance type skipped: incomplete DescribeInstanceTypes record",
                    extra={"instance_type": name, "error": repr(exc)},
                )
        if not described:
            raise ValueError("DescribeInstanceTypes returned no hvm x86_64/arm64 instance types")
        return tuple(sorted(described, key=lambda f: f.name))

    def list(
        self, nodeclass: EC2NodeClass, kubelet: Mapping[str, object] | None = None
    ) -> list[InstanceType]:
        """The instance types for ``nodeclass``; the same list object while nothing changed.
        ``kubelet``: the kubelet settings in effect when they are not the class's own (a
        NodePool's kubelet compatibility annotation)."""
        rooms = self._rooms(nodeclass)
        key = (
            self.seq_num,
            self._pricing.seq_num,
            *_cache_key(nodeclass, kubelet),
            tuple((r.id, r.state, room) for r, room in rooms),
        )
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
            subnet_zones: dict[str, str] = {}
            for subnet in nodeclass.status.subnets:
                # Keep a known zone id if another subnet of the zone lacks it.
                subnet_zones[subnet.zone] = subnet_zones.get(subnet.zone) or subnet.zone_id
            built = resolve_instance_types(
                self._facts,
                subnet_zones,
                region=self._clients.region,
                knobs=knobs_for(
                    nodeclass,
                    vm_memory_overhead_percent=self._vm_overhead,
                    reserved_enis=self._reserved_enis,
                    kubelet=kubelet,
                ),
                pricing=self._pricing,
                reservations=rooms,
            )
            # Entries for older data or prices can never be asked for again.
            for stale in [k for k in self._cache if k[:2] != key[:2]]:
                del self._cache[stale]
            self._cache[key] = built
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
            return built

    def _rooms(self, nodeclass: EC2NodeClass) -> tuple[ReservationRoom, ...]:
        """The class's reservations with their free instance counts (none with the gate off)."""
        if self._reservations is None:
            return ()
        return tuple(
            (r, self._reservations.available(r.id)) for r in nodeclass.status.capacity_reservations
        )
