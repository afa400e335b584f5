"""Metrics read from the cluster model, and the provisioner's per-round metrics.

:func:`run_state_metrics` runs on every replica (not leader-gated: a standby's cache is as warm
as the leader's) and every ``interval`` seconds refreshes, as upstream's metrics controllers do:

* ``karpenter_cluster_state_synced`` / ``_node_count`` / ``_unsynced_time_seconds``;
* ``karpenter_nodepools_usage`` (from ``status.resources``, which the NodePool counter keeps) and
  ``karpenter_nodepools_limit`` (``spec.limits``), per nodepool and resource type;
* ``karpenter_pods_state``: one series per pod with upstream's labels, the node's labels joined
  in. A pod's label values are recomputed only when its Pod or Node object was replaced, and only
  series that changed are written or removed, so a pass over 10k unchanged pods allocates
  nothing per pod. Series of deleted pods disappear on the next pass.

:class:`SchedulingMetrics` is the provisioner's ``observe`` hook (``karpenter_scheduler_*`` and
``karpenter_pods_scheduling_decision_duration_seconds``); the manager tells it when a
provisionable pod is first seen (:meth:`SchedulingMetrics.pod_seen`, through its pod watch).

Not derivable here: ``karpenter_pods_bound_duration_seconds`` needs the PodScheduled condition's
transition time, which the slim Pod view does not keep.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Final

from karpenter_py.aio.clock import Clock
from karpenter_py.controllers.provisioning.provisioner import RoundResult
from karpenter_py.controllers.runtime import Watch
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import PODS
from karpenter_py.manager.informermetrics import InformerMetrics
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Node, Pod
from karpenter_py.model.labels import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
    RESOURCE_CPU,
)
from karpenter_py.model.quantity import QuantityError, parse_resource
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import object_key
from karpenter_py.state.snapshot import is_provisionable

log = logging.getLogger("karpenter.metrics")

PROVISIONER: Final = "provisioner"

# ownerReferences[].apiVersion of the usual pod owners, for owner references written without one
# (hand-built pods in tests and manifests); the API always records it.
_OWNER_API_VERSIONS: Final = {
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "ReplicationController": "v1",
    "Node": "v1",
}

Labels = tuple[str, ...]
_PodEntry = tuple[Pod, Node | None, Labels]  # the objects the labels were computed from


def owner_link(pod: Pod) -> str:
    """Upstream's hand-built selfLink of the pod's first owner: ``/apis/<apiVersion>/namespaces/
    <ns>/<kind>s/<name>`` (lower-case kind), or "" without owners."""
    if not pod.owners:
        return ""
    owner = pod.owners[0]
    version = owner.api_version or _OWNER_API_VERSIONS.get(owner.kind, "")
    return f"/apis/{version}/namespaces/{pod.namespace}/{owner.kind.lower()}s/{owner.name}"


def pod_state_labels(pod: Pod, node: Node | None) -> Labels:
    """Label values of ``karpenter_pods_state``, in ``POD_STATE_LABELS`` order."""
    nl = node.labels if node is not None else {}
    return (
        pod.name,
        pod.namespace,
        owner_link(pod),
        pod.node_name,
        "true" if pod.node_name else "false",
        nl.get(LABEL_NODEPOOL, ""),
        nl.get(LABEL_TOPOLOGY_ZONE, ""),
        nl.get(LABEL_ARCH, ""),
        nl.get(LABEL_CAPACITY_TYPE, ""),
        nl.get(LABEL_INSTANCE_TYPE, ""),
        pod.phase,
    )


def resource_type(name: str) -> str:
    """Upstream's ``resource_type`` label: lower case, dashes as underscores."""
    return name.lower().replace("-", "_")


def resource_value(name: str, quantity: str | int) -> float:
    """cpu in cores (milli-precision), everything else in its base unit rounded up."""
    amount = parse_resource(name, quantity)
    return amount / 1000 if name == RESOURCE_CPU else float(amount)


def nodepool_series(np: NodePool) -> tuple[dict[Labels, float], dict[Labels, float]]:
    """(usage, limit) series of one NodePool, keyed by (resource_type, nodepool)."""
    name = np.metadata.name or ""
    usage: dict[Labels, float] = {}
    limit: dict[Labels, float] = {}
    for out, resources in ((usage, np.status.resources), (limit, np.spec.limits or {})):
        for resource, quantity in resources.items():
            try:
                out[(resource_type(resource), name)] = resource_value(resource, quantity)
            except QuantityError:
                continue
    return usage, limit


class StateMetrics:
    """One :meth:`update` per pass; keeps what it exported last so it can remove stale series."""

    def __init__(self, cluster: Cluster, metrics: Metrics, clock: Clock) -> None:
        self.cluster = cluster
        self.metrics = metrics
        self.clock = clock
        self._generation: int | None = None
        self._unsynced_since: float | None = None
        self._pods: dict[str, _PodEntry] = {}
        self._usage: dict[Labels, float] = {}
        self._limit: dict[Labels, float] = {}

    def update(self) -> None:
        self._sync()
        generation = self.cluster.generation
        if generation == self._generation:
            return  # no watch event since the last pass: every other series is still true
        self._generation = generation
        self._node_count()
        self._nodepools()
        self._pod_states()

    def _sync(self) -> None:
        m = self.metrics
        if self.cluster.synced():
            self._unsynced_since = None
            m.cluster_state_synced.set(1)
            m.cluster_state_unsynced_time.set(0)
            return
        now = self.clock.monotonic()
        if self._unsynced_since is None:
            self._unsynced_since = now
        m.cluster_state_synced.set(0)
        m.cluster_state_unsynced_time.set(now - self._unsynced_since)

    def _node_count(self) -> None:
        # Upstream's state nodes are keyed by provider ID: nodes, and NodeClaims once launched.
        count = sum(
            1
            for sn in self.cluster.state_nodes(self.clock.now())
            if sn.node is not None or (sn.nodeclaim is not None and sn.nodeclaim.status.provider_id)
        )
        self.metrics.cluster_state_node_count.set(count)

    def _nodepools(self) -> None:
        usage: dict[Labels, float] = {}
        limit: dict[Labels, float] = {}
        for np in self.cluster.nodepools.values():
            u, lim = nodepool_series(np)
            usage.update(u)
            limit.update(lim)
        Metrics.replace_series(self.metrics.nodepools_usage, self._usage, usage)
        Metrics.replace_series(self.metrics.nodepools_limit, self._limit, limit)
        self._usage, self._limit = usage, limit

    def _pod_states(self) -> None:
        gauge = self.metrics.pods_state
        nodes = self.cluster.nodes
        previous = self._pods
        current: dict[str, _PodEntry] = {}
        for key, pod in self.cluster.pods.items():
            node = nodes.get(pod.node_name) if pod.node_name else None
            old = previous.pop(key, None)
            if old is not None and old[0] is pod and old[1] is node:
                current[key] = old
                continue
            labels = pod_state_labels(pod, node)
            if old is None or old[2] != labels:
                if old is not None:
                    Metrics.remove_series(gauge, old[2])
                gauge.labels(*labels).set(1)
            current[key] = (pod, node, labels)
        for _, _, labels in previous.values():  # pods gone since the last pass
            Metrics.remove_series(gauge, labels)
        self._pods = current


class SchedulingMetrics:
    """The provisioner's ``observe`` hook.

    Per round that had pods (upstream skips the solve otherwise): the solve's duration, the
    round's pod count as the queue depth (labelled with a fresh scheduling id; the previous id's
    series is removed, as upstream does at each solve), the unschedulable count, and for each pod
    decided for the first time, the time since it was first seen provisionable.
    """

    def __init__(
        self, metrics: Metrics, cluster: Cluster, clock: Clock, *, controller: str = PROVISIONER
    ) -> None:
        self.metrics = metrics
        self.cluster = cluster
        self.clock = clock
        self.controller = controller
        self._seen: dict[str, tuple[str, float]] = {}  # pod key -> (uid, first seen)
        self._decided: dict[str, str] = {}  # pod key -> uid
        self._scheduling_id: str | None = None

    def watches(self) -> Sequence[Watch]:
        return (Watch(PODS, upsert=self._pod_changed),)

    def _pod_changed(self, obj: KubeObject) -> None:
        pod = self.cluster.pods.get(object_key(obj))  # taken in by the state already
        if pod is not None:
            self.pod_seen(pod)

    def pod_seen(self, pod: Pod) -> None:
        """Every pod upsert (cheap; only provisionable, undecided pods are remembered)."""
        if not is_provisionable(pod) or self._decided.get(pod.key) == pod.uid:
            return
        seen = self._seen.get(pod.key)
        if seen is None or seen[0] != pod.uid:
            self._seen[pod.key] = (pod.uid, self.clock.monotonic())

    def observe_round(self, result: RoundResult) -> None:
        if result.pods == 0:
            return
        m, c = self.metrics, self.controller
        m.scheduler_scheduling_duration.labels(controller=c).observe(result.solve_seconds)
        if self._scheduling_id is not None:
            Metrics.remove_series(m.scheduler_queue_depth, (c, self._scheduling_id))
        self._scheduling_id = str(uuid.uuid4())
        m.scheduler_queue_depth.labels(controller=c, scheduling_id=self._scheduling_id).set(
            result.pods
        )
        m.scheduler_unschedulable_pods.labels(controller=c).set(result.errors)
        m.scheduler_ignored_pods.set(result.ignored)
        now = self.clock.monotonic()
        decision = m.pods_scheduling_decision_duration
        pods = self.cluster.pods
        for key in result.decided:
            pod = pods.get(key)
            uid = pod.uid if pod is not None else ""
            seen = self._seen.pop(key, None)
            if seen is not None and seen[0] == uid and self._decided.get(key) != uid:
                decision.observe(max(0.0, now - seen[1]))
            if pod is not None:
                self._decided[key] = uid
        self.prune()

    def prune(self) -> None:
        """Forget pods that are gone, were replaced, or are bound (no decision left to make)."""
        pods = self.cluster.pods
        for key, (uid, _) in list(self._seen.items()):
            pod = pods.get(key)
            if pod is None or pod.uid != uid or pod.node_name:
                del self._seen[key]
        for key, uid in list(self._decided.items()):
            pod = pods.get(key)
            if pod is None or pod.uid != uid or pod.node_name:
                del self._decided[key]


async def run_state_metrics(
    cluster: Cluster,
    metrics: Metrics,
    clock: Clock,
    interval: float = 5.0,
    *,
    scheduling: SchedulingMetrics | None = None,
    informers: InformerMetrics | None = None,
) -> None:
    """Refresh the cluster-state metrics forever; a failing pass is logged, never fatal."""
    state = StateMetrics(cluster, metrics, clock)
    while True:
        try:
            state.update()
            if informers is not None:
                informers.update()
            if scheduling is not None:
                scheduling.prune()
        except Exception:
            log.exception("updating cluster state metrics failed")
        await clock.sleep(interval)
