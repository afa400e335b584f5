"""``pod.nomination``: tell the kube-scheduler where each pod was planned.

A provisioning round plans every pending pod onto a NodeClaim it creates (or onto a node that
has room). The kube-scheduler knows nothing of that plan: when the planned nodes register it
binds pods by its own scoring (LeastAllocated spreads what the plan packs), so pods land off the
plan, others no longer fit where they were meant to go, and the next round buys more nodes.

Since Kubernetes 1.34 (KEP-5278, ``NominatedNodeNameForExpectation``, beta and on by default from
1.35) an external component may express an expected placement through a pending pod's
``status.nominatedNodeName``. The scheduler then tries that node first, and while the pod waits
it counts the pod's requests on that node when it places other pods of the same or lower
priority, so the planned room is kept for it. What kube-scheduler 1.37 does with it
(``schedule_one.go``, ``framework/preemption``), and so what this controller does:

* A nomination onto a node where the pod cannot bind yet is cleared by the scheduler's next
  failed attempt at the pod, and every node that opens triggers one for nearly every waiting
  pod (a 10,000-pod scale-out spent its API server on those clears when pods were nominated as
  soon as their Node existed). So the nominations onto a node are written at the last moment:
  registration calls :meth:`PodNominations.settle` just before it lifts the node's
  ``karpenter.sh/unregistered`` taint; settle writes every planned pod's nomination, waits to
  see them come back on the pod watch, and then the taint goes. Lifting it is the event that
  makes the scheduler try those pods, with their room already kept for them.
* A nomination onto a node that is open already is never written: the scheduler does not try a
  waiting pod again because its nomination changed, and a nominated pod is not provisionable,
  so it could wait for minutes on a node that has no room for it after all.
* One of ours still unbound :data:`GRACE` seconds (5 minutes) after its node opened is taken
  back, and so is one whose plan went (NodeClaim deleted, launch failed, the pod found no home, a later round
  planned it elsewhere): the pod is provisionable again. Only a value this controller wrote is
  ever cleared.
* Never against the scheduler: a bound pod is left alone, and so is a nomination someone else
  wrote (a preemption, the scheduler's own while binding).

The in-memory plans are ``Cluster.pod_plans`` (the provisioner's rounds write them); the pod
watch brings every written value back into the state, where the pod counts on its node in every
snapshot and marks the node nominated for disruption, as any nomination does, so both agree by
construction.

Not while more than :data:`MAX_WAITING` pods wait for nodes (see there). Only where the API
server is 1.35 or newer (its emulated version when it emulates an older
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
from karpenter_py.model.labels import TAINT_UNREGISTERED_KEY
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import object_key

log = logging.getLogger("karpenter.pod.nomination")

MIN_VERSION: Final = (1, 35)  # NominatedNodeNameForExpectation beta, on by default
# Seconds a nomination of ours may stay unbound once its node is open: a safety net only (the
# scheduler tries the pod as the node opens and clears the nomination itself when the pod does
# not fit), as long as the scheduler's own flush of waiting pods; 15 s cleared thousands of
# nominations a 10,000-pod scale-out was still working through, each one a write.
GRACE: Final = 300.0
# No nominations while more pods than this wait for nodes. In a 10,000-pod scale-out on this
# project's 2-core test machine, nominating every planned pod stalled binding (264 pods bound
# 220 s in, against 2,286 at 170 s without) while at 1,000 pods it kept the cluster near its plan;
# the cause (the scheduler's per-node work for nominated pods against a deep queue, or the
# writes' share of the controller's API budget) is not pinned down, so a deep backlog is left
# to the scheduler as before, and nominations resume as it drains.
MAX_WAITING: Final = 2000
SETTLE_TIMEOUT: Final = 5.0  # registration never waits longer on the writes
SETTLE_PASSES: Final = 3  # write, see them back, write again what an attempt cleared meanwhile
ECHO_TIMEOUT: Final = 2.0  # nor longer than this on seeing them come back

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

    def __init__(
        self,
        deps: Deps,
        *,
        enabled: bool = True,
        grace: float = GRACE,
        max_waiting: int = MAX_WAITING,
        echo_timeout: float = ECHO_TIMEOUT,
        workers: int | None = None,
    ) -> None:
        super().__init__(deps, workers=workers)
        self.enabled = enabled
        self.grace = grace
        self.max_waiting = max_waiting
        self.skipped = 0  # nodes opened without nominations, the backlog being too deep
        self.echo_timeout = echo_timeout
        # Set whenever the pod watch delivers a pod this controller nominated (``settle`` waits
        # for its writes to come back before the node opens).
        self._echo = asyncio.Event()
        self._seen: set[str] = set()  # pods whose watch showed the nomination last written
        # Setting on and the API server supports it; decided once ``run`` asked the server.
        self.active = False
        self._written: dict[str, str] = {}  # pod key -> the node name this controller wrote
        # pod key -> when ours was written (monotonic); its GRACE counts from the later of this
        # and the moment settle ran, which is just before the node opens.
        self._opened: dict[str, float] = {}
        self.writes = {"set": 0, "moved": 0, "cleared": 0}

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(PODS, upsert=self.on_pod, delete=self.on_pod),
            Watch(NODES, delete=self.on_node_gone),
            Watch(NODECLAIMS, delete=self.on_nodeclaim_gone),
        )

    def planned(self, pod_keys: Iterable[str]) -> None:
        """A round planned (or gave up on) these pods (``RoundRunner.planned``): a nomination of
        ours that the new plan no longer holds is taken back."""
        # Only pods carrying one of ours can have anything to take back (a round plans thousands).
        for key in pod_keys:
            if key in self._written:
                self.queue.add(key)

    def on_pod(self, obj: KubeObject) -> None:
        key = object_key(obj)
        written = self._written.get(key)
        if written is not None:
            status = obj.get("status")
            if isinstance(status, dict) and status.get("nominatedNodeName") == written:
                self._seen.add(key)
                self._echo.set()
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
        """Nominate every pod planned onto ``node_name`` now, before registration lifts its
        unregistered taint (the lifecycle's hook). Bounded and never raising: registration must
        go on; what failed is retried by the queue."""
        if not self.active or _open(self.deps.cluster, node_name):
            return
        if self.deps.cluster.waiting_pods() > self.max_waiting:
            self.skipped += 1
            return
        keys = self.deps.cluster.pods_planned_on(node_name)
        if not keys:
            return
        for _ in range(SETTLE_PASSES):
            if not await self._write_all(node_name, keys):
                break
            await self._echoed(node_name, keys)
            # The scheduler clears a nomination at its next failed attempt at the pod, and every
            # other node that opens meanwhile makes one: write those again before this one opens.
            if not self._cleared(node_name, keys):
                break
        opens = self.deps.clock.monotonic()
        for key in keys:  # each is taken back if still unbound GRACE after the node opens
            if key in self._written:
                self._opened[key] = opens
            self.queue.add_after(key, self.grace)

    async def _write_all(self, node_name: str, keys: Sequence[str]) -> bool:
        """Write the nominations of ``keys`` onto ``node_name`` that are not there; False when
        a write failed (the queue retries those: it takes back what no longer holds)."""
        failed = False
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT), asyncio.TaskGroup() as tg:
                for key in keys:
                    tg.create_task(self._nominate(key, node_name))
        except* Exception as group:
            failed = True
            log.warning(
                "nominating pods before registration failed",
                extra={"node": node_name, "errors": [repr(e) for e in group.exceptions]},
            )
            for key in keys:
                self.queue.add(key)
        return not failed

    def _cleared(self, node_name: str, keys: Sequence[str]) -> bool:
        """Did an attempt clear one of ours onto ``node_name`` after the watch showed it?"""
        cluster = self.deps.cluster
        return any(
            key in self._seen
            and self._written.get(key) == node_name
            and (pod := cluster.pods.get(key)) is not None
            and not pod.node_name
            and not pod.nominated_node_name
            for key in keys
        )

    async def _echoed(self, node_name: str, keys: Sequence[str]) -> None:
        """Wait (at most ``echo_timeout``) until the pod watch shows every nomination written
        onto ``node_name``. The kube-scheduler reads pods and nodes through separate informers;
        the node opening first would let it fill the room with other pods before it knows
        whose room it is. Seeing our own writes come back is a close stand-in for its pod
        informer having them (the same API server, the same kind of watch)."""
        cluster = self.deps.cluster

        def unseen() -> bool:
            for key in keys:
                pod = cluster.pods.get(key)
                if (
                    self._written.get(key) == node_name
                    and key not in self._seen
                    and pod is not None
                    and not pod.node_name
                ):
                    return True
            return False

        try:
            async with asyncio.timeout(self.echo_timeout):
                while unseen():
                    self._echo.clear()
                    await self._echo.wait()
        except TimeoutError:
            log.debug("nominations not seen back before registration", extra={"node": node_name})

    async def _nominate(self, key: str, node_name: str) -> None:
        pod = self._waiting(key)
        if pod is None or pod.nominated_node_name == node_name:
            return
        if pod.nominated_node_name and pod.nominated_node_name != self._written.get(key):
            return  # someone else's nomination (a preemption): leave it
        await self._write(pod, node_name, "moved" if pod.nominated_node_name else "set")

    def _waiting(self, key: str) -> Pod | None:
        """The pod while it waits for a node; None (and forgotten) once gone, bound or ending:
        then it is the scheduler's, never ours to touch."""
        pod = self.deps.cluster.pods.get(key)
        if pod is None or pod.node_name or pod.is_terminal() or pod.is_terminating():
            self._forget(key)
            return None
        return pod

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        """Take a nomination of ours back once it no longer holds: its plan went or moved, or
        its node has been open for ``grace`` seconds without the pod binding there. Writing is
        ``settle``'s alone (see the module docstring)."""
        if not self.active:
            return None
        pod = self._waiting(key)
        if pod is None:
            return None
        ours = self._written.get(key)
        if not ours or pod.nominated_node_name != ours:
            self._forget(key)  # cleared by the scheduler, or someone else's: not ours to touch
            return None
        cluster = self.deps.cluster
        if cluster.planned_node(key) == ours:
            if not _open(cluster, ours):
                return None  # the node opens later; its settle counts the grace from there
            left = self.grace - (self.deps.clock.monotonic() - self._opened.get(key, 0.0))
            if left > 0:
                return Result(requeue_after=left)
        await self._write(pod, None, "cleared")
        self._forget(key)
        return None

    async def _write(self, pod: Pod, node: str | None, action: str) -> None:
        self._seen.discard(pod.key)
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
            self._opened[pod.key] = self.deps.clock.monotonic()
        log.debug("pod nomination", extra={"pod": pod.key, "node": node, "action": action})

    def _forget(self, key: str) -> None:
        self._written.pop(key, None)
        self._opened.pop(key, None)
        self._seen.discard(key)


def _open(cluster: Cluster, node_name: str) -> bool:
    """The Node can take pods as far as registration goes: it no longer carries
    ``karpenter.sh/unregistered`` (a node Karpenter does not manage never did)."""
    node = cluster.nodes.get(node_name)
    return node is None or not any(t.key == TAINT_UNREGISTERED_KEY for t in node.taints)
