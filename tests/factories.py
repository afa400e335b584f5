"""Shared builders for the objects tests need: NodePools, NodeClaims, Nodes, Pods (DaemonSet
pods too), EC2NodeClasses, PodDisruptionBudgets and NodeOverlays.

Each builder makes the smallest valid object and takes the few knobs tests vary; the result is
the real model type (parsed from the same dict shape the API server returns), so tests exercise
the production parsers. As upstream's ``pkg/test`` factories, the defaults describe an ordinary
object: a NodePool referencing the default KWOKNodeClass, a NodeClaim launched, registered and
initialized on its own Node, a Node that is Ready, a Pod owned by a ReplicaSet.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from karpenter_py.model.api.ec2nodeclass import CapacityReservation, EC2NodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod, node_from_dict, pod_from_dict
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.state.ingest import pdb_from_dict
from karpenter_py.state.pdb import PodDisruptionBudget

KWOK_REF = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
KWOK_NODECLASS_KEY = ("karpenter.kwok.sh", "KWOKNodeClass", "default")
T0 = "2026-01-01T00:00:00Z"

P = ParamSpec("P")
T = TypeVar("T")


def _parsed(
    parse: Callable[[dict[str, Any]], T], build: Callable[P, dict[str, Any]]
) -> Callable[P, T]:
    """The model-object builder of a dict builder: same knobs, the dict parsed by ``parse`` (the
    production parser, so tests exercise it)."""

    @functools.wraps(build)
    def made(*args: P.args, **kw: P.kwargs) -> T:
        return parse(build(*args, **kw))

    return made


def condition(
    type_: str, status: str = "True", *, at: str = T0, reason: str = "", message: str = ""
) -> dict[str, Any]:
    """A status condition as the API holds it (the reason defaults to the type)."""
    return {
        "type": type_,
        "status": status,
        "reason": reason or type_,
        "message": message,
        "lastTransitionTime": at,
    }


def nodepool_dict(
    name: str = "default",
    *,
    requirements: list[dict[str, Any]] | None = None,
    disruption: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    weight: int | None = None,
    limits: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    uid: str | None = None,
    status: dict[str, Any] | None = None,
    node_class_ref: dict[str, str] | None = None,
    expire_after: str | None = None,
    annotations: dict[str, str] | None = None,
    generation: int | None = None,
    resource_version: str | None = None,
    pool_labels: dict[str, str] | None = None,
    termination_grace_period: str | None = None,
    template_spec: dict[str, Any] | None = None,
    **spec_fields: Any,
) -> dict[str, Any]:
    """A NodePool as the API server holds it; other keyword arguments are spec fields.
    ``uid=""`` leaves out the uid; ``pool_labels`` are the NodePool's own (``labels`` its
    nodes'); ``template_spec`` adds or replaces fields of the template's spec."""
    tspec: dict[str, Any] = {
        "nodeClassRef": dict(node_class_ref or KWOK_REF),
        "requirements": requirements or [],
    }
    if expire_after is not None:
        tspec["expireAfter"] = expire_after
    if taints is not None:
        tspec["taints"] = taints
    if termination_grace_period is not None:
        tspec["terminationGracePeriod"] = termination_grace_period
    tspec.update(template_spec or {})
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": labels or {}}, "spec": tspec},
        **spec_fields,
    }
    if disruption is not None:
        spec["disruption"] = disruption
    if weight is not None:
        spec["weight"] = weight
    if limits is not None:
        spec["limits"] = limits
    meta: dict[str, Any] = {"name": name}
    if uid != "":
        meta["uid"] = uid if uid is not None else f"np-{name}"
    if generation is not None:
        meta["generation"] = generation
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if annotations is not None:
        meta["annotations"] = annotations
    if pool_labels is not None:
        meta["labels"] = pool_labels
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": meta,
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return body


nodepool = _parsed(NodePool.model_validate, nodepool_dict)


def nodeoverlay_dict(
    name: str,
    *,
    requirements: list[dict[str, Any]] | None = None,
    weight: int | None = None,
    price: str | None = None,
    price_adjustment: str | None = None,
    capacity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A NodeOverlay as the API server holds it (empty requirements select every type)."""
    spec: dict[str, Any] = {"requirements": requirements or []}
    if weight is not None:
        spec["weight"] = weight
    if price is not None:
        spec["price"] = price
    if price_adjustment is not None:
        spec["priceAdjustment"] = price_adjustment
    if capacity is not None:
        spec["capacity"] = capacity
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": spec,
    }


nodeoverlay = _parsed(NodeOverlay.model_validate, nodeoverlay_dict)


def node_labels(
    pool: str, instance_type: str, *, zone: str = "test-zone-a", capacity_type: str = "on-demand"
) -> dict[str, str]:
    return {
        LABEL_NODEPOOL: pool,
        LABEL_INSTANCE_TYPE: instance_type,
        LABEL_TOPOLOGY_ZONE: zone,
        LABEL_CAPACITY_TYPE: capacity_type,
        LABEL_NODE_REGISTERED: "true",
        LABEL_NODE_INITIALIZED: "true",
    }


def node_dict(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    provider_id: str | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
    capacity: dict[str, str] | None = None,
    resource_version: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Node as the API server holds it; ``capacity`` defaults to ``allocatable``.
    ``conditions`` (built with :func:`condition`) replace the default Ready one."""
    alloc = (
        allocatable if allocatable is not None else {"cpu": "4", "memory": "16Gi", "pods": "110"}
    )
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "labels": {LABEL_HOSTNAME: name, **(labels or {})},
        "annotations": annotations or {},
        "creationTimestamp": T0,
    }
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {
            "providerID": provider_id if provider_id is not None else f"kwok://{name}",
            "taints": [dict(t) for t in taints or []],
        },
        "status": {
            "capacity": capacity if capacity is not None else alloc,
            "allocatable": alloc,
            "conditions": conditions
            if conditions is not None
            else [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


node = _parsed(node_from_dict, node_dict)


def nodeclaim_dict(
    name: str,
    *,
    pool: str = "default",
    node_name: str | None = None,
    provider_id: str | None = None,
    labels: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    created: str | None = T0,
    expire_after: str | None = "720h",
    termination_grace_period: str | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    node_class_ref: dict[str, str] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    resources: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
    deleting: str | None = None,
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    launched: bool = True,
    taints: list[dict[str, str]] | None = None,
    startup_taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A NodeClaim as the API server holds it. ``pool=""`` leaves out the NodePool label;
    ``launched=False`` leaves out the status (a NodeClaim as the provisioner writes it);
    ``deleting`` is its deletionTimestamp; ``created=None`` leaves out the creationTimestamp and
    ``uid=""`` the uid (what a client sends to create one)."""
    node_name = node_name if node_name is not None else name
    spec: dict[str, Any] = {
        "nodeClassRef": dict(node_class_ref or KWOK_REF),
        "requirements": requirements or [],
    }
    if expire_after is not None:
        spec["expireAfter"] = expire_after
    if termination_grace_period is not None:
        spec["terminationGracePeriod"] = termination_grace_period
    if taints is not None:
        spec["taints"] = taints
    if startup_taints is not None:
        spec["startupTaints"] = startup_taints
    if resources is not None:
        spec["resources"] = {"requests": resources}
    meta: dict[str, Any] = {
        "name": name,
        "labels": {**({LABEL_NODEPOOL: pool} if pool else {}), **(labels or {})},
        "annotations": annotations or {},
        "finalizers": finalizers if finalizers is not None else ["karpenter.sh/termination"],
    }
    if uid != "":
        meta["uid"] = uid if uid is not None else f"nc-uid-{name}"
    if created is not None:
        meta["creationTimestamp"] = created
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if deleting is not None:
        meta["deletionTimestamp"] = deleting
    status: dict[str, Any] = {
        "nodeName": node_name,
        "providerID": provider_id if provider_id is not None else f"kwok://{node_name}",
        "conditions": conditions
        if conditions is not None
        else [
            {"type": t, "status": "True", "lastTransitionTime": T0, "reason": t}
            for t in ("Launched", "Registered", "Initialized")
        ],
    }
    if capacity is not None:
        status["capacity"] = capacity
    if allocatable is not None:
        status["allocatable"] = allocatable
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": meta,
        "spec": spec,
    }
    if launched:
        body["status"] = status
    return body


nodeclaim = _parsed(NodeClaim.model_validate, nodeclaim_dict)


def pod_dict(
    name: str,
    *,
    namespace: str = "default",
    node_name: str = "",
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    pending: bool = False,
    phase: str | None = None,
    owner: str | None = "ReplicaSet",
    owner_name: str | None = None,
    priority: int | None = None,
    uid: str | None = None,
    created: str = T0,
    container: str = "c",
    resource_version: str | None = None,
    ready: bool | None = None,
    deleting: str | None = None,
    nominated: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Pod as the API server holds it, with one container requesting ``cpu`` and ``memory`` (None: no request). ``pending``
    makes it unschedulable-pending; ``phase=""`` leaves out the status; ``ready`` adds its
    Ready condition; ``deleting`` is its deletionTimestamp; ``nominated`` its
    status.nominatedNodeName; other keyword arguments are Pod.spec fields (camelCase)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid if uid is not None else f"uid-{namespace}-{name}",
        "labels": labels or {},
        "annotations": annotations or {},
        "creationTimestamp": created,
    }
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if deleting is not None:
        meta["deletionTimestamp"] = deleting
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": owner_name if owner_name is not None else f"{name}-owner",
                "uid": "o",
                "controller": True,
            }
        ]
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    body_spec: dict[str, Any] = {
        "containers": [{"name": container, "resources": {"requests": requests}}],
        **spec,
    }
    if node_name:
        body_spec["nodeName"] = node_name
    if priority is not None:
        body_spec["priority"] = priority
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body_spec}
    if phase is None:
        phase = "Pending" if pending else "Running"
    if phase:
        body["status"] = {"phase": phase}
    if pending and phase:
        body["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    if ready is not None and phase:
        body["status"].setdefault("conditions", []).append(
            {"type": "Ready", "status": "True" if ready else "False"}
        )
    if nominated is not None and phase:
        body["status"]["nominatedNodeName"] = nominated
    return body


pod = _parsed(pod_from_dict, pod_dict)


def daemonset_pod(name: str, **kw: Any) -> Pod:
    """A pod a DaemonSet owns (what the scheduler reserves room for on every node)."""
    return pod(name, owner="DaemonSet", **kw)


def pdb(
    name: str,
    match_labels: dict[str, str] | None,
    *,
    namespace: str = "default",
    disruptions_allowed: int = 0,
) -> PodDisruptionBudget:
    """A PodDisruptionBudget as its status reports it; ``match_labels=None`` has no selector."""
    spec: dict[str, Any] = {}
    if match_labels is not None:
        spec["selector"] = {"matchLabels": match_labels}
    return pdb_from_dict(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
            "status": {"disruptionsAllowed": disruptions_allowed},
        }
    )


def ec2nodeclass_spec(
    *,
    role: str = "KarpenterNodeRole",
    selector: dict[str, str] | None = None,
    alias: str = "al2023@latest",
) -> dict[str, Any]:
    """The getting-started EC2NodeClass spec: subnets and security groups found by ``selector``
    tags (``karpenter.sh/discovery: test-cluster``), the latest AL2023 AMIs."""
    tags = selector if selector is not None else {"karpenter.sh/discovery": "test-cluster"}
    return {
        "role": role,
        "amiSelectorTerms": [{"alias": alias}],
        "subnetSelectorTerms": [{"tags": dict(tags)}],
        "securityGroupSelectorTerms": [{"tags": dict(tags)}],
    }


def ec2nodeclass(
    name: str = "default",
    *,
    role: str = "KarpenterNodeRole",
    selector: dict[str, str] | None = None,
    alias: str = "al2023@latest",
    status: dict[str, Any] | None = None,
    resource_version: str | None = None,
    generation: int | None = None,
    uid: str | None = None,
    base_spec: dict[str, Any] | None = None,
    **spec: Any,
) -> EC2NodeClass:
    """An EC2NodeClass of ``ec2nodeclass_spec`` (or of ``base_spec`` where given). Other keyword
    arguments are spec fields (camelCase)."""
    if base_spec is None:
        base_spec = ec2nodeclass_spec(role=role, selector=selector, alias=alias)
    meta: dict[str, Any] = {"name": name}
    if uid is not None:
        meta["uid"] = uid
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if generation is not None:
        meta["generation"] = generation
    body: dict[str, Any] = {"metadata": meta, "spec": {**base_spec, **spec}}
    if status is not None:
        body["status"] = status
    return EC2NodeClass.model_validate(body)


def capacity_reservation(
    reservation_id: str = "cr-0123456789abcdef0",
    *,
    instance_type: str = "m5.large",
    zone: str = "us-west-2a",
    reservation_type: str = "default",
    state: str = "active",
    interruptible: bool = False,
    owner_id: str = "123456789012",
    match_criteria: str = "targeted",
) -> CapacityReservation:
    """One ``status.capacityReservations`` entry of an EC2NodeClass."""
    return CapacityReservation.model_validate(
        {
            "id": reservation_id,
            "availabilityZone": zone,
            "instanceType": instance_type,
            "ownerID": owner_id,
            "instanceMatchCriteria": match_criteria,
            "reservationType": reservation_type,
            "interruptible": interruptible,
            "state": state,
        }
    )


def ec2_instance_dict(
    instance_id: str, zone: str = "us-west-2a", tags: dict[str, str] | None = None
) -> dict[str, Any]:
    """An instance as EC2's DescribeInstances answers it (the fields the tests read)."""
    return {
        "InstanceId": instance_id,
        "InstanceType": "m5.large",
        "Placement": {"AvailabilityZone": zone},
        "State": {"Name": "running"},
        "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
    }
