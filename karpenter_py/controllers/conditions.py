"""Status conditions a controller owns: what it wants them to be, their ``Ready`` roll-up, and
applying them to the stored list, as operatorpkg does for upstream's controllers.

Shared by the controller packages that own an object's conditions (``nodepool.readiness``,
``nodeclass.status``, ``nodeoverlay``), which never import each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from karpenter_py.model.api.meta import (
    CONDITION_FALSE,
    CONDITION_READY,
    CONDITION_TRUE,
    Condition,
    ConditionStatus,
    set_condition,
)

REASON_UNHEALTHY_DEPENDENTS: Final = "UnhealthyDependents"


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
