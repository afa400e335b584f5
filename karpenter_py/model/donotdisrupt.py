"""The pod annotation ``karpenter.sh/do-not-disrupt``: ``"true"`` or a duration (upstream's
IsDoNotDisruptActive), read the same way by disruption (which nodes are candidates) and by
termination (which pods are evicted).

A duration (a Go duration such as ``"30m"``, positive) protects the pod until it has run that
long, counted from ``status.startTime``; a pod without one (not started yet) stays protected, as
upstream fails safe. Any other value protects nothing: the annotation is ignored, and the
disruption controller says so with an ``InvalidDoNotDisruptAnnotation`` event on the pod.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from karpenter_py.model.api.base import as_utc, parse_time
from karpenter_py.model.api.common import parse_duration
from karpenter_py.model.core import Pod
from karpenter_py.model.labels import ANNOTATION_DO_NOT_DISRUPT

INVALID_DO_NOT_DISRUPT: Final = "InvalidDoNotDisruptAnnotation"  # upstream's event reason


def do_not_disrupt_duration(value: str) -> timedelta | None:
    """The protection a duration value grants; None for ``"true"`` and for invalid values."""
    if value == "true":
        return None
    try:
        duration = parse_duration(value)
    except ValueError:
        return None
    return duration if duration > timedelta(0) else None


def do_not_disrupt_problem(pod: Pod) -> str | None:
    """Why the pod's annotation is ignored (the event message), or None when it is absent,
    ``"true"`` or a positive duration."""
    value = pod.annotations.get(ANNOTATION_DO_NOT_DISRUPT)
    if value is None or value == "true" or do_not_disrupt_duration(value) is not None:
        return None
    return (
        f"Invalid {ANNOTATION_DO_NOT_DISRUPT} annotation value {value!r}, ignoring annotation. "
        "Use 'true' or a duration like '5m', '1h'"
    )


def do_not_disrupt_until(pod: Pod) -> datetime | None:
    """When a duration's protection ends (start time + duration); None when the value is not a
    duration or the pod has no usable start time."""
    value = pod.annotations.get(ANNOTATION_DO_NOT_DISRUPT)
    duration = do_not_disrupt_duration(value) if value is not None else None
    started = parse_time(pod.start_time)
    if duration is None or started is None:
        return None
    return started + duration


def do_not_disrupt_active(pod: Pod, now: datetime) -> bool:
    """Whether the annotation protects the pod at ``now``."""
    value = pod.annotations.get(ANNOTATION_DO_NOT_DISRUPT)
    if value is None:
        return False
    if value == "true":
        return True
    if do_not_disrupt_duration(value) is None:
        return False
    until = do_not_disrupt_until(pod)
    return until is None or as_utc(now) < until
