"""Lifecycle phase 2, registration: adopt the Node whose providerID matches the NodeClaim.

Upstream's pkg/controllers/nodeclaim/lifecycle/registration.go. The Node gets the termination
finalizer (so deleting it drains first), an ownerReference to its NodeClaim, the NodeClaim's
labels and annotations, its taints and startup taints (unless ``karpenter.sh/do-not-sync-taints``
is ``"true"``), ``karpenter.sh/registered=true``, and loses the ``karpenter.sh/unregistered``
taint. The Node patch is a merge patch carrying the Node's resourceVersion, because it replaces
the finalizer and taint lists wholesale.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from karpenter_py.controllers.common import nodes_for
from karpenter_py.controllers.nodeclaim.common import (
    DONE,
    PhaseResult,
    get_node_raw,
    map_diff,
    nodeclaim_ref,
    nodepool_of,
    zone_of,
)
from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.events import WARNING, Reason
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODES
from karpenter_py.model.api.common import Taint as ApiTaint
from karpenter_py.model.api.meta import CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN
from karpenter_py.model.api.nodeclaim import (
    API_VERSION,
    CONDITION_LAUNCHED,
    CONDITION_REGISTERED,
    KIND,
    NodeClaim,
)
from karpenter_py.model.labels import (
    FINALIZER_TERMINATION,
    LABEL_DO_NOT_SYNC_TAINTS,
    LABEL_NODE_REGISTERED,
    TAINT_UNREGISTERED_KEY,
)

log = logging.getLogger("karpenter.nodeclaim.lifecycle")

RawTaint = dict[str, Any]


def taint_dict(t: ApiTaint) -> RawTaint:
    out: RawTaint = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def merge_taints(existing: Sequence[RawTaint], extra: Sequence[RawTaint]) -> list[RawTaint]:
    """``existing`` plus each taint of ``extra`` whose key+effect is not there yet (upstream's
    Taints.Merge: a taint matches another by key and effect, values may differ)."""
    out = [dict(t) for t in existing]
    have = {(t.get("key"), t.get("effect")) for t in out}
    for t in extra:
        if (t.get("key"), t.get("effect")) not in have:
            out.append(dict(t))
            have.add((t.get("key"), t.get("effect")))
    return out


def has_unregistered_taint(node: KubeObject) -> bool:
    return any(t.get("key") == TAINT_UNREGISTERED_KEY for t in node_taints(node))


def node_taints(node: KubeObject) -> list[RawTaint]:
    spec = node.get("spec")
    taints = spec.get("taints") if isinstance(spec, dict) else None
    return [t for t in taints if isinstance(t, dict)] if isinstance(taints, list) else []


def owner_reference(nc: NodeClaim) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": nc.name,
        "uid": nc.metadata.uid,
        "blockOwnerDeletion": True,
    }


def sync_node_patch(node: KubeObject, nc: NodeClaim) -> KubeObject | None:
    """The merge patch that registers ``node`` for ``nc``, or None when it already is."""
    meta = metadata(node)
    labels: dict[str, str] = dict(meta.get("labels") or {})
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    finalizers: list[str] = list(meta.get("finalizers") or [])
    owners: list[dict[str, Any]] = list(meta.get("ownerReferences") or [])
    taints = node_taints(node)

    new_labels = {**labels, **nc.metadata.labels, LABEL_NODE_REGISTERED: "true"}
    new_annotations = {**annotations, **nc.metadata.annotations}
    new_finalizers = (
        finalizers if FINALIZER_TERMINATION in finalizers else [*finalizers, FINALIZER_TERMINATION]
    )
    new_owners = owners
    if not any(o.get("uid") == nc.metadata.uid for o in owners):
        new_owners = [*owners, owner_reference(nc)]
    new_taints = taints
    if nc.metadata.labels.get(LABEL_DO_NOT_SYNC_TAINTS) != "true":
        new_taints = merge_taints(
            taints, [taint_dict(t) for t in (*nc.spec.taints, *nc.spec.startup_taints)]
        )
    new_taints = [t for t in new_taints if t.get("key") != TAINT_UNREGISTERED_KEY]

    patch_meta: dict[str, Any] = {}
    if new_labels != labels:
        patch_meta["labels"] = map_diff(labels, new_labels)
    if new_annotations != annotations:
        patch_meta["annotations"] = map_diff(annotations, new_annotations)
    if new_finalizers != finalizers:
        patch_meta["finalizers"] = new_finalizers
    if new_owners != owners:
        patch_meta["ownerReferences"] = new_owners
    patch: KubeObject = {}
    if new_taints != taints:
        patch["spec"] = {"taints": new_taints}
    if not patch_meta and not patch:
        return None
    patch_meta["resourceVersion"] = meta.get("resourceVersion")
    patch["metadata"] = patch_meta
    return patch


# Called with the Node's name before its first registration patch lifts the unregistered taint
# (the manager passes ``PodNominations.settle``: planned pods are nominated before the scheduler
# sees room on the node).
BeforeRegister = Callable[[str], Awaitable[None]]


class Registration:
    def __init__(self, deps: Deps, *, before_register: BeforeRegister | None = None) -> None:
        self.deps = deps
        self.before_register = before_register

    async def reconcile(self, nc: NodeClaim) -> PhaseResult:
        if not nc.status.is_true(CONDITION_LAUNCHED) or nc.status.is_true(CONDITION_REGISTERED):
            return DONE
        now = self.deps.clock.now()
        nodes = nodes_for(self.deps.cluster, nc)
        if not nodes:
            nc.status.set_condition(
                CONDITION_REGISTERED,
                CONDITION_UNKNOWN,
                now=now,
                reason="NodeNotFound",
                message="Node not registered with cluster",
            )
            return DONE  # the Node's arrival triggers us again
        if len(nodes) > 1:
            nc.status.set_condition(
                CONDITION_REGISTERED,
                CONDITION_FALSE,
                now=now,
                reason="MultipleNodesFound",
                message="Invariant violated, matched multiple nodes",
            )
            return DONE
        raw = await get_node_raw(self.deps.client, nodes[0].name)
        if raw is None:  # deleted since the cache saw it
            return PhaseResult(requeue_after=1.0)
        labels = metadata(raw).get("labels") or {}
        if LABEL_NODE_REGISTERED not in labels and not has_unregistered_taint(raw):
            # A node that booted without the taint may already run pods we never vetted.
            message = (
                f"Invariant violated, {TAINT_UNREGISTERED_KEY} taint must be present on "
                "Karpenter-managed nodes"
            )
            nc.status.set_condition(
                CONDITION_REGISTERED,
                CONDITION_FALSE,
                now=now,
                reason="UnregisteredTaintNotFound",
                message=message,
            )
            self.deps.recorder.record(
                nodeclaim_ref(nc), Reason.UNREGISTERED_TAINT_MISSING, message, event_type=WARNING
            )
            return PhaseResult(requeue_after=10.0)
        patch = sync_node_patch(raw, nc)
        if patch is not None and LABEL_NODE_REGISTERED not in labels and self.before_register:
            await self.before_register(nodes[0].name)
        if patch is not None:
            await self.deps.client.patch(NODES, nodes[0].name, patch, patch_type=PatchType.MERGE)
            if LABEL_NODE_REGISTERED not in labels:
                log.info(
                    "registered nodeclaim",
                    extra={"nodeclaim": nc.name, "node": nodes[0].name},
                )
                if self.deps.metrics is not None:
                    self.deps.metrics.nodes_created.labels(
                        nodepool=nodepool_of(nc), zone=zone_of(nc.metadata.labels)
                    ).inc()
        nc.status.node_name = nodes[0].name
        nc.status.set_condition(CONDITION_REGISTERED, CONDITION_TRUE, now=now)
        return DONE
