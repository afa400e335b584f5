"""What must hold once a chaos run has converged (issue 17's invariants), as pure functions.

Each check takes objects as the API lists them (plain dicts) and the cloud's instances, and
returns the :class:`Violation` s it finds, none when the invariant holds. Nothing here reads the
API or the clock: the runner (``benchmarks/chaos.py``) lists, passes ``now``, and reports.

An :class:`Instance` is what the cloud provider says exists: its provider ID and the NodeClaim
it was launched for (the kwok provider's Node name; AWS's ``karpenter.sh/nodeclaim`` tag).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from karpenter_py.model.labels import LABEL_NODEPOOL, TAINT_DISRUPTED_KEY

Obj = Mapping[str, Any]


class Instance(NamedTuple):
    provider_id: str
    nodeclaim: str


@dataclass(frozen=True)
class Violation:
    invariant: str  # one of the check names below
    subject: str  # the object or log line it is about
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.subject}: {self.detail}"


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _name(obj: Obj) -> str:
    meta = _meta(obj)
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _deleting(obj: Obj) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _provider_id_of_claim(claim: Obj) -> str:
    return str((claim.get("status") or {}).get("providerID") or "")


def _duplicates(values: Iterable[str]) -> list[tuple[str, int]]:
    return sorted((v, n) for v, n in Counter(values).items() if v and n > 1)


def duplicate_capacity(
    nodeclaims: Sequence[Obj], nodes: Sequence[Obj], instances: Sequence[Instance]
) -> list[Violation]:
    """Never two instances for one NodeClaim, never two Nodes for one instance or NodeClaim."""
    found = [
        Violation("two-instances-one-nodeclaim", claim, f"{n} instances")
        for claim, n in _duplicates(i.nodeclaim for i in instances)
    ]
    found += [
        Violation("two-nodes-one-instance", pid, f"{n} Nodes")
        for pid, n in _duplicates(
            str((node.get("spec") or {}).get("providerID") or "") for node in nodes
        )
    ]
    found += [
        Violation("two-nodeclaims-one-instance", pid, f"{n} NodeClaims")
        for pid, n in _duplicates(_provider_id_of_claim(c) for c in nodeclaims)
    ]
    return found


def orphans(
    nodeclaims: Sequence[Obj], nodes: Sequence[Obj], instances: Sequence[Instance]
) -> list[Violation]:
    """No instance, and no Node of one, without its NodeClaim (once converged, every launch has
    written its provider ID, so a claim is found by it)."""
    claimed = {_provider_id_of_claim(c) for c in nodeclaims} - {""}
    found = [
        Violation("instance-without-nodeclaim", i.provider_id, f"launched for {i.nodeclaim}")
        for i in sorted(instances)
        if i.provider_id not in claimed
    ]
    launched = {i.provider_id for i in instances}
    found += [
        Violation("node-without-nodeclaim", _name(node), str(pid))
        for node in nodes
        if (pid := (node.get("spec") or {}).get("providerID")) in launched and pid not in claimed
    ]
    return found


def _unschedulable(pod: Obj) -> bool:
    """The scheduler reported why the pod has no place (PodScheduled=False/Unschedulable)."""
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def pods_placed(pods: Sequence[Obj]) -> list[Violation]:
    """Every pod not being deleted runs, or is reported unschedulable with a reason."""
    return [
        Violation("pod-not-placed", _name(p), str((p.get("status") or {}).get("phase")))
        for p in pods
        if not _deleting(p) and not _running(p) and not _unschedulable(p)
    ]


def _daemonset_pod(pod: Obj) -> bool:
    owners = _meta(pod).get("ownerReferences") or []
    return any(o.get("controller") and o.get("kind") == "DaemonSet" for o in owners)


def empty_nodes(nodes: Sequence[Obj], pods: Sequence[Obj]) -> list[Violation]:
    """No managed Node without a workload pod while no pod is pending (with consolidation off,
    nothing removes a node bought for nobody, so one left empty was bought in vain; a pending
    pod may still be headed for it)."""
    live = [p for p in pods if not _deleting(p)]
    if any(not (p.get("spec") or {}).get("nodeName") for p in live):
        return []
    used = {p["spec"]["nodeName"] for p in live if not _daemonset_pod(p)}
    return [
        Violation("empty-node", _name(n), "no pod runs on it and none is pending")
        for n in nodes
        if LABEL_NODEPOOL in (_meta(n).get("labels") or {})
        and not _deleting(n)
        and _meta(n).get("name") not in used
    ]


def disrupted_taints(nodes: Sequence[Obj]) -> list[Violation]:
    """No ``karpenter.sh/disrupted`` taint left on a Node that is not being deleted."""
    return [
        Violation("stray-disrupted-taint", _name(n), str(t.get("effect")))
        for n in nodes
        if not _deleting(n)
        for t in (n.get("spec") or {}).get("taints") or []
        if t.get("key") == TAINT_DISRUPTED_KEY
    ]


def stuck_finalizers(objects: Sequence[Obj], now: datetime, grace: timedelta) -> list[Violation]:
    """No object still held by its finalizers ``grace`` after its deletion was asked for."""
    found = []
    for obj in objects:
        since = _meta(obj).get("deletionTimestamp")
        if since and now - datetime.fromisoformat(since) > grace:
            finalizers = ",".join(_meta(obj).get("finalizers") or [])
            kind = obj.get("kind", "")
            found.append(Violation("stuck-finalizer", f"{kind} {_name(obj)}", finalizers))
    return found


def _traceback(line: str) -> tuple[str, str] | None:
    """(subject, detail) when the controller's log line is an ERROR with a traceback, or a bare
    traceback (an exception that escaped the JSON logger)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return ("stderr", line.strip()) if line.startswith("Traceback") else None
    if not isinstance(entry, dict) or entry.get("level") != "ERROR":
        return None
    if "Traceback" not in str(entry.get("error", "")):
        return None
    subject = str(entry.get("controller") or entry.get("logger") or "")
    return subject, str(entry.get("message", ""))


def error_tracebacks(log_lines: Iterable[str]) -> list[Violation]:
    """No ERROR line with a traceback in the controller's JSON log: a transient fault is one
    WARN line (controllers.failures), so a traceback is a bug or a fault taken for one."""
    return [
        Violation("error-traceback", *found)
        for line in log_lines
        if (found := _traceback(line)) is not None
    ]


def call_rate(service: str, calls: int, seconds: float, bound: float) -> list[Violation]:
    """The controller made at most ``bound`` calls per minute to ``service`` over ``seconds``
    (a fault answered by retrying at once, without backing off, multiplies its calls)."""
    per_minute = calls * 60.0 / seconds if seconds > 0 else 0.0
    if per_minute <= bound:
        return []
    detail = f"{per_minute:.0f} calls/min over {seconds:.1f} s (bound {bound:.0f})"
    return [Violation("call-rate", service, detail)]


@dataclass(frozen=True)
class Observed:
    """One converged run, as listed: the cluster's objects, the cloud's instances and the
    controller's log."""

    nodeclaims: Sequence[Obj]
    nodes: Sequence[Obj]
    pods: Sequence[Obj]
    instances: Sequence[Instance]
    log_lines: Sequence[str]


def check(
    seen: Observed, now: datetime, *, finalizer_grace: timedelta, consolidation: bool = False
) -> list[Violation]:
    """Every invariant over one run (``empty_nodes`` only with consolidation off)."""
    return [
        *duplicate_capacity(seen.nodeclaims, seen.nodes, seen.instances),
        *orphans(seen.nodeclaims, seen.nodes, seen.instances),
        *pods_placed(seen.pods),
        *([] if consolidation else empty_nodes(seen.nodes, seen.pods)),
        *disrupted_taints(seen.nodes),
        *stuck_finalizers([*seen.nodeclaims, *seen.nodes, *seen.pods], now, finalizer_grace),
        *error_tracebacks(seen.log_lines),
    ]
