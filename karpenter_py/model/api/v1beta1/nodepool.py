"""NodePool, ``karpenter.sh/v1beta1``, as Karpenter's v0.3x releases served it.

Differences from v1: ``disruption`` holds ``expireAfter`` and offers the policies WhenEmpty and
WhenUnderutilized; the template carries ``kubelet`` and (ignored) ``resources``; ``nodeClassRef``
names ``apiVersion``/``kind``/``name`` and may leave the first two out.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from karpenter_py.model.api.base import CRD_DEFAULT, KubeModel, SchemaExtra, cel, model_schema
from karpenter_py.model.api.common import (
    DEFAULT_EXPIRE_AFTER,
    NEVER,
    NillableDuration,
    ResourceList,
)
from karpenter_py.model.api.meta import ObjectMeta
from karpenter_py.model.api.nodepool import (
    Budgets,
    NodeClaimTemplateMetadata,
    NodePoolStatus,
    TemplateRequirements,
    default_budgets,
)
from karpenter_py.model.api.v1beta1.common import NodeClaimSpecBase

API_VERSION: Final = "karpenter.sh/v1beta1"
KIND: Final = "NodePool"

ConsolidationPolicy = Literal["WhenEmpty", "WhenUnderutilized"]
WHEN_EMPTY: Final = "WhenEmpty"
WHEN_UNDERUTILIZED: Final = "WhenUnderutilized"


def _no_resources(resources: dict[str, ResourceList]) -> dict[str, ResourceList]:
    if resources:
        raise ValueError(
            "a NodePool template takes no resources (the scheduler sets each NodeClaim's "
            "requests); remove it"
        )
    return resources


class NodeClaimTemplateSpec(NodeClaimSpecBase):
    """A v1beta1 NodePool's NodeClaim spec: as a NodeClaim's, but without karpenter.sh/nodepool
    requirements (Karpenter sets it) and without resource requests (the scheduler adds those)."""

    requirements: TemplateRequirements
    """Constraints on the instances nodes may run on."""
    resources: (
        Annotated[
            dict[str, ResourceList],
            AfterValidator(_no_resources),
            SchemaExtra({"maxProperties": 0}),
        ]
        | None
    ) = None
    """Must be empty: a template has no resource requests (upstream's v1beta1 schema says so)."""


class NodeClaimTemplate(KubeModel):
    """The template every NodeClaim of the pool is made from."""

    metadata: NodeClaimTemplateMetadata = Field(default_factory=NodeClaimTemplateMetadata)
    spec: NodeClaimTemplateSpec


_AFTER_WITH_UNDERUTILIZED: Final = (
    "consolidateAfter cannot be combined with consolidationPolicy=WhenUnderutilized"
)
_WHEN_EMPTY_NEEDS_AFTER: Final = (
    "consolidateAfter must be specified with consolidationPolicy=WhenEmpty"
)


class Disruption(KubeModel):
    """How and when Karpenter may disrupt the pool's nodes (v1beta1 layout)."""

    model_config = ConfigDict(
        json_schema_extra=model_schema(
            cel(
                "!has(self.consolidateAfter) || self.consolidationPolicy != 'WhenUnderutilized' || "
                "self.consolidateAfter == 'Never'",
                _AFTER_WITH_UNDERUTILIZED,
            ),
            cel(
                "self.consolidationPolicy != 'WhenEmpty' || has(self.consolidateAfter)",
                _WHEN_EMPTY_NEEDS_AFTER,
            ),
        )
    )

    consolidate_after: NillableDuration | None = Field(default=None, alias="consolidateAfter")
    """How long a node must be empty before it is consolidated (WhenEmpty)."""
    consolidation_policy: Annotated[
        ConsolidationPolicy, SchemaExtra({CRD_DEFAULT: WHEN_UNDERUTILIZED})
    ] = Field(default=WHEN_UNDERUTILIZED, alias="consolidationPolicy")
    """Which nodes consolidation may act on: WhenEmpty or WhenUnderutilized."""
    expire_after: Annotated[NillableDuration, SchemaExtra({CRD_DEFAULT: DEFAULT_EXPIRE_AFTER})] = (
        Field(default=DEFAULT_EXPIRE_AFTER, alias="expireAfter")
    )
    """How long a node may live before it is replaced ('Never' to keep it)."""
    budgets: Budgets = Field(default_factory=default_budgets)
    """Disruption budgets; the most restrictive active one wins."""

    @model_validator(mode="after")
    def _consolidate_after_fits_policy(self) -> Disruption:
        # WhenUnderutilized consolidates as soon as it can ('Never' switches it off); only
        # WhenEmpty waits, and then it must be told how long.
        after, policy = self.consolidate_after, self.consolidation_policy
        if after is not None and after != NEVER and policy == WHEN_UNDERUTILIZED:
            raise ValueError(
                f"{_AFTER_WITH_UNDERUTILIZED} (got consolidateAfter {after!r}; only 'Never' is "
                "allowed with it)"
            )
        if after is None and policy == WHEN_EMPTY:
            raise ValueError(_WHEN_EMPTY_NEEDS_AFTER)
        return self


class NodePoolSpec(KubeModel):
    """What the pool may launch and how its nodes are disrupted."""

    template: NodeClaimTemplate
    """Template for the NodeClaims the pool launches."""
    disruption: Annotated[
        Disruption, SchemaExtra({CRD_DEFAULT: {"consolidationPolicy": WHEN_UNDERUTILIZED}})
    ] = Field(default_factory=Disruption)
    """Disruption settings."""
    limits: ResourceList | None = None
    """Upper bounds on the pool's total capacity."""
    weight: Annotated[int, Field(ge=1, le=100), SchemaExtra({"format": "int32"})] | None = None
    """Priority among NodePools (1-100, higher first)."""


class NodePool(KubeModel):
    """NodePool, karpenter.sh/v1beta1 (served for older manifests; stored as v1)."""

    api_version: Literal["karpenter.sh/v1beta1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["NodePool"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodePoolSpec
    status: NodePoolStatus = Field(default_factory=NodePoolStatus)
