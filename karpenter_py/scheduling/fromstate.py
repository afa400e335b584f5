"""Turn API objects and a cluster snapshot into solver input."""

from __future__ import annotations

import operator
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from karpenter_py.model.api.common import slim_taints
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Node, Pod, Taint
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import LABEL_HOSTNAME
from karpenter_py.model.quantity import add, fits, parse_resources
from karpenter_py.scheduling.inputs import (
    ExistingNode,
    PoolTemplate,
    SolveInput,
    SolveOptions,
    pool_template,
)
from karpenter_py.scheduling.plan import ExistingPlacement
from karpenter_py.scheduling.requirements import Requirements, compatible
from karpenter_py.scheduling.taints import PREFER_NO_SCHEDULE_TOLERATION, untolerated
from karpenter_py.scheduling.typetable import daemon_requirement_terms
from karpenter_py.scheduling.volumes import volume_inputs
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode
from karpenter_py.state.usage import nodepool_usage


def pool_from_nodepool(np: NodePool) -> PoolTemplate:
    """A NodePool as the solver sees it (limits and usage as canonical quantities; usage is its
    ``status.resources`` until ``solve_input`` counts it from the cluster)."""
    tmpl = np.spec.template
    spec = tmpl.spec
    return pool_template(
        name=np.metadata.name or "",
        weight=np.spec.weight,
        labels=tmpl.metadata.labels,
        annotations=tmpl.metadata.annotations,
        requirements=spec.requirements,
        taints=slim_taints(spec.taints),
        startup_taints=slim_taints(spec.startup_taints),
        limits=dict(np.spec.limits) if np.spec.limits is not None else None,
        usage=dict(np.status.resources) if np.status.resources else None,
        node_class_ref=nodeclass_key(np),
        expire_after=spec.expire_after,
        termination_grace_period=spec.termination_grace_period,
    )


def _daemon_fits(ds: Pod, labels: Mapping[str, str], taints: Sequence[Taint]) -> bool:
    if untolerated(taints, (*ds.tolerations, PREFER_NO_SCHEDULE_TOLERATION)) is not None:
        return False
    node_reqs = Requirements.from_labels(labels)
    return any(compatible(node_reqs, t) is None for t in daemon_requirement_terms(ds))


def _daemonset_key(namespace: str, owner_name: str) -> tuple[str, str]:
    return (namespace, owner_name)


def reserve_daemonsets(existing: ExistingNode, daemonsets: Sequence[Pod]) -> ExistingNode:
    """Reserve room for DaemonSets that will run on the node but have no pod there yet, so new
    pods do not take it. A DaemonSet is matched to its pods by namespace and name (hand-written
    manifests carry no UIDs)."""
    node = existing.node
    running = {
        _daemonset_key(p.namespace, o.name)
        for p in existing.pods
        for o in p.owners
        if o.kind == "DaemonSet"
    }
    allocatable = dict(node.allocatable)
    for ds in daemonsets:
        keys = {_daemonset_key(ds.namespace, o.name) for o in ds.owners if o.kind == "DaemonSet"}
        if keys & running or not _daemon_fits(ds, node.labels, node.taints):
            continue
        for name, amount in ds.requests.items():
            allocatable[name] = allocatable.get(name, 0) - amount
    return replace(existing, node=replace(node, allocatable=allocatable))


@dataclass(frozen=True, slots=True, eq=False)
class _Derived:
    """One node's ExistingNode and everything it was derived from (held, so identities stay)."""

    node: Node | None
    nodeclaim: NodeClaim | None
    marked_for_deletion: bool
    reserved: Mapping[str, int]
    pods: tuple[Pod, ...]
    daemonsets: tuple[Pod, ...]
    existing: ExistingNode

    def still(self, sn: StateNode, pods: Sequence[Pod], daemonsets: Sequence[Pod]) -> bool:
        return (
            self.node is sn.node
            and self.nodeclaim is sn.nodeclaim
            and self.marked_for_deletion == sn.marked_for_deletion
            and self.reserved == sn.reserved
            and _same(self.pods, pods)
            and _same(self.daemonsets, daemonsets)
        )


def _same(a: Sequence[Pod], b: Sequence[Pod]) -> bool:
    # The cluster hands back a node's very tuple while none of its pods changed.
    return a is b or (len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True)))


class ExistingMemo:
    """What ``solve_input`` derives from a snapshot's nodes, kept across rounds (a plain memo,
    no I/O): a node whose Node, NodeClaim, marks, pods and DaemonSets are the same objects as
    last round gives back the same ExistingNode, so the solver's per-node work
    (``IndexCache.existing_parts``, ``IndexCache.existing_base``) is reused too; the pools' usage
    is kept while the state nodes are the very same tuple (``Cluster.state_nodes``). A warm round
    over 5,000 nodes otherwise rebuilds every node's reservations, labels and charges."""

    def __init__(self) -> None:
        self._held: dict[str, _Derived] = {}
        # The last round's nodes, their pods, DaemonSets and the existing tuple built from them.
        self._last: (
            tuple[tuple[StateNode, ...], list[tuple[Pod, ...] | None], tuple[Pod, ...]] | None
        ) = None
        self._last_existing: tuple[ExistingNode, ...] = ()
        self._at: list[int | None] = []  # the last nodes' places in that tuple
        self._usage: tuple[tuple[StateNode, ...], dict[str, dict[str, int]]] | None = None

    def existing(self, snapshot: Snapshot) -> tuple[ExistingNode, ...]:
        """The ExistingNodes of the snapshot's nodes that take pods: the very same tuple as last
        round when the nodes, each one's pods and the DaemonSets are the same objects."""
        nodes = snapshot.nodes
        daemonsets = snapshot.daemonsets
        pods = list(map(snapshot.pods_by_node.get, [sn.name for sn in nodes]))
        last = self._last
        if last is not None and last[0] is nodes and last[2] is daemonsets:
            # The same nodes: rebuild only those whose pods changed (the tuple's order is the
            # nodes' and the filter is theirs, so a node keeps its place).
            changed = [k for k, same in enumerate(map(operator.is_, pods, last[1])) if not same]
            if not changed:
                return self._last_existing
            built = list(self._last_existing)
            for k in changed:
                at = self._at[k]
                if at is not None:
                    built[at] = self.existing_node(nodes[k], pods[k] or (), daemonsets)
            existing = tuple(built)
        else:
            at_list: list[int | None] = []
            made: list[ExistingNode] = []
            for sn, held in zip(nodes, pods, strict=True):
                if takes_pods(sn):
                    at_list.append(len(made))
                    made.append(self.existing_node(sn, held or (), daemonsets))
                else:
                    at_list.append(None)
            existing, self._at = tuple(made), at_list
            self.keep_only({sn.name for sn in nodes})
        self._last, self._last_existing = (nodes, pods, daemonsets), existing
        return existing

    def usage(self, nodes: tuple[StateNode, ...]) -> dict[str, dict[str, int]]:
        """``nodepool_usage(nodes)``, kept while ``nodes`` is the same tuple (a copy each time:
        callers add to it)."""
        if self._usage is None or self._usage[0] is not nodes:
            self._usage = (nodes, nodepool_usage(nodes))
        return {k: dict(v) for k, v in self._usage[1].items()}

    def existing_node(
        self, sn: StateNode, pods: Sequence[Pod], daemonsets: Sequence[Pod]
    ) -> ExistingNode:
        held = self._held.get(sn.name)
        if held is not None and held.still(sn, pods, daemonsets):
            return held.existing
        existing = existing_node(sn, pods, daemonsets)
        self._held[sn.name] = _Derived(
            sn.node,
            sn.nodeclaim,
            sn.marked_for_deletion,
            dict(sn.reserved),
            pods if isinstance(pods, tuple) else tuple(pods),
            daemonsets if isinstance(daemonsets, tuple) else tuple(daemonsets),
            existing,
        )
        return existing

    def keep_only(self, names: Collection[str]) -> None:
        """Forget nodes that are gone (called with the nodes of the latest snapshot)."""
        if len(self._held) > len(names):
            self._held = {k: v for k, v in self._held.items() if k in names}


def existing_node(sn: StateNode, pods: Sequence[Pod], daemonsets: Sequence[Pod]) -> ExistingNode:
    """A state node as solver capacity, daemonsets reserved (except on a NodeClaim that has not
    launched: its size already includes them)."""
    # The node's own mapping when it has a hostname label: its identity lets the solver reuse
    # what it derived from it (IndexCache.node_requirements) across rounds.
    labels = sn.labels
    if LABEL_HOSTNAME not in labels:
        labels = {**labels, LABEL_HOSTNAME: sn.name}
    node = sn.node or Node(
        name=sn.name,
        labels=labels,
        taints=sn.taints,
        capacity=sn.capacity,
        provider_id=sn.provider_id,
    )
    # The state's judgement, not the Node's own: a node not initialized yet is taken as what its
    # NodeClaim makes it (StateNode.labels and .taints).
    node = replace(node, labels=labels, taints=sn.taints, allocatable=sn.allocatable)
    existing = ExistingNode(
        node=node,
        pods=tuple(pods),
        node_pool=sn.node_pool,
        initialized=sn.initialized,
        in_flight=sn.in_flight,
        marked_for_deletion=sn.marked_for_deletion,
    )
    return reserve_daemonsets(existing, daemonsets) if sn.launched else existing


def pool_usage(snapshot: Snapshot, memo: ExistingMemo | None = None) -> dict[str, dict[str, int]]:
    """What each NodePool already uses of its limits (``state.usage.nodepool_usage``).

    Counted from the live state rather than ``status.resources`` so that claims created a moment
    ago, which the status does not show yet, still count against the limits. A pool none of
    whose nodes the snapshot holds keeps its ``status.resources``: the status is then the only
    evidence (a NodePool given to ``plan`` without its nodes; the counter writes zeros once a
    pool in a cluster has none).
    """
    usage = memo.usage(snapshot.nodes) if memo is not None else nodepool_usage(snapshot.nodes)
    for name, np in snapshot.nodepools.items():
        if name not in usage:
            usage[name] = parse_resources(np.status.resources)
    return usage


def nodeclass_key(np: NodePool) -> tuple[str, str, str]:
    ref = np.spec.template.spec.node_class_ref
    return (ref.group, ref.kind, ref.name)


def provisionable_pools(snapshot: Snapshot) -> list[NodePool]:
    """NodePools that may launch now: not being deleted, NodeClass present and Ready."""
    return ready_pools(snapshot.nodepools, snapshot.nodeclasses)


def ready_pools(
    nodepools: Mapping[str, NodePool], nodeclasses: Mapping[tuple[str, str, str], bool]
) -> list[NodePool]:
    """``provisionable_pools`` over the cluster's own maps (no snapshot needed)."""
    return [
        np
        for np in nodepools.values()
        if np.metadata.deletion_timestamp is None and nodeclasses.get(nodeclass_key(np), False)
    ]


def takes_pods(sn: StateNode) -> bool:
    """Whether the solver may place pods on the node: not going away, and of a known size (a
    NodeClaim that has not launched and was sized for nothing offers no room to plan with)."""
    return not sn.marked_for_deletion and (sn.launched or bool(sn.allocatable))


def solve_input(
    snapshot: Snapshot,
    *,
    instance_types: Mapping[str, Sequence[InstanceType]],
    options: SolveOptions,
    extra_pods: Sequence[Pod] = (),
    memo: ExistingMemo | None = None,
) -> SolveInput:
    """Pending and reschedulable pods against every ready NodePool and the existing nodes, with
    where their volumes can attach. ``memo`` reuses unchanged nodes' ExistingNodes."""
    usage = pool_usage(snapshot, memo)
    # A static NodePool (``spec.replicas``) never launches for pods, with the StaticCapacity
    # gate on or off (upstream filters them out of the scheduler either way); its nodes still
    # take pods as existing capacity.
    pools = tuple(
        replace(pool_from_nodepool(np), usage=usage.get(np.metadata.name or "", {}))
        for np in provisionable_pools(snapshot)
        if np.spec.replicas is None
    )
    existing = (
        memo.existing(snapshot)
        if memo is not None
        else tuple(
            existing_node(sn, snapshot.pods_by_node.get(sn.name, ()), snapshot.daemonsets)
            for sn in snapshot.nodes
            if takes_pods(sn)
        )
    )
    pods = (*snapshot.pending, *snapshot.reschedulable, *extra_pods)
    volume_requirements, volume_errors = volume_inputs(pods, snapshot.storage)
    return SolveInput(
        pods=pods,
        pools=pools,
        instance_types=instance_types,
        existing=existing,
        daemonsets=snapshot.daemonsets,
        options=options,
        volume_requirements=volume_requirements,
        volume_errors=volume_errors,
    )


def hold_pods(
    inp: SolveInput, holds: Mapping[str, str]
) -> tuple[SolveInput, tuple[ExistingPlacement, ...]]:
    """``inp`` with the pods ``holds`` names (pod key -> node name) taken out of its pods and
    put on those of its existing nodes as if bound there, and the placements that makes.

    The provisioner holds the pods an earlier round placed on capacity that is not ready yet, so
    a round packs the pods that came since into the room left instead of placing everything
    anew: a fresh solve puts the largest pods first on the first node with room, which takes
    nodes bought for a mix of small and large pods and leaves their own pods to new ones. A node
    whose held pods no longer all fit (pods bound there since) or that takes no pods now holds
    none: its pods are solved with the rest, as is every pod whose node is gone. Pods go on the
    first node of their name only."""
    if not holds:
        return inp, ()
    by_node: dict[str, list[Pod]] = {}
    for pod in inp.pods:
        node = holds.get(pod.key)
        if node is not None:
            by_node.setdefault(node, []).append(pod)
    if not by_node:
        return inp, ()
    existing = list(inp.existing)
    placements: list[ExistingPlacement] = []
    for i, ex in enumerate(existing):
        # Popped: a node may be there twice for a moment (its Node seen before the NodeClaim's
        # launch status joins the two), and its pods go on one of them only.
        pods = by_node.pop(ex.node.name, None)
        if pods is None or ex.marked_for_deletion or ex.node.deletion_timestamp:
            continue
        used: dict[str, int] = {}
        for pod in (*ex.pods, *pods):
            if not pod.is_terminal():
                used = add(used, pod.requests)
        if not fits(used, ex.node.allocatable):
            continue
        existing[i] = replace(ex, pods=(*ex.pods, *pods))
        placements.append(ExistingPlacement(ex.node.name, tuple(pods)))
    if not placements:  # the very input: its nodes keep the identities the solver's caches use
        return inp, ()
    held = {pod.key for placement in placements for pod in placement.pods}
    rest = tuple(pod for pod in inp.pods if pod.key not in held)
    return replace(inp, pods=rest, existing=tuple(existing)), tuple(placements)


def static_input(
    snapshot: Snapshot,
    np: NodePool,
    *,
    instance_types: Sequence[InstanceType],
    options: SolveOptions,
) -> SolveInput:
    """The input ``scheduling.static_claims`` builds a static NodePool's NodeClaims from: the
    pool alone, its instance types and the DaemonSets that will run on its nodes; no pods."""
    name = np.metadata.name or ""
    return SolveInput(
        pods=(),
        pools=(pool_from_nodepool(np),),
        instance_types={name: instance_types},
        daemonsets=snapshot.daemonsets,
        options=options,
    )
