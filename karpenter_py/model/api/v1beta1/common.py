"""Pieces the v1beta1 NodePool and NodeClaim share: the kubelet block and the class reference."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field, model_validator

from karpenter_py.model.api.base import KubeModel, SchemaExtra, cel
from karpenter_py.model.api.common import (
    MAX_REQUIREMENTS,
    REQUIREMENTS_CEL,
    Duration,
    NodeSelectorRequirementWithMinValues,
    ResourceList,
    Taint,
    duplicate_taint_problem,
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


class KubeletConfiguration(KubeModel):
    """The kubelet settings v1beta1 NodePools and NodeClaims carried (v1 keeps them on the
    EC2NodeClass)."""

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
    system_reserved: ResourceList | None = Field(default=None, alias="systemReserved")
    """Resources reserved for OS system daemons."""
    kube_reserved: ResourceList | None = Field(default=None, alias="kubeReserved")
    """Resources reserved for Kubernetes system components."""
    eviction_hard: dict[str, str] | None = Field(default=None, alias="evictionHard")
    """Hard eviction thresholds."""
    eviction_soft: dict[str, str] | None = Field(default=None, alias="evictionSoft")
    """Soft eviction thresholds."""
    eviction_soft_grace_period: dict[str, str] | None = Field(
        default=None, alias="evictionSoftGracePeriod"
    )
    """Grace periods of the soft eviction thresholds."""
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
