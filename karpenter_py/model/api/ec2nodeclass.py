"""EC2NodeClass, ``karpenter.k8s.aws/v1``: how the AWS provider builds instances.

Follows the AWS provider's pkg/apis/v1/ec2nodeclass*.go (upstream-features.md section 1.4).
``kubelet`` is an open map: upstream passes any KubeletConfiguration field through, and only the
controller (not the schema) decides what is valid, so it is stored as-is.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator

from karpenter_py.model.api.base import (
    CRD_DEFAULT,
    KubeModel,
    SchemaExtra,
    Time,
    cel,
    check,
    model_schema,
)
from karpenter_py.model.api.common import NodeSelectorRequirement, Pattern
from karpenter_py.model.api.meta import ConditionedStatus, ObjectMeta
from karpenter_py.model.labels import (
    AWS_ANNOTATION_UBUNTU_COMPATIBILITY,
    AWS_LABEL_EC2NODECLASS,
    LABEL_NODEPOOL,
    UBUNTU_INCOMPATIBLE,
)

API_VERSION: Final = "karpenter.k8s.aws/v1"
KIND: Final = "EC2NodeClass"

AMIFamily = Literal[
    "AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"
]
AMI_FAMILY_CUSTOM: Final = "Custom"
# alias family (lower case, as in "al2023@latest") -> amiFamily value
ALIAS_FAMILIES: Final = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
_WINDOWS_ALIASES: Final = tuple(f for f in ALIAS_FAMILIES if f.startswith("windows"))

# EC2NodeClass condition types; all roll up into Ready.
CONDITION_AMIS_READY: Final = "AMIsReady"
CONDITION_SUBNETS_READY: Final = "SubnetsReady"
CONDITION_SECURITY_GROUPS_READY: Final = "SecurityGroupsReady"
CONDITION_INSTANCE_PROFILE_READY: Final = "InstanceProfileReady"
CONDITION_CAPACITY_RESERVATIONS_READY: Final = "CapacityReservationsReady"
CONDITION_PLACEMENT_GROUP_READY: Final = "PlacementGroupReady"
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"

# Tags Karpenter writes itself; users may not set them.
RESTRICTED_TAG_KEYS: Final = (
    "eks:eks-cluster-name",
    LABEL_NODEPOOL,
    "karpenter.sh/nodeclaim",
    AWS_LABEL_EC2NODECLASS,
)
RESTRICTED_TAG_PREFIX: Final = "kubernetes.io/cluster/"

MAX_SELECTOR_TERMS: Final = 30
MAX_SELECTOR_TAGS: Final = 20


def _selector_tags_problem(tags: dict[str, str]) -> dict[str, str]:
    if len(tags) > MAX_SELECTOR_TAGS:
        raise ValueError(f"at most {MAX_SELECTOR_TAGS} tags are allowed, got {len(tags)}")
    if any(k == "" or v == "" for k, v in tags.items()):
        raise ValueError("empty tag keys or values aren't supported")
    return tags


SelectorTags = Annotated[
    dict[str, str],
    AfterValidator(_selector_tags_problem),
    SchemaExtra(
        {
            "maxProperties": MAX_SELECTOR_TAGS,
            "x-kubernetes-validations": [
                cel(
                    "self.all(k, k != '' && self[k] != '')",
                    "empty tag keys or values aren't supported",
                )
            ],
        }
    ),
]


def _present(term: KubeModel, fields: tuple[str, ...]) -> list[str]:
    """Aliases of the listed fields that are set on ``term``."""
    out = []
    for name in fields:
        if getattr(term, name) is not None:
            out.append(type(term).model_fields[name].alias or name)
    return out


def terms_rules(
    kind: str, fields: list[str], exclusive: dict[str, list[str]]
) -> list[dict[str, str]]:
    """CEL for a selector-term list: each term sets one of ``fields``; some fields stand alone."""
    has_any = " || ".join(f"has(x.{f})" for f in fields)
    rules = [cel(f"self.all(x, {has_any})", f"expected at least one, got none, {fields}")]
    for field_name, others in exclusive.items():
        has_other = " || ".join(f"has(x.{o})" for o in others)
        rules.append(
            cel(
                f"!self.exists(x, has(x.{field_name}) && ({has_other}))",
                f"'{field_name}' is mutually exclusive, cannot be set with a combination of "
                f"other fields in {kind}",
            )
        )
    return rules


def _check_term(term: KubeModel, fields: tuple[str, ...], exclusive: tuple[str, ...]) -> None:
    present = _present(term, fields)
    if not present:
        names = [type(term).model_fields[f].alias or f for f in fields]
        raise ValueError(f"a selector term needs at least one of {names}")
    for name in exclusive:
        alias = type(term).model_fields[name].alias or name
        if alias in present and len(present) > 1:
            others = [p for p in present if p != alias]
            raise ValueError(f"'{alias}' is mutually exclusive, cannot be combined with {others}")


class SubnetSelectorTerm(KubeModel):
    """Selects subnets by tags or id (terms are ORed, fields within a term ANDed)."""

    tags: SelectorTags | None = None
    """Tags the subnet must have; '*' as a value matches any value."""
    id: (
        Annotated[str, Pattern(r"subnet-[0-9a-z]+", "a subnet id such as 'subnet-0123abcd'")] | None
    ) = None
    """The subnet id."""

    @model_validator(mode="after")
    def _one_kind(self) -> SubnetSelectorTerm:
        _check_term(self, ("tags", "id"), ("id",))
        return self


class SecurityGroupSelectorTerm(KubeModel):
    """Selects security groups by tags, id or name."""

    tags: SelectorTags | None = None
    """Tags the security group must have."""
    id: (
        Annotated[str, Pattern(r"sg-[0-9a-z]+", "a security group id such as 'sg-0123abcd'")] | None
    ) = None
    """The security group id."""
    name: str | None = None
    """The security group name (the name field, not the Name tag)."""

    @model_validator(mode="after")
    def _one_kind(self) -> SecurityGroupSelectorTerm:
        _check_term(self, ("tags", "id", "name"), ("id", "name"))
        return self


class CapacityReservationSelectorTerm(KubeModel):
    """Selects On-Demand Capacity Reservations / Capacity Blocks to launch into."""

    tags: SelectorTags | None = None
    """Tags the capacity reservation must have."""
    id: (
        Annotated[
            str, Pattern(r"^cr-[0-9a-z]+$", "a capacity reservation id such as 'cr-0123abcd'")
        ]
        | None
    ) = None
    """The capacity reservation id."""
    owner_id: Annotated[str, Pattern(r"^[0-9]{12}$", "a 12-digit AWS account id")] | None = Field(
        default=None, alias="ownerID"
    )
    """The account that owns the reservation."""
    instance_match_criteria: Literal["open", "targeted"] | None = Field(
        default=None, alias="instanceMatchCriteria"
    )
    """Only reservations with this instance match criteria (open or targeted)."""

    @model_validator(mode="after")
    def _one_kind(self) -> CapacityReservationSelectorTerm:
        _check_term(self, ("tags", "id", "owner_id", "instance_match_criteria"), ("id",))
        return self


class PlacementGroupSelector(KubeModel):
    """The placement group instances launch into, by name or id."""

    model_config = ConfigDict(
        json_schema_extra=model_schema(
            cel("has(self.name) != has(self.id)", "expected exactly one of ['name', 'id']")
        )
    )

    name: str | None = None
    """Placement group name."""
    id: (
        Annotated[str, Pattern(r"^pg-[0-9a-z]+$", "a placement group id such as 'pg-0123abcd'")]
        | None
    ) = None
    """Placement group id."""

    @model_validator(mode="after")
    def _exactly_one(self) -> PlacementGroupSelector:
        if (self.name is None) == (self.id is None):
            raise ValueError("placementGroupSelector needs exactly one of 'name' or 'id'")
        return self


_ALIAS_FORMAT: Final = re.compile(r"^[a-zA-Z0-9]+@.+$")


def _alias_problem(alias: str) -> str | None:
    if _ALIAS_FORMAT.match(alias) is None:
        return f"alias {alias!r} is improperly formatted, must match the format 'family@version'"
    family, version = alias.split("@", 1)
    if family not in ALIAS_FAMILIES:
        return f"alias family {family!r} is not supported, must be one of {sorted(ALIAS_FAMILIES)}"
    if family in _WINDOWS_ALIASES and version != "latest":
        return f"{family} only supports the version 'latest' (got {version!r})"
    return None


class AMISelectorTerm(KubeModel):
    """Selects AMIs: by EKS-optimized alias (family@version), id, name/owner, tags or SSM parameter."""

    alias: (
        Annotated[
            str,
            check(_alias_problem),
            SchemaExtra(
                {
                    "maxLength": 30,
                    "x-kubernetes-validations": [
                        cel(
                            "self.matches('^[a-zA-Z0-9]+@.+$')",
                            "'alias' is improperly formatted, must match the format 'family@version'",
                        ),
                        cel(
                            f"self.find('^[^@]+') in {sorted(ALIAS_FAMILIES)}",
                            "family is not supported, must be one of the following: "
                            + ", ".join(f"'{f}'" for f in sorted(ALIAS_FAMILIES)),
                        ),
                        cel(
                            "self.find('^[^@]+').startsWith('windows') ? self.find('[^@]+$') == 'latest' : true",
                            "windows families may only specify version 'latest'",
                        ),
                    ],
                }
            ),
        ]
        | None
    ) = None
    """An EKS-optimized AMI family and version, e.g. al2023@latest or al2023@v20240625.
    Windows families support only 'latest'. An alias must be the only term."""
    tags: SelectorTags | None = None
    """Tags the AMI must have."""
    id: Annotated[str, Pattern(r"ami-[0-9a-z]+", "an AMI id such as 'ami-0123abcd'")] | None = None
    """The AMI id."""
    name: str | None = None
    """The AMI name (the name field, not the Name tag)."""
    owner: str | None = None
    """The AMI owner: an account id, 'self', 'amazon' or 'aws-marketplace'."""
    ssm_parameter: str | None = Field(default=None, alias="ssmParameter")
    """An SSM parameter whose value is the AMI id."""

    @model_validator(mode="after")
    def _one_kind(self) -> AMISelectorTerm:
        _check_term(
            self,
            ("alias", "tags", "id", "name", "ssm_parameter"),
            ("id", "alias"),
        )
        if self.owner is not None and (self.id is not None or self.alias is not None):
            raise ValueError("'owner' cannot be combined with 'id' or 'alias'")
        return self


class BlockDevice(KubeModel):
    """EBS volume parameters."""

    model_config = ConfigDict(
        json_schema_extra=model_schema(
            cel(
                "has(self.snapshotID) || has(self.volumeSize)",
                "snapshotID or volumeSize must be defined",
            ),
            cel(
                "has(self.volumeInitializationRate) ? has(self.snapshotID) : true",
                "volumeInitializationRate requires snapshotID",
            ),
        )
    )

    delete_on_termination: bool | None = Field(default=None, alias="deleteOnTermination")
    """Delete the volume when the instance terminates."""
    encrypted: bool | None = None
    """Encrypt the volume."""
    iops: Annotated[int, SchemaExtra({"format": "int64"})] | None = None
    """Provisioned IOPS (io1, io2, gp3)."""
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    """ARN of the KMS key used for encryption."""
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    """EBS snapshot to create the volume from."""
    throughput: Annotated[int, SchemaExtra({"format": "int64"})] | None = None
    """Throughput in MiB/s for gp3 (125-1000)."""
    volume_initialization_rate: (
        Annotated[int, Field(ge=100, le=300), SchemaExtra({"format": "int32"})] | None
    ) = Field(default=None, alias="volumeInitializationRate")
    """Rate (MiB/s, 100-300) at which a volume created from a snapshot is initialised."""
    volume_size: (
        Annotated[
            str,
            Pattern(
                r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|"
                r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|"
                r"([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$",
                "a volume size in Gi, G, Ti or T such as '20Gi' (at most 59000Gi / 64000G / 58Ti / 64T)",
            ),
        ]
        | None
    ) = Field(default=None, alias="volumeSize")
    """Volume size, e.g. 100Gi."""
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = Field(
        default=None, alias="volumeType"
    )
    """EBS volume type."""

    @model_validator(mode="after")
    def _size_or_snapshot(self) -> BlockDevice:
        if self.snapshot_id is None and self.volume_size is None:
            raise ValueError("snapshotID or volumeSize must be defined")
        if self.volume_initialization_rate is not None and self.snapshot_id is None:
            raise ValueError("volumeInitializationRate requires snapshotID")
        return self


class BlockDeviceMapping(KubeModel):
    """A block device attached to launched instances."""

    device_name: str | None = Field(default=None, alias="deviceName")
    """Device name, e.g. /dev/xvda."""
    ebs: BlockDevice | None = None
    """EBS volume parameters."""
    root_volume: bool = Field(default=False, alias="rootVolume")
    """This device holds the kubelet root directory (at most one mapping may say so)."""


class NetworkInterface(KubeModel):
    """One network interface in an explicit (EFA) interface layout."""

    network_card_index: Annotated[int, Field(ge=0), SchemaExtra({"format": "int64"})] = Field(
        alias="networkCardIndex"
    )
    """Index of the network card."""
    device_index: Annotated[int, Field(ge=0), SchemaExtra({"format": "int64"})] = Field(
        alias="deviceIndex"
    )
    """Device index on that card."""
    interface_type: Literal["interface", "efa-only"] = Field(alias="interfaceType")
    """'interface' (ENA, optionally EFA) or 'efa-only'."""


MAX_NETWORK_INTERFACES: Final = 150


class MetadataOptions(KubeModel):
    """Instance Metadata Service settings for launched instances."""

    http_endpoint: Annotated[
        Literal["enabled", "disabled"], SchemaExtra({CRD_DEFAULT: "enabled"})
    ] = Field(default="enabled", alias="httpEndpoint")
    """Whether the metadata endpoint is reachable."""
    http_protocol_ipv6: Annotated[
        Literal["enabled", "disabled"], SchemaExtra({CRD_DEFAULT: "disabled"})
    ] = Field(default="disabled", alias="httpProtocolIPv6")
    """Whether the IPv6 metadata endpoint is enabled."""
    http_put_response_hop_limit: Annotated[
        int, Field(ge=1, le=64), SchemaExtra({CRD_DEFAULT: 1, "format": "int64"})
    ] = Field(default=1, alias="httpPutResponseHopLimit")
    """Hop limit for metadata PUT responses (1-64)."""
    http_tokens: Annotated[
        Literal["required", "optional"], SchemaExtra({CRD_DEFAULT: "required"})
    ] = Field(default="required", alias="httpTokens")
    """Whether IMDSv2 session tokens are required."""


DEFAULT_METADATA_OPTIONS: Final = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}


class ConnectionTracking(KubeModel):
    """Connection-tracking idle timeouts (seconds) for the instances' network interfaces."""

    model_config = ConfigDict(
        json_schema_extra=model_schema(
            cel(
                "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
                "expected at least one of ['tcpEstablishedTimeout', 'udpStreamTimeout', 'udpTimeout']",
            )
        )
    )

    tcp_established_timeout: Annotated[int, Field(ge=60, le=432000)] | None = Field(
        default=None, alias="tcpEstablishedTimeout"
    )
    """Idle timeout for established TCP connections (60-432000 s)."""
    udp_stream_timeout: Annotated[int, Field(ge=60, le=180)] | None = Field(
        default=None, alias="udpStreamTimeout"
    )
    """Idle timeout for UDP streams (60-180 s)."""
    udp_timeout: Annotated[int, Field(ge=30, le=60)] | None = Field(
        default=None, alias="udpTimeout"
    )
    """Idle timeout for other UDP flows (30-60 s)."""

    @model_validator(mode="after")
    def _at_least_one(self) -> ConnectionTracking:
        if (self.tcp_established_timeout, self.udp_stream_timeout, self.udp_timeout) == (
            None,
            None,
            None,
        ):
            raise ValueError(
                "expected at least one of ['tcpEstablishedTimeout', 'udpStreamTimeout', 'udpTimeout']"
            )
        return self


class CPUOptions(KubeModel):
    """CPU options for the launch template."""

    nested_virtualization: Literal["enabled", "disabled"] | None = Field(
        default=None, alias="nestedVirtualization"
    )
    """Whether nested virtualization is enabled."""


def _tags_problem(tags: dict[str, str]) -> dict[str, str]:
    for key in tags:
        if key == "":
            raise ValueError("empty tag keys aren't supported")
        if key in RESTRICTED_TAG_KEYS or key.startswith(RESTRICTED_TAG_PREFIX):
            raise ValueError(
                f"tag {key!r} is restricted: Karpenter sets {list(RESTRICTED_TAG_KEYS)} and "
                f"{RESTRICTED_TAG_PREFIX}* itself"
            )
    return tags


_TAGS_CEL: Final = [
    cel("self.all(k, k != '')", "empty tag keys aren't supported"),
    cel(
        f"self.all(k, !k.startsWith('{RESTRICTED_TAG_PREFIX}'))",
        f"tag contains a restricted tag matching {RESTRICTED_TAG_PREFIX}",
    ),
    *[
        cel(f"self.all(k, k != '{key}')", f"tag contains a restricted tag matching {key}")
        for key in RESTRICTED_TAG_KEYS
    ],
]

_BDM_CEL: Final = [
    cel(
        "self.filter(x, has(x.rootVolume) ? x.rootVolume == true : false).size() <= 1",
        "must have only one blockDeviceMappings with rootVolume",
    )
]

_NETWORK_INTERFACES_CEL: Final = [
    cel(
        "self.exists(x, x.networkCardIndex == 0 && x.deviceIndex == 0 && x.interfaceType == 'interface')",
        "networkInterfaces must include a primary interface (networkCardIndex 0, deviceIndex 0, "
        "interfaceType 'interface')",
    ),
    cel(
        "self.all(x, self.exists_one(y, x.networkCardIndex == y.networkCardIndex && "
        "x.deviceIndex == y.deviceIndex))",
        "each networkCardIndex/deviceIndex pair may appear only once",
    ),
    cel(
        "self.all(x, x.interfaceType != 'efa-only' || self.exists_one(y, "
        "y.interfaceType == 'efa-only' && y.networkCardIndex == x.networkCardIndex))",
        "at most one 'efa-only' interface per network card",
    ),
]

# Identity rules both EC2NodeClass versions carry: a role or an instance profile, never both,
# and no switch from an instance profile to a role.
IDENTITY_CEL: Final = (
    cel(
        "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    cel(
        "(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))",
        "changing from 'instanceProfile' to 'role' is not supported. You must delete and recreate "
        "this node class if you want to change this.",
    ),
)


def identity_problem(role: str | None, instance_profile: str | None) -> str | None:
    """Python side of ``IDENTITY_CEL`` and the non-empty rules of ``Role``/``InstanceProfile``."""
    if (role is None) == (instance_profile is None):
        return "must specify exactly one of ['role', 'instanceProfile']"
    if role == "" or instance_profile == "":
        return "role / instanceProfile cannot be empty"
    return None


_SPEC_CEL: Final = [
    *IDENTITY_CEL,
    cel(
        "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    ),
    cel(
        "!has(self.amiFamily) || self.amiFamily == 'Custom' || self.amiSelectorTerms.all(x, "
        "!has(x.alias) || x.alias.find('^[^@]+') == self.amiFamily.lowerAscii())",
        "amiFamily must match the alias family or be 'Custom'",
    ),
]


def _one_root_volume(mappings: list[BlockDeviceMapping]) -> list[BlockDeviceMapping]:
    if sum(1 for m in mappings if m.root_volume) > 1:
        raise ValueError("must have only one blockDeviceMappings with rootVolume")
    return mappings


SubnetSelectorTerms = Annotated[
    list[SubnetSelectorTerm],
    Field(min_length=1, max_length=MAX_SELECTOR_TERMS),
    SchemaExtra(
        {
            "x-kubernetes-validations": terms_rules(
                "subnetSelectorTerms", ["tags", "id"], {"id": ["tags"]}
            )
        }
    ),
]
SecurityGroupSelectorTerms = Annotated[
    list[SecurityGroupSelectorTerm],
    Field(min_length=1, max_length=MAX_SELECTOR_TERMS),
    SchemaExtra(
        {
            "x-kubernetes-validations": terms_rules(
                "securityGroupSelectorTerms",
                ["tags", "id", "name"],
                {"id": ["tags", "name"], "name": ["tags", "id"]},
            )
        }
    ),
]
Role = Annotated[
    str, SchemaExtra({"x-kubernetes-validations": [cel("self != ''", "role cannot be empty")]})
]
InstanceProfile = Annotated[
    str,
    SchemaExtra(
        {"x-kubernetes-validations": [cel("self != ''", "instanceProfile cannot be empty")]}
    ),
]
NodeClassTags = Annotated[
    dict[str, str],
    AfterValidator(_tags_problem),
    SchemaExtra({"x-kubernetes-validations": _TAGS_CEL}),
]
"""Tags for the class's EC2 resources; the keys Karpenter writes itself are refused."""
BlockDeviceMappings = Annotated[
    list[BlockDeviceMapping],
    Field(max_length=50),
    AfterValidator(_one_root_volume),
    SchemaExtra({"x-kubernetes-validations": _BDM_CEL}),
]


class EC2NodeClassSpec(KubeModel):
    """AWS launch configuration shared by the NodePools that reference this class."""

    model_config = ConfigDict(json_schema_extra=model_schema(*_SPEC_CEL))

    subnet_selector_terms: SubnetSelectorTerms = Field(alias="subnetSelectorTerms")
    """Subnets to launch into (terms ORed)."""
    security_group_selector_terms: SecurityGroupSelectorTerms = Field(
        alias="securityGroupSelectorTerms"
    )
    """Security groups for the instances (terms ORed)."""
    capacity_reservation_selector_terms: (
        Annotated[
            list[CapacityReservationSelectorTerm],
            Field(max_length=MAX_SELECTOR_TERMS),
            SchemaExtra(
                {
                    "x-kubernetes-validations": terms_rules(
                        "capacityReservationSelectorTerms",
                        ["tags", "id", "ownerID", "instanceMatchCriteria"],
                        {"id": ["tags", "ownerID", "instanceMatchCriteria"]},
                    )
                }
            ),
        ]
        | None
    ) = Field(default=None, alias="capacityReservationSelectorTerms")
    """Capacity reservations Karpenter may launch into as 'reserved' capacity."""
    placement_group_selector: PlacementGroupSelector | None = Field(
        default=None, alias="placementGroupSelector"
    )
    """Placement group to launch into."""
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    """Assign public IPs (overrides the subnet's setting)."""
    ami_selector_terms: Annotated[
        list[AMISelectorTerm],
        Field(min_length=1, max_length=MAX_SELECTOR_TERMS),
        SchemaExtra(
            {
                "x-kubernetes-validations": [
                    *terms_rules(
                        "amiSelectorTerms",
                        ["alias", "tags", "id", "name", "ssmParameter"],
                        {
                            "id": ["alias", "tags", "name", "owner", "ssmParameter"],
                            "alias": ["id", "tags", "name", "owner", "ssmParameter"],
                        },
                    ),
                    cel(
                        "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                        "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
                    ),
                ]
            }
        ),
    ] = Field(alias="amiSelectorTerms")
    """AMIs to launch (terms ORed)."""
    ami_family: AMIFamily | None = Field(default=None, alias="amiFamily")
    """Bootstrap format and default block devices; inferred from an alias, else required."""
    user_data: str | None = Field(default=None, alias="userData")
    """User data merged with Karpenter's bootstrap (used as-is for Custom)."""
    role: Role | None = None
    """IAM role for the nodes; Karpenter manages an instance profile for it."""
    instance_profile: InstanceProfile | None = Field(default=None, alias="instanceProfile")
    """Existing instance profile to use as-is (instead of role)."""
    tags: NodeClassTags | None = None
    """Tags for instances, volumes, launch templates and instance profiles."""
    kubelet: (
        Annotated[
            dict[str, object],
            SchemaExtra({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
        ]
        | None
    ) = None
    """Kubelet configuration (any KubeletConfiguration field), passed through."""
    block_device_mappings: BlockDeviceMappings | None = Field(
        default=None, alias="blockDeviceMappings"
    )
    """Block devices for launched instances (defaults depend on the AMI family)."""
    instance_store_policy: Literal["RAID0"] | None = Field(
        default=None, alias="instanceStorePolicy"
    )
    """RAID0: stripe local NVMe disks and use them for ephemeral storage."""
    network_interfaces: (
        Annotated[
            list[NetworkInterface],
            Field(max_length=MAX_NETWORK_INTERFACES),
            SchemaExtra({"x-kubernetes-validations": _NETWORK_INTERFACES_CEL}),
        ]
        | None
    ) = Field(default=None, alias="networkInterfaces")
    """Explicit network interface layout (for EFA)."""
    ip_prefix_count: Annotated[int, Field(ge=0), SchemaExtra({"format": "int32"})] | None = Field(
        default=None, alias="ipPrefixCount"
    )
    """Number of IPv4/IPv6 prefixes assigned to the primary interface."""
    detailed_monitoring: bool | None = Field(default=None, alias="detailedMonitoring")
    """Enable CloudWatch detailed monitoring."""
    metadata_options: Annotated[
        MetadataOptions, SchemaExtra({CRD_DEFAULT: DEFAULT_METADATA_OPTIONS})
    ] = Field(default_factory=MetadataOptions, alias="metadataOptions")
    """IMDS settings for the launch template."""
    connection_tracking: ConnectionTracking | None = Field(default=None, alias="connectionTracking")
    """Connection-tracking idle timeouts."""
    context: str | None = None
    """The EC2 CreateFleet Context (reserved capacity pools)."""
    cpu_options: CPUOptions | None = Field(default=None, alias="cpuOptions")
    """CPU options for the launch template."""

    @field_validator("network_interfaces")
    @classmethod
    def _interface_layout(
        cls, interfaces: list[NetworkInterface] | None
    ) -> list[NetworkInterface] | None:
        if interfaces is None:
            return None
        pairs = [(i.network_card_index, i.device_index) for i in interfaces]
        if len(set(pairs)) != len(pairs):
            raise ValueError("each networkCardIndex/deviceIndex pair may appear only once")
        if not any(
            i.network_card_index == 0 and i.device_index == 0 and i.interface_type == "interface"
            for i in interfaces
        ):
            raise ValueError(
                "networkInterfaces must include a primary interface (networkCardIndex 0, "
                "deviceIndex 0, interfaceType 'interface')"
            )
        efa_cards = [i.network_card_index for i in interfaces if i.interface_type == "efa-only"]
        if len(set(efa_cards)) != len(efa_cards):
            raise ValueError("at most one 'efa-only' interface per network card")
        return interfaces

    @field_validator("ami_selector_terms")
    @classmethod
    def _alias_alone(cls, terms: list[AMISelectorTerm]) -> list[AMISelectorTerm]:
        if any(t.alias is not None for t in terms) and len(terms) != 1:
            raise ValueError("an 'alias' term must be the only amiSelectorTerm")
        return terms

    @model_validator(mode="after")
    def _identity_and_family(self) -> EC2NodeClassSpec:
        problem = identity_problem(self.role, self.instance_profile)
        if problem is not None:
            raise ValueError(problem)
        alias = self.alias_family()
        if alias is None and self.ami_family is None:
            raise ValueError("must specify amiFamily if amiSelectorTerms does not contain an alias")
        if alias is not None and self.ami_family not in (
            None,
            AMI_FAMILY_CUSTOM,
            ALIAS_FAMILIES[alias],
        ):
            raise ValueError(
                f"amiFamily {self.ami_family!r} does not match the alias family; use "
                f"{ALIAS_FAMILIES[alias]!r} or 'Custom'"
            )
        return self

    def alias_family(self) -> str | None:
        """The lower-case family of the alias term ("al2023"), if the class uses an alias."""
        for term in self.ami_selector_terms:
            if term.alias is not None:
                return term.alias.split("@", 1)[0]
        return None

    def resolved_ami_family(self) -> str:
        """amiFamily, or the family an alias implies (upstream's AMIFamily())."""
        if self.ami_family is not None:
            return self.ami_family
        alias = self.alias_family()
        return ALIAS_FAMILIES[alias] if alias is not None else AMI_FAMILY_CUSTOM


class Subnet(KubeModel):
    """A resolved subnet."""

    model_config = ConfigDict(extra="ignore")

    id: str
    zone: str
    zone_id: str = Field(default="", alias="zoneID")


class SecurityGroup(KubeModel):
    """A resolved security group."""

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str = ""


class AMI(KubeModel):
    """A resolved AMI and the instance-type requirements it serves."""

    model_config = ConfigDict(
        extra="ignore", json_schema_extra=model_schema(required=["requirements"])
    )

    id: str
    name: str = ""
    deprecated: bool = False
    requirements: list[NodeSelectorRequirement] = Field(default_factory=list)


class CapacityReservation(KubeModel):
    """A resolved capacity reservation."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[str, Pattern(r"^cr-[0-9a-z]+$", "a capacity reservation id")]
    availability_zone: str = Field(alias="availabilityZone")
    instance_type: str = Field(alias="instanceType")
    owner_id: Annotated[str, Pattern(r"^[0-9]{12}$", "a 12-digit AWS account id")] = Field(
        alias="ownerID"
    )
    instance_match_criteria: Literal["open", "targeted"] = Field(alias="instanceMatchCriteria")
    reservation_type: Annotated[
        Literal["default", "capacity-block"], SchemaExtra({CRD_DEFAULT: "default"})
    ] = Field(default="default", alias="reservationType")
    interruptible: bool = False
    state: Annotated[Literal["active", "expiring"], SchemaExtra({CRD_DEFAULT: "active"})] = "active"
    end_time: Time | None = Field(default=None, alias="endTime")


class EC2NodeClassStatus(ConditionedStatus):
    """What the class's selectors resolved to."""

    subnets: list[Subnet] = Field(default_factory=list)
    """Subnets matched by subnetSelectorTerms, most free IPs first."""
    security_groups: list[SecurityGroup] = Field(default_factory=list, alias="securityGroups")
    """Security groups matched by securityGroupSelectorTerms."""
    amis: list[AMI] = Field(default_factory=list)
    """AMIs matched by amiSelectorTerms."""
    capacity_reservations: list[CapacityReservation] = Field(
        default_factory=list, alias="capacityReservations"
    )
    """Capacity reservations matched by capacityReservationSelectorTerms."""
    instance_profile: str = Field(default="", alias="instanceProfile")
    """The instance profile in use."""


class EC2NodeClass(KubeModel):
    """EC2NodeClass is the Schema for the EC2NodeClass API."""

    api_version: Literal["karpenter.k8s.aws/v1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["EC2NodeClass"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus = Field(default_factory=EC2NodeClassStatus)

    def ubuntu_incompatible(self) -> bool:
        """Converted from a v1beta1 Ubuntu class without AMI terms: v1 finds no Ubuntu AMI by
        itself, so the class holds a placeholder term and launches nothing (as upstream)."""
        value = self.metadata.annotations.get(AWS_ANNOTATION_UBUNTU_COMPATIBILITY, "")
        return UBUNTU_INCOMPATIBLE in value.split(",")
