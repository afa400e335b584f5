"""Fill existing capacity as a whole, planned on request vectors.

The solver's loop takes pods largest first and puts each on the first existing node with room.
When a round's existing capacity is mostly NodeClaims in flight of different shapes (the plan of
an earlier round, after the kube-scheduler bound pods elsewhere than planned) and the pods
outnumber its room, first fit spends room on pods another node would have held as well: a large
pod on a NodeClaim sized for seventeen small ones takes the memory they needed, and the round
buys new nodes for pods the capacity in flight could have held.

``plan_fill`` plans instead node by node: each node, in the order given, takes the fill of the
pods still unplaced that is worth the most (``packing.best_fill``: exact where few fills
exist), a pod being worth what its requests would cost on a new node (``worth``). The plan is
kept only when it places more worth than first fit does on the same vectors, so rounds that
first fit serves as well are planned as before. The solver then places the planned pods for
real, each through ``try_add``, and the rest as it always does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from karpenter_py.scheduling.instances import PoolIndex
from karpenter_py.scheduling.packing import best_fill, resource_rate

Vector = tuple[int, ...]

# A fill must place at least this much more worth than first fit to replace it (float noise).
MIN_GAIN: Final = 1e-9


@dataclass(frozen=True, slots=True)
class Bin:
    """An existing node's room (a vector over the classes' resource names) and the classes of
    pods that may go on it (labels, taints)."""

    room: Vector
    allowed: frozenset[int]


def worth(
    requests: Mapping[str, int], indexes: Sequence[PoolIndex], room: Mapping[str, int]
) -> float:
    """What a pod's requests would cost on a new node: under each pool, its most expensive
    resource at the pool's cheapest rate for it (price per unit a type has); the cheapest pool.
    With no pool to buy from, the largest share it takes of ``room`` (the nodes' total room)."""
    best: float | None = None
    for idx in indexes:
        cost = max(
            (amount * resource_rate(idx, name) for name, amount in requests.items()), default=0.0
        )
        if cost > 0 and (best is None or cost < best):
            best = cost
    if best is not None:
        return best
    return max(
        (amount / room[name] for name, amount in requests.items() if room.get(name, 0) > 0),
        default=0.0,
    )


def first_fit_worth(
    counts: Sequence[int], vecs: Sequence[Vector], value: Sequence[float], bins: Sequence[Bin]
) -> float:
    """The worth first fit places: classes in order, each pod on the first bin that holds it."""
    rooms = [list(b.room) for b in bins]
    total = 0.0
    for c, (vec, n) in enumerate(zip(vecs, counts, strict=True)):
        left = n
        for b, room in zip(bins, rooms, strict=True):
            if not left:
                break
            if c not in b.allowed:
                continue
            k = _fits(room, vec, left)
            if k:
                for r, v in enumerate(vec):
                    room[r] -= v * k
                left -= k
                total += k * value[c]
    return total


def plan_fill(
    counts: Sequence[int], vecs: Sequence[Vector], value: Sequence[float], bins: Sequence[Bin]
) -> list[list[int]] | None:
    """Per bin, how many pods of each class it takes: bin by bin, the most valuable fill of the
    pods left. None when that places no more worth than ``first_fit_worth``."""
    left = list(counts)
    takes: list[list[int]] = []
    total = 0.0
    memo: dict[tuple[object, ...], list[int]] = {}
    for b in bins:
        live = [c for c in sorted(b.allowed) if left[c] and _fits(b.room, vecs[c], 1)]
        if not live:
            takes.append([0] * len(left))
            continue
        # A fill depends on the pods left only up to what the bin could hold of each class.
        key = (
            b.room,
            tuple(live),
            tuple(min(left[c], _fits(b.room, vecs[c], left[c])) for c in live),
        )
        take = memo.get(key)
        if take is None:
            take = best_fill(left, vecs, b.room, value, live)
            memo[key] = take
        for c, k in enumerate(take):
            left[c] -= k
            total += k * value[c]
        takes.append(take)
    if total <= first_fit_worth(counts, vecs, value, bins) * (1 + MIN_GAIN):
        return None
    return takes


def _fits(room: Sequence[int], vec: Vector, most: int) -> int:
    """How many pods of ``vec`` (at most ``most``) fit in ``room``."""
    k = most
    for free, v in zip(room, vec, strict=True):
        if v:
            k = min(k, free // v) if free >= 0 else 0
    return max(k, 0)
