"""CreateFleet: shaping the request, reading its errors, and batching equal requests.

Batching (upstream's CreateFleet batcher): launches with equal parameters that arrive within
``idle`` seconds of each other (at most ``max_window`` after the first, at most ``max_items``)
become one CreateFleet call with TotalTargetCapacity = N; each caller gets one of the returned
instances. The batch key is the whole request *except* the per-NodeClaim tags
(``karpenter.sh/nodeclaim`` and ``Name``): those would make every request unique, so the
instance provider writes them with CreateTags on the instance it got.

The window, its leader and the hand-over when the leader is cancelled are ``aio.CallBatcher``'s;
the instances of one call are interchangeable, so a caller that went away leaves its instance to
the next one still waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from karpenter_py.aio.batcher import CallBatcher
from karpenter_py.cloudprovider.aws.clients import error_code
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
)

log = logging.getLogger("karpenter.aws.fleet")

MAX_INSTANCE_TYPES: Final = 60
MAX_BATCH: Final = 1000
SPOT_STRATEGY: Final = "price-capacity-optimized"
ON_DEMAND_STRATEGY: Final = "lowest-price"

# Fleet error codes that mean "this offering cannot be had right now": the caller marks the
# (type, zone, capacity type) unavailable for a while and schedules around it.
UNAVAILABLE_OFFERING_CODES: Final = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "SpotMaxPriceTooLow",
        "InsufficientCapacityOnHost",
        "ReservationCapacityExceeded",
        "InsufficientReservedInstanceCapacity",
    }
)
LAUNCH_TEMPLATE_NOT_FOUND_CODES: Final = frozenset(
    {
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateId.VersionNotFound",
    }
)


@dataclass(frozen=True, slots=True)
class Override:
    launch_template: str
    instance_type: str
    subnet_id: str
    zone: str
    priority: float


@dataclass(frozen=True, slots=True)
class FleetRequest:
    """The batchable part of a launch (hashable: equal requests share one CreateFleet)."""

    capacity_type: str
    overrides: tuple[Override, ...]
    tags: tuple[tuple[str, str], ...]
    context: str | None = None
    # EC2's DefaultTargetCapacityType when it differs from ``capacity_type``: a reserved launch
    # asks for on-demand (or capacity-block) through templates that target the reservation.
    target_capacity_type: str | None = None


@dataclass(frozen=True, slots=True)
class FleetError:
    code: str
    message: str
    instance_type: str
    zone: str
    capacity_type: str
    launch_template: str = ""


@dataclass(slots=True)
class FleetResult:
    instance_ids: list[str] = field(default_factory=list)
    errors: list[FleetError] = field(default_factory=list)


class FleetLaunchError(Exception):
    """CreateFleet gave this caller no instance; ``errors`` are the fleet's per-override errors."""

    def __init__(self, errors: Sequence[FleetError]) -> None:
        summary = "; ".join(f"{e.code} {e.instance_type}/{e.zone}: {e.message}" for e in errors)
        super().__init__(summary or "CreateFleet launched no instance and reported no error")
        self.errors = tuple(errors)


# ---------------------------------------------------------------- shaping


def _offering_price(it: InstanceType, zone: str, capacity_type: str) -> float | None:
    prices = [
        o.price
        for o in it.offerings
        if o.available and o.zone == zone and o.capacity_type == capacity_type
    ]
    return min(prices) if prices else None


def select_types(
    instance_types: Sequence[InstanceType],
    zones: Iterable[str],
    capacity_type: str,
    *,
    max_types: int = MAX_INSTANCE_TYPES,
) -> list[InstanceType]:
    """The ``max_types`` cheapest types with an available ``capacity_type`` offering in
    ``zones`` (by their cheapest such offering; ties keep the caller's order)."""
    zone_list = list(zones)
    priced: list[tuple[float, int, InstanceType]] = []
    for index, it in enumerate(instance_types):
        prices = [p for z in zone_list if (p := _offering_price(it, z, capacity_type)) is not None]
        if prices:
            priced.append((min(prices), index, it))
    priced.sort(key=lambda t: (t[0], t[1]))
    return [it for _, _, it in priced[:max_types]]


def drop_pricier_spot(
    instance_types: Sequence[InstanceType], zones: Iterable[str]
) -> list[InstanceType]:
    """Types whose cheapest spot offering is no dearer than the cheapest on-demand offering of
    any candidate (upstream: paying more for spot than on-demand makes no sense)."""
    zone_list = list(zones)

    def cheapest(it: InstanceType, capacity_type: str) -> float | None:
        prices = [p for z in zone_list if (p := _offering_price(it, z, capacity_type)) is not None]
        return min(prices) if prices else None

    od = [p for it in instance_types if (p := cheapest(it, CAPACITY_TYPE_ON_DEMAND)) is not None]
    if not od:
        return list(instance_types)
    ceiling = min(od)
    return [
        it
        for it in instance_types
        if (p := cheapest(it, CAPACITY_TYPE_SPOT)) is not None and p <= ceiling
    ]


def build_overrides(
    templates: Iterable[tuple[str, Sequence[str]]],
    instance_types: Sequence[InstanceType],
    zone_subnets: Mapping[str, str],
    capacity_type: str,
    *,
    max_types: int = MAX_INSTANCE_TYPES,
) -> tuple[Override, ...]:
    """types x zonal subnets for every available offering of ``capacity_type``.

    Only the ``max_types`` cheapest types are kept (:func:`select_types`); overrides come
    cheapest first with Priority = the offering's price.
    """
    kept = {
        it.name: it
        for it in select_types(instance_types, zone_subnets, capacity_type, max_types=max_types)
    }
    out: list[Override] = []
    for template, names in templates:
        for name in names:
            it = kept.get(name)
            if it is None:
                continue
            for zone, subnet in zone_subnets.items():
                price = _offering_price(it, zone, capacity_type)
                if price is not None:
                    out.append(Override(template, name, subnet, zone, price))
    out.sort(key=lambda o: o.priority)  # stable: equal prices keep template/type/zone order
    return tuple(out)


def create_fleet_input(request: FleetRequest, count: int) -> dict[str, Any]:
    """The CreateFleet parameters for ``count`` instances of ``request``."""
    configs: dict[str, list[dict[str, Any]]] = {}
    for o in request.overrides:
        configs.setdefault(o.launch_template, []).append(
            {"InstanceType": o.instance_type, "SubnetId": o.subnet_id, "Priority": o.priority}
        )
    tags = [{"Key": k, "Value": v} for k, v in request.tags]
    params: dict[str, Any] = {
        "Type": "instant",
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": request.target_capacity_type or request.capacity_type,
        },
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": overrides,
            }
            for name, overrides in configs.items()
        ],
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume", "fleet")
        ],
    }
    if request.capacity_type == CAPACITY_TYPE_SPOT:
        params["SpotOptions"] = {"AllocationStrategy": SPOT_STRATEGY}
    else:
        params["OnDemandOptions"] = {"AllocationStrategy": ON_DEMAND_STRATEGY}
    if request.context:
        params["Context"] = request.context
    return params


def parse_fleet_response(request: FleetRequest, response: Mapping[str, Any]) -> FleetResult:
    """Instance ids and per-override errors (zone from the error, else from its subnet)."""
    zone_of = {o.subnet_id: o.zone for o in request.overrides}
    result = FleetResult()
    for item in response.get("Instances") or []:
        result.instance_ids.extend(str(i) for i in item.get("InstanceIds") or [])
    for err in response.get("Errors") or []:
        lto = err.get("LaunchTemplateAndOverrides") or {}
        ovr = lto.get("Overrides") or {}
        spec = lto.get("LaunchTemplateSpecification") or {}
        zone = str(ovr.get("AvailabilityZone") or zone_of.get(str(ovr.get("SubnetId") or ""), ""))
        result.errors.append(
            FleetError(
                code=str(err.get("ErrorCode") or ""),
                message=str(err.get("ErrorMessage") or ""),
                instance_type=str(ovr.get("InstanceType") or ""),
                zone=zone,
                # EC2 names a reserved launch's lifecycle on-demand; the offering is reserved.
                capacity_type=(
                    CAPACITY_TYPE_RESERVED
                    if request.capacity_type == CAPACITY_TYPE_RESERVED
                    else str(err.get("Lifecycle") or request.capacity_type)
                ),
                launch_template=str(spec.get("LaunchTemplateName") or ""),
            )
        )
    return result


def unavailable_offerings(errors: Iterable[FleetError]) -> tuple[tuple[str, str, str], ...]:
    """(type, zone, capacity type) of the errors that mark an offering unavailable, deduped,
    in error order."""
    seen: dict[tuple[str, str, str], None] = {}
    for e in errors:
        if e.code in UNAVAILABLE_OFFERING_CODES and e.instance_type and e.zone:
            seen[(e.instance_type, e.zone, e.capacity_type)] = None
    return tuple(seen)


def is_launch_template_not_found(exc: BaseException) -> bool:
    if isinstance(exc, FleetLaunchError):
        return any(e.code in LAUNCH_TEMPLATE_NOT_FOUND_CODES for e in exc.errors)
    return error_code(exc) in LAUNCH_TEMPLATE_NOT_FOUND_CODES


# ---------------------------------------------------------------- batching


UnavailableSink = Callable[[tuple[tuple[str, str, str], ...]], None]


class FleetBatcher:
    """Merges equal :class:`FleetRequest` s into one CreateFleet; ``launch`` returns an id."""

    def __init__(
        self,
        ec2: Any,
        *,
        idle: float = 0.035,
        max_window: float = 1.0,
        max_items: int = MAX_BATCH,
        on_unavailable: UnavailableSink | None = None,
    ) -> None:
        self._ec2 = ec2
        self._on_unavailable = on_unavailable
        # The instances of one CreateFleet are interchangeable: whoever still waits gets one.
        self._batcher: CallBatcher[FleetRequest, None, str] = CallBatcher(
            self._call,
            idle=idle,
            max_window=max_window,
            max_items=max_items,
            interchangeable=True,
            unclaimed=_unclaimed,
        )

    @property
    def calls(self) -> int:
        """CreateFleet API calls made so far."""
        return self._batcher.calls

    async def launch(self, request: FleetRequest) -> str:
        return await self._batcher.call(request, None)

    async def _call(self, request: FleetRequest, waiters: Sequence[None]) -> list[str | Exception]:
        response = await self._ec2.create_fleet(**create_fleet_input(request, len(waiters)))
        result = parse_fleet_response(request, response)
        failed = unavailable_offerings(result.errors)
        if failed and self._on_unavailable is not None:
            # Even when some instance launched, the failed pools are worth avoiding for a while.
            self._on_unavailable(failed)
        log.info(
            "CreateFleet",
            extra={
                "requested": len(waiters),
                "launched": len(result.instance_ids),
                "errors": len(result.errors),
                "capacity_type": request.capacity_type,
            },
        )
        ids = result.instance_ids
        if len(ids) > len(waiters):
            _unclaimed(request, ids[len(waiters) :])
        return [
            ids[i] if i < len(ids) else FleetLaunchError(result.errors) for i in range(len(waiters))
        ]


def _unclaimed(_: FleetRequest, instance_ids: Sequence[str]) -> None:
    log.warning(
        "CreateFleet launched instances nobody waits for any more (garbage collection "
        "will terminate them)",
        extra={"instance_ids": list(instance_ids)},
    )
