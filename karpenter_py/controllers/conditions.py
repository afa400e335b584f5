"""Status conditions a controller owns: what it wants them to be, their ``Ready`` roll-up, and
applying them to the stored list, as operatorpkg does for upstream's controllers.

Shared by the controller packages that own an object's conditions (``nodepool.readiness``,
``nodeclass.status``, ``nodeoverlay``), which never import each other. So is what they do with
an object that does not parse (:func:`report_unreadable`): every decision leaves it out, and the
object says why.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from pydantic import ValidationError

from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.events import WARNING, object_ref
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import Resource
from karpenter_py.model.api.meta import (
    CONDITION_FALSE,
    CONDITION_READY,
    CONDITION_TRUE,
    Condition,
    ConditionStatus,
    set_condition,
)

log = logging.getLogger("karpenter.conditions")

REASON_UNHEALTHY_DEPENDENTS: Final = "UnhealthyDependents"
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
MAX_MESSAGE: Final = 32768  # metav1.Condition.message limit


@dataclass(frozen=True, slots=True)
class DesiredCondition:
    type: str
    status: ConditionStatus
    reason: str
    message: str = ""


def ready_rollup(dependents: Sequence[DesiredCondition]) -> DesiredCondition:
    """``Ready``: True (reason ``Ready``) when every dependent is True, else False with reason
    ``UnhealthyDependents`` and the others listed (``NodeClassReady=False, ...``)."""
    unhealthy = [c for c in dependents if c.status != CONDITION_TRUE]
    if not unhealthy:
        return DesiredCondition(CONDITION_READY, CONDITION_TRUE, CONDITION_READY)
    return DesiredCondition(
        CONDITION_READY,
        CONDITION_FALSE,
        REASON_UNHEALTHY_DEPENDENTS,
        ", ".join(f"{c.type}={c.status}" for c in unhealthy),
    )


def set_conditions(
    current: Sequence[Condition],
    desired: Iterable[DesiredCondition],
    *,
    now: datetime,
    generation: int | None,
) -> tuple[list[Condition], bool]:
    """A copy of ``current`` with ``desired`` set (other types kept, order kept, new ones
    appended; ``lastTransitionTime`` moves on flips only), and whether anything changed."""
    out = [c.model_copy() for c in current]
    changed = False
    for d in desired:
        changed |= set_condition(
            out,
            d.type,
            d.status,
            now=now,
            reason=d.reason,
            message=d.message,
            observed_generation=generation,
        )
    return out, changed


def conditions_patch(resource_version: str, conditions: Sequence[Condition]) -> dict[str, object]:
    """A status merge patch replacing ``status.conditions`` only, conditional on the
    resourceVersion the list was computed from (when known)."""
    patch: dict[str, object] = {
        "status": {"conditions": [c.model_dump(mode="json", by_alias=True) for c in conditions]}
    }
    if resource_version:
        patch["metadata"] = {"resourceVersion": resource_version}
    return patch


def validation_message(err: ValidationError) -> str:
    """Pydantic's errors as one line each (``loc: message``), without URLs and input echoes."""
    lines = []
    for e in err.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(lines)[:MAX_MESSAGE]


def raw_conditions(obj: KubeObject) -> list[Condition]:
    """The parseable ``status.conditions`` of a raw object."""
    status = obj.get("status")
    items = status.get("conditions") if isinstance(status, dict) else None
    out = []
    for item in items if isinstance(items, list) else []:
        try:
            out.append(Condition.model_validate(item))
        except ValidationError:
            continue
    return out


def validation_failed(reason: str, error: str) -> tuple[DesiredCondition, DesiredCondition]:
    """``ValidationSucceeded`` False with ``reason`` and the error, and its ``Ready`` roll-up."""
    validation = DesiredCondition(
        CONDITION_VALIDATION_SUCCEEDED, CONDITION_FALSE, reason, error[:MAX_MESSAGE]
    )
    return validation, ready_rollup((validation,))


async def report_unreadable(
    deps: Deps,
    resource: Resource,
    raw: KubeObject,
    error: str,
    *,
    reason: str,
    desired: Sequence[DesiredCondition] | None = None,
) -> bool:
    """Say on an object that does not parse (and so is left out of every decision) why.

    ``desired`` (default :func:`validation_failed`) is written over the stored conditions with a
    status merge patch guarded by the resourceVersion read; nothing when they already say so.
    A Warning event with ``reason`` and the error, and a warning log line, go out the first time
    the error shows (the stored ``ValidationSucceeded`` does not carry it yet). True when
    something was written."""
    meta = metadata(raw)
    name = str(meta.get("name") or "")
    current = raw_conditions(raw)
    message = error[:MAX_MESSAGE]
    stored = next((c for c in current if c.type == CONDITION_VALIDATION_SUCCEEDED), None)
    if stored is None or (stored.status, stored.message) != (CONDITION_FALSE, message):
        log.warning(
            "object cannot be read; it is skipped",
            extra={"kind": resource.kind, "object": name, "error": error},
        )
        uid = meta.get("uid")
        involved = object_ref(
            resource.api_version, resource.kind, name, uid=uid if isinstance(uid, str) else None
        )
        deps.recorder.record(involved, reason, message, event_type=WARNING)
    generation = meta.get("generation")
    conditions, changed = set_conditions(
        current,
        desired if desired is not None else validation_failed(reason, error),
        now=deps.clock.now(),
        generation=generation if isinstance(generation, int) else None,
    )
    if not changed:
        return False
    try:
        await deps.client.patch(
            resource,
            name,
            conditions_patch(str(meta.get("resourceVersion") or ""), conditions),
            patch_type=PatchType.MERGE,
            subresource="status",
        )
    except NotFoundError:
        return False
    return True
