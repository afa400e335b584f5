"""The in-memory cluster: what the informers have seen, merged into one model.

Mutators are plain methods (no awaits): each watch event is applied atomically by construction.
Decisions wait for ``synced()``: every resource has completed its first list, so a decision never
acts on a half-filled view (e.g. launching nodes for pods that already have some).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Node, Pod
from karpenter_py.model.labels import LABEL_NODE_REGISTERED, LABEL_NODEPOOL
from karpenter_py.model.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObjects,
)
from karpenter_py.state.pdb import PodDisruptionBudget
from karpenter_py.state.podplans import PodPlans
from karpenter_py.state.snapshot import Snapshot, is_provisionable, is_reschedulable
from karpenter_py.state.statenode import StateNode

KINDS = ("nodes", "nodeclaims", "pods", "nodepools", "daemonsets", "nodeclasses")

NodeClassKey = tuple[str, str, str]  # group, kind, name


class Cluster:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.nodeclaims: dict[str, NodeClaim] = {}
        self.pods: dict[str, Pod] = {}
        self.nodepools: dict[str, NodePool] = {}
        self.daemonsets: dict[str, Pod] = {}  # DaemonSet key -> a pod built from its template
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.invalid: dict[str, str] = {}
        self.nodeclasses: dict[NodeClassKey, bool] = {}  # -> Ready
        self.overlays: dict[str, NodeOverlay] = {}  # name -> NodeOverlay (gate NodeOverlay)
        # The kinds ``synced()`` waits for: KINDS, and those a feature gate adds (``require``).
        self.kinds: tuple[str, ...] = KINDS
        self.pdbs: dict[
            str, PodDisruptionBudget
        ] = {}  # "kind/key" -> why the object could not be parsed
        # Volume topology facts. Not in the sync gate: until they are listed a pod that mounts a
        # claim is refused (claim not found), never placed wrongly.
        self.pvcs: dict[str, PersistentVolumeClaim] = {}  # namespace/name
        self.pvs: dict[str, PersistentVolume] = {}
        self.storage_classes: dict[str, StorageClass] = {}
        self._pods_by_node: dict[str, set[str]] = {}
        # Kept by the pod mutators so a snapshot of 100,000 pods neither scans them all for the
        # pending ones nor re-sorts every node's pods: a node's tuple is rebuilt only after one
        # of its pods changed.
        self._pending: dict[str, Pod] = {}
        self._unbound: set[str] = set()  # active pods without a node, tried or not
        self._pods_on: dict[str, tuple[Pod, ...]] = {}
        self._daemonset_tuple: tuple[Pod, ...] | None = None  # until a DaemonSet changes
        self._synced: set[str] = set()
        self._deleting: set[str] = set()  # NodeClaim names marked for deletion
        self._nominated: dict[str, datetime] = {}  # node or NodeClaim name -> until
        # Pending pod key -> the node its status.nominatedNodeName names (the kube-scheduler
        # preempted for it there): that node keeps its nomination while the pod waits.
        self._nominating: dict[str, str] = {}
        # The same, by node: such pods count on the node they wait for in every snapshot (as
        # the kube-scheduler counts them there for pods of the same or lower priority), so a
        # round never plans other pods into room that is promised. (node -> pod keys; node ->
        # (its bound pods' tuple, that tuple with the waiting pods) while neither changed)
        self._nominated_on: dict[str, set[str]] = {}
        self._held_on: dict[str, tuple[tuple[Pod, ...], tuple[Pod, ...]]] = {}
        self._reserved: dict[str, dict[str, int]] = {}  # NodeClaim name -> largest option capacity
        # Pending pod key -> the NodeClaim or node the last round planned it onto; what the
        # pod's nominatedNodeName is written from once that node exists.
        self.pod_plans = PodPlans()
        # providerID -> Node name / NodeClaim name, kept by the mutators so lookups never scan.
        self._node_by_pid: dict[str, str] = {}
        self._claim_by_pid: dict[str, str] = {}
        # Bumped on every change; lets periodic workers skip passes when nothing moved.
        self.generation = 0
        # The state nodes as last joined, and each one's pods, reused by the next snapshot unless
        # a node-side fact changed (a Node, a NodeClaim, a mark, a reservation, a nomination) or
        # a nomination they reflect expired: pods change far more often than nodes, and a round
        # over 5,000 nodes otherwise re-joined them all. Node names whose pods changed since.
        self._view: _NodeView | None = None
        self._pods_changed: set[str] = set()

    # ------------------------------------------------------------------ sync gate
    def mark_synced(self, kind: str) -> None:
        self._synced.add(kind)

    def require(self, kind: str) -> None:
        """Make ``synced()`` wait for ``kind`` too (a kind only an enabled feature reflects)."""
        if kind not in self.kinds:
            self.kinds = (*self.kinds, kind)

    def synced(self) -> bool:
        return all(k in self._synced for k in self.kinds)

    def unsynced(self) -> list[str]:
        return [k for k in self.kinds if k not in self._synced]

    # ------------------------------------------------------------------ mutators
    def upsert_node(self, node: Node) -> None:
        old = self.nodes.get(node.name)
        if old is not None and old.provider_id != node.provider_id:
            _unindex(self._node_by_pid, old.provider_id, node.name)
        self.nodes[node.name] = node
        if node.provider_id:
            self._node_by_pid[node.provider_id] = node.name
        self._view = None
        self.generation += 1

    def delete_node(self, name: str) -> None:
        old = self.nodes.pop(name, None)
        if old is not None:
            _unindex(self._node_by_pid, old.provider_id, name)
        self.pod_plans.forget_target(name)
        self._view = None
        self.generation += 1

    def upsert_nodeclaim(self, nc: NodeClaim) -> None:
        name = nc.metadata.name or ""
        old = self.nodeclaims.get(name)
        pid = nc.status.provider_id
        if old is not None and old.status.provider_id != pid:
            _unindex(self._claim_by_pid, old.status.provider_id, name)
        self.nodeclaims[name] = nc
        if pid:
            self._claim_by_pid[pid] = name
        self._view = None
        self.generation += 1

    def delete_nodeclaim(self, name: str) -> None:
        old = self.nodeclaims.pop(name, None)
        if old is not None:
            _unindex(self._claim_by_pid, old.status.provider_id, name)
        self.pod_plans.forget_target(name)
        self._reserved.pop(name, None)
        self._deleting.discard(name)
        self._nominated.pop(name, None)
        self._view = None
        self.generation += 1

    def upsert_pod(self, pod: Pod) -> None:
        old = self.pods.get(pod.key)
        if old is not None and old.node_name:
            self._pods_on.pop(old.node_name, None)
            self._pods_changed.add(old.node_name)
            if old.node_name != pod.node_name:
                self._pods_by_node.get(old.node_name, set()).discard(pod.key)
        self.pods[pod.key] = pod
        if pod.node_name:
            self._pods_by_node.setdefault(pod.node_name, set()).add(pod.key)
            self._pods_on.pop(pod.node_name, None)
            self._pods_changed.add(pod.node_name)
        if is_provisionable(pod):
            self._pending[pod.key] = pod
        else:
            self._pending.pop(pod.key, None)
        if pod.node_name or pod.is_terminal() or pod.is_terminating():
            self.pod_plans.forget_pod(pod.key)  # bound or ending: the plan has done its part
            self._unbound.discard(pod.key)
        else:
            self._unbound.add(pod.key)
        waits_for = _nominated_node(pod)
        waited = self._nominating.get(pod.key, "")
        if waited != waits_for:
            if waits_for:
                self._nominating[pod.key] = waits_for
            else:
                del self._nominating[pod.key]
            self._view = None
            self._unwait(pod.key, waited)
            if waits_for:
                self._nominated_on.setdefault(waits_for, set()).add(pod.key)
        if waits_for:
            self._held_on.pop(waits_for, None)  # the pod object changed (or began to wait)
            self._pods_changed.add(waits_for)
        self.generation += 1

    def delete_pod(self, key: str) -> None:
        old = self.pods.pop(key, None)
        if old is not None and old.node_name:
            self._pods_by_node.get(old.node_name, set()).discard(key)
            self._pods_on.pop(old.node_name, None)
            self._pods_changed.add(old.node_name)
        self._pending.pop(key, None)
        self._unbound.discard(key)
        self.pod_plans.forget_pod(key)
        waited = self._nominating.pop(key, None)
        if waited is not None:
            self._view = None
            self._unwait(key, waited)
        self.generation += 1

    def _unwait(self, key: str, node_name: str) -> None:
        """The pod no longer waits for ``node_name`` (a nomination ended or moved)."""
        waiting = self._nominated_on.get(node_name)
        if waiting is None:
            return
        waiting.discard(key)
        if not waiting:
            del self._nominated_on[node_name]
        self._held_on.pop(node_name, None)
        self._pods_changed.add(node_name)

    def upsert_nodepool(self, np: NodePool) -> None:
        self.nodepools[np.metadata.name or ""] = np
        self.generation += 1

    def delete_nodepool(self, name: str) -> None:
        self.nodepools.pop(name, None)
        self.generation += 1

    def upsert_daemonset(self, key: str, template: Pod) -> None:
        self.daemonsets[key] = template
        self._daemonset_tuple = None
        self.generation += 1

    def delete_daemonset(self, key: str) -> None:
        self.daemonsets.pop(key, None)
        self._daemonset_tuple = None
        self.generation += 1

    def upsert_nodeclass(self, key: NodeClassKey, ready: bool) -> None:
        self.nodeclasses[key] = ready
        self.generation += 1

    def delete_nodeclass(self, key: NodeClassKey) -> None:
        self.nodeclasses.pop(key, None)
        self.generation += 1

    def upsert_overlay(self, overlay: NodeOverlay) -> None:
        self.overlays[overlay.metadata.name or ""] = overlay
        self.generation += 1

    def delete_overlay(self, name: str) -> None:
        self.overlays.pop(name, None)
        self.generation += 1

    def upsert_pdb(self, pdb: PodDisruptionBudget) -> None:
        self.pdbs[pdb.key] = pdb
        self.generation += 1

    def delete_pdb(self, key: str) -> None:
        self.pdbs.pop(key, None)
        self.generation += 1

    def replace_pdbs(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        self.pdbs = {p.key: p for p in pdbs}
        self.generation += 1

    # Storage changes do not bump ``generation``: nothing generation-gated reads them, and a
    # pod waiting on a claim is retried by the provisioner's resync.
    def upsert_pvc(self, pvc: PersistentVolumeClaim) -> None:
        self.pvcs[pvc.key] = pvc

    def delete_pvc(self, key: str) -> None:
        self.pvcs.pop(key, None)

    def replace_pvcs(self, pvcs: Iterable[PersistentVolumeClaim]) -> None:
        self.pvcs = {p.key: p for p in pvcs}

    def upsert_pv(self, pv: PersistentVolume) -> None:
        self.pvs[pv.name] = pv

    def delete_pv(self, name: str) -> None:
        self.pvs.pop(name, None)

    def replace_pvs(self, pvs: Iterable[PersistentVolume]) -> None:
        self.pvs = {p.name: p for p in pvs}

    def upsert_storage_class(self, sc: StorageClass) -> None:
        self.storage_classes[sc.name] = sc

    def delete_storage_class(self, name: str) -> None:
        self.storage_classes.pop(name, None)

    def replace_storage_classes(self, classes: Iterable[StorageClass]) -> None:
        self.storage_classes = {c.name: c for c in classes}

    # ------------------------------------------------------------------ decisions' bookkeeping
    def mark_for_deletion(self, *nodeclaim_names: str) -> None:
        self._deleting.update(nodeclaim_names)
        self._view = None
        self.generation += 1

    def is_marked_for_deletion(self, nodeclaim_name: str) -> bool:
        return nodeclaim_name in self._deleting

    def unmark_for_deletion(self, *nodeclaim_names: str) -> None:
        self._deleting.difference_update(nodeclaim_names)
        self._view = None
        self.generation += 1

    def reserve(self, nodeclaim_name: str, capacity: Mapping[str, int]) -> None:
        """Charge a just-created NodeClaim at its largest option until it reports its capacity."""
        self._reserved[nodeclaim_name] = dict(capacity)
        self._view = None

    def nominate(self, name: str, until: datetime) -> None:
        """A node or NodeClaim expected to receive pods soon: disruption must leave it alone."""
        self._nominated[name] = until
        self._view = None

    def is_nominated(self, name: str, now: datetime) -> bool:
        return self.nominated_until(name, now) is not None

    def nominated_until(self, name: str, now: datetime) -> datetime | None:
        """When the nomination of ``name`` runs out, or None when it is not nominated at ``now``."""
        until = self._nominated.get(name)
        return until if until is not None and until > now else None

    def waiting_pods(self) -> int:
        """Active pods not bound to a node yet (whether or not the scheduler has tried them)."""
        return len(self._unbound)

    def planned_node(self, pod_key: str) -> str:
        """The name of the Node the pod was planned onto, once that Node exists ("" before, or
        when the pod has no plan). A plan onto a NodeClaim resolves through the Node that joined
        it (by provider ID, else the claim's ``status.nodeName``)."""
        target = self.pod_plans.target(pod_key)
        if target is None:
            return ""
        if target in self.nodes:
            return target
        claim = self.nodeclaims.get(target)
        if claim is None:
            return ""
        node = self.node_for_provider_id(claim.status.provider_id)
        if node is not None:
            return node.name
        return claim.status.node_name if claim.status.node_name in self.nodes else ""

    def pods_planned_on(self, node_name: str) -> tuple[str, ...]:
        """Pods planned onto the Node ``node_name``: by its own name or its NodeClaim's."""
        keys = set(self.pod_plans.pods_for(node_name))
        node = self.nodes.get(node_name)
        claim = self.nodeclaim_for_provider_id(node.provider_id) if node is not None else None
        if claim is not None and claim.metadata.name and claim.metadata.name != node_name:
            keys.update(self.pod_plans.pods_for(claim.metadata.name))
        return tuple(sorted(keys))

    # ------------------------------------------------------------------ queries
    def pods_on(self, node_name: str) -> tuple[Pod, ...]:
        """The node's pods by key (the same tuple while none of them changes)."""
        held = self._pods_on.get(node_name)
        if held is None:
            keys = sorted(self._pods_by_node.get(node_name, ()))
            held = self._pods_on[node_name] = tuple(self.pods[k] for k in keys if k in self.pods)
        return held

    def pods_held(self, node_name: str) -> tuple[Pod, ...]:
        """The node's pods and, after them, the pending pods nominated to it (what the node's
        room is counted against in a snapshot); the same tuple while none of them changes."""
        base = self.pods_on(node_name)
        waiting = self._nominated_on.get(node_name)
        if not waiting:
            return base
        held = self._held_on.get(node_name)
        if held is not None and held[0] is base:
            return held[1]
        extra = tuple(self.pods[k] for k in sorted(waiting) if k in self.pods)
        self._held_on[node_name] = (base, (*base, *extra))
        return self._held_on[node_name][1]

    def state_nodes(self, now: datetime) -> tuple[StateNode, ...]:
        """Nodes joined with their NodeClaims by provider ID; unmatched NodeClaims are in flight.
        The same tuple while no node-side fact changed and no nomination it reflects expired."""
        return self._node_view(now).nodes

    def _node_view(self, now: datetime) -> _NodeView:
        view = self._view
        if view is None or not view.holds_at(now):
            view = self._view = _NodeView(self._join(now), now, self._nominated)
            self._pods_changed.clear()
        return view

    def _join(self, now: datetime) -> tuple[StateNode, ...]:
        awaited = set(self._nominating.values())
        by_node_name: dict[str, NodeClaim] = {}
        unlaunched: dict[str, NodeClaim] = {}
        for claim in self.nodeclaims.values():
            if claim.status.node_name:
                by_node_name[claim.status.node_name] = claim
            elif not claim.status.provider_id and claim.metadata.name:
                # Launched, but its status (the provider ID) is not seen yet while its Node is:
                # a provider naming Nodes after their NodeClaims (kwok) registers them that
                # fast. Joined by name when the Node carries the claim's NodePool and is not
                # registered, so it is not counted twice (the Node as capacity of its own and
                # the claim in flight).
                unlaunched[claim.metadata.name] = claim
        out: list[StateNode] = []
        matched: set[str] = set()
        for node in self.nodes.values():
            nc = self.nodeclaim_for_provider_id(node.provider_id)
            if nc is None:
                nc = by_node_name.get(node.name)
            if nc is None and node.name in unlaunched:
                claim = unlaunched[node.name]
                pool = claim.metadata.labels.get(LABEL_NODEPOOL)
                registered = LABEL_NODE_REGISTERED in node.labels  # then it had a provider ID
                if pool and node.labels.get(LABEL_NODEPOOL) == pool and not registered:
                    nc = claim
            if nc is not None:
                matched.add(nc.metadata.name or "")
            out.append(self._state_node(node, nc, now, awaited))
        for name, claim in self.nodeclaims.items():
            if name not in matched:
                out.append(self._state_node(None, claim, now, awaited))
        return tuple(out)

    def _state_node(
        self, node: Node | None, nc: NodeClaim | None, now: datetime, awaited: set[str]
    ) -> StateNode:
        nc_name = (nc.metadata.name or "") if nc is not None else ""
        deleting = nc_name in self._deleting or (
            nc is not None and nc.metadata.deletion_timestamp is not None
        )
        deleting = deleting or (node is not None and bool(node.deletion_timestamp))
        nominated_until = self.nominated_until(nc_name, now) if self._nominated else None
        if node is not None and self._nominated:
            by_node = self.nominated_until(node.name, now)
            if by_node is not None and (nominated_until is None or by_node > nominated_until):
                nominated_until = by_node
        name = node.name if node is not None else (nc.status.node_name if nc is not None else "")
        return StateNode(
            node=node,
            nodeclaim=nc,
            marked_for_deletion=deleting,
            nominated=nominated_until is not None or (bool(name) and name in awaited),
            nominated_until=nominated_until,
            reserved=self._reserved.get(nc_name, {}) if node is None else {},
        )

    def _daemonsets(self) -> tuple[Pod, ...]:
        """The DaemonSet templates (the same tuple while none changes)."""
        if self._daemonset_tuple is None:
            self._daemonset_tuple = tuple(self.daemonsets.values())
        return self._daemonset_tuple

    def nodeclaim_for_provider_id(self, provider_id: str) -> NodeClaim | None:
        name = self._claim_by_pid.get(provider_id) if provider_id else None
        return self.nodeclaims.get(name) if name is not None else None

    def node_for_provider_id(self, provider_id: str) -> Node | None:
        name = self._node_by_pid.get(provider_id) if provider_id else None
        return self.nodes.get(name) if name is not None else None

    def snapshot(self, now: datetime) -> Snapshot:
        """A frozen copy for one decision. Nodes are copied before pending pods are listed, as
        upstream does, so a race errs towards launching too little (the next round fixes that)."""
        view = self._node_view(now)
        nodes = view.nodes
        # A NodeClaim in flight holds the pods already bound to its node's name (the Node may
        # reach the informer after its pods do), and every node the pods nominated to it.
        if view.pods_by_node is None:
            view.pods_by_node = {n.name: self.pods_held(n.name) for n in nodes}
        else:
            for name in self._pods_changed:
                if name in view.pods_by_node:
                    view.pods_by_node[name] = self.pods_held(name)
        self._pods_changed.clear()
        pods_by_node = dict(view.pods_by_node)
        pending = tuple(self._pending.values())
        reschedulable = tuple(
            p for n in view.marked for p in pods_by_node.get(n.name, ()) if is_reschedulable(p)
        )
        return Snapshot(
            now=now,
            nodes=nodes,
            pods_by_node=pods_by_node,
            pending=pending,
            reschedulable=reschedulable,
            nodepools=dict(self.nodepools),
            daemonsets=self._daemonsets(),
            namespace_labels={k: dict(v) for k, v in self.namespace_labels.items()},
            nodeclasses=dict(self.nodeclasses),
            storage=StorageObjects(
                claims=dict(self.pvcs),
                volumes=dict(self.pvs),
                classes=dict(self.storage_classes),
            ),
            pdbs=dict(self.pdbs),
            overlays=dict(self.overlays),
        )


def _nominated_node(pod: Pod) -> str:
    """The node a pending, active pod is nominated to by the kube-scheduler, or ""."""
    if pod.node_name or pod.is_terminal() or pod.is_terminating():
        return ""
    return pod.nominated_node_name


def _unindex(index: dict[str, str], provider_id: str, name: str) -> None:
    """Drop ``provider_id`` from ``index`` if it still points at ``name``."""
    if provider_id and index.get(provider_id) == name:
        del index[provider_id]


class _NodeView:
    """One join of the cluster's nodes (``Cluster.state_nodes``) and what snapshots derive from
    it. It holds at a later moment while no nomination it reflects as active has expired."""

    __slots__ = ("built", "expires", "marked", "nodes", "pods_by_node")

    def __init__(
        self, nodes: tuple[StateNode, ...], now: datetime, nominated: Mapping[str, datetime]
    ) -> None:
        self.nodes = nodes
        self.built = now
        self.expires = min((until for until in nominated.values() if until > now), default=None)
        self.marked = tuple(n for n in nodes if n.marked_for_deletion)
        # Node name -> its pods (``Cluster.pods_on``), filled by the first snapshot and kept
        # current by the next ones; each snapshot gets its own copy.
        self.pods_by_node: dict[str, tuple[Pod, ...]] | None = None

    def holds_at(self, now: datetime) -> bool:
        return now >= self.built and (self.expires is None or now < self.expires)
