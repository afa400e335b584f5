"""``NodeClassResolver``: everything an EC2NodeClass's status says, resolved against AWS.

One call, :meth:`NodeClassResolver.resolve`, returns the subnets, security groups, AMIs,
instance profile and (ReservedCapacity gate on) capacity reservations of a class, and for each part that could not be resolved a :class:`Failure`
keyed by the condition it turns False (``SubnetsReady``, ``SecurityGroupsReady``, ``AMIsReady``,
``InstanceProfileReady``, ``ValidationSucceeded``, ``CapacityReservationsReady``). A part's AWS error is its failure; it never
escapes, so the other parts still resolve and the controller can report all of them.

Validation (``ValidationSucceeded``) is upstream's authorization check, done with ``DryRun``:
``RunInstances`` and ``CreateLaunchTemplate`` with the resolved AMI, subnet, security groups,
instance profile and tags. EC2 answers ``DryRunOperation`` when the call would have been
allowed and ``UnauthorizedOperation`` when not. (CreateFleet is not dry-run: it needs an
existing launch template to reference.) It runs only once the other parts resolved, and a
passing result is remembered for 30 minutes per set of inputs, as upstream caches it.

:meth:`NodeClassResolver.cleanup` undoes what Karpenter created for a class: its launch
templates and its instance profile.

Classes often share selectors (every class of a cluster selecting ``karpenter.sh/discovery``):
concurrent look-ups of the same subnet, security-group or AMI selector share one set of
Describe calls (``aio.SingleFlight``, keyed by the selector terms).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from karpenter_py.aio.clock import Clock, RealClock
from karpenter_py.aio.singleflight import SingleFlight
from karpenter_py.cloudprovider.aws.amis import (
    AMIDiscovery,
    AMIResolutionError,
    KubernetesVersionError,
)
from karpenter_py.cloudprovider.aws.capacityreservations import CapacityReservationProvider
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, is_aws_error
from karpenter_py.cloudprovider.aws.instanceprofiles import (
    CLUSTER_TAG_PREFIX,
    InstanceProfileNotFoundError,
    InstanceProfiles,
)
from karpenter_py.cloudprovider.aws.launchtemplates import delete_launch_templates
from karpenter_py.cloudprovider.aws.securitygroups import discover_security_groups
from karpenter_py.cloudprovider.aws.subnets import DiscoveredSubnet, discover_subnets
from karpenter_py.model.api.ec2nodeclass import (
    AMI,
    CONDITION_AMIS_READY,
    CONDITION_CAPACITY_RESERVATIONS_READY,
    CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_SECURITY_GROUPS_READY,
    CONDITION_SUBNETS_READY,
    CONDITION_VALIDATION_SUCCEEDED,
    CapacityReservation,
    EC2NodeClass,
    SecurityGroup,
    Subnet,
)
from karpenter_py.model.labels import AWS_LABEL_EC2NODECLASS, LABEL_ARCH, TAG_EKS_CLUSTER_NAME

log = logging.getLogger("karpenter.aws.nodeclass")

# Condition reasons (CamelCase, as the API requires).
REASON_SUBNETS_NOT_FOUND: Final = "SubnetsNotFound"
REASON_SECURITY_GROUPS_NOT_FOUND: Final = "SecurityGroupsNotFound"
REASON_AMIS_NOT_FOUND: Final = "AMINotFound"
REASON_AMI_ALIAS_UNSUPPORTED: Final = "AMIAliasUnsupported"
REASON_INSTANCE_PROFILE_NOT_FOUND: Final = "InstanceProfileNotFound"
REASON_RESOLUTION_FAILED: Final = (
    "ResolutionFailed"  # prefixed with the part: SubnetsResolutionFailed
)
REASON_RUN_INSTANCES_AUTH: Final = "RunInstancesAuthCheckFailed"
REASON_LAUNCH_TEMPLATE_AUTH: Final = "CreateLaunchTemplateAuthCheckFailed"
REASON_DEPENDENCIES_NOT_READY: Final = "DependenciesNotReady"

VALIDATION_TTL: Final = 30 * 60.0
# Instance types the dry run names, per AMI architecture (any type the account may launch).
DRY_RUN_TYPES: Final = {"amd64": "m5.large", "arm64": "m6g.large"}
UNAUTHORIZED: Final = ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException")


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a condition is not True: its reason and a message naming what is missing."""

    reason: str
    message: str
    transient: bool = False  # an AWS error: the part's previous status value still stands


@dataclass(slots=True)
class ResolvedNodeClass:
    subnets: list[Subnet] = field(default_factory=list)
    security_groups: list[SecurityGroup] = field(default_factory=list)
    amis: list[AMI] = field(default_factory=list)
    instance_profile: str = ""
    # None: the ReservedCapacity gate is off and the status field is not ours to write.
    capacity_reservations: list[CapacityReservation] | None = None
    failures: dict[str, Failure] = field(default_factory=dict)  # condition type -> why

    @property
    def ready(self) -> bool:
        return not self.failures


def _aws_failure(part: str, exc: BaseException) -> Failure:
    return Failure(
        f"{part}{REASON_RESOLUTION_FAILED}",
        f"failed to resolve {part}: {error_code(exc) or exc}",
        transient=True,
    )


def terms_key(terms: Sequence[BaseModel]) -> str:
    """The selector ``terms`` as one string: equal for equal selectors (term order kept)."""
    dumped = [t.model_dump(mode="json", exclude_none=True) for t in terms]
    return json.dumps(dumped, sort_keys=True, separators=(",", ":"))


def launch_tags(cluster: str, nodeclass: EC2NodeClass) -> dict[str, str]:
    """The tags a launch for this class carries (what the dry run authorizes)."""
    tags = dict(nodeclass.spec.tags or {})
    tags.update(
        {
            f"{CLUSTER_TAG_PREFIX}{cluster}": "owned",
            TAG_EKS_CLUSTER_NAME: cluster,
            AWS_LABEL_EC2NODECLASS: nodeclass.metadata.name,
        }
    )
    return tags


def _ami_arch(ami: AMI) -> str:
    for req in ami.requirements:
        if req.key == LABEL_ARCH and req.values:
            return req.values[0]
    return "amd64"


class NodeClassResolver:
    def __init__(
        self,
        clients: AwsClients,
        cluster_name: str,
        *,
        kubernetes_version: Callable[[], Awaitable[str]],
        clock: Clock | None = None,
        dry_run: bool = True,
        reservations: CapacityReservationProvider | None = None,
    ) -> None:
        """``reservations``: given when the ReservedCapacity gate is on; the class's
        ``capacityReservationSelectorTerms`` are then resolved too."""
        self.clients = clients
        self.reservations = reservations
        self.cluster_name = cluster_name
        self.kubernetes_version = kubernetes_version
        self.clock = clock or RealClock()
        self.dry_run = dry_run
        self.amis = AMIDiscovery(clients, self.clock)
        self.profiles = InstanceProfiles(clients, cluster_name, self.clock)
        self._validated: dict[tuple[Any, ...], float] = {}  # inputs -> passing until
        # Concurrent look-ups of one selector (keyed by terms_key) share one set of calls.
        self._subnet_lookups = SingleFlight[str, list[DiscoveredSubnet]]()
        self._security_group_lookups = SingleFlight[str, list[SecurityGroup]]()
        self._ami_lookups = SingleFlight[str, list[AMI]]()

    # ------------------------------------------------------------------ resolve
    async def resolve(self, nodeclass: EC2NodeClass) -> ResolvedNodeClass:
        out = ResolvedNodeClass()
        await self._subnets(nodeclass, out)
        await self._security_groups(nodeclass, out)
        await self._amis(nodeclass, out)
        await self._instance_profile(nodeclass, out)
        await self._validate(nodeclass, out)
        # After validation: the launch check does not depend on reservations.
        await self._capacity_reservations(nodeclass, out)
        return out

    async def _subnets(self, nodeclass: EC2NodeClass, out: ResolvedNodeClass) -> None:
        try:
            terms = nodeclass.spec.subnet_selector_terms
            found = await self._subnet_lookups.do(
                terms_key(terms), lambda: discover_subnets(self.clients, terms)
            )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            out.failures[CONDITION_SUBNETS_READY] = _aws_failure("Subnets", exc)
            return
        out.subnets = [s.status() for s in found]
        if not found:
            out.failures[CONDITION_SUBNETS_READY] = Failure(
                REASON_SUBNETS_NOT_FOUND, "SubnetSelector did not match any Subnets"
            )

    async def _security_groups(self, nodeclass: EC2NodeClass, out: ResolvedNodeClass) -> None:
        terms = nodeclass.spec.security_group_selector_terms
        try:
            out.security_groups = await self._security_group_lookups.do(
                terms_key(terms), lambda: discover_security_groups(self.clients, terms)
            )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            out.failures[CONDITION_SECURITY_GROUPS_READY] = _aws_failure("SecurityGroups", exc)
            return
        if not out.security_groups:
            out.failures[CONDITION_SECURITY_GROUPS_READY] = Failure(
                REASON_SECURITY_GROUPS_NOT_FOUND,
                "SecurityGroupSelector did not match any SecurityGroups",
            )

    async def _amis(self, nodeclass: EC2NodeClass, out: ResolvedNodeClass) -> None:
        if nodeclass.ubuntu_incompatible():
            out.failures[CONDITION_AMIS_READY] = Failure(
                REASON_AMIS_NOT_FOUND,
                "converted from a v1beta1 Ubuntu EC2NodeClass without amiSelectorTerms; v1 "
                "selects no Ubuntu AMI by itself: set amiSelectorTerms to Ubuntu's EKS AMIs",
            )
            return
        terms = nodeclass.spec.ami_selector_terms
        try:
            out.amis = await self._ami_lookups.do(
                terms_key(terms), lambda: self.amis.discover(terms, self.kubernetes_version)
            )
        except AMIResolutionError as exc:
            out.failures[CONDITION_AMIS_READY] = Failure(REASON_AMI_ALIAS_UNSUPPORTED, str(exc))
            return
        except KubernetesVersionError as exc:
            out.failures[CONDITION_AMIS_READY] = Failure(
                f"AMIs{REASON_RESOLUTION_FAILED}", str(exc), transient=True
            )
            return
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            out.failures[CONDITION_AMIS_READY] = _aws_failure("AMIs", exc)
            return
        if not out.amis:
            out.failures[CONDITION_AMIS_READY] = Failure(
                REASON_AMIS_NOT_FOUND, "AMISelector did not match any AMIs"
            )

    async def _instance_profile(self, nodeclass: EC2NodeClass, out: ResolvedNodeClass) -> None:
        try:
            out.instance_profile = await self.profiles.ensure(nodeclass)
        except InstanceProfileNotFoundError as exc:
            out.failures[CONDITION_INSTANCE_PROFILE_READY] = Failure(
                REASON_INSTANCE_PROFILE_NOT_FOUND, str(exc)
            )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            out.failures[CONDITION_INSTANCE_PROFILE_READY] = _aws_failure("InstanceProfile", exc)

    async def _capacity_reservations(self, nodeclass: EC2NodeClass, out: ResolvedNodeClass) -> None:
        if self.reservations is None:
            return
        try:
            found = await self.reservations.resolve(
                nodeclass.spec.capacity_reservation_selector_terms or []
            )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            out.failures[CONDITION_CAPACITY_RESERVATIONS_READY] = _aws_failure(
                "CapacityReservations", exc
            )
            out.capacity_reservations = []
            return
        out.capacity_reservations = found

    # ------------------------------------------------------------------ validation
    async def _validate(self, nodeclass: EC2NodeClass, out: ResolvedNodeClass) -> None:
        if out.failures:
            pending = ", ".join(sorted(out.failures))
            out.failures[CONDITION_VALIDATION_SUCCEEDED] = Failure(
                REASON_DEPENDENCIES_NOT_READY, f"validation waits for {pending}"
            )
            return
        if not self.dry_run:
            return
        tags = launch_tags(self.cluster_name, nodeclass)
        ami = out.amis[0]
        key = (
            ami.id,
            out.subnets[0].id,
            tuple(g.id for g in out.security_groups),
            out.instance_profile,
            tuple(sorted(tags.items())),
        )
        now = self.clock.monotonic()
        if self._validated.get(key, 0.0) > now:
            return
        failure = await self._dry_run(ami, out, tags)
        if failure is not None:
            out.failures[CONDITION_VALIDATION_SUCCEEDED] = failure
            return
        self._validated[key] = now + VALIDATION_TTL

    async def _dry_run(
        self, ami: AMI, out: ResolvedNodeClass, tags: dict[str, str]
    ) -> Failure | None:
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
        instance_type = DRY_RUN_TYPES.get(_ami_arch(ami), "m5.large")
        groups = [g.id for g in out.security_groups]
        ec2 = self.clients.ec2
        checks: Sequence[tuple[str, Callable[[], Awaitable[Any]]]] = (
            (
                REASON_RUN_INSTANCES_AUTH,
                lambda: ec2.run_instances(
                    DryRun=True,
                    MinCount=1,
                    MaxCount=1,
                    ImageId=ami.id,
                    InstanceType=instance_type,
                    SubnetId=out.subnets[0].id,
                    SecurityGroupIds=groups,
                    IamInstanceProfile={"Name": out.instance_profile},
                    TagSpecifications=[{"ResourceType": "instance", "Tags": tag_list}],
                ),
            ),
            (
                REASON_LAUNCH_TEMPLATE_AUTH,
                lambda: ec2.create_launch_template(
                    DryRun=True,
                    LaunchTemplateName="karpenter.k8s.aws/validation",
                    LaunchTemplateData={"ImageId": ami.id, "SecurityGroupIds": groups},
                    TagSpecifications=[{"ResourceType": "launch-template", "Tags": tag_list}],
                ),
            ),
        )
        for reason, call in checks:
            try:
                await call()
            except Exception as exc:
                if not is_aws_error(exc):
                    raise
                code = error_code(exc)
                if code == "DryRunOperation":
                    continue
                if code in UNAUTHORIZED:
                    return Failure(reason, f"not authorized: {code}")
                return Failure(f"Validation{REASON_RESOLUTION_FAILED}", f"dry run: {code or exc}")
            # A call that succeeded despite DryRun=True means a peer that ignores DryRun; the
            # call was still authorized, which is all the check asks.
        return None

    # ------------------------------------------------------------------ cleanup
    async def cleanup(self, nodeclass: EC2NodeClass) -> None:
        """Delete the class's launch templates and the instance profile Karpenter created for
        it. AWS errors propagate (the caller retries; the finalizer stays until this passes)."""
        name = nodeclass.metadata.name
        deleted = await delete_launch_templates(self.clients, self.cluster_name, name)
        profile = await self.profiles.delete(nodeclass)
        log.info(
            "cleaned up ec2nodeclass",
            extra={"ec2nodeclass": name, "launch_templates": deleted, "instance_profile": profile},
        )
