"""What the termination controllers share: their trigger (:class:`FinalizingController`), finalizer
removal, conditions.

(Controller packages never import each other, so the few helpers the nodeclaim package also has
are repeated here rather than shared.)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from karpenter_py.controllers.runtime import Deps, QueueController
from karpenter_py.kube.client import KubeClient, PatchType
from karpenter_py.kube.errors import ConflictError, NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, Resource
from karpenter_py.model.api.meta import ConditionStatus
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.labels import FINALIZER_TERMINATION

log = logging.getLogger("karpenter.termination")


async def remove_finalizer(
    client: KubeClient,
    resource: Resource,
    name: str,
    *,
    finalizers: Sequence[str],
    resource_version: str,
    finalizer: str,
) -> bool:
    """Drop ``finalizer`` with a merge patch carrying ``resource_version``: a concurrent change
    makes the apiserver answer 409 (ConflictError, retried quietly) instead of losing that
    change. (A JSON patch's failed ``test`` op is a 422 Invalid, which reads as a bug: an e2e
    run logged one as an ERROR.) Returns False when the object is already gone."""
    if finalizer not in finalizers:
        return True
    patch: dict[str, Any] = {
        "metadata": {
            "resourceVersion": resource_version,
            "finalizers": [f for f in finalizers if f != finalizer],
        }
    }
    try:
        await client.patch(resource, name, patch)
    except NotFoundError:
        return False
    return True


async def set_nodeclaim_condition(
    deps: Deps,
    nc: NodeClaim,
    type_: str,
    status: ConditionStatus,
    *,
    reason: str = "",
    message: str = "",
) -> NodeClaim:
    """Best effort: a termination progress marker for humans (kubectl get nodeclaim -o yaml).
    A lost race or a vanished NodeClaim is not worth failing the termination step for.

    Returns the NodeClaim as written (so a second condition in the same pass carries the new
    resourceVersion instead of conflicting with our own write), or ``nc`` when nothing was
    written."""
    work = nc.model_copy(deep=True)
    if not work.status.set_condition(
        type_, status, now=deps.clock.now(), reason=reason, message=message
    ):
        return nc
    patch = {
        "metadata": {"resourceVersion": nc.metadata.resource_version},
        "status": work.status.model_dump(mode="json", by_alias=True),
    }
    try:
        updated = await deps.client.patch(
            NODECLAIMS, nc.name, patch, patch_type=PatchType.MERGE, subresource="status"
        )
    except (ConflictError, NotFoundError):
        log.debug("condition not written", extra={"nodeclaim": nc.name, "condition": type_})
        return nc
    try:
        return NodeClaim.model_validate(updated)
    except ValidationError:
        return nc


def is_finalizing(obj: KubeObject) -> bool:
    """Deleted, and still held by our termination finalizer: what both termination controllers
    are woken for."""
    meta = metadata(obj)
    return bool(meta.get("deletionTimestamp")) and FINALIZER_TERMINATION in (
        meta.get("finalizers") or []
    )


class FinalizingController(QueueController):
    """A termination controller: woken for the objects being deleted that still hold our
    termination finalizer (keyed by their name)."""

    def enqueue_finalizing(self, obj: KubeObject) -> None:
        if is_finalizing(obj):
            self.enqueue(obj)
