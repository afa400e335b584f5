"""Taints and tolerations as the scheduler applies them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from karpenter_py.model.core import EFFECT_PREFER_NO_SCHEDULE, Taint, Toleration
from karpenter_py.model.labels import (
    EPHEMERAL_TAINT_PREFIXES,
    TAINT_EXTERNAL_CLOUD_PROVIDER,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_UNREACHABLE,
    TAINT_UNREGISTERED_KEY,
)

PREFER_NO_SCHEDULE_TOLERATION: Final = Toleration(
    operator="Exists", effect=EFFECT_PREFER_NO_SCHEDULE
)

_EPHEMERAL_KEYS: Final = frozenset(
    {
        TAINT_NODE_NOT_READY,
        TAINT_NODE_UNREACHABLE,
        TAINT_EXTERNAL_CLOUD_PROVIDER,
        TAINT_UNREGISTERED_KEY,
    }
)


def untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first taint no toleration matches, or None. Every effect counts, PreferNoSchedule too:
    Karpenter only relaxes that by adding an explicit toleration (the last preference relaxation)."""
    for taint in taints:
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def is_ephemeral(taint: Taint) -> bool:
    """Taints a node carries while it boots; ignored on managed nodes that are not initialized."""
    return taint.key in _EPHEMERAL_KEYS or taint.key.startswith(EPHEMERAL_TAINT_PREFIXES)


def describe(taint: Taint) -> str:
    return (
        f"{taint.key}={taint.value}:{taint.effect}"
        if taint.value
        else f"{taint.key}:{taint.effect}"
    )
