"""KWOKNodeClass, ``karpenter.kwok.sh/v1alpha1``: the fake provider's NodeClass.

Upstream's kwok provider (kwok/apis/v1alpha1) needs nothing from a NodeClass to "launch" a node,
so the spec only tunes the fake: registration delay, max pods and reserved resources. Its status
defaults to Ready so NodePools that reference it are schedulable at once, as upstream does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Final, Literal

from pydantic import Field

from karpenter_py.model.api.base import CRD_DEFAULT, KubeModel, SchemaExtra, format_time
from karpenter_py.model.api.common import (
    Duration,
    ReservedQuantity,
    reserved_resources_cel,
    reserved_resources_check,
)
from karpenter_py.model.api.meta import CONDITION_READY, Condition, ConditionedStatus, ObjectMeta

API_VERSION: Final = "karpenter.kwok.sh/v1alpha1"
KIND: Final = "KWOKNodeClass"

# Upstream's fixed default status timestamp (kwoknodeclass.go).
_DEFAULT_READY_SINCE: Final = datetime(2024, 1, 1, 1, 1, 1, tzinfo=UTC)


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
            dict[str, ReservedQuantity],
            reserved_resources_check("reservedResources"),
            # Upstream's kwok CRD names the map kubeReserved in its messages; kept for greps.
            SchemaExtra({"x-kubernetes-validations": reserved_resources_cel("kubeReserved")}),
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
