"""Pieces the v1beta1 NodePool and NodeClaim share: the kubelet block and the class reference."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from karpenter_py.model.api.base import KubeModel, SchemaExtra, cel, model_schema
from karpenter_py.model.api.common import (
    MAX_REQUIREMENTS,
    QUANTITY_PATTERN,
    REQUIREMENTS_CEL,
    RESERVED_RESOURCE_KEYS,
    Duration,
    NodeSelectorRequirementWithMinValues,
    Pattern,
    ResourceList,
    Taint,
    duplicate_taint_problem,
    reserved_resources_cel,
    reserved_resources_check,
)

GROUP_VERSION: Final = "karpenter.sh/v1beta1"


class NodeClassReference(KubeModel):
    """v1beta1's reference to the provider NodeClass: ``apiVersion`` and ``kind`` may be left
    out (the cloud provider's default class, EC2NodeClass, is meant)."""

    api_version: str = Field(default="", alias="apiVersion")
    """API version of the referent, e.g. karpenter.k8s.aws/v1beta1."""
    kind: str = ""
    """Kind of the referent, e.g. EC2NodeClass."""
    name: Annotated[
        str,
        SchemaExtra({"x-kubernetes-validations": [cel("self != ''", "name may not be empty")]}),
    ]
    """Name of the referent."""


# The kubelet's eviction signals upstream's v1beta1 schema accepts as evictionHard/evictionSoft
# (and evictionSoftGracePeriod) keys.
EVICTION_SIGNALS: Final = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
# A threshold is a percentage (up to 100, two decimals) or a quantity.
EVICTION_THRESHOLD_PATTERN: Final = (
    r"^(([0-9]{1,2}(\.[0-9]{1,2})?|100(\.0{1,2})?)%|" + QUANTITY_PATTERN[1:-1] + ")$"
)
_SIGNAL_LIST: Final = "[" + ",".join(f"'{s}'" for s in EVICTION_SIGNALS) + "]"

EvictionThreshold = Annotated[
    str,
    Pattern(EVICTION_THRESHOLD_PATTERN, "a percentage such as '10%' or a quantity such as '500Mi'"),
]


def _signals_check(field: str) -> AfterValidator:
    def _validate(signals: dict[str, str]) -> dict[str, str]:
        for key in signals:
            if key not in EVICTION_SIGNALS:
                raise ValueError(
                    f"{key!r} is not a valid key for {field}; valid keys are {list(EVICTION_SIGNALS)}"
                )
        return signals

    return AfterValidator(_validate)


def _signals_cel(field: str) -> SchemaExtra:
    # maxProperties refuses nothing the key rule allows; it bounds the rules' estimated cost.
    return SchemaExtra(
        {
            "maxProperties": len(EVICTION_SIGNALS),
            "x-kubernetes-validations": [
                cel(
                    f"self.all(x, x in {_SIGNAL_LIST})",
                    f"valid keys for {field} are {_SIGNAL_LIST}",
                )
            ],
        }
    )


def _reserved(field: str) -> SchemaExtra:
    # Values are int-or-string quantities (a ResourceList); maxProperties bounds the cost.
    return SchemaExtra(
        {
            "maxProperties": len(RESERVED_RESOURCE_KEYS),
            "x-kubernetes-validations": reserved_resources_cel(field, int_or_string=True),
        }
    )


_IMAGE_GC_ORDER: Final = (
    "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"
)
_SOFT_NEEDS_GRACE: Final = "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"
_GRACE_NEEDS_SOFT: Final = "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"


class KubeletConfiguration(KubeModel):
    """The kubelet settings v1beta1 NodePools and NodeClaims carried (v1 keeps them on the
    EC2NodeClass)."""

    model_config = ConfigDict(
        json_schema_extra=model_schema(
            cel(
                "!has(self.imageGCHighThresholdPercent) || !has(self.imageGCLowThresholdPercent) || "
                "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent",
                _IMAGE_GC_ORDER,
            ),
            # Every soft threshold needs its grace period, and a grace period its threshold.
            cel(
                "!has(self.evictionSoft) || (has(self.evictionSoftGracePeriod) && "
                "self.evictionSoft.all(x, x in self.evictionSoftGracePeriod))",
                _SOFT_NEEDS_GRACE,
            ),
            cel(
                "!has(self.evictionSoftGracePeriod) || (has(self.evictionSoft) && "
                "self.evictionSoftGracePeriod.all(x, x in self.evictionSoft))",
                _GRACE_NEEDS_SOFT,
            ),
        )
    )

    cluster_dns: list[str] | None = Field(default=None, alias="clusterDNS")
    """IP addresses of the cluster DNS servers."""
    max_pods: Annotated[int, Field(ge=0), SchemaExtra({"format": "int32"})] | None = Field(
        default=None, alias="maxPods"
    )
    """Maximum number of pods on the node."""
    pods_per_core: Annotated[int, Field(ge=0), SchemaExtra({"format": "int32"})] | None = Field(
        default=None, alias="podsPerCore"
    )
    """Maximum number of pods per core (the lower of this and maxPods wins)."""
    system_reserved: (
        Annotated[
            ResourceList, reserved_resources_check("systemReserved"), _reserved("systemReserved")
        ]
        | None
    ) = Field(default=None, alias="systemReserved")
    """Resources reserved for OS system daemons (cpu, memory, ephemeral-storage, pid)."""
    kube_reserved: (
        Annotated[ResourceList, reserved_resources_check("kubeReserved"), _reserved("kubeReserved")]
        | None
    ) = Field(default=None, alias="kubeReserved")
    """Resources reserved for Kubernetes system components (cpu, memory, ephemeral-storage, pid)."""
    eviction_hard: (
        Annotated[
            dict[str, EvictionThreshold],
            _signals_check("evictionHard"),
            _signals_cel("evictionHard"),
        ]
        | None
    ) = Field(default=None, alias="evictionHard")
    """Hard eviction thresholds."""
    eviction_soft: (
        Annotated[
            dict[str, EvictionThreshold],
            _signals_check("evictionSoft"),
            _signals_cel("evictionSoft"),
        ]
        | None
    ) = Field(default=None, alias="evictionSoft")
    """Soft eviction thresholds (each needs an evictionSoftGracePeriod)."""
    eviction_soft_grace_period: (
        Annotated[
            dict[str, str],
            _signals_check("evictionSoftGracePeriod"),
            _signals_cel("evictionSoftGracePeriod"),
        ]
        | None
    ) = Field(default=None, alias="evictionSoftGracePeriod")
    """Grace periods of the soft eviction thresholds (each needs its evictionSoft)."""
    eviction_max_pod_grace_period: Annotated[int, SchemaExtra({"format": "int32"})] | None = Field(
        default=None, alias="evictionMaxPodGracePeriod"
    )
    """Longest pod termination grace period used for soft evictions (seconds)."""
    image_gc_high_threshold_percent: (
        Annotated[int, Field(ge=0, le=100), SchemaExtra({"format": "int32"})] | None
    ) = Field(default=None, alias="imageGCHighThresholdPercent")
    """Disk usage percentage after which image garbage collection always runs."""
    image_gc_low_threshold_percent: (
        Annotated[int, Field(ge=0, le=100), SchemaExtra({"format": "int32"})] | None
    ) = Field(default=None, alias="imageGCLowThresholdPercent")
    """Disk usage percentage below which image garbage collection never runs."""
    cpu_cfs_quota: bool | None = Field(default=None, alias="cpuCFSQuota")
    """Enforce CPU CFS quota for containers that set CPU limits."""

    @model_validator(mode="after")
    def _pairs_and_order(self) -> KubeletConfiguration:
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and high <= low:
            raise ValueError(f"{_IMAGE_GC_ORDER} (got {high} and {low})")
        soft = set(self.eviction_soft or {})
        grace = set(self.eviction_soft_grace_period or {})
        if soft - grace:
            raise ValueError(
                f"evictionSoft {sorted(soft - grace)} has no matching evictionSoftGracePeriod"
            )
        if grace - soft:
            raise ValueError(
                f"evictionSoftGracePeriod {sorted(grace - soft)} has no matching evictionSoft"
            )
        return self


class NodeClaimSpecBase(KubeModel):
    """Fields a v1beta1 NodeClaim and a v1beta1 NodePool template share."""

    taints: list[Taint] = Field(default_factory=list)
    """Taints applied to the node."""
    startup_taints: list[Taint] = Field(default_factory=list, alias="startupTaints")
    """Taints present at boot and removed by something else."""
    requirements: Annotated[
        list[NodeSelectorRequirementWithMinValues],
        Field(max_length=MAX_REQUIREMENTS),
        SchemaExtra({"x-kubernetes-validations": list(REQUIREMENTS_CEL)}),
    ]
    """Constraints on the instances nodes may run on."""
    resources: dict[str, ResourceList] | None = None
    """Resource requests the node must provide (``requests``)."""
    kubelet: KubeletConfiguration | None = None
    """Kubelet settings for the node (v1: EC2NodeClass spec.kubelet)."""
    node_class_ref: NodeClassReference = Field(alias="nodeClassRef")
    """Reference to the provider NodeClass."""
    termination_grace_period: Duration | None = Field(default=None, alias="terminationGracePeriod")
    """Upper bound on draining a node once its deletion starts."""

    @model_validator(mode="after")
    def _no_duplicate_taints(self) -> NodeClaimSpecBase:
        problem = duplicate_taint_problem(self.taints, self.startup_taints)
        if problem is not None:
            raise ValueError(problem)
        return self
