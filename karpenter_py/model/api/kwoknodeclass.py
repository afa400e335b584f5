"""KWOKNodeClass, ``karpenter.kwok.sh/v1alpha1``: the fake provider's NodeClass.

Upstream's kwok provider (kwok/apis/v1alpha1) needs nothing from a NodeClass to "launch" a node,
so the spec only tunes the fake: registration delay, max pods and reserved resources. Its status
defaults to Ready so NodePools that reference it are schedulable at once, as upstream does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field

from karpenter_py.model.api.base import CRD_DEFAULT, KubeModel, SchemaExtra, cel, format_time
from karpenter_py.model.api.common import QUANTITY_PATTERN, Duration, check_quantity
from karpenter_py.model.api.meta import CONDITION_READY, Condition, ConditionedStatus, ObjectMeta

API_VERSION: Final = "karpenter.kwok.sh/v1alpha1"
KIND: Final = "KWOKNodeClass"

RESERVED_RESOURCE_KEYS: Final = ("cpu", "memory", "ephemeral-storage", "pid")
# Upstream's fixed default status timestamp (kwoknodeclass.go).
_DEFAULT_READY_SINCE: Final = datetime(2024, 1, 1, 1, 1, 1, tzinfo=UTC)


def _quantity_str(value: str) -> str:
    # A map[string]string upstream (so CEL's startsWith applies); the values must still be
    # quantities for the provider to use them.
    check_quantity(value)
    return value


def _reserved_problem(resources: dict[str, str]) -> dict[str, str]:
    for key, value in resources.items():
        if key not in RESERVED_RESOURCE_KEYS:
            raise ValueError(
                f"{key!r} is not a valid key for reservedResources; valid keys are "
                f"{list(RESERVED_RESOURCE_KEYS)}"
            )
        if value.startswith("-"):
            raise ValueError(f"reservedResources[{key!r}] cannot be a negative quantity")
    return resources


_RESERVED_CEL: Final = [
    cel(
        "self.all(x, " + " || ".join(f"x=='{k}'" for k in RESERVED_RESOURCE_KEYS) + ")",
        "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",
    ),
    cel(
        "self.all(x, !self[x].startsWith('-'))",
        "kubeReserved value cannot be a negative resource quantity",
    ),
]


class KWOKNodeClassSpec(KubeModel):
    """Tuning for fake nodes."""

    max_pods: Annotated[int, Field(ge=0), SchemaExtra({"format": "int64"})] | None = Field(
        default=None, alias="maxPods"
    )
    """Override for the maximum number of pods per node."""
    node_registration_delay: Duration | None = Field(default=None, alias="nodeRegistrationDelay")
    """How long a fake node takes to register, modelling instance start-up time."""
    reserved_resources: (
        Annotated[
            dict[
                str,
                Annotated[
                    str, AfterValidator(_quantity_str), SchemaExtra({"pattern": QUANTITY_PATTERN})
                ],
            ],
            AfterValidator(_reserved_problem),
            SchemaExtra({"x-kubernetes-validations": _RESERVED_CEL}),
        ]
        | None
    ) = Field(default=None, alias="reservedResources")
    """Resources subtracted from capacity to get allocatable (default 100m CPU, 10Mi memory)."""


def _default_status() -> KWOKNodeClassStatus:
    return KWOKNodeClassStatus(
        conditions=[
            Condition(
                type=CONDITION_READY,
                status="True",
                reason=CONDITION_READY,
                message="",
                last_transition_time=_DEFAULT_READY_SINCE,
            )
        ]
    )


class KWOKNodeClassStatus(ConditionedStatus):
    """Resolved state of the KWOKNodeClass."""


_DEFAULT_STATUS_JSON: Final = {
    "conditions": [
        {
            "lastTransitionTime": format_time(_DEFAULT_READY_SINCE),
            "message": "",
            "reason": CONDITION_READY,
            "status": "True",
            "type": CONDITION_READY,
        }
    ]
}


class KWOKNodeClass(KubeModel):
    """KWOKNodeClass is the Schema for the KWOKNodeClass API."""

    api_version: Literal["karpenter.kwok.sh/v1alpha1"] = Field(
        default=API_VERSION, alias="apiVersion"
    )
    kind: Literal["KWOKNodeClass"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KWOKNodeClassSpec = Field(default_factory=KWOKNodeClassSpec)
    status: Annotated[KWOKNodeClassStatus, SchemaExtra({CRD_DEFAULT: _DEFAULT_STATUS_JSON})] = (
        Field(default_factory=_default_status)
    )
