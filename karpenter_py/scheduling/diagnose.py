"""Why a pod could not be placed, in words a person can act on.

Runs only for pods that stayed unplaced, so it can afford to re-check every NodePool step by
step: taints, requirements, instance types matching them, resources, limits; then falls back to
the last error the solve loop recorded (usually topology).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from karpenter_py.model.quantity import Resources, format_resource
from karpenter_py.scheduling.instances import PoolIndex
from karpenter_py.scheduling.podstate import PodState
from karpenter_py.scheduling.requirements import WELL_KNOWN, compatible
from karpenter_py.scheduling.taints import describe, untolerated


def diagnose(
    st: PodState, indexes: Sequence[PoolIndex], limits: Mapping[str, Resources], last_error: str
) -> str:
    if not indexes:
        return "no NodePools can launch nodes (none are defined, or none has a ready NodeClass)"
    static = [_static_reason(st, idx, limits.get(idx.pool.name)) for idx in indexes]
    if all(r is not None for r in static):
        reasons = "; ".join(
            f'nodepool "{idx.pool.name}": {r}' for idx, r in zip(indexes, static, strict=True)
        )
        return f"incompatible with every nodepool: {reasons}{_relaxed(st)}"
    return f"{_summarise(last_error)}{_relaxed(st)}"


def _static_reason(st: PodState, idx: PoolIndex, remaining: Resources | None) -> str | None:
    if not idx.all:
        if not idx.rejected:
            return "has no usable instance types (none were given for it)"
        common = Counter(idx.rejected.values()).most_common(1)[0][0]
        return f"has no usable instance types ({len(idx.rejected)} rejected, e.g. {common})"
    taint = untolerated(idx.taints, st.tolerations)
    if taint is not None:
        return f"did not tolerate taint {describe(taint)}"
    why = compatible(idx.requirements, st.requirements, allow_undefined=WELL_KNOWN)
    if why is not None:
        return why
    reqs = idx.requirements & st.requirements
    matching = idx.reqs_mask(reqs) & idx.offering_mask(reqs)
    if not matching:
        wanted = ", ".join(str(r) for r in st.requirements.values()) or "none"
        return f"no instance type with an available offering matches the requirements ({wanted})"
    if not matching & idx.fit_mask(st.pod.requests):
        return _resources_reason(st, idx)
    if remaining is not None and not matching & idx.limits_mask(remaining):
        return "all instance types that fit would exceed the nodepool's limits"
    return None


def _resources_reason(st: PodState, idx: PoolIndex) -> str:
    overhead = _overhead_reason(idx)
    if overhead is not None:
        return overhead
    short = []
    for name, amount in sorted(st.pod.requests.items()):
        largest = idx.largest(name)
        if amount > largest:
            short.append(
                f"{name} {format_resource(name, amount)} > largest {format_resource(name, max(largest, 0))}"
            )
    detail = ", ".join(short) or "no single instance type fits every requested resource at once"
    return f"no instance type has enough resources after daemonset overhead ({detail})"


def _overhead_reason(idx: PoolIndex) -> str | None:
    """Why no type takes any pod when the daemonsets alone exceed every type's allocatable,
    per resource short (their least request against the largest allocatable); else None."""
    types = [i for i in range(len(idx.types)) if idx.all >> i & 1]
    if not types or idx.all & idx.overhead_fits:
        return None
    short = []
    for name in sorted({n for i in types for n in idx.daemon_requests[i]}):
        need = [idx.daemon_requests[i].get(name, 0) for i in types]
        have = [idx.types[i].allocatable.get(name, 0) for i in types]
        if all(h >= n for n, h in zip(need, have, strict=True)):
            continue
        short.append(
            f"{name} {format_resource(name, min(need))} > largest {format_resource(name, max(have))}"
        )
    return f"no instance type holds the daemonsets alone ({', '.join(short)})"


def _summarise(error: str) -> str:
    """The solve loop's last error names each pool; keep it, minus internal cache wording."""
    return error.replace("does not fit (unchanged since last check)", "does not fit")


def _relaxed(st: PodState) -> str:
    return f" (after relaxing preferences: {', '.join(st.relaxations)})" if st.relaxations else ""
