"""EC2NodeClass, ``karpenter.k8s.aws/v1beta1``, as the AWS provider's v0.3x releases served it.

Differences from v1: ``amiFamily`` is required and ``amiSelectorTerms`` optional (no terms means
the family's latest EKS-optimized AMI; v1 says that with an ``alias`` term), the family list has
Ubuntu, AMI terms select by tags/id/name/owner only, and there is no ``kubelet`` (v1beta1 kept
it on the NodePool), no capacity reservations, placement groups, network interfaces, prefix
count, connection tracking or CPU options.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from karpenter_py.model.api.base import CRD_DEFAULT, KubeModel, SchemaExtra, cel, model_schema
from karpenter_py.model.api.common import Pattern
from karpenter_py.model.api.ec2nodeclass import (
    DEFAULT_METADATA_OPTIONS,
    IDENTITY_CEL,
    MAX_SELECTOR_TERMS,
    BlockDeviceMappings,
    EC2NodeClassStatus,
    InstanceProfile,
    MetadataOptions,
    NodeClassTags,
    Role,
    SecurityGroupSelectorTerms,
    SelectorTags,
    SubnetSelectorTerms,
    identity_problem,
    terms_rules,
)
from karpenter_py.model.api.meta import ObjectMeta

API_VERSION: Final = "karpenter.k8s.aws/v1beta1"
KIND: Final = "EC2NodeClass"

AMIFamily = Literal[
    "AL2", "AL2023", "Bottlerocket", "Ubuntu", "Custom", "Windows2019", "Windows2022"
]
AMI_FAMILY_UBUNTU: Final = "Ubuntu"
AMI_FAMILY_CUSTOM: Final = "Custom"


class AMISelectorTerm(KubeModel):
    """Selects AMIs by tags, id or name/owner."""

    tags: SelectorTags | None = None
    """Tags the AMI must have."""
    id: Annotated[str, Pattern(r"ami-[0-9a-z]+", "an AMI id such as 'ami-0123abcd'")] | None = None
    """The AMI id."""
    name: str | None = None
    """The AMI name."""
    owner: str | None = None
    """The AMI owner: an account id, 'self', 'amazon' or 'aws-marketplace'."""

    @model_validator(mode="after")
    def _one_kind(self) -> AMISelectorTerm:
        if self.tags is None and self.id is None and self.name is None:
            raise ValueError("a selector term needs at least one of ['tags', 'id', 'name']")
        if self.id is not None and (
            self.tags is not None or self.name is not None or self.owner is not None
        ):
            raise ValueError("'id' is mutually exclusive, cannot be combined with other fields")
        return self


_CUSTOM_NEEDS_TERMS: Final = "amiSelectorTerms is required when amiFamily == 'Custom'"


class EC2NodeClassSpec(KubeModel):
    """AWS launch configuration (v1beta1 layout)."""

    model_config = ConfigDict(
        json_schema_extra=model_schema(
            *IDENTITY_CEL,
            cel(
                "self.amiFamily != 'Custom' || "
                "(has(self.amiSelectorTerms) && self.amiSelectorTerms.size() != 0)",
                _CUSTOM_NEEDS_TERMS,
            ),
        )
    )

    subnet_selector_terms: SubnetSelectorTerms = Field(alias="subnetSelectorTerms")
    """Subnets to launch into."""
    security_group_selector_terms: SecurityGroupSelectorTerms = Field(
        alias="securityGroupSelectorTerms"
    )
    """Security groups for the instances."""
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    """Assign public IPs (overrides the subnet's setting)."""
    ami_selector_terms: (
        Annotated[
            list[AMISelectorTerm],
            Field(max_length=MAX_SELECTOR_TERMS),
            SchemaExtra(
                {
                    "x-kubernetes-validations": terms_rules(
                        "amiSelectorTerms",
                        ["tags", "id", "name"],
                        {"id": ["tags", "name", "owner"]},
                    )
                }
            ),
        ]
        | None
    ) = Field(default=None, alias="amiSelectorTerms")
    """AMIs to launch; none: the family's latest EKS-optimized AMI."""
    ami_family: AMIFamily = Field(alias="amiFamily")
    """Bootstrap format, default AMIs and block devices."""
    user_data: str | None = Field(default=None, alias="userData")
    """User data merged with Karpenter's bootstrap."""
    # v1beta1 (unlike v1) kept the role fixed: instance profiles Karpenter made for the old
    # role would otherwise be left on running instances.
    role: (
        Annotated[
            Role,
            SchemaExtra(
                {"x-kubernetes-validations": [cel("self == oldSelf", "immutable field changed")]}
            ),
        ]
        | None
    ) = None
    """IAM role for the nodes (immutable in v1beta1)."""
    instance_profile: InstanceProfile | None = Field(default=None, alias="instanceProfile")
    """Existing instance profile to use as-is."""
    tags: NodeClassTags | None = None
    """Tags for instances, volumes and launch templates."""
    block_device_mappings: BlockDeviceMappings | None = Field(
        default=None, alias="blockDeviceMappings"
    )
    """Block devices for launched instances."""
    instance_store_policy: Literal["RAID0"] | None = Field(
        default=None, alias="instanceStorePolicy"
    )
    """RAID0: stripe local NVMe disks for ephemeral storage."""
    detailed_monitoring: bool | None = Field(default=None, alias="detailedMonitoring")
    """Enable CloudWatch detailed monitoring."""
    metadata_options: Annotated[
        MetadataOptions, SchemaExtra({CRD_DEFAULT: DEFAULT_METADATA_OPTIONS})
    ] = Field(default_factory=MetadataOptions, alias="metadataOptions")
    """IMDS settings for the launch template."""
    context: str | None = None
    """The EC2 CreateFleet Context."""

    @model_validator(mode="after")
    def _identity_and_terms(self) -> EC2NodeClassSpec:
        problem = identity_problem(self.role, self.instance_profile)
        if problem is not None:
            raise ValueError(problem)
        if self.ami_family == AMI_FAMILY_CUSTOM and not self.ami_selector_terms:
            raise ValueError(_CUSTOM_NEEDS_TERMS)
        return self


class EC2NodeClass(KubeModel):
    """EC2NodeClass, karpenter.k8s.aws/v1beta1 (served for older manifests; stored as v1)."""

    api_version: Literal["karpenter.k8s.aws/v1beta1"] = Field(
        default=API_VERSION, alias="apiVersion"
    )
    kind: Literal["EC2NodeClass"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus = Field(default_factory=EC2NodeClassStatus)
