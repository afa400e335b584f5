"""Host port conflicts: same port and protocol, and overlapping host IPs (0.0.0.0 overlaps all)."""

from __future__ import annotations

from collections.abc import Iterable

from karpenter_py.model.core import HostPort

_ANY = "0.0.0.0"


def conflict(used: Iterable[HostPort], wanted: Iterable[HostPort]) -> HostPort | None:
    """The first wanted port that collides with one in use, or None."""
    used = tuple(used)
    for w in wanted:
        for u in used:
            if (
                u.port == w.port
                and u.protocol == w.protocol
                and (u.ip == w.ip or _ANY in (u.ip, w.ip))
            ):
                return w
    return None
