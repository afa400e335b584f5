"""NodeClaim, ``karpenter.sh/v1``: one node Karpenter decided to launch.

A NodeClaim in the API is the durable record of a launch decision (architecture.md): it is
written before the cloud call, and its spec never changes afterwards (the CRD enforces that with
``self == oldSelf``). Field layout follows upstream's pkg/apis/v1/nodeclaim*.go.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from karpenter_py.model.api.base import KubeModel, SchemaExtra, Time, cel
from karpenter_py.model.api.common import (
    MAX_REQUIREMENTS,
    REQUIREMENTS_CEL,
    NodeClaimSpecBase,
    NodeSelectorRequirementWithMinValues,
    QuantityString,
    ResourceList,
)
from karpenter_py.model.api.meta import ConditionedStatus, ObjectMeta

API_VERSION: Final = "karpenter.sh/v1"
KIND: Final = "NodeClaim"

# NodeClaim condition types; Ready = Launched and Registered and Initialized.
CONDITION_LAUNCHED: Final = "Launched"
CONDITION_REGISTERED: Final = "Registered"
CONDITION_INITIALIZED: Final = "Initialized"
CONDITION_CONSOLIDATABLE: Final = "Consolidatable"
CONDITION_DRIFTED: Final = "Drifted"
CONDITION_DISRUPTION_REASON: Final = "DisruptionReason"
CONDITION_DRAINED: Final = "Drained"
CONDITION_VOLUMES_DETACHED: Final = "VolumesDetached"
CONDITION_INSTANCE_TERMINATING: Final = "InstanceTerminating"
CONDITION_CONSISTENT_STATE_FOUND: Final = "ConsistentStateFound"
LIFECYCLE_CONDITIONS: Final = (CONDITION_LAUNCHED, CONDITION_REGISTERED, CONDITION_INITIALIZED)


class ResourceRequirements(KubeModel):
    """Resources the NodeClaim must provide."""

    requests: ResourceList = Field(default_factory=dict)
    """Sum of the scheduled pods' requests plus daemonset overhead."""


class NodeClaimSpec(NodeClaimSpecBase):
    """Desired state of the NodeClaim; immutable once created."""

    requirements: Annotated[
        list[NodeSelectorRequirementWithMinValues],
        Field(max_length=MAX_REQUIREMENTS),
        SchemaExtra({"x-kubernetes-validations": list(REQUIREMENTS_CEL)}),
    ]
    """Constraints the launched instance must satisfy."""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    """Resources the node must provide."""


class NodeClaimStatus(ConditionedStatus):
    """Observed state of the NodeClaim, filled in as it launches and registers."""

    node_name: str = Field(default="", alias="nodeName")
    """Name of the Node that registered for this NodeClaim."""
    provider_id: str = Field(default="", alias="providerID")
    """Cloud provider ID of the instance (aws:///zone/i-..., kwok://...)."""
    image_id: str = Field(default="", alias="imageID")
    """Image the instance was launched from."""
    capacity: dict[str, QuantityString] = Field(default_factory=dict)
    """Resources the instance has."""
    allocatable: dict[str, QuantityString] = Field(default_factory=dict)
    """Resources available to pods after system overhead."""
    last_pod_event_time: Time | None = Field(default=None, alias="lastPodEventTime")
    """Last time a pod was bound to, or left, the node (drives consolidateAfter)."""


class NodeClaim(KubeModel):
    """NodeClaim is the Schema for the NodeClaims API."""

    api_version: Literal["karpenter.sh/v1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["NodeClaim"] = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: Annotated[
        NodeClaimSpec,
        SchemaExtra({"x-kubernetes-validations": [cel("self == oldSelf", "spec is immutable")]}),
    ]
    status: NodeClaimStatus = Field(default_factory=NodeClaimStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    def is_ready(self) -> bool:
        """Ready = Launched and Registered and Initialized (upstream's root condition)."""
        return all(self.status.is_true(t) for t in LIFECYCLE_CONDITIONS)
