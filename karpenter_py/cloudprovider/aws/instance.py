"""EC2 instances behind NodeClaims: launch (CreateFleet), get, list, delete, tag.

``create`` follows upstream's instance provider: pick the capacity type (reserved when the
NodeClaim allows it and some candidate has an available reserved offering, else spot when
allowed and offered, else on-demand), one subnet per allowed zone, at most 60 of the cheapest
types, one launch template per AMI, then one batched CreateFleet.

A reserved launch targets reservations explicitly: per (type, zone) the reservation with the
most free instances (CreateFleet refuses two overrides of one type and zone), one launch
template per reservation naming it, and only those templates in the request, so EC2 answers
``ReservationCapacityExceeded`` rather than falling back to plain on-demand (upstream's design:
Karpenter, not Fleet, decides the fallback). Default reservations launch as on-demand, Capacity
Blocks as ``capacity-block``; one request never mixes the two (default ones are preferred). Per-override errors that mean "no capacity" come
back as :class:`InsufficientCapacityError` naming exactly the failed offerings.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from karpenter_py.cloudprovider.aws import fleet, instancebatch
from karpenter_py.cloudprovider.aws.capacityreservations import (
    RESERVATION_TYPE_CAPACITY_BLOCK,
    RESERVATION_TYPE_DEFAULT,
    ReservationTarget,
)
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, is_aws_error, paginate
from karpenter_py.cloudprovider.aws.cluster import ClusterInfo
from karpenter_py.cloudprovider.aws.launchtemplates import (
    LaunchTemplateProvider,
    ResolvedLaunchTemplate,
)
from karpenter_py.cloudprovider.aws.userdata import UserDataError
from karpenter_py.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
)
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import SelectorRequirement
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    AWS_LABEL_CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
    TAG_EKS_CLUSTER_NAME,
    TAG_NODECLAIM,
)
from karpenter_py.scheduling.requirements import Requirements

log = logging.getLogger("karpenter.aws.instance")

PROVIDER_ID_PREFIX: Final = "aws:///"
TAG_NAME: Final = "Name"
# Tags that differ per NodeClaim: kept out of the CreateFleet batch key, written by CreateTags.
PER_CLAIM_TAGS: Final = frozenset({TAG_NODECLAIM, TAG_NAME})
LIVE_STATES: Final = ("pending", "running", "stopping", "stopped", "shutting-down")
NOT_FOUND_CODES: Final = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
DESCRIBE_ATTEMPTS: Final = 6
DESCRIBE_BACKOFF: Final = 0.1  # seconds, grows linearly per attempt


@dataclass(frozen=True, slots=True)
class Instance:
    id: str
    instance_type: str
    zone: str
    capacity_type: str
    image_id: str
    subnet_id: str
    security_group_ids: tuple[str, ...]
    state: str
    launch_time: datetime
    private_dns_name: str
    tags: Mapping[str, str] = field(default_factory=dict)
    # The capacity reservation EC2 placed the instance in ("" when none).
    capacity_reservation_id: str = ""

    @property
    def provider_id(self) -> str:
        return f"{PROVIDER_ID_PREFIX}{self.zone}/{self.id}"

    @staticmethod
    def from_ec2(raw: Mapping[str, Any]) -> Instance:
        """From one DescribeInstances ``Instances`` entry."""
        launch = raw.get("LaunchTime")
        if not isinstance(launch, datetime):
            launch = datetime.now(UTC)
        elif launch.tzinfo is None:
            launch = launch.replace(tzinfo=UTC)
        return Instance(
            id=str(raw.get("InstanceId", "")),
            instance_type=str(raw.get("InstanceType", "")),
            zone=str((raw.get("Placement") or {}).get("AvailabilityZone", "")),
            capacity_type=(
                CAPACITY_TYPE_SPOT
                if raw.get("InstanceLifecycle") == "spot"
                else CAPACITY_TYPE_ON_DEMAND
            ),
            image_id=str(raw.get("ImageId", "")),
            subnet_id=str(raw.get("SubnetId", "")),
            security_group_ids=tuple(
                str(g.get("GroupId", "")) for g in raw.get("SecurityGroups") or []
            ),
            state=str((raw.get("State") or {}).get("Name", "")),
            launch_time=launch.astimezone(UTC),
            private_dns_name=str(raw.get("PrivateDnsName", "")),
            tags={str(t["Key"]): str(t.get("Value", "")) for t in raw.get("Tags") or []},
            capacity_reservation_id=str(raw.get("CapacityReservationId") or ""),
        )


def parse_provider_id(provider_id: str) -> str:
    """``aws:///us-west-2a/i-0abc`` -> ``i-0abc``."""
    if provider_id.startswith(PROVIDER_ID_PREFIX):
        parts = provider_id[len(PROVIDER_ID_PREFIX) :].split("/")
        if len(parts) == 2 and parts[0] and parts[1].startswith("i-"):
            return parts[1]
    raise ValueError(
        f"provider ID {provider_id!r} is not an AWS instance ID of the form aws:///<zone>/i-<id>"
    )


def _allows(reqs: Requirements, key: str, value: str) -> bool:
    return key not in reqs or reqs[key].has(value)


def zonal_subnets(nodeclass: EC2NodeClass, reqs: Requirements) -> dict[str, str]:
    """zone -> subnet for the zones the NodeClaim allows: the first subnet listed per zone
    (status lists the most free IPs first)."""
    out: dict[str, str] = {}
    for subnet in nodeclass.status.subnets:
        if subnet.zone not in out and _allows(reqs, LABEL_TOPOLOGY_ZONE, subnet.zone):
            out[subnet.zone] = subnet.id
    return out


def choose_capacity_type(
    reqs: Requirements, instance_types: Sequence[InstanceType], zones: Sequence[str]
) -> str:
    """Reserved, then spot, if allowed and offered anywhere usable; on-demand otherwise."""
    zone_set = set(zones)
    for capacity_type in (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT):
        if not _allows(reqs, LABEL_CAPACITY_TYPE, capacity_type):
            continue
        for it in instance_types:
            if any(
                o.available and o.capacity_type == capacity_type and o.zone in zone_set
                for o in it.offerings
            ):
                return capacity_type
    return CAPACITY_TYPE_ON_DEMAND


# (instance type, zone) -> the reserved offering a launch targets there
ReservedTargets = dict[tuple[str, str], Offering]


def reserved_targets(
    instance_types: Sequence[InstanceType], zones: Iterable[str]
) -> tuple[ReservedTargets, str]:
    """Per (type, zone) the available reserved offering with the most room, and the
    DefaultTargetCapacityType of the request: default reservations (on-demand) when there are
    any, else Capacity Blocks (``capacity-block``); CreateFleet takes one per request."""
    zone_set = set(zones)
    best: ReservedTargets = {}
    for it in instance_types:
        for o in it.offerings:
            if not (o.available and o.capacity_type == CAPACITY_TYPE_RESERVED):
                continue
            if o.zone not in zone_set:
                continue
            held = best.get((it.name, o.zone))
            if held is None or o.reservation_capacity > held.reservation_capacity:
                best[(it.name, o.zone)] = o
    kinds = {_reservation(o).reservation_type for o in best.values()}
    kind = (
        RESERVATION_TYPE_DEFAULT
        if RESERVATION_TYPE_DEFAULT in kinds or not kinds
        else RESERVATION_TYPE_CAPACITY_BLOCK
    )
    kept = {k: o for k, o in best.items() if _reservation(o).reservation_type == kind}
    target = CAPACITY_TYPE_ON_DEMAND if kind == RESERVATION_TYPE_DEFAULT else kind
    return kept, target


def _reservation(o: Offering) -> ReservationTarget:
    return ReservationTarget(
        o.labels.get(AWS_LABEL_CAPACITY_RESERVATION_ID, ""),
        o.labels.get(AWS_LABEL_CAPACITY_RESERVATION_TYPE, RESERVATION_TYPE_DEFAULT),
    )


def plan_launch(
    reqs: Requirements,
    instance_types: Sequence[InstanceType],
    zones: Sequence[str] | Mapping[str, str],
) -> tuple[str, list[InstanceType]]:
    """(capacity type, at most 60 cheapest candidates with an offering of it in ``zones``).

    Spot offerings dearer than the cheapest on-demand one are dropped when on-demand is allowed;
    if that leaves no spot candidate, the launch falls back to on-demand.
    """
    zone_list = list(zones)
    capacity_type = choose_capacity_type(reqs, instance_types, zone_list)
    if not _allows(reqs, LABEL_CAPACITY_TYPE, capacity_type):
        raise InsufficientCapacityError("no allowed capacity type has an available offering")
    types: Sequence[InstanceType] = instance_types
    if capacity_type == CAPACITY_TYPE_SPOT and _allows(
        reqs, LABEL_CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND
    ):
        types = fleet.drop_pricier_spot(instance_types, zone_list)
        if not types:
            capacity_type, types = CAPACITY_TYPE_ON_DEMAND, instance_types
    candidates = fleet.select_types(types, zone_list, capacity_type)
    if not candidates:
        raise InsufficientCapacityError(
            f"no instance type has an available {capacity_type} offering in {sorted(zone_list)}"
        )
    return capacity_type, candidates


def split_tags(tags: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(tags every instance of a batch shares, per-NodeClaim tags)."""
    shared = {k: v for k, v in tags.items() if k not in PER_CLAIM_TAGS}
    own = {k: v for k, v in tags.items() if k in PER_CLAIM_TAGS}
    return shared, own


class InstanceProvider:
    def __init__(
        self,
        clients: AwsClients,
        cluster: ClusterInfo,
        launch_templates: LaunchTemplateProvider,
        *,
        batch_idle: float = 0.035,
        batch_max: float = 1.0,
        on_unavailable: fleet.UnavailableSink | None = None,
        instance_batch_idle: float = instancebatch.IDLE,
        instance_batch_max: float = instancebatch.MAX_WINDOW,
        reserved_capacity: bool = False,
    ) -> None:
        """``on_unavailable`` hears every (type, zone, capacity type) a CreateFleet reported
        without capacity, including ones from calls that still launched something.
        ``instance_batch_*`` are the windows of the batched DescribeInstances and
        TerminateInstances by ID (``get``, ``delete``)."""
        self._clients = clients
        self._cluster = cluster
        self._launch_templates = launch_templates
        # The ReservedCapacity gate: on-demand launches of a class that selects reservations
        # then stay out of open ones (see capacityreservations.OPT_OUT_OF_OPEN_RESERVATIONS).
        self._reserved_capacity = reserved_capacity
        self._fleet = fleet.FleetBatcher(
            clients.ec2, idle=batch_idle, max_window=batch_max, on_unavailable=on_unavailable
        )
        self.batch = instancebatch.InstanceBatcher(
            clients.ec2, idle=instance_batch_idle, max_window=instance_batch_max
        )

    @property
    def create_fleet_calls(self) -> int:
        """CreateFleet API calls made so far."""
        return self._fleet.calls

    async def create(
        self,
        nodeclass: EC2NodeClass,
        nodeclaim: NodeClaim,
        instance_types: Sequence[InstanceType],
        tags: Mapping[str, str],
    ) -> Instance:
        reqs = Requirements.from_selectors(
            SelectorRequirement(r.key, r.operator, tuple(r.values), r.min_values)
            for r in nodeclaim.spec.requirements
        )
        subnets = zonal_subnets(nodeclass, reqs)
        if not subnets:
            raise CreateError(
                f"no subnet of EC2NodeClass {nodeclass.metadata.name!r} is in a zone the "
                "NodeClaim allows",
                reason="NoSubnets",
            )
        capacity_type, candidates = plan_launch(reqs, instance_types, subnets)
        shared, own = split_tags(tags)
        instance_id = await self._launch(
            nodeclass, nodeclaim, candidates, capacity_type, subnets, shared
        )
        if own:
            await self._tag_quietly(instance_id, own)
        instance = await self._describe_new(instance_id)
        return _with_tags(instance, own)

    async def _launch(
        self,
        nodeclass: EC2NodeClass,
        nodeclaim: NodeClaim,
        candidates: Sequence[InstanceType],
        capacity_type: str,
        subnets: Mapping[str, str],
        shared_tags: Mapping[str, str],
    ) -> str:
        """One CreateFleet (batched); a missing launch template is re-created once."""
        for attempt in (1, 2):
            target: str | None = None
            if capacity_type == CAPACITY_TYPE_RESERVED:
                templates, overrides, target = await self._reserved_overrides(
                    nodeclass, nodeclaim, candidates, subnets
                )
            else:
                templates = await self._ensure_templates(
                    nodeclass, nodeclaim, candidates, capacity_type
                )
                overrides = fleet.build_overrides(
                    [(t.name, t.instance_types) for t in templates],
                    candidates,
                    subnets,
                    capacity_type,
                )
            if not templates:
                raise CreateError(
                    "no AMI of the EC2NodeClass is compatible with the candidate instance types",
                    reason="NoCompatibleAMI",
                )
            request = fleet.FleetRequest(
                capacity_type=capacity_type,
                overrides=overrides,
                tags=tuple(sorted(shared_tags.items())),
                context=nodeclass.spec.context,
                target_capacity_type=target,
            )
            try:
                return await self._fleet.launch(request)
            except Exception as exc:
                if attempt == 1 and fleet.is_launch_template_not_found(exc):
                    self._invalidate(templates)
                    continue
                if isinstance(exc, fleet.FleetLaunchError) or is_aws_error(exc):
                    raise _launch_error(exc) from exc
                raise
        raise CreateError("launch template missing after re-creating it")  # pragma: no cover

    async def _reserved_overrides(
        self,
        nodeclass: EC2NodeClass,
        nodeclaim: NodeClaim,
        candidates: Sequence[InstanceType],
        subnets: Mapping[str, str],
    ) -> tuple[builtins.list[ResolvedLaunchTemplate], tuple[fleet.Override, ...], str]:
        """Templates (one per targeted reservation), their overrides cheapest first, and the
        request's DefaultTargetCapacityType."""
        by_name = {it.name: it for it in candidates}
        targets, target_capacity_type = reserved_targets(candidates, subnets)
        templates: builtins.list[ResolvedLaunchTemplate] = []
        overrides: builtins.list[fleet.Override] = []
        for (name, zone), offering in targets.items():
            ensured = await self._ensure_templates(
                nodeclass,
                nodeclaim,
                [by_name[name]],
                CAPACITY_TYPE_RESERVED,
                _reservation(offering),
            )
            templates.extend(ensured)
            overrides.extend(
                fleet.build_overrides(
                    [(t.name, t.instance_types) for t in ensured],
                    [by_name[name]],
                    {zone: subnets[zone]},
                    CAPACITY_TYPE_RESERVED,
                )
            )
        overrides.sort(key=lambda o: o.priority)
        return templates, tuple(overrides), target_capacity_type

    async def _ensure_templates(
        self,
        nodeclass: EC2NodeClass,
        nodeclaim: NodeClaim,
        candidates: Sequence[InstanceType],
        capacity_type: str,
        reservation: ReservationTarget | None = None,
    ) -> builtins.list[ResolvedLaunchTemplate]:
        opt_out = (
            self._reserved_capacity
            and capacity_type == CAPACITY_TYPE_ON_DEMAND
            and bool(nodeclass.spec.capacity_reservation_selector_terms)
        )
        try:
            return await self._launch_templates.ensure(
                nodeclass,
                nodeclaim,
                candidates,
                capacity_type,
                reservation,
                opt_out_of_open_reservations=opt_out,
            )
        except UserDataError as exc:
            raise CreateError(str(exc), reason="InvalidUserData") from exc
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            raise CreateError(
                f"creating launch template failed: {error_code(exc) or 'error'}: {exc}",
                reason="LaunchTemplateCreationFailed",
            ) from exc

    def _invalidate(self, templates: Sequence[ResolvedLaunchTemplate]) -> None:
        for t in templates:
            log.info("launch template not found; re-creating", extra={"launch_template": t.name})
            self._launch_templates.invalidate(t.name)

    async def _tag_quietly(self, instance_id: str, tags: Mapping[str, str]) -> None:
        # The instance is up whatever happens here; the tagging controller retries later.
        try:
            await self.tag(instance_id, tags)
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            log.warning(
                "tagging a new instance failed",
                extra={"instance_id": instance_id, "error": str(exc)},
            )

    async def _describe_new(self, instance_id: str) -> Instance:
        """DescribeInstances right after launch, retried briefly (eventual consistency)."""
        for attempt in range(1, DESCRIBE_ATTEMPTS + 1):
            try:
                return await self.get(instance_id)
            except NodeClaimNotFoundError:
                if attempt == DESCRIBE_ATTEMPTS:
                    break
                await asyncio.sleep(DESCRIBE_BACKOFF * attempt)
        raise CreateError(f"launched instance {instance_id} could not be described")

    async def get(self, instance_id: str) -> Instance:
        try:
            raw = await self.batch.describe(instance_id)
        except Exception as exc:
            if error_code(exc) in NOT_FOUND_CODES:
                raise NodeClaimNotFoundError(f"instance {instance_id} not found") from exc
            raise
        instance = Instance.from_ec2(raw) if raw is not None else None
        if instance is None or instance.state == "terminated":
            raise NodeClaimNotFoundError(f"instance {instance_id} not found or terminated")
        return instance

    async def list(self) -> builtins.list[Instance]:
        reservations = await paginate(
            self._clients.ec2,
            "describe_instances",
            "Reservations",
            Filters=[
                {"Name": "tag-key", "Values": [LABEL_NODEPOOL]},
                {"Name": f"tag:{TAG_EKS_CLUSTER_NAME}", "Values": [self._cluster.name]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ],
        )
        out = [Instance.from_ec2(raw) for r in reservations for raw in r.get("Instances") or []]
        return [i for i in out if i.state != "terminated"]

    async def find(self, nodeclaim_name: str) -> Instance | None:
        """The live instance tagged for ``nodeclaim_name`` (a launch whose result was lost)."""
        reservations = await paginate(
            self._clients.ec2,
            "describe_instances",
            "Reservations",
            Filters=[
                {"Name": f"tag:{TAG_EKS_CLUSTER_NAME}", "Values": [self._cluster.name]},
                {"Name": f"tag:{TAG_NODECLAIM}", "Values": [nodeclaim_name]},
                # Only an instance that is coming up or running can be adopted; a stopping or
                # terminating one would leave the NodeClaim without a node.
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ],
        )
        found = [Instance.from_ec2(raw) for r in reservations for raw in r.get("Instances") or []]
        return next((i for i in found if i.state != "terminated"), None)

    async def delete(self, instance_id: str) -> None:
        await self.get(instance_id)  # NodeClaimNotFoundError when unknown or terminated
        try:
            await self.batch.terminate(instance_id)
        except Exception as exc:
            if error_code(exc) in NOT_FOUND_CODES:
                raise NodeClaimNotFoundError(f"instance {instance_id} not found") from exc
            raise
        log.info("terminating instance", extra={"instance_id": instance_id})

    async def tag(self, instance_id: str, tags: Mapping[str, str]) -> None:
        if not tags:
            return
        try:
            await self._clients.ec2.create_tags(
                Resources=[instance_id],
                Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())],
            )
        except Exception as exc:
            if error_code(exc) in NOT_FOUND_CODES:
                raise NodeClaimNotFoundError(f"instance {instance_id} not found") from exc
            raise


def _with_tags(instance: Instance, tags: Mapping[str, str]) -> Instance:
    if all(instance.tags.get(k) == v for k, v in tags.items()):
        return instance
    return dataclasses.replace(instance, tags={**instance.tags, **tags})


def _launch_error(exc: BaseException) -> CloudProviderError:
    """The typed error a failed launch surfaces as."""
    if isinstance(exc, fleet.FleetLaunchError):
        offerings = fleet.unavailable_offerings(exc.errors)
        if offerings:
            return InsufficientCapacityError(str(exc), offerings=offerings)
        return CreateError(f"CreateFleet: {exc}")
    return CreateError(f"CreateFleet failed: {error_code(exc) or 'error'}: {exc}")
