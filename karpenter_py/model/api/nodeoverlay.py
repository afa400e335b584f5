"""NodeOverlay, ``karpenter.sh/v1alpha1`` (alpha, feature gate ``NodeOverlay``).

An overlay changes what Karpenter believes about the instance types its ``requirements`` select
before it simulates scheduling: their price (``price`` replaces it, ``priceAdjustment`` moves it
by an amount or a percentage) and extended resources they offer (``capacity``). ``weight``
orders overlays that select the same instance type. The rules the API server enforces (patterns,
limits, CEL) are the CRD's; the ones upstream checks at run time (restricted label keys) are
``scheduling.overlays``', which reports them on the ``ValidationSucceeded`` condition.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from karpenter_py.model.api.base import KubeModel, SchemaExtra, cel, check, model_schema
from karpenter_py.model.api.common import (
    MAX_REQUIREMENTS,
    REQUIREMENTS_CEL,
    Operator,
    ResourceList,
    operator_values_problem,
)
from karpenter_py.model.api.meta import ConditionedStatus, ObjectMeta

API_VERSION: Final = "karpenter.sh/v1alpha1"
KIND: Final = "NodeOverlay"
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"

# Upstream's patterns: a signed amount, or a signed percentage no lower than -100%.
PRICE_ADJUSTMENT_PATTERN: Final = (
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
)
PRICE_PATTERN: Final = r"^\d+(\.\d+)?$"
# Standard resources an overlay may not touch: it only adds extended ones.
RESTRICTED_CAPACITY: Final = ("cpu", "memory", "ephemeral-storage", "pods")
MIN_WEIGHT: Final = 1
MAX_WEIGHT: Final = 10000

# The CEL rules upstream's CRD puts on spec.requirements: a NodePool's In rule, NotIn alike, and
# the numeric rule in the overlay's own wording.
_REQUIREMENTS_CEL: Final = (
    cel(
        "self.all(x, x.operator == 'NotIn' ? (has(x.values) && x.values.size() != 0) : true)",
        "requirements with operator 'NotIn' must have a value defined",
    ),
    REQUIREMENTS_CEL[0],
    cel(
        "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || "
        "x.operator == 'Lte') ? (has(x.values) && x.values.size() == 1 && int(x.values[0]) >= 0)"
        " : true)",
        "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer "
        "value",
    ),
)
_CAPACITY_CEL: Final = cel(
    "self.all(x, !(x in [" + ", ".join(f"'{r}'" for r in RESTRICTED_CAPACITY) + "]))",
    "invalid resource restricted",
)


def _capacity_problem(capacity: dict[str, int | str]) -> str | None:
    restricted = sorted(set(capacity) & set(RESTRICTED_CAPACITY))
    if restricted:
        return (
            f"capacity may only add extended resources; {restricted} are standard resources "
            f"(restricted: {list(RESTRICTED_CAPACITY)})"
        )
    return None


class NodeOverlayRequirement(KubeModel):
    """A label key, an operator and values, as in a NodePool's requirements (no minValues)."""

    key: str
    """The label key that the selector applies to."""
    operator: Operator
    """In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte."""
    values: list[str] = Field(
        default_factory=list,
        validate_default=True,
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    """Values for In/NotIn; one non-negative integer for Gt/Lt/Gte/Lte; none otherwise."""

    @field_validator("values")
    @classmethod
    def _values_fit_operator(cls, values: list[str], info: ValidationInfo) -> list[str]:
        # Unlike a NodePool's, an overlay's NotIn needs values too (upstream's CRD says so).
        problem = operator_values_problem(
            info.data.get("operator"), values, need_values=("In", "NotIn")
        )
        if problem is not None:
            raise ValueError(problem)
        return values


class NodeOverlaySpec(KubeModel):
    """Which instance types to change, and how."""

    model_config = ConfigDict(
        json_schema_extra=model_schema(
            cel(
                "!has(self.price) || !has(self.priceAdjustment)",
                "cannot set both 'price' and 'priceAdjustment'",
            )
        )
    )

    requirements: Annotated[
        list[NodeOverlayRequirement],
        Field(max_length=MAX_REQUIREMENTS),
        SchemaExtra({"x-kubernetes-validations": list(_REQUIREMENTS_CEL)}),
    ]
    """Selects instance types (and offerings) by their labels, the NodePool's name
    (``karpenter.sh/nodepool``) and its template labels; empty selects every instance type."""
    price_adjustment: Annotated[str, Field(pattern=PRICE_ADJUSTMENT_PATTERN)] | None = Field(
        default=None, alias="priceAdjustment"
    )
    """A signed change of the price: an amount (``-0.5``, ``+1.2``) or a percentage (``+10%``,
    ``-15%``, at least ``-100%``)."""
    price: Annotated[str, Field(pattern=PRICE_PATTERN)] | None = None
    """The price to use instead of the cloud provider's."""
    capacity: (
        Annotated[
            ResourceList,
            check(_capacity_problem),
            SchemaExtra({"x-kubernetes-validations": [_CAPACITY_CEL]}),
        ]
        | None
    ) = None
    """Extended resources added to the instance types' capacity (never cpu, memory,
    ephemeral-storage or pods)."""
    weight: (
        Annotated[int, Field(ge=MIN_WEIGHT, le=MAX_WEIGHT), SchemaExtra({"format": "int32"})] | None
    ) = None
    """Precedence among overlays selecting the same instance type (1-10000, higher first);
    unset counts as 0."""

    @model_validator(mode="after")
    def _price_xor_adjustment(self) -> NodeOverlaySpec:
        if self.price is not None and self.price_adjustment is not None:
            raise ValueError("cannot set both 'price' and 'priceAdjustment'")
        return self


class NodeOverlayStatus(ConditionedStatus):
    """``ValidationSucceeded`` (and its ``Ready`` roll-up)."""


class NodeOverlay(KubeModel):
    """NodeOverlay adjusts instance types' price and capacity in Karpenter's simulations."""

    api_version: Literal["karpenter.sh/v1alpha1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["NodeOverlay"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeOverlaySpec
    status: NodeOverlayStatus = Field(default_factory=NodeOverlayStatus)
