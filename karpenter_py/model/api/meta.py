"""ObjectMeta and status conditions, shared by every kind.

ObjectMeta keeps fields it does not model (managedFields, selfLink, ...) so an object read from
the API server can be written back without losing anything. Conditions follow the
operatorpkg/metav1 shape Karpenter uses; ``set_condition`` moves ``lastTransitionTime`` only when
the status really changes, which is what makes "Ready since" meaningful.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, ClassVar, Final, Literal, Required, TypedDict, Unpack

from pydantic import BeforeValidator, ConfigDict, Field

from karpenter_py.model.api.base import KubeModel, SchemaExtra, Time, as_utc, model_schema

ConditionStatus = Literal["True", "False", "Unknown"]
CONDITION_TRUE: Final = "True"
CONDITION_FALSE: Final = "False"
CONDITION_UNKNOWN: Final = "Unknown"

CONDITION_READY: Final = "Ready"

# metav1.Condition's own limits, as the upstream CRDs carry them.
CONDITION_TYPE_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class OwnerReference(KubeModel):
    """A pointer to the object that owns this one (NodeClaim -> NodePool)."""

    model_config = ConfigDict(extra="allow")

    api_version: str = Field(alias="apiVersion")
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = Field(default=None, alias="blockOwnerDeletion")


class ObjectMeta(KubeModel):
    """Standard object metadata. Unknown fields are kept so read-modify-write is lossless."""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    generate_name: str = Field(default="", alias="generateName")
    namespace: str = ""
    uid: str = ""
    resource_version: str = Field(default="", alias="resourceVersion")
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[OwnerReference] = Field(default_factory=list, alias="ownerReferences")
    creation_timestamp: Time | None = Field(default=None, alias="creationTimestamp")
    deletion_timestamp: Time | None = Field(default=None, alias="deletionTimestamp")
    deletion_grace_period_seconds: int | None = Field(
        default=None, alias="deletionGracePeriodSeconds"
    )


def _status_from_yaml(value: object) -> object:
    # YAML reads an unquoted `status: True` as a boolean; Kubernetes means the string.
    if value is True:
        return CONDITION_TRUE
    if value is False:
        return CONDITION_FALSE
    return value


class Condition(KubeModel):
    """One status condition (metav1.Condition as operatorpkg uses it)."""

    # extra="ignore": conditions are written by controllers, not users; tolerate newer fields.
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=model_schema(
            required=["lastTransitionTime", "message", "reason", "status", "type"]
        ),
    )
    _KEEP_EMPTY: ClassVar[frozenset[str]] = frozenset({"message"})

    type: Annotated[str, SchemaExtra({"maxLength": 316, "pattern": CONDITION_TYPE_PATTERN})]
    """Type of condition in CamelCase or in foo.example.com/CamelCase."""
    status: Annotated[ConditionStatus, BeforeValidator(_status_from_yaml)]
    """Status of the condition, one of True, False, Unknown."""
    reason: Annotated[
        str,
        SchemaExtra({"minLength": 1, "maxLength": 1024, "pattern": CONDITION_REASON_PATTERN}),
    ]
    """A programmatic CamelCase identifier for the condition's last transition."""
    message: Annotated[str, SchemaExtra({"maxLength": 32768})] = ""
    """A human readable message about the transition; may be empty."""
    last_transition_time: Time = Field(alias="lastTransitionTime")
    """When the condition last moved from one status to another."""
    observed_generation: Annotated[int, SchemaExtra({"minimum": 0, "format": "int64"})] | None = (
        Field(default=None, alias="observedGeneration")
    )
    """The metadata.generation the condition was computed from."""


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    for condition in conditions:
        if condition.type == type_:
            return condition
    return None


class ConditionChange(TypedDict, total=False):
    """The keyword arguments of :func:`set_condition`, for callers that pass them through."""

    now: Required[datetime]
    reason: str
    message: str
    observed_generation: int | None


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: ConditionStatus,
    *,
    now: datetime,
    reason: str = "",
    message: str = "",
    observed_generation: int | None = None,
) -> bool:
    """Set (or add) a condition in place; returns True when anything changed.

    As operatorpkg does: an empty reason becomes the type (the API requires a non-empty reason),
    and ``lastTransitionTime`` moves only when the status flips.
    """
    reason = reason or type_
    existing = find_condition(conditions, type_)
    if existing is None:
        conditions.append(
            Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=now,
                observed_generation=observed_generation,
            )
        )
        return True
    changed = (existing.status, existing.reason, existing.message) != (status, reason, message)
    changed = changed or existing.observed_generation != observed_generation
    if existing.status != status:
        existing.last_transition_time = as_utc(now)
    existing.status = status
    existing.reason = reason
    existing.message = message
    existing.observed_generation = observed_generation
    return changed


def clear_condition(conditions: list[Condition], type_: str) -> bool:
    """Remove a condition; returns True when it was present."""
    before = len(conditions)
    conditions[:] = [c for c in conditions if c.type != type_]
    return len(conditions) != before


class ConditionedStatus(KubeModel):
    """A status block with conditions and the helpers controllers use on them."""

    model_config = ConfigDict(extra="ignore")

    conditions: list[Condition] = Field(default_factory=list)
    """Signals for health and readiness."""

    def get_condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    def is_true(self, type_: str) -> bool:
        condition = self.get_condition(type_)
        return condition is not None and condition.status == CONDITION_TRUE

    def set_condition(
        self, type_: str, status: ConditionStatus, **change: Unpack[ConditionChange]
    ) -> bool:
        """:func:`set_condition` on this status's conditions."""
        return set_condition(self.conditions, type_, status, **change)

    def clear_condition(self, type_: str) -> bool:
        return clear_condition(self.conditions, type_)
