"""``nodeclaim.podevents``: stamp ``status.lastPodEventTime`` when a pod comes to or leaves a node.

Upstream's pkg/controllers/nodeclaim/podevents/controller.go. A pod event is a pod (not owned by
a DaemonSet) that

* gets bound: ``spec.nodeName`` goes from empty to set (or a pod first seen already bound),
* becomes terminal: phase Succeeded or Failed,
* becomes terminating: it gets a ``deletionTimestamp``,
* or vanishes from a node while still active (a force delete the watch saw only as DELETED).

The NodeClaim behind the pod's node then gets ``status.lastPodEventTime`` = when the event was
seen, through a merge patch of the status subresource (one scalar field: no resourceVersion
needed, nothing to clobber). Consolidation measures ``consolidateAfter`` from that time.

Writes are de-duplicated as upstream does: at most one per NodeClaim every
:data:`DEDUPE_TIMEOUT` (10 s, shorter than consolidation's 15 s validation, so a command decided
meanwhile is still invalidated). Unlike upstream, an event inside the window is not dropped: the
NodeClaim is requeued for the end of the window and gets the latest event's time then.

Sinks deliver only the new object, so transitions are found against a small per-pod cache of
(node, terminal, terminating), filled silently by the first list: a restart does not restamp
every NodeClaim.

Woken by the pod reflector: its first list (:meth:`on_pods_listed`), upserts (:meth:`on_pod`) and
deletes (:meth:`on_pod_deleted`); see :meth:`NodeClaimPodEvents.watches`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Final

from karpenter_py.controllers.runtime import QueueController, Result, Watch
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, PODS
from karpenter_py.model.api.base import format_time

log = logging.getLogger("karpenter.nodeclaim.podevents")

DEDUPE_TIMEOUT: Final = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class PodState:
    """What a pod event is judged on."""

    node_name: str
    terminal: bool
    terminating: bool

    @property
    def active(self) -> bool:
        return not self.terminal and not self.terminating


def pod_state(obj: KubeObject) -> PodState:
    spec = obj.get("spec")
    status = obj.get("status")
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    phase = status.get("phase") if isinstance(status, dict) else None
    return PodState(
        node_name=node if isinstance(node, str) else "",
        terminal=phase in ("Succeeded", "Failed"),
        terminating=bool(metadata(obj).get("deletionTimestamp")),
    )


def is_daemonset_pod(obj: KubeObject) -> bool:
    """Owned by a DaemonSet (any owner reference, as upstream's IsOwnedBy checks)."""
    owners = metadata(obj).get("ownerReferences") or []
    return any(
        isinstance(o, dict) and o.get("kind") == "DaemonSet" and o.get("apiVersion") == "apps/v1"
        for o in owners
    )


def is_pod_event(previous: PodState | None, current: PodState) -> bool:
    """Did the pod just get bound, go terminal or start terminating on its node?"""
    if not current.node_name:
        return False
    if previous is None:
        return True  # first seen after the initial list, already on a node
    bound = not previous.node_name
    terminal = current.terminal and not previous.terminal
    terminating = current.terminating and not previous.terminating
    return bound or terminal or terminating


def is_departure(previous: PodState | None) -> bool:
    """A deleted pod that was still active on a node left it without a terminating update."""
    return previous is not None and bool(previous.node_name) and previous.active


def dedupe_remaining(last: datetime | None, now: datetime) -> float:
    """Seconds until the NodeClaim may be stamped again (0: now)."""
    if last is None:
        return 0.0
    left = (DEDUPE_TIMEOUT - (now - last)).total_seconds()
    return min(max(0.0, left), DEDUPE_TIMEOUT.total_seconds())


@dataclass(frozen=True, slots=True)
class _Write:
    value: datetime  # the lastPodEventTime written
    at: datetime  # when it was written (the dedupe window counts from here)


class NodeClaimPodEvents(QueueController):
    """Its queue is keyed by node name."""

    name = "nodeclaim.podevents"

    @cached_property
    def _pods(self) -> dict[str, PodState]:
        """ "ns/name" -> last state seen."""
        return {}

    @cached_property
    def _pending(self) -> dict[str, datetime]:
        """Node -> latest unstamped event time."""
        return {}

    @cached_property
    def _writes(self) -> dict[str, _Write]:
        """NodeClaim -> our last stamp."""
        return {}

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(
                PODS,
                upsert=self.on_pod,
                delete=self.on_pod_deleted,
                listed=self.on_pods_listed,
            ),
        )

    def on_pods_listed(self, objs: Sequence[KubeObject]) -> None:
        """The first list: remember every pod's state, stamp nothing."""
        for obj in objs:
            if not is_daemonset_pod(obj):
                self._pods[_key(obj)] = pod_state(obj)

    def on_pod(self, obj: KubeObject) -> None:
        if is_daemonset_pod(obj):
            return
        key = _key(obj)
        current = pod_state(obj)
        previous = self._pods.get(key)
        self._pods[key] = current
        if is_pod_event(previous, current):
            self._event(current.node_name)

    def on_pod_deleted(self, obj: KubeObject) -> None:
        previous = self._pods.pop(_key(obj), None)
        if is_departure(previous):
            assert previous is not None
            self._event(previous.node_name)

    def _event(self, node_name: str) -> None:
        self._pending[node_name] = self.deps.clock.now()
        self.queue.add(node_name)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        when = self._pending.get(key)
        if when is None:
            return None
        node = self.deps.cluster.nodes.get(key)
        nc = (
            self.deps.cluster.nodeclaim_for_provider_id(node.provider_id)
            if node is not None and node.provider_id
            else None
        )
        if nc is None:  # not a node of ours (or gone): nothing to stamp
            self._pending.pop(key, None)
            return None
        written = self._writes.get(nc.name)
        stamped = _latest(nc.status.last_pod_event_time, written.value if written else None)
        if stamped is not None and when <= stamped:
            self._pending.pop(key, None)  # already covered (second precision on the wire)
            return None
        now = self.deps.clock.now()
        last_write = _latest(nc.status.last_pod_event_time, written.at if written else None)
        wait = dedupe_remaining(last_write, now)
        if wait > 0:
            return Result(requeue_after=wait)
        when = self._pending.pop(key)  # the latest, should an event have come in meanwhile
        patch = {"status": {"lastPodEventTime": format_time(when)}}
        try:
            await self.deps.client.patch(
                NODECLAIMS, nc.name, patch, patch_type=PatchType.MERGE, subresource="status"
            )
        except NotFoundError:
            return None
        self._writes[nc.name] = _Write(value=when, at=now)
        self._prune()
        return None

    def _prune(self) -> None:
        if len(self._writes) > 2 * len(self.deps.cluster.nodeclaims) + 100:
            for gone in [n for n in self._writes if n not in self.deps.cluster.nodeclaims]:
                del self._writes[gone]


def _key(obj: KubeObject) -> str:
    meta = metadata(obj)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)
