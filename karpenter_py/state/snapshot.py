"""A frozen copy of the cluster for one decision: nodes first, then the pods that need them.

Nodes are copied before pending pods are listed, as upstream does, so a race errs towards
launching too little (the next round fixes that) rather than too much.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod
from karpenter_py.model.storage import StorageObjects
from karpenter_py.state.pdb import PodDisruptionBudget
from karpenter_py.state.statenode import StateNode


def is_provisionable(pod: Pod) -> bool:
    """Upstream's definition: the kube-scheduler said Unschedulable, nothing is binding or
    preempting for it, and no controller other than a ReplicaSet-like one owns its placement."""
    return (
        pod.unschedulable
        and not pod.node_name
        and not pod.nominated_node_name
        and not pod.is_daemonset_pod()
        and not pod.is_mirror_pod()
        and not pod.is_terminating()
        and not pod.is_terminal()
        and not pod.scheduling_gated
    )


def is_reschedulable(pod: Pod) -> bool:
    """A pod on a node being deleted that will need a home elsewhere: an active one, or a
    terminating StatefulSet pod (its controller recreates it, under the same name, only once
    it is gone, so its room must be found as if it were running), as upstream's
    IsReschedulable. Daemonset and mirror pods stay with their node."""
    active = not pod.is_terminal() and not pod.is_terminating()
    return (
        (active or (pod.is_terminating() and pod.is_statefulset_pod()))
        and not pod.is_daemonset_pod()
        and not pod.is_mirror_pod()
    )


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: datetime
    nodes: tuple[StateNode, ...]
    # Node name -> its bound pods, then the pending pods nominated to it (status
    # .nominatedNodeName: they count on the node they wait for, as the kube-scheduler counts them).
    pods_by_node: Mapping[str, tuple[Pod, ...]]
    pending: tuple[Pod, ...]
    reschedulable: tuple[Pod, ...]
    nodepools: Mapping[str, NodePool]
    daemonsets: tuple[Pod, ...]
    namespace_labels: Mapping[str, Mapping[str, str]]
    # (group, kind, name) of each NodeClass seen -> Ready.
    nodeclasses: Mapping[tuple[str, str, str], bool] = field(default_factory=dict)
    # PersistentVolumeClaims, PersistentVolumes and StorageClasses, for volume topology.
    storage: StorageObjects = field(default_factory=StorageObjects)
    # namespace/name -> PodDisruptionBudget, for disruption's pod-level checks.
    pdbs: Mapping[str, PodDisruptionBudget] = field(default_factory=dict)
    # name -> NodeOverlay (only when the NodeOverlay gate is on: nothing else feeds them in).
    overlays: Mapping[str, NodeOverlay] = field(default_factory=dict)
    # ``pdbs`` by namespace, each sorted by key, built on first use: a pod is checked against
    # its namespace's PDBs only (900 PDBs x 100,000 pods was most of a disruption pass), and
    # what-if copies (``without``) that never ask do not pay for it.
    _pdbs_by_namespace: Mapping[str, tuple[PodDisruptionBudget, ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def pdbs_in(self, namespace: str) -> tuple[PodDisruptionBudget, ...]:
        """The namespace's PDBs, by key."""
        if self._pdbs_by_namespace is None:
            grouped: dict[str, list[PodDisruptionBudget]] = {}
            for key in sorted(self.pdbs):
                pdb = self.pdbs[key]
                grouped.setdefault(pdb.namespace, []).append(pdb)
            by_namespace = {ns: tuple(group) for ns, group in grouped.items()}
            object.__setattr__(self, "_pdbs_by_namespace", by_namespace)
            return by_namespace.get(namespace, ())
        return self._pdbs_by_namespace.get(namespace, ())

    def without(self, node_names: Iterable[str]) -> Snapshot:
        """The cluster as it would be with these nodes gone: their capacity disappears and their
        reschedulable pods join the pods that need a home (disruption's what-if)."""
        gone = set(node_names)
        if not gone:
            return self
        # Pods of nodes already marked for deletion are in ``reschedulable`` already.
        marked = {n.name for n in self.nodes if n.marked_for_deletion}
        moved = tuple(
            p
            for name in sorted(gone - marked)
            for p in self.pods_by_node.get(name, ())
            if is_reschedulable(p)
        )
        return replace(
            self,
            nodes=tuple(n for n in self.nodes if n.name not in gone),
            pods_by_node={k: v for k, v in self.pods_by_node.items() if k not in gone},
            reschedulable=(*self.reschedulable, *moved),
        )
