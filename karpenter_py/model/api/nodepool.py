"""NodePool, ``karpenter.sh/v1``: what nodes Karpenter may launch, and how it may disrupt them.

Field names, defaults and validation follow upstream's pkg/apis/v1/nodepool.go and the CRD it
generates (upstream-features.md section 1.1). The scheduler reads these attribute paths directly,
so they are part of this package's contract.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from karpenter_py.model.api.base import CRD_DEFAULT, KubeModel, SchemaExtra, cel, model_schema
from karpenter_py.model.api.common import (
    BUDGET_DURATION_PATTERN,
    BUDGET_NODES_PATTERN,
    BUDGET_SCHEDULE_PATTERN,
    MAX_LABELS,
    MAX_REQUIREMENTS,
    REQUIREMENTS_CEL,
    DurationPattern,
    LabelValue,
    NillableDuration,
    NodeClaimSpecBase,
    NodeClassReference,
    NodeSelectorRequirementWithMinValues,
    Pattern,
    QuantityString,
    ResourceList,
    label_map_cel,
    nodepool_key_problem,
    qualified_name_problem,
    restricted_label_problem,
)
from karpenter_py.model.api.meta import ConditionedStatus, ObjectMeta

API_VERSION: Final = "karpenter.sh/v1"
KIND: Final = "NodePool"

DEFAULT_CONSOLIDATE_AFTER: Final = "0s"
DEFAULT_BUDGET_NODES: Final = "10%"

ConsolidationPolicy = Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]
CONSOLIDATION_WHEN_EMPTY: Final = "WhenEmpty"
CONSOLIDATION_WHEN_EMPTY_OR_UNDERUTILIZED: Final = "WhenEmptyOrUnderutilized"
CONSOLIDATION_BALANCED: Final = "Balanced"
DEFAULT_CONSOLIDATION_POLICY: Final = CONSOLIDATION_WHEN_EMPTY_OR_UNDERUTILIZED

DisruptionReason = Literal["Underutilized", "Empty", "Drifted"]

# NodePool condition types (status.conditions); the first two roll up into Ready.
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
CONDITION_NODE_CLASS_READY: Final = "NodeClassReady"
CONDITION_NODE_REGISTRATION_HEALTHY: Final = "NodeRegistrationHealthy"


def _label_map_problems(labels: dict[str, str]) -> dict[str, str]:
    for key in labels:
        problem = qualified_name_problem(key) or restricted_label_problem(key, allow_nodepool=False)
        if problem is not None:
            raise ValueError(problem)
    return labels


class NodeClaimTemplateMetadata(KubeModel):
    """Labels and annotations copied to every NodeClaim and Node of the pool."""

    labels: Annotated[
        dict[str, LabelValue],
        SchemaExtra(
            {
                "maxProperties": MAX_LABELS,
                "x-kubernetes-validations": label_map_cel(allow_nodepool=False),
            }
        ),
    ] = Field(default_factory=dict)
    """Labels for the nodes; each also acts as an ``In [value]`` requirement."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations for the nodes."""

    @field_validator("labels")
    @classmethod
    def _labels_allowed(cls, labels: dict[str, str]) -> dict[str, str]:
        if len(labels) > MAX_LABELS:
            raise ValueError(f"at most {MAX_LABELS} labels are allowed, got {len(labels)}")
        return _label_map_problems(labels)


def _no_nodepool_key(
    requirements: list[NodeSelectorRequirementWithMinValues],
) -> list[NodeSelectorRequirementWithMinValues]:
    problem = nodepool_key_problem(requirements)
    if problem is not None:
        raise ValueError(problem)
    return requirements


TemplateRequirements = Annotated[
    list[NodeSelectorRequirementWithMinValues],
    Field(max_length=MAX_REQUIREMENTS),
    AfterValidator(_no_nodepool_key),
    SchemaExtra(
        {
            "x-kubernetes-validations": [
                *REQUIREMENTS_CEL,
                cel(
                    "self.all(x, x.key != 'karpenter.sh/nodepool')",
                    'label "karpenter.sh/nodepool" is restricted',
                ),
            ]
        }
    ),
]
"""A NodePool template's requirements (v1 and v1beta1): Karpenter sets karpenter.sh/nodepool."""

# On a budgets list, both versions: a schedule and a duration come together (Budget checks it
# in Python).
BUDGETS_CEL: Final = (
    cel(
        "self.all(x, has(x.schedule) == has(x.duration))", "'schedule' must be set with 'duration'"
    ),
)


class NodeClaimTemplateSpec(NodeClaimSpecBase):
    """The NodeClaim spec a NodePool stamps out (without resource requests: the scheduler adds
    those per NodeClaim)."""

    requirements: TemplateRequirements
    """Constraints on the instance types, zones, capacity types, ... nodes may have."""
    node_class_ref: Annotated[
        NodeClassReference,
        SchemaExtra(
            {
                "x-kubernetes-validations": [
                    cel("self.group == oldSelf.group", "nodeClassRef.group is immutable"),
                    cel("self.kind == oldSelf.kind", "nodeClassRef.kind is immutable"),
                ]
            }
        ),
    ] = Field(alias="nodeClassRef")
    """Reference to the provider NodeClass; its group and kind cannot change after creation."""


class NodeClaimTemplate(KubeModel):
    """The template every NodeClaim of the pool is made from."""

    metadata: NodeClaimTemplateMetadata = Field(default_factory=NodeClaimTemplateMetadata)
    spec: NodeClaimTemplateSpec


class Budget(KubeModel):
    """Limits how many of the pool's nodes may be disrupted at once, optionally only during a
    cron window and only for some disruption reasons."""

    model_config = ConfigDict(json_schema_extra=model_schema(required=["nodes"]))

    nodes: Annotated[
        str,
        Pattern(BUDGET_NODES_PATTERN, "a node count or percentage such as '5' or '10%'"),
        SchemaExtra({CRD_DEFAULT: DEFAULT_BUDGET_NODES}),
    ] = DEFAULT_BUDGET_NODES
    """Maximum number (or percentage, rounded up) of the pool's nodes disrupted at once."""
    schedule: (
        Annotated[
            str,
            Pattern(
                BUDGET_SCHEDULE_PATTERN,
                "a cron schedule with five fields (e.g. '0 9 * * mon-fri') or one of @yearly, "
                "@annually, @monthly, @weekly, @daily, @midnight, @hourly",
            ),
        ]
        | None
    ) = None
    """When the budget becomes active (cron syntax, UTC; time zones are not supported)."""
    duration: (
        Annotated[
            str,
            DurationPattern(
                BUDGET_DURATION_PATTERN, "a duration in hours and/or minutes such as '30m' or '8h'"
            ),
        ]
        | None
    ) = Field(default=None, validate_default=True)
    """How long the budget stays active after each schedule hit (minutes/hours only)."""
    reasons: Annotated[list[DisruptionReason], Field(max_length=50)] | None = None
    """Disruption reasons the budget applies to (Underutilized, Empty, Drifted); unset: all."""

    @field_validator("schedule")
    @classmethod
    def _no_time_zone(cls, schedule: str | None) -> str | None:
        if schedule is not None and schedule.lstrip().upper().startswith(("TZ=", "CRON_TZ=")):
            raise ValueError("time zones are not supported in budget schedules (they run in UTC)")
        return schedule

    @field_validator("duration")
    @classmethod
    def _with_schedule(cls, duration: str | None, info: ValidationInfo) -> str | None:
        if "schedule" not in info.data:
            return duration  # schedule itself was invalid; that error is reported already
        if (info.data["schedule"] is None) != (duration is None):
            raise ValueError("'schedule' must be set with 'duration': set both or neither")
        return duration


def default_budgets() -> list[Budget]:
    return [Budget(nodes=DEFAULT_BUDGET_NODES)]


# A pool's disruption budgets, both API versions (default: one budget of 10%).
Budgets = Annotated[
    list[Budget],
    Field(max_length=50),
    SchemaExtra(
        {
            CRD_DEFAULT: [{"nodes": DEFAULT_BUDGET_NODES}],
            "x-kubernetes-validations": list(BUDGETS_CEL),
        }
    ),
]


class Disruption(KubeModel):
    """How and when Karpenter may disrupt the pool's nodes."""

    model_config = ConfigDict(json_schema_extra=model_schema(required=["consolidateAfter"]))

    consolidate_after: NillableDuration = Field(
        default=DEFAULT_CONSOLIDATE_AFTER, alias="consolidateAfter"
    )
    """How long a node must see no pod scheduling or removal before it may be consolidated
    ('Never' turns consolidation off)."""
    consolidation_policy: Annotated[
        ConsolidationPolicy, SchemaExtra({CRD_DEFAULT: DEFAULT_CONSOLIDATION_POLICY})
    ] = Field(default=DEFAULT_CONSOLIDATION_POLICY, alias="consolidationPolicy")
    """Which nodes consolidation may act on: WhenEmpty, WhenEmptyOrUnderutilized or Balanced."""
    budgets: Budgets = Field(default_factory=default_budgets)
    """Disruption budgets; with several active, the most restrictive wins. Default: 10%."""


class NodePoolSpec(KubeModel):
    """What the pool may launch and how its nodes are disrupted."""

    model_config = ConfigDict(
        json_schema_extra=model_schema(
            cel(
                "has(self.replicas) == has(oldSelf.replicas)",
                "Cannot transition NodePool between static (replicas set) and dynamic "
                "(replicas unset) provisioning modes",
            ),
            cel(
                "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || "
                "(size(self.limits) == 1 && 'nodes' in self.limits))",
                "only 'limits.nodes' is supported on static NodePools",
            ),
            cel(
                "!has(self.replicas) || !has(self.weight)",
                "'weight' is not supported on static NodePools",
            ),
        )
    )

    template: NodeClaimTemplate
    """Template for the NodeClaims the pool launches."""
    disruption: Annotated[
        Disruption, SchemaExtra({CRD_DEFAULT: {"consolidateAfter": DEFAULT_CONSOLIDATE_AFTER}})
    ] = Field(default_factory=Disruption)
    """Disruption settings (consolidation and budgets)."""
    limits: ResourceList | None = None
    """Upper bounds on the pool's total capacity (cpu, memory, nodes, any resource);
    provisioning stops once the pool would exceed them."""
    weight: Annotated[int, Field(ge=1, le=100), SchemaExtra({"format": "int32"})] | None = None
    """Priority among NodePools (1-100, higher first); unset counts as 0."""
    replicas: Annotated[int, Field(ge=0), SchemaExtra({"format": "int64"})] | None = None
    """Alpha (StaticCapacity): keep exactly this many nodes instead of following pod demand."""

    @model_validator(mode="after")
    def _static_pool_rules(self) -> NodePoolSpec:
        if self.replicas is None:
            return self
        if self.weight is not None:
            raise ValueError("'weight' is not supported on static NodePools (replicas is set)")
        if self.limits and set(self.limits) != {"nodes"}:
            raise ValueError(
                "only 'limits.nodes' is supported on static NodePools (replicas is set)"
            )
        return self


class NodePoolStatus(ConditionedStatus):
    """Observed state of the pool."""

    resources: dict[str, QuantityString] = Field(default_factory=dict)
    """Total capacity of the pool's nodes."""
    nodes: Annotated[int, SchemaExtra({"format": "int64"})] | None = None
    """Number of nodes in the pool (the scale subresource's status replicas)."""
    node_class_observed_generation: Annotated[int, SchemaExtra({"format": "int64"})] | None = Field(
        default=None, alias="nodeClassObservedGeneration"
    )
    """NodeClass generation last seen; a change resets NodeRegistrationHealthy."""


class NodePool(KubeModel):
    """NodePool is the Schema for the NodePools API."""

    api_version: Literal["karpenter.sh/v1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["NodePool"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodePoolSpec
    status: NodePoolStatus = Field(default_factory=NodePoolStatus)
