"""After the drain: the minimum drain time, then waiting for the node's volumes to detach.

Upstream's pkg/controllers/node/termination/controller.go.

*Minimum drain time.* A pod the scheduler bound just before it saw the
``karpenter.sh/disrupted`` taint would otherwise land on a node already judged empty and die with
the instance. So the drain is complete only once the node has carried the taint for at least
:data:`MIN_DRAIN_TIME` (5 s) and no pod is left; the pod list is read again after the wait.

*Volume detachment.* Before the instance is deleted, the VolumeAttachments bound to the node must
be gone, so a StatefulSet's replacement pod can attach its volume elsewhere at once instead of
waiting out the attach-detach controller's forced detach. Only volumes of *drainable* pods count:
a pod that stays to the end (it tolerates the disrupted taint, is a mirror pod, or is stuck
terminating) never unmounts its volumes, so its claims are followed Pod -> PVC ->
``spec.volumeName`` and attachments of those PVs are left out, as are attachments with no
``spec.source.persistentVolumeName`` (inline volumes). Once the termination grace period has
elapsed, nothing waits any more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

from karpenter_py.controllers.termination.drain import is_drainable
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import PERSISTENTVOLUMECLAIMS, VOLUMEATTACHMENTS
from karpenter_py.model.core import Pod

MIN_DRAIN_TIME: Final = timedelta(seconds=5)


def min_drain_remaining(
    tainted_at: datetime | None, now: datetime, minimum: timedelta = MIN_DRAIN_TIME
) -> float:
    """Seconds the drain must still last (0: done). ``tainted_at`` None: not tainted yet, so
    the whole minimum is ahead."""
    if tainted_at is None:
        return minimum.total_seconds()
    return max(0.0, (minimum - (now - tainted_at)).total_seconds())


def grace_period_elapsed(deadline: datetime | None, now: datetime) -> bool:
    """The NodeClaim's termination grace period is over (never, without one)."""
    return deadline is not None and now >= deadline


def _spec(obj: KubeObject) -> dict[str, object]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def attachment_node(va: KubeObject) -> str:
    node = _spec(va).get("nodeName")
    return node if isinstance(node, str) else ""


def attachment_pv(va: KubeObject) -> str:
    """``spec.source.persistentVolumeName``, or "" for an inline volume."""
    source = _spec(va).get("source")
    pv = source.get("persistentVolumeName") if isinstance(source, dict) else None
    return pv if isinstance(pv, str) else ""


def attachments_on(attachments: Iterable[KubeObject], node_name: str) -> list[KubeObject]:
    """The attachments bound to ``node_name`` (the API has no field selector for this)."""
    return [va for va in attachments if attachment_node(va) == node_name]


def staying_claims(pods: Sequence[Pod], now: datetime) -> list[tuple[str, str]]:
    """``(namespace, claim)`` of every PVC mounted by a pod the drain leaves on the node."""
    claims = {(p.namespace, c) for p in pods if not is_drainable(p, now) for c in p.pvc_names if c}
    return sorted(claims)


def blocking_attachments(
    attachments: Iterable[KubeObject], staying_pvs: set[str]
) -> list[KubeObject]:
    """Attachments the node must wait for: those of a PV no staying pod uses."""
    out = []
    for va in attachments:
        pv = attachment_pv(va)
        if pv and pv not in staying_pvs:
            out.append(va)
    return out


async def pending_volume_attachments(
    client: KubeClient, pods: Sequence[Pod], node_name: str, now: datetime
) -> list[KubeObject]:
    """The node's VolumeAttachments that still block instance termination.

    One LIST of VolumeAttachments per call; a GET per claim of a staying pod only when the node
    has attachments at all (usually none: staying pods are mostly DaemonSets without claims).
    Claims are read from the API, not the informer cache: a claim bound a moment ago must not
    be missed, and the call is rare.
    """
    on_node = attachments_on((await client.list(VOLUMEATTACHMENTS)).items, node_name)
    if not on_node:
        return []
    staying_pvs: set[str] = set()
    for namespace, claim in staying_claims(pods, now):
        try:
            pvc = await client.get(PERSISTENTVOLUMECLAIMS, claim, namespace=namespace)
        except NotFoundError:
            continue
        volume = _spec(pvc).get("volumeName")
        if isinstance(volume, str) and volume:
            staying_pvs.add(volume)
    return blocking_attachments(on_node, staying_pvs)
