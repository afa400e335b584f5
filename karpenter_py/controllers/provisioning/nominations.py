"""``pod.nomination``: tell the kube-scheduler where each pod was planned.

A provisioning round plans every pending pod onto a NodeClaim it creates (or onto a node that
has room). The kube-scheduler knows nothing of that plan: when the planned nodes register it
binds pods by its own scoring (LeastAllocated spreads what the plan packs), so pods land off the
plan, others no longer fit where they were meant to go, and the next round buys more nodes.

Since Kubernetes 1.34 (KEP-5278, ``NominatedNodeNameForExpectation``, beta and on by default from
1.35) an external component may express an expected placement through a pending pod's
``status.nominatedNodeName``. The scheduler then tries that node first, and while the pod waits
it counts the pod's requests on that node when it places other pods of the same or lower
priority, so the planned room is kept for it. This controller writes that field:

* once the planned node exists as a Node (a name that does not exist yet buys nothing: the
  scheduler's first failed attempt at the pod clears it again, read in kube-scheduler 1.37's
  ``schedule_one.go``/preemption), and before registration lifts the node's
  ``karpenter.sh/unregistered`` taint (:meth:`PodNominations.settle`, the lifecycle's hook), so
  the nominations are in place when the scheduler first sees room there;
* moved when a later round plans the pod elsewhere, cleared when the plan goes (NodeClaim
  deleted, launch failed, the pod found no home) — only a value this controller wrote;
* never against the scheduler: a bound pod is left alone, and so is a nomination someone else
  wrote (a preemption, the scheduler's own at binding). When the scheduler clears one of ours
  (an attempt while the node was not ready for the pod), it is written again at most
  :data:`MAX_REWRITES` times.

The in-memory plans are ``Cluster.pod_plans`` (the provisioner's rounds write them); the pod
watch brings every written value back into the state, where it marks the node nominated for
disruption as any nomination does, so both agree by construction.

Only where the API server is 1.35 or newer (its emulated version when it emulates an older
one) and the ``NOMINATE_PODS`` setting is on; elsewhere nothing is written and rounds behave as
before. The patch goes to the ``pods/status`` subresource (RBAC: ``pods/status`` ``patch``) and
carries the pod's UID, so a pod recreated under the same name is never nominated by mistake.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from karpenter_py.controllers.runtime import Deps, QueueController, Result, Watch
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.errors import ConflictError, InvalidError, KubeError, NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODES, PODS
from karpenter_py.model.core import Pod
from karpenter_py.state.ingest import object_key

log = logging.getLogger("karpenter.pod.nomination")

MIN_VERSION: Final = (1, 35)  # NominatedNodeNameForExpectation beta, on by default
MAX_REWRITES: Final = 3
SETTLE_TIMEOUT: Final = 5.0  # registration never waits longer on nominations

_NUMBER = re.compile(r"\d+")


def server_version(info: Mapping[str, object]) -> tuple[int, int] | None:
    """(major, minor) of a ``/version`` answer: the emulated version when the API server
    emulates an older release (its feature gates are that release's), else its own. Minor
    versions like ``"35+"`` (some distributions) count as 35. None when unreadable."""
    for major_key, minor_key in (("emulationMajor", "emulationMinor"), ("major", "minor")):
        major = _NUMBER.match(str(info.get(major_key) or ""))
        minor = _NUMBER.match(str(info.get(minor_key) or ""))
        if major and minor:
            return int(major.group()), int(minor.group())
    return None


def supports_nominations(info: Mapping[str, object]) -> bool:
    version = server_version(info)
    return version is not None and version >= MIN_VERSION


class PodNominations(QueueController):
    """Its queue is keyed by pod key (``namespace/name``)."""

    name = "pod.nomination"
    default_workers = 10

    def __init__(self, deps: Deps, *, enabled: bool = True, workers: int | None = None) -> None:
        super().__init__(deps, workers=workers)
        self.enabled = enabled
        # Setting on and the API server supports it; decided once ``run`` asked the server.
        self.active = False
        self._written: dict[str, str] = {}  # pod key -> the node name this controller wrote
        self._rewrites: dict[str, int] = {}  # pod key -> writes after the scheduler cleared ours
        self.writes = {"set": 0, "moved": 0, "cleared": 0}

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(PODS, upsert=self.on_pod, delete=self.on_pod),
            Watch(NODES, upsert=self.on_node, delete=self.on_node_gone),
            Watch(NODECLAIMS, delete=self.on_nodeclaim_gone),
        )

    def planned(self, pod_keys: Iterable[str]) -> None:
        """A round planned (or gave up on) these pods (``RoundRunner.planned``)."""
        if self.active:
            for key in pod_keys:
                self.queue.add(key)

    def on_pod(self, obj: KubeObject) -> None:
        key = object_key(obj)
        if key in self._written or self.deps.cluster.pod_plans.target(key) is not None:
            self.queue.add(key)

    def on_node(self, obj: KubeObject) -> None:
        """A planned node exists now: its pods can be nominated to it."""
        if not self.active:
            return
        name = str(metadata(obj).get("name") or "")
        for key in self.deps.cluster.pods_planned_on(name):
            if self._written.get(key) != name:
                self.queue.add(key)

    def on_node_gone(self, obj: KubeObject) -> None:
        self._requeue_written(str(metadata(obj).get("name") or ""))

    def on_nodeclaim_gone(self, obj: KubeObject) -> None:
        status = obj.get("status")
        node_name = status.get("nodeName") if isinstance(status, dict) else None
        self._requeue_written(str(metadata(obj).get("name") or ""), str(node_name or ""))

    def _requeue_written(self, *names: str) -> None:
        """Pods nominated (by us) onto a node that is going: their nomination is taken back."""
        gone = {n for n in names if n}
        for key, node in self._written.items():
            if node in gone:
                self.queue.add(key)

    # ------------------------------------------------------------------ run
    async def run(self) -> None:
        await self.detect()
        log.info(
            "pod nominations " + ("on" if self.active else "off"),
            extra={"setting": self.enabled, "active": self.active},
        )
        await super().run()

    async def detect(self) -> bool:
        """Decide ``active``: the setting is on and the API server supports the feature."""
        self.active = self.enabled and await self._server_supports()
        return self.active

    async def _server_supports(self) -> bool:
        try:
            info = await self.deps.client.version()
        except KubeError as err:
            log.warning("cannot read the API server version; pod nominations off", exc_info=err)
            return False
        supported = supports_nominations(info)
        if not supported:
            log.info(
                "the API server predates nominatedNodeName for expected placements (1.35)",
                extra={"version": server_version(info)},
            )
        return supported

    async def settle(self, node_name: str) -> None:
        """Nominate every pod planned onto ``node_name`` now (the lifecycle calls this before it
        lifts the unregistered taint). Bounded and never raising: registration must go on."""
        if not self.active:
            return
        keys = self.deps.cluster.pods_planned_on(node_name)
        if not keys:
            return
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT), asyncio.TaskGroup() as tg:
                for key in keys:
                    tg.create_task(self.reconcile(key))
        except* Exception as group:
            log.warning(
                "nominating pods before registration failed; the queue retries",
                extra={"node": node_name, "errors": [str(e) for e in group.exceptions]},
            )
            for key in keys:
                self.queue.add(key)

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        if not self.active:
            return None
        pod = self.deps.cluster.pods.get(key)
        if pod is None or pod.node_name or pod.is_terminal() or pod.is_terminating():
            self._forget(key)  # gone, or bound: the scheduler's now, never ours to touch
            return None
        want = self.deps.cluster.planned_node(key)
        have = pod.nominated_node_name
        ours = self._written.get(key)
        if want:
            if have == want:
                self._written[key] = want
                return None
            if have and have != ours:
                return None  # someone else's nomination (a preemption): leave it
            if not have and ours == want:
                # The scheduler cleared ours after a failed attempt (the node not ready for the
                # pod yet): try again, a few times only.
                tries = self._rewrites.get(key, 0)
                if tries >= MAX_REWRITES:
                    return None
                self._rewrites[key] = tries + 1
            await self._write(pod, want, "moved" if have else "set")
            return None
        if ours and have == ours:
            await self._write(pod, None, "cleared")
        self._forget(key)
        return None

    async def _write(self, pod: Pod, node: str | None, action: str) -> None:
        patch: KubeObject = {
            "metadata": {"uid": pod.uid} if pod.uid else {},
            "status": {"nominatedNodeName": node},
        }
        try:
            await self.deps.client.patch(
                PODS,
                pod.name,
                patch,
                namespace=pod.namespace,
                patch_type=PatchType.MERGE,
                subresource="status",
            )
        except (NotFoundError, ConflictError, InvalidError):
            # Deleted, or recreated under the same name (the UID no longer matches).
            self._forget(pod.key)
            return
        self.writes[action] += 1
        if node is None:
            self._written.pop(pod.key, None)
        else:
            self._written[pod.key] = node
        log.debug("pod nomination", extra={"pod": pod.key, "node": node, "action": action})

    def _forget(self, key: str) -> None:
        self._written.pop(key, None)
        self._rewrites.pop(key, None)
