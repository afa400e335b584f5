"""What disrupting a node costs, from its pods and its NodeClaim: upstream's pkg/utils/disruption
(v1.14). Disruption orders and prices candidates with it; static deprovisioning picks which of a
static NodePool's nodes go first with it.

* ``eviction_cost(pod)`` = clamp(1 + pod-deletion-cost/2^27 + priority/2^25, -10, 10);
* ``lifetime_remaining(nodeclaim, now)`` = the fraction of its ``expireAfter`` still ahead;
* ``disruption_cost(pods, nodeclaim, now)`` = Σ eviction costs * lifetime remaining.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Final

from karpenter_py.model.api.base import as_utc
from karpenter_py.model.api.common import parse_nillable_duration
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Pod

ANNOTATION_POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
EVICTION_COST_MIN: Final = -10.0
EVICTION_COST_MAX: Final = 10.0
_DELETION_COST_SCALE: Final = 2.0**27
_PRIORITY_SCALE: Final = 2.0**25
# A decimal number as strconv.ParseFloat reads it, minus inf/nan (which would poison sums).
_DECIMAL: Final = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")


def eviction_cost(pod: Pod) -> float:
    """What evicting ``pod`` costs: 1, plus pod-deletion-cost/2^27, plus priority/2^25,
    clamped to [-10, 10]. An unparsable pod-deletion-cost is ignored, as upstream does."""
    cost = 1.0
    raw = pod.annotations.get(ANNOTATION_POD_DELETION_COST)
    if raw is not None and _DECIMAL.match(raw) is not None:
        deletion_cost = float(raw)
        if math.isfinite(deletion_cost):
            cost += deletion_cost / _DELETION_COST_SCALE
    cost += pod.priority / _PRIORITY_SCALE
    return min(EVICTION_COST_MAX, max(EVICTION_COST_MIN, cost))


def lifetime_remaining(nodeclaim: NodeClaim, now: datetime) -> float:
    """Fraction of the NodeClaim's ``expireAfter`` still ahead, in [0, 1]; 1.0 for ``Never``
    or an unknown creation time."""
    try:
        lifetime = parse_nillable_duration(nodeclaim.spec.expire_after)
    except ValueError:
        return 1.0
    created = nodeclaim.metadata.creation_timestamp
    if lifetime is None or created is None:
        return 1.0
    if lifetime <= timedelta(0):
        return 0.0
    left = lifetime - (as_utc(now) - as_utc(created))
    return min(1.0, max(0.0, left / lifetime))


def disruption_cost(pods: Iterable[Pod], nodeclaim: NodeClaim, now: datetime) -> float:
    """Σ eviction costs of ``pods`` * the fraction of the NodeClaim's lifetime remaining (from
    its ``spec.expireAfter``, copied from the pool at launch): nodes near expiry are cheap to
    disrupt. Upstream passes all the node's pods, not just the reschedulable ones."""
    return sum(eviction_cost(p) for p in pods) * lifetime_remaining(nodeclaim, now)
