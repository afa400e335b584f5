"""The existing nodes as a solve starts from them.

``SlotParts`` is what a solve derives from one node (kept per node by ``IndexCache``);
``ExistingBase`` is every node's parts in first-fit order, with what the solver and topology
read from all of them at once: the most CPU and memory left per block of slots, the domains the
nodes offer per label key, and the placed pods by label. A base is read-only and shared by every
solve over the same nodes (``IndexCache.existing_base``): a one-pod round over 5,000 nodes
otherwise re-derived all of it, and a solve only copies the few slots it places pods on.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from karpenter_py.model.core import HostPort, Taint
from karpenter_py.model.labels import LABEL_HOSTNAME, RESOURCE_CPU, RESOURCE_MEMORY
from karpenter_py.scheduling.inputs import ExistingNode
from karpenter_py.scheduling.requirements import Req, Requirements
from karpenter_py.scheduling.taints import is_ephemeral
from karpenter_py.scheduling.topology import DomainSource, ExistingPods, Placed, PlacedGroup

TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"

T = TypeVar("T")

# Slots per block of ``ExistingBase.cpu``/``memory``: a pod skips a block none of whose nodes
# has the CPU or memory it asks for.
BLOCK: Final = 32


@dataclass(frozen=True, slots=True)
class SlotParts:
    """What a solve derives from an existing node before placing anything: its requirements,
    the taints that count, the room left after its pods, their host ports, and the pods as
    topology sees them. Read-only: a solve copies ``remaining`` and ``ports``."""

    requirements: Requirements
    taints: tuple[Taint, ...]
    remaining: Mapping[str, int]
    ports: tuple[HostPort, ...]
    placed: PlacedGroup


def existing_slot_parts(
    ex: ExistingNode,
    node_requirements: Callable[[Mapping[str, str]], Requirements] = Requirements.from_labels,
) -> SlotParts:
    node = ex.node
    labels = node.labels
    if LABEL_HOSTNAME not in labels:
        labels = {**labels, LABEL_HOSTNAME: node.name}
    reqs = node_requirements(labels)
    taints = node.taints
    if node.unschedulable and not any(t.key == TAINT_NODE_UNSCHEDULABLE for t in taints):
        # A cordoned node: the node controller taints it so, and kube-scheduler honours it.
        taints = (*taints, Taint(key=TAINT_NODE_UNSCHEDULABLE, effect="NoSchedule"))
    if ex.node_pool and not ex.initialized:
        taints = tuple(t for t in taints if not is_ephemeral(t))
    remaining = dict(node.allocatable)
    ports: list[HostPort] = []
    placed: list[Placed] = []
    for pod in ex.pods:
        if pod.is_terminal():
            continue
        for name, amount in pod.requests.items():
            remaining[name] = remaining.get(name, 0) - amount
        ports.extend(pod.host_ports)
        placed.append(Placed(pod, reqs, taints))
    return SlotParts(reqs, taints, remaining, tuple(ports), PlacedGroup(tuple(placed)))


def takes_new_pods(ex: ExistingNode) -> bool:
    """Whether a solve may place pods on the node (not on its way out)."""
    return not (ex.marked_for_deletion or ex.node.deletion_timestamp)


class ExistingBase:
    """The nodes that may take pods, initialised ones first and then by name (first fit),
    each with its ``SlotParts`` and whether it is initialised. Built from ``existing`` (the
    solve input's nodes) and read-only after; the per-key views are built on first use and
    kept, and building one is idempotent, so solves in threads may share a base."""

    __slots__ = (
        "_allowed",
        "_domains",
        "_ids",
        "_keys",
        "_parent",
        "_sources",
        "_values",
        "cpu",
        "existing",
        "initialized",
        "memory",
        "names",
        "parts",
        "pods",
        "position",
    )

    def __init__(
        self, existing: Sequence[ExistingNode], parts: Callable[[ExistingNode], SlotParts]
    ) -> None:
        self.existing = tuple(existing)
        order = sorted(
            (not ex.initialized, ex.node.name, n)
            for n, ex in enumerate(self.existing)
            if takes_new_pods(ex)
        )
        self.names: tuple[str, ...] = tuple(name for _, name, _ in order)
        self.initialized: tuple[bool, ...] = tuple(not late for late, _, _ in order)
        # existing's index -> its slot's (absent: the node takes no pods).
        self.position: dict[int, int] = {n: i for i, (_, _, n) in enumerate(order)}
        self.parts: tuple[SlotParts, ...] = tuple(parts(self.existing[n]) for _, _, n in order)
        self.pods = ExistingPods(tuple(p.placed for p in self.parts))
        self.cpu: tuple[int, ...] = self._block_max(RESOURCE_CPU)
        self.memory: tuple[int, ...] = self._block_max(RESOURCE_MEMORY)
        self._domains: dict[str, dict[str, list[DomainSource]]] = {}
        self._keys: tuple[str, ...] | None = None
        self._values: dict[str, tuple[str | None, ...]] = {}
        self._allowed: dict[tuple[str, frozenset[str]], tuple[int, ...]] = {}
        self._sources: tuple[DomainSource, ...] | None = None
        self._ids: dict[int, int] | None = None
        # (the base this one was cut from, the slots of it kept): per-key views come from its.
        self._parent: tuple[ExistingBase, tuple[int, ...]] | None = None

    def subset(self, existing: Sequence[ExistingNode]) -> ExistingBase | None:
        """The base of ``existing`` cut from this one, when ``existing`` holds only nodes of
        this base: a disruption simulation's nodes, the cluster without the candidates. Slots
        keep their order, so the per-key views are this base's, picked."""
        if len(existing) >= len(self.existing):
            return None
        if self._ids is None:
            self._ids = {id(ex): n for n, ex in enumerate(self.existing)}
        ids, own = self._ids, self.existing
        at = [ids.get(id(ex), -1) for ex in existing]
        if any(n < 0 or own[n] is not ex for n, ex in zip(at, existing, strict=True)):
            return None
        if len(set(at)) != len(at):
            return None  # a node twice: not a part of this base
        kept = tuple(sorted(i for n in at if (i := self.position.get(n)) is not None))
        base = object.__new__(ExistingBase)
        base.existing = tuple(existing)
        base.names = _pick(self.names, kept)
        base.initialized = _pick(self.initialized, kept)
        slot_of = {i: k for k, i in enumerate(kept)}
        base.position = {
            m: slot_of[i] for m, n in enumerate(at) if (i := self.position.get(n)) is not None
        }
        base.parts = _pick(self.parts, kept)
        base.pods = self.pods.subset(kept)
        base.cpu = base._block_max(RESOURCE_CPU)
        base.memory = base._block_max(RESOURCE_MEMORY)
        base._domains, base._values, base._allowed = {}, {}, {}
        base._keys, base._sources, base._ids = self._keys, None, None
        base._parent = (self, kept)
        return base

    def patched(
        self, existing: Sequence[ExistingNode], parts: Callable[[ExistingNode], SlotParts]
    ) -> ExistingBase | None:
        """The base of ``existing`` made from this one, when ``existing`` is these nodes, in
        order, with only some of them changed in ways that keep their slot where it is (same
        name, initialisation and whether they take pods): what pods bound, deleted or finished
        between two rounds do. None when it is not so (build a new base then)."""
        if len(existing) != len(self.existing):
            return None
        changed = [
            n for n, same in enumerate(map(operator.is_, existing, self.existing)) if not same
        ]
        new_parts = list(self.parts)
        for n in changed:
            old, ex = self.existing[n], existing[n]
            if (
                ex.node.name != old.node.name
                or ex.initialized != old.initialized
                or takes_new_pods(ex) != takes_new_pods(old)
            ):
                return None
            i = self.position.get(n)
            if i is not None:
                new_parts[i] = parts(ex)
        base = object.__new__(ExistingBase)
        base.existing = tuple(existing)
        base.names, base.initialized, base.position = self.names, self.initialized, self.position
        base.parts = tuple(new_parts)
        slots = [i for n in changed if (i := self.position.get(n)) is not None]
        base.pods = self.pods.patched({i: base.parts[i].placed for i in slots})
        base.cpu = _patch_blocks(self.cpu, base.parts, slots, RESOURCE_CPU)
        base.memory = _patch_blocks(self.memory, base.parts, slots, RESOURCE_MEMORY)
        # A node's domains come from its requirements and taints only: kept while those are
        # the same (pods changed, not labels).
        same_domains = all(
            base.parts[i].requirements is self.parts[i].requirements
            and base.parts[i].taints == self.parts[i].taints
            for i in slots
        )
        base._domains = self._domains if same_domains else {}
        base._keys = self._keys if same_domains else None
        base._values = self._values if same_domains else {}
        base._allowed = self._allowed if same_domains else {}
        base._sources = self._sources if same_domains else None
        base._ids, base._parent = None, None
        return base

    def same_nodes(self, existing: Sequence[ExistingNode]) -> bool:
        """Whether ``existing`` holds the very nodes this base was built from, in order."""
        return len(existing) == len(self.existing) and all(
            map(operator.is_, existing, self.existing)
        )

    def _block_max(self, resource: str) -> tuple[int, ...]:
        room = [p.remaining.get(resource, 0) for p in self.parts]
        return tuple(max(room[b : b + BLOCK]) for b in range(0, len(room), BLOCK))

    def domains(self, key: str) -> Mapping[str, Sequence[DomainSource]]:
        """label value -> the nodes whose labels give ``key`` that one value, in slot order."""
        domains = self._domains.get(key)
        if domains is None:
            domains = {}
            for value, source in zip(self.values(key), self.sources(), strict=True):
                if value is not None:
                    domains.setdefault(value, []).append(source)
            self._domains[key] = domains
        return domains

    def sources(self) -> tuple[DomainSource, ...]:
        """Each slot as a source of domains (its requirements and taints)."""
        if self._sources is None:
            if self._parent is not None:
                parent, kept = self._parent
                self._sources = _pick(parent.sources(), kept)
            else:
                self._sources = tuple(DomainSource(p.requirements, p.taints) for p in self.parts)
        return self._sources

    def values(self, key: str) -> tuple[str | None, ...]:
        """Each slot's value of the label ``key`` (None: it has none), in slot order."""
        held = self._values.get(key)
        if held is None:
            if self._parent is not None:
                parent, kept = self._parent
                held = _pick(parent.values(key), kept)
            else:
                held = tuple(_single(p.requirements.get(key)) for p in self.parts)
            self._values[key] = held
        return held

    def allowed(self, key: str, domains: frozenset[str]) -> tuple[int, ...]:
        """The slots a pod limited to ``domains`` of ``key`` may go to, in order: those with a
        value of the key in ``domains``, and those without the label (``Prefilter.rules_out``
        leaves those to the full check)."""
        held = self._allowed.get((key, domains))
        if held is None:
            held = tuple(i for i, v in enumerate(self.values(key)) if v is None or v in domains)
            if len(self._allowed) >= 64:  # the allowed sets of a solve are few; never grow
                self._allowed.clear()
            self._allowed[(key, domains)] = held
        return held

    def label_keys(self) -> tuple[str, ...]:
        """Every label key some node has (requirements' keys), in first-seen order."""
        if self._keys is None:
            keys: dict[str, None] = {}
            for p in self.parts:
                keys.update(dict.fromkeys(p.requirements))
            self._keys = tuple(keys)
        return self._keys


def _patch_blocks(
    blocks: tuple[int, ...], parts: Sequence[SlotParts], slots: Sequence[int], resource: str
) -> tuple[int, ...]:
    """Block maxima with the blocks of ``slots`` re-measured."""
    out = list(blocks)
    for b in {i // BLOCK for i in slots}:
        out[b] = max(p.remaining.get(resource, 0) for p in parts[b * BLOCK : (b + 1) * BLOCK])
    return tuple(out)


def _pick(items: tuple[T, ...], kept: tuple[int, ...]) -> tuple[T, ...]:
    """The items at ``kept``, in that order."""
    if len(kept) < 2:
        return tuple(items[i] for i in kept)
    return operator.itemgetter(*kept)(items)  # type: ignore[no-any-return]


def _single(req: Req | None) -> str | None:
    """The one value a node's requirement pins (its label's), else None."""
    return req.single() if req is not None else None
