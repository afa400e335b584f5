"""Volume topology: where the persistent volumes a pod mounts let it run.

As upstream's VolumeTopology (``pkg/controllers/provisioning/scheduling/volumetopology.go``):

* a claim bound to a volume (``spec.volumeName``) contributes the volume's required node
  affinity, one alternative per OR-ed node selector term (``matchExpressions``; ``matchFields``
  are not read, as upstream);
* an unbound claim contributes its StorageClass's ``allowedTopologies``, one alternative per term
  (each ``matchLabelExpression`` an ``In``); a class without them does not constrain the pod;
* a pod with several such volumes gets the cross product, in order, keeping only combinations
  whose requirements intersect.

The solver adds the chosen alternative to the node's requirements only, never to the pod's own
affinity, so topology spread keeps counting the pod by what the pod itself asks for.

A pod is refused with a reason (upstream ignores it and logs why) when one of its claims is
missing, being deleted or Lost; when a bound claim's volume is missing or being deleted, or the
binding is not complete yet (no ``pv.kubernetes.io/bind-completed``: the kube-scheduler waits for
it too); when an unbound claim names no StorageClass, a missing one, or one that binds
Immediately (the claim must be bound first). Upstream keeps every combination when none of a
pod's volumes' alternatives intersect; the pod can then never be placed, so here it is refused
with that reason instead.

Deliberate difference: upstream drops ``kubernetes.io/hostname`` from a ``local`` or ``hostPath``
volume's affinity, so that a pod whose node goes away is not pinned to it. Here the pin is kept
by default (``pin_local_volumes``): such a pod can only run where its data is, which is what the
kube-scheduler enforces, so Karpenter must not launch a node the pod can never use. Callers that
want upstream's behaviour (a disruption simulation, say) pass ``pin_local_volumes=False``.

``require_bind_completed=False`` is for hand-written manifests (``karpenter-py plan``), where a
claim naming its volume stands for a bound one.
"""

from __future__ import annotations

from collections.abc import Iterable

from karpenter_py.model.core import Pod
from karpenter_py.model.labels import LABEL_HOSTNAME
from karpenter_py.model.storage import (
    ANNOTATION_BIND_COMPLETED,
    BINDING_IMMEDIATE,
    CLAIM_LOST,
    PersistentVolume,
    StorageObjects,
)
from karpenter_py.scheduling.inputs import VolumeAlternatives, VolumeFacts
from karpenter_py.scheduling.requirements import Requirements, intersects


def pod_volume_facts(
    pod: Pod,
    storage: StorageObjects,
    *,
    require_bind_completed: bool = True,
    pin_local_volumes: bool = True,
) -> VolumeFacts:
    """Where ``pod``'s volumes can attach, or why they rule the pod out."""
    alternatives: list[Requirements] | None = None  # None: no volume constrains the pod yet
    for claim in dict.fromkeys(n for n in pod.pvc_names if n):
        found = _claim_alternatives(
            pod.namespace, claim, storage, require_bind_completed, pin_local_volumes
        )
        if isinstance(found, str):
            return VolumeFacts(error=found)
        if not found:
            continue
        alternatives = _merge(alternatives or [Requirements()], found)
        if not alternatives:
            claims = ", ".join(f'"{n}"' for n in dict.fromkeys(pod.pvc_names) if n)
            return VolumeFacts(
                error=f"no node can attach all of its persistentvolumeclaims ({claims}): "
                "their topologies do not intersect"
            )
    if alternatives is None or all(not alt for alt in alternatives):
        return VolumeFacts()
    return VolumeFacts(alternatives=tuple(alt.to_selectors() for alt in alternatives))


def volume_inputs(
    pods: Iterable[Pod],
    storage: StorageObjects,
    *,
    require_bind_completed: bool = True,
    pin_local_volumes: bool = True,
) -> tuple[dict[str, VolumeAlternatives], dict[str, str]]:
    """``SolveInput.volume_requirements`` and ``volume_errors`` for ``pods`` (by pod key).
    Pods that mount no claim cost one attribute check."""
    requirements: dict[str, VolumeAlternatives] = {}
    errors: dict[str, str] = {}
    for pod in pods:
        if not pod.pvc_names:
            continue
        facts = pod_volume_facts(
            pod,
            storage,
            require_bind_completed=require_bind_completed,
            pin_local_volumes=pin_local_volumes,
        )
        if facts.error is not None:
            errors[pod.key] = facts.error
        elif facts.alternatives:
            requirements[pod.key] = facts.alternatives
    return requirements, errors


def _claim_alternatives(
    namespace: str,
    claim_name: str,
    storage: StorageObjects,
    require_bind_completed: bool,
    pin_local_volumes: bool,
) -> list[Requirements] | str:
    """One claim's alternatives ([] when it does not constrain the pod), or why it is unusable."""
    key = f"{namespace}/{claim_name}"
    pvc = storage.claims.get(key)
    what = f'persistentvolumeclaim "{key}"'
    if pvc is None:
        return f"{what} not found"
    if pvc.deleting:
        return f"{what} is being deleted"
    if pvc.phase == CLAIM_LOST:
        return f"{what} is Lost: its persistentvolume no longer exists"
    if pvc.volume_name:
        pv = storage.volumes.get(pvc.volume_name)
        if pv is None:
            return f'{what} is bound to persistentvolume "{pvc.volume_name}", which was not found'
        if pv.deleting:
            return f'{what} is bound to persistentvolume "{pv.name}", which is being deleted'
        if require_bind_completed and not pvc.bind_completed:
            return (
                f'{what} names persistentvolume "{pv.name}" but is not bound yet '
                f"(no {ANNOTATION_BIND_COMPLETED} annotation)"
            )
        return _volume_alternatives(pv, pin_local_volumes)
    class_name = pvc.storage_class_name
    if not class_name:
        return f"{what} is unbound and names no storage class"
    sc = storage.classes.get(class_name)
    if sc is None:
        return f'{what} uses storageclass "{class_name}", which was not found'
    if sc.volume_binding_mode == BINDING_IMMEDIATE:
        return (
            f'{what} is unbound and storageclass "{class_name}" binds Immediately: '
            "it must be bound before the pod can be scheduled"
        )
    return [Requirements.from_selectors(term) for term in sc.allowed_topologies if term]


def _volume_alternatives(pv: PersistentVolume, pin_local_volumes: bool) -> list[Requirements] | str:
    out: list[Requirements] = []
    for term in pv.node_affinity:
        kept = term
        if pv.local and not pin_local_volumes:
            kept = tuple(r for r in term if r.key != LABEL_HOSTNAME)
            if term and not kept:
                out.append(Requirements())  # a hostname-only term: anywhere
                continue
        if not kept:
            continue
        try:
            out.append(Requirements.from_selectors(kept))
        except ValueError as err:
            return f'persistentvolume "{pv.name}" has an invalid node affinity: {err}'
    return out


def _merge(current: list[Requirements], volume: list[Requirements]) -> list[Requirements]:
    """Every compatible (current, volume) pair, intersected, in order and without repeats."""
    out: list[Requirements] = []
    for have in current:
        for add in volume:
            if intersects(have, add) is not None:
                continue
            merged = have & add
            if merged not in out:
                out.append(merged)
    return out
