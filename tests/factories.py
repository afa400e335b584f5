"""Shared builders for the objects tests need: NodePools, NodeClaims, Nodes and Pods.

Each builder makes the smallest valid object and takes the few knobs tests vary; the result is
the real model type (parsed from the same dict shape the API server returns), so tests exercise
the production parsers.
"""

from __future__ import annotations

from typing import Any

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Node, Pod, node_from_dict, pod_from_dict
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)

KWOK_REF = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
KWOK_NODECLASS_KEY = ("karpenter.kwok.sh", "KWOKNodeClass", "default")
T0 = "2026-01-01T00:00:00Z"


def nodepool(
    name: str = "default",
    *,
    requirements: list[dict[str, Any]] | None = None,
    disruption: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    weight: int | None = None,
    limits: dict[str, str] | None = None,
) -> NodePool:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": labels or {}},
            "spec": {"nodeClassRef": dict(KWOK_REF), "requirements": requirements or []},
        },
    }
    if disruption is not None:
        spec["disruption"] = disruption
    if weight is not None:
        spec["weight"] = weight
    if limits is not None:
        spec["limits"] = limits
    return NodePool.model_validate({"metadata": {"name": name, "uid": f"np-{name}"}, "spec": spec})


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


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    provider_id: str | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
) -> Node:
    alloc = allocatable or {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return node_from_dict(
        {
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "labels": {LABEL_HOSTNAME: name, **(labels or {})},
                "annotations": annotations or {},
                "creationTimestamp": T0,
            },
            "spec": {
                "providerID": provider_id if provider_id is not None else f"kwok://{name}",
                "taints": taints or [],
            },
            "status": {
                "capacity": alloc,
                "allocatable": alloc,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
    )


def nodeclaim(
    name: str,
    *,
    pool: str = "default",
    node_name: str | None = None,
    provider_id: str | None = None,
    labels: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    created: str = T0,
    expire_after: str = "720h",
    termination_grace_period: str | None = None,
) -> NodeClaim:
    node_name = node_name if node_name is not None else name
    spec: dict[str, Any] = {
        "nodeClassRef": dict(KWOK_REF),
        "requirements": [],
        "expireAfter": expire_after,
    }
    if termination_grace_period is not None:
        spec["terminationGracePeriod"] = termination_grace_period
    return NodeClaim.model_validate(
        {
            "metadata": {
                "name": name,
                "uid": f"nc-uid-{name}",
                "labels": {LABEL_NODEPOOL: pool, **(labels or {})},
                "annotations": annotations or {},
                "creationTimestamp": created,
                "finalizers": ["karpenter.sh/termination"],
            },
            "spec": spec,
            "status": {
                "nodeName": node_name,
                "providerID": provider_id if provider_id is not None else f"kwok://{node_name}",
                "conditions": conditions
                if conditions is not None
                else [
                    {"type": t, "status": "True", "lastTransitionTime": T0, "reason": t}
                    for t in ("Launched", "Registered", "Initialized")
                ],
            },
        }
    )


def pod(
    name: str,
    *,
    namespace: str = "default",
    node_name: str = "",
    cpu: str = "1",
    memory: str = "1Gi",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    pending: bool = False,
    owner: str | None = "ReplicaSet",
    priority: int | None = None,
) -> Pod:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": labels or {},
        "annotations": annotations or {},
        "creationTimestamp": T0,
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": f"{name}-owner",
                "uid": "o",
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    status: dict[str, Any] = {"phase": "Pending" if pending else "Running"}
    if pending:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return pod_from_dict({"metadata": meta, "spec": spec, "status": status})
