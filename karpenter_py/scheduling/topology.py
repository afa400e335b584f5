"""Topology spread and pod (anti-)affinity as counts of matching pods per domain.

Each distinct constraint becomes a ``TopologyGroup`` that counts, per domain (zone, hostname, any
label value), the pods its selector matches. A pod *owns* the groups built from its own
constraints; when it is placed, it is *recorded* in every group that selects it. Before a
placement, each owned group (and each inverse anti-affinity group that selects the pod) narrows
the node's requirement on its key to the domains it allows. Semantics follow upstream's
topology.go / topologygroup.go, with one change in how domains are scanned: when the node's
domains are a finite set (always, for hostnames) only those are inspected, so self
anti-affinity over thousands of new nodes stays linear.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from karpenter_py.model.core import (
    DO_NOT_SCHEDULE,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from karpenter_py.model.labels import LABEL_HOSTNAME
from karpenter_py.scheduling.requirements import WELL_KNOWN, Req, Requirements, compatible
from karpenter_py.scheduling.taints import untolerated

_MAX: Final = 1 << 31
LABEL_NAMESPACE_NAME: Final = "kubernetes.io/metadata.name"


class Kind(Enum):
    SPREAD = "topology spread"
    AFFINITY = "pod affinity"
    ANTI_AFFINITY = "pod anti-affinity"


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """Which nodes a spread constraint counts (nodeAffinityPolicy / nodeTaintsPolicy: Honor)."""

    terms: tuple[Requirements, ...] | None  # None: every node (policy Ignore)
    tolerations: tuple[Toleration, ...] | None  # None: taints ignored

    def matches(self, reqs: Mapping[str, Req], taints: Sequence[Taint]) -> bool:
        # As upstream's TopologyNodeFilter: the node must be *compatible* with one of the pod's
        # terms, so a node without a custom label the pod selects on does not count.
        if self.terms is not None and not any(
            not t or compatible(reqs, t, allow_undefined=WELL_KNOWN) is None for t in self.terms
        ):
            return False
        return self.tolerations is None or untolerated(taints, self.tolerations) is None

    def counts_every_node(self) -> bool:
        """True when the filter passes every node whatever its labels and taints (a pod with
        no node affinity under the default nodeAffinityPolicy Honor, taints ignored)."""
        return self.tolerations is None and (self.terms is None or any(not t for t in self.terms))


@dataclass(frozen=True, slots=True)
class GroupKey:
    kind: Kind
    key: str
    namespaces: frozenset[str] | None  # None: all namespaces
    namespace_selector: LabelSelector | None
    selector: LabelSelector | None
    max_skew: int
    min_domains: int | None
    node_filter: NodeFilter | None


class TopologyGroup:
    __slots__ = ("domains", "empty", "gkey", "key", "kind", "owners")

    def __init__(self, gkey: GroupKey, domains: Mapping[str, int]) -> None:
        self.gkey = gkey
        self.kind = gkey.kind
        self.key = gkey.key
        self.domains: dict[str, int] = dict(domains)
        self.empty: set[str] = {d for d, c in self.domains.items() if c == 0}
        self.owners: set[int] = set()

    def selects(self, pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        g = self.gkey
        if g.selector is None:
            return False
        if (
            g.namespaces is not None
            and pod.namespace not in g.namespaces
            and (
                g.namespace_selector is None
                or not g.namespace_selector.matches(
                    _namespace_labels(namespace_labels, pod.namespace)
                )
            )
        ):
            return False
        return g.selector.matches(pod.labels)

    def counts(
        self,
        pod: Pod,
        reqs: Mapping[str, Req],
        taints: Sequence[Taint],
        ns: Mapping[str, Mapping[str, str]],
    ) -> bool:
        if not self.selects(pod, ns):
            return False
        nf = self.gkey.node_filter
        return nf is None or nf.matches(reqs, taints)

    def record(self, domain: str) -> None:
        self.domains[domain] = self.domains.get(domain, 0) + 1
        self.empty.discard(domain)

    # --------------------------------------------------------------- allowed domains
    def allowed(self, pod_domains: Req, node_domains: Req, self_selecting: bool) -> Req:
        if self.kind is Kind.SPREAD:
            return self._spread(pod_domains, node_domains, self_selecting)
        if self.kind is Kind.AFFINITY:
            return self._affinity(pod_domains, node_domains, self_selecting)
        return self._anti_affinity(pod_domains, node_domains)

    def _candidates(self, node_domains: Req) -> list[tuple[str, int]]:
        """(domain, count) pairs the node could be in, scanning the smaller side."""
        if not node_domains.complement:
            out = []
            for d in node_domains.values:
                count = self.domains.get(d)
                if count is None:
                    if self.key != LABEL_HOSTNAME:
                        continue  # a domain no NodePool or node offers
                    count = 0  # a new node's placeholder hostname: nothing there yet
                out.append((d, count))
            return out
        return [(d, c) for d, c in self.domains.items() if node_domains.has(d)]

    def _min_count(self, pod_domains: Req) -> int:
        if self.key == LABEL_HOSTNAME:
            return 0  # a new node is always an empty hostname domain
        lowest, eligible = _MAX, 0
        for d, c in self.domains.items():
            if pod_domains.has(d):
                eligible += 1
                lowest = min(lowest, c)
        md = self.gkey.min_domains
        if md is not None and eligible < md:
            return 0
        return 0 if lowest == _MAX else lowest

    def _spread(self, pod_domains: Req, node_domains: Req, self_selecting: bool) -> Req:
        lowest = self._min_count(pod_domains)
        best, best_count = "", _MAX
        skew = self.gkey.max_skew
        for d, c in self._candidates(node_domains):
            if not pod_domains.has(d):
                continue
            count = c + 1 if self_selecting else c
            if count - lowest <= skew and (
                count < best_count or (count == best_count and d < best)
            ):
                best, best_count = d, count
        return Req.in_(self.key, (best,)) if best else Req.does_not_exist(self.key)

    def _affinity(self, pod_domains: Req, node_domains: Req, self_selecting: bool) -> Req:
        options = {d for d, c in self.domains.items() if c > 0 and pod_domains.has(d)}
        if not options and self_selecting:
            # Nothing to be near yet and the pod matches itself: it may start a domain. Prefer one the
            # node is already in (the node's own hostname, or its zone).
            for d, _ in sorted(self._candidates(node_domains)):
                if pod_domains.has(d):
                    options.add(d)
                    break
            if not options:
                options = {d for d in sorted(self.domains) if pod_domains.has(d)}
                options = set(sorted(options)[:1])
        return Req.in_(self.key, options)

    def possible(self, pod_domains: Req, self_selecting: bool) -> frozenset[str] | None:
        """Every domain this group could allow for some node, or None when that is open-ended."""
        if self.kind is Kind.SPREAD:
            lowest = self._min_count(pod_domains)
            bump = 1 if self_selecting else 0
            skew = self.gkey.max_skew
            return frozenset(
                d
                for d, c in self.domains.items()
                if pod_domains.has(d) and c + bump - lowest <= skew
            )
        if self.kind is Kind.AFFINITY:
            found = frozenset(d for d, c in self.domains.items() if c > 0 and pod_domains.has(d))
            return found if found or not self_selecting else None
        return frozenset(d for d in self.empty if pod_domains.has(d))

    def _anti_affinity(self, pod_domains: Req, node_domains: Req) -> Req:
        if not node_domains.complement:
            ok = {
                d for d in node_domains.values if pod_domains.has(d) and self.domains.get(d, 0) == 0
            }
        else:
            ok = {d for d in self.empty if pod_domains.has(d) and node_domains.has(d)}
        return Req.in_(self.key, ok)


def _namespace_labels(known: Mapping[str, Mapping[str, str]], namespace: str) -> dict[str, str]:
    """A namespace's labels, with the ``kubernetes.io/metadata.name`` label the API server always
    sets, so a namespaceSelector on it works without the caller passing namespace labels."""
    return {**known.get(namespace, {}), LABEL_NAMESPACE_NAME: namespace}


def pod_namespaces(
    pod: Pod, term: PodAffinityTerm
) -> tuple[frozenset[str] | None, LabelSelector | None]:
    """The namespaces an affinity term looks in: listed ones, a selector, or the pod's own."""
    if (
        term.namespace_selector is not None
        and not term.namespace_selector.match_labels
        and not term.namespace_selector.match_expressions
    ):
        return None, None  # an empty namespaceSelector means every namespace
    if term.namespaces or term.namespace_selector is not None:
        return frozenset(term.namespaces), term.namespace_selector
    return frozenset((pod.namespace,)), None


def spread_selector(pod: Pod, tsc: TopologySpreadConstraint) -> LabelSelector | None:
    """The constraint's selector with matchLabelKeys merged in from the pod's own labels."""
    if tsc.label_selector is None:
        return None
    if not tsc.match_label_keys:
        return tsc.label_selector
    extra = {k: pod.labels[k] for k in tsc.match_label_keys if k in pod.labels}
    return tsc.label_selector.with_labels(extra)


def is_hard(tsc: TopologySpreadConstraint) -> bool:
    return tsc.when_unsatisfiable == DO_NOT_SCHEDULE


@dataclass(frozen=True, slots=True)
class Prefilter:
    hostnames: tuple[tuple[dict[str, int], int], ...]
    domains: tuple[tuple[str, frozenset[str]], ...]

    @property
    def shape(self) -> tuple[object, ...]:
        """What the filter rules out, as a key: the hostname groups (their counts only grow
        during a solve, so a node out stays out) and the allowed domains per key."""
        return (tuple((id(c), t) for c, t in self.hostnames), self.domains)

    def rules_out_host(self, hostname: str) -> bool:
        """Whether a hostname group keeps the pod off the node of this hostname."""
        for counts, threshold in self.hostnames:
            if counts.get(hostname, 0) >= threshold:
                return True
        return False

    def rules_out(self, hostname: str, reqs: Mapping[str, Req]) -> bool:
        if self.rules_out_host(hostname):
            return True
        for key, allowed in self.domains:
            req = reqs.get(key)
            if req is not None and not req.complement and req.values.isdisjoint(allowed):
                return True
        return False


@dataclass(frozen=True, slots=True)
class DomainSource:
    """Something that can provide a domain: a NodePool (its requirements, taints) or a node."""

    requirements: Requirements
    taints: tuple[Taint, ...]


@dataclass(frozen=True, slots=True)
class Placed:
    pod: Pod
    requirements: Requirements
    taints: tuple[Taint, ...]


class PlacedGroup:
    """The pods of one existing node as topology sees them, with what counting them needs
    built on first use and kept: the node's parts outlive a solve (``IndexCache``), so a
    topology group over 100,000 placed pods reads one small index per node instead of every
    pod. Read-only once built; building is idempotent, so threads may race on it."""

    __slots__ = ("_anti", "_by_label", "pods")

    def __init__(self, pods: tuple[Placed, ...]) -> None:
        self.pods = pods
        self._by_label: dict[str, dict[str, list[Placed]]] = {}
        self._anti: tuple[Placed, ...] | None = None

    def by_label(self, key: str) -> dict[str, list[Placed]]:
        """label value -> the pods carrying it, for ``key``."""
        index = self._by_label.get(key)
        if index is None:
            index = _label_index(self.pods, key)
            self._by_label[key] = index
        return index

    @property
    def anti_affinity(self) -> tuple[Placed, ...]:
        """The pods with required anti-affinity (they keep matching pods out of their domains)."""
        if self._anti is None:
            self._anti = tuple(p for p in self.pods if p.pod.pod_anti_affinity)
        return self._anti


class ExistingPods:
    """The pods on the existing nodes, one ``PlacedGroup`` per node, with their label indexes
    merged per key on first use. Shared by the solves over the same nodes
    (``existing.ExistingBase``), so a new topology group reads only its value's lists instead of
    every node's index; read-only once built, and building is idempotent."""

    __slots__ = ("_anti", "_by_label", "_parent", "groups")

    def __init__(self, groups: Sequence[PlacedGroup]) -> None:
        self.groups = tuple(groups)
        self._by_label: dict[str, dict[str, list[list[Placed]]]] = {}
        self._anti: tuple[Placed, ...] | None = None
        # (the pods this was cut from, the groups of it left out): merged indexes come from its.
        self._parent: tuple[ExistingPods, tuple[PlacedGroup, ...]] | None = None

    def subset(self, kept: Sequence[int]) -> ExistingPods:
        """These pods with only the groups at ``kept`` (positions, in order)."""
        out = ExistingPods([self.groups[i] for i in kept])
        keep = set(kept)
        out._parent = (self, tuple(g for i, g in enumerate(self.groups) if i not in keep))
        return out

    def by_label(self, key: str) -> dict[str, list[list[Placed]]]:
        """label value -> the nodes' lists of pods carrying it, for ``key``."""
        merged = self._by_label.get(key)
        if merged is None:
            if self._parent is not None:
                merged = self._cut(key, *self._parent)
            else:
                merged = {}
                for group in self.groups:
                    for value, pods in group.by_label(key).items():
                        merged.setdefault(value, []).append(pods)
            self._by_label[key] = merged
        return merged

    @staticmethod
    def _cut(
        key: str, parent: ExistingPods, gone: Sequence[PlacedGroup]
    ) -> dict[str, list[list[Placed]]]:
        """The parent's merged index for ``key`` without the lists of the ``gone`` groups."""
        dropped = {id(pods) for g in gone for pods in g.by_label(key).values()}
        merged: dict[str, list[list[Placed]]] = {}
        for value, lists in parent.by_label(key).items():
            left = [pods for pods in lists if id(pods) not in dropped] if dropped else lists
            if left:
                merged[value] = left
        return merged

    def patched(self, groups: Mapping[int, PlacedGroup]) -> ExistingPods:
        """These pods with some nodes' groups replaced (position -> group); the merged label
        indexes are rebuilt on first use."""
        if not groups:
            return self
        replaced = list(self.groups)
        for i, group in groups.items():
            replaced[i] = group
        return ExistingPods(replaced)

    @property
    def anti_affinity(self) -> tuple[Placed, ...]:
        """Every existing pod with required anti-affinity."""
        if self._anti is None:
            self._anti = tuple(p for g in self.groups for p in g.anti_affinity)
        return self._anti


def _label_index(pods: Iterable[Placed], key: str) -> dict[str, list[Placed]]:
    index: dict[str, list[Placed]] = {}
    for p in pods:
        value = p.pod.labels.get(key)
        if value is not None:
            index.setdefault(value, []).append(p)
    return index


class Topology:
    """All topology groups of one solve, and the pods already placed that they count."""

    def __init__(
        self,
        *,
        universe: Mapping[str, Mapping[str, Sequence[DomainSource]]],
        placed: Sequence[Placed],
        namespace_labels: Mapping[str, Mapping[str, str]],
        existing: ExistingPods | Sequence[PlacedGroup] = (),
    ) -> None:
        """``existing``: the pods already on existing nodes, one group per node; ``placed``:
        other pods already placed. Pods this solve places are recorded with ``record``."""
        self.universe = universe
        self.namespace_labels = namespace_labels
        self.existing = existing if isinstance(existing, ExistingPods) else ExistingPods(existing)
        self.placed: list[Placed] = list(placed)
        self.groups: dict[GroupKey, TopologyGroup] = {}
        self.inverse: dict[GroupKey, TopologyGroup] = {}
        self.owned: dict[int, list[TopologyGroup]] = {}
        self.inverse_owned: dict[int, list[TopologyGroup]] = {}
        # Which groups select a (namespace, labels) pair; rebuilt when a group is added.
        self._version = 0
        self._selecting: dict[
            tuple[object, ...], tuple[int, list[TopologyGroup], list[TopologyGroup]]
        ] = {}
        # label key -> value -> ``placed`` pods with that label, built for a key the first time
        # a group's selector requires it, so a new group counts only the pods it could select
        # instead of every placed pod (``existing`` nodes keep their own such index).
        self._by_label: dict[str, dict[str, list[Placed]]] = {}
        self._seed_inverse_from_placed()

    # ------------------------------------------------------------------ group registry
    def _domains_for(self, key: str, node_filter: NodeFilter | None) -> dict[str, int]:
        out = {}
        for domain, sources in self.universe.get(key, {}).items():
            if node_filter is None or any(
                node_filter.matches(s.requirements.with_req(Req.in_(key, (domain,))), s.taints)
                for s in sources
            ):
                out[domain] = 0
        return out

    def _group(
        self, gkey: GroupKey, registry: dict[GroupKey, TopologyGroup], *, count: bool
    ) -> TopologyGroup:
        group = registry.get(gkey)
        if group is None:
            group = TopologyGroup(gkey, self._domains_for(gkey.key, gkey.node_filter))
            registry[gkey] = group
            self._version += 1
            if count:
                for p in self._may_select(gkey.selector):
                    # Pods on their way out do not count (upstream IgnoredForTopology).
                    if not p.pod.deletion_timestamp:
                        self._record_one(group, p)
        return group

    def _may_select(self, selector: LabelSelector | None) -> Iterator[Placed]:
        """The placed pods ``selector`` could match: those carrying a label value it requires
        (a matchLabels pair, or an In expression), else every placed pod."""
        if selector is None:
            return
        key = ""
        values: tuple[str, ...] = ()
        if selector.match_labels:
            key, value = selector.match_labels[0]
            values = (value,)
        else:
            for req in selector.match_expressions:
                if req.operator == "In":
                    key, values = req.key, tuple(sorted(req.values))
                    break
        if not key:
            for group in self.existing.groups:
                yield from group.pods
            yield from self.placed
            return
        existing = self.existing.by_label(key)
        loose = self._label_index(key)
        for value in values:
            for pods in existing.get(value, ()):
                yield from pods
            yield from loose.get(value, ())

    def _label_index(self, key: str) -> dict[str, list[Placed]]:
        index = self._by_label.get(key)
        if index is None:
            index = self._by_label[key] = _label_index(self.placed, key)
        return index

    def _record_one(self, group: TopologyGroup, p: Placed) -> None:
        if not group.counts(p.pod, p.requirements, p.taints, self.namespace_labels):
            return
        req = p.requirements.get(group.key)
        if req is None or req.complement:
            return
        if group.kind is Kind.ANTI_AFFINITY:
            for d in req.values:
                group.record(d)
        elif len(req.values) == 1:
            group.record(next(iter(req.values)))

    def _seed_inverse_from_placed(self) -> None:
        """Pods already running with required anti-affinity keep matching pods out of their domains."""
        anti = list(self.existing.anti_affinity)
        anti.extend(p for p in self.placed if p.pod.pod_anti_affinity)
        for p in anti:
            for term in p.pod.pod_anti_affinity:
                group = self._group(
                    self._affinity_key(Kind.ANTI_AFFINITY, p.pod, term), self.inverse, count=False
                )
                req = p.requirements.get(group.key)
                if req is not None and not req.complement:
                    for d in req.values:
                        group.record(d)

    @staticmethod
    def _affinity_key(kind: Kind, pod: Pod, term: PodAffinityTerm) -> GroupKey:
        namespaces, ns_selector = pod_namespaces(pod, term)
        return GroupKey(
            kind, term.topology_key, namespaces, ns_selector, term.label_selector, 1, None, None
        )

    @staticmethod
    def _spread_key(
        state_pod: Pod,
        tsc: TopologySpreadConstraint,
        node_terms: tuple[Requirements, ...],
        tolerations: tuple[Toleration, ...],
    ) -> GroupKey:
        nf = NodeFilter(
            terms=node_terms if tsc.node_affinity_policy == "Honor" else None,
            tolerations=tolerations if tsc.node_taints_policy == "Honor" else None,
        )
        return GroupKey(
            Kind.SPREAD,
            tsc.topology_key,
            frozenset((state_pod.namespace,)),
            None,
            spread_selector(state_pod, tsc),
            tsc.max_skew,
            tsc.min_domains,
            None if nf.terms is None and nf.tolerations is None else nf,
        )

    def register(
        self,
        index: int,
        pod: Pod,
        *,
        spread: Sequence[TopologySpreadConstraint],
        affinity: Sequence[PodAffinityTerm],
        anti_affinity: Sequence[PodAffinityTerm],
        node_terms: tuple[Requirements, ...],
        tolerations: tuple[Toleration, ...],
    ) -> None:
        """(Re)build the groups a pod owns from its current (possibly relaxed) constraints."""
        for group in self.owned.pop(index, []):
            group.owners.discard(index)
        for group in self.inverse_owned.pop(index, []):
            group.owners.discard(index)
        owned = [
            self._group(self._spread_key(pod, t, node_terms, tolerations), self.groups, count=True)
            for t in spread
        ]
        owned += [
            self._group(self._affinity_key(Kind.AFFINITY, pod, t), self.groups, count=True)
            for t in affinity
        ]
        owned += [
            self._group(self._affinity_key(Kind.ANTI_AFFINITY, pod, t), self.groups, count=True)
            for t in anti_affinity
        ]
        # Only required anti-affinity keeps other pods away: a preference belongs to this pod and
        # is relaxed on this pod, so it must not block others (upstream does the same).
        inverse = [
            self._group(self._affinity_key(Kind.ANTI_AFFINITY, pod, t), self.inverse, count=False)
            for t in pod.pod_anti_affinity
        ]
        for group in owned + inverse:
            group.owners.add(index)
        if owned:
            self.owned[index] = owned
        if inverse:
            self.inverse_owned[index] = inverse

    # ------------------------------------------------------------------ scheduling
    def _selecting_groups(self, pod: Pod) -> tuple[list[TopologyGroup], list[TopologyGroup]]:
        """(groups, inverse groups) whose selectors match the pod; memoised by namespace+labels."""
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        hit = self._selecting.get(key)
        if hit is not None and hit[0] == self._version:
            return hit[1], hit[2]
        groups = [g for g in self.groups.values() if g.selects(pod, self.namespace_labels)]
        inverse = [g for g in self.inverse.values() if g.selects(pod, self.namespace_labels)]
        self._selecting[key] = (self._version, groups, inverse)
        return groups, inverse

    def keys_involving(self, index: int, pod: Pod) -> frozenset[str] | None:
        """The topology keys of every group where the pod goes matters to: those it owns (its
        own spread or pod (anti-)affinity) and those that count it. A pod may move between new
        NodeClaims without changing any topology decision when it keeps its domain of each.
        None when a group filters the nodes it counts by their labels or taints (that depends on
        more than the domain)."""
        groups = [*self.owned.get(index, ()), *self.inverse_owned.get(index, ())]
        counting, inverse = self._selecting_groups(pod)
        groups.extend(counting)
        groups.extend(inverse)
        for g in groups:
            nf = g.gkey.node_filter
            if nf is not None and not nf.counts_every_node():
                return None
        return frozenset(g.key for g in groups)

    def prefilter(self, index: int, pod: Pod, pod_reqs: Mapping[str, Req]) -> Prefilter:
        """Cheap necessary conditions for this pod, valid until the next placement.

        Hostname groups become (counts, threshold) pairs: a node whose own hostname count reaches the
        threshold is out. Other groups become the set of domains they could allow at all: a node
        already pinned to domains outside that set is out. ``narrow`` still decides for real.
        """
        hostnames: list[tuple[dict[str, int], int]] = []
        domains: list[tuple[str, frozenset[str]]] = []
        for group, owned in self._groups_for(index, pod):
            self_selecting = group.selects(pod, self.namespace_labels)
            if group.key == LABEL_HOSTNAME:
                if group.kind is Kind.ANTI_AFFINITY:
                    hostnames.append((group.domains, 1))
                elif group.kind is Kind.SPREAD:
                    hostnames.append(
                        (group.domains, group.gkey.max_skew + (0 if self_selecting else 1))
                    )
                continue
            pod_domains = pod_reqs.get(group.key) or Req.exists(group.key)
            allowed = (
                group.possible(pod_domains, self_selecting)
                if owned or group.kind is Kind.ANTI_AFFINITY
                else None
            )
            if allowed is not None:
                domains.append((group.key, allowed))
        return Prefilter(tuple(hostnames), tuple(domains))

    def constrains(self, index: int, pod: Pod) -> bool:
        """Whether any group has a say in where the pod goes (its own, or an existing pod's
        required anti-affinity that selects it)."""
        return bool(self.owned.get(index)) or bool(self._selecting_groups(pod)[1])

    def _groups_for(self, index: int, pod: Pod) -> list[tuple[TopologyGroup, bool]]:
        out = [(g, True) for g in self.owned.get(index, ())]
        out.extend((g, False) for g in self._selecting_groups(pod)[1])
        return out

    def narrow(
        self, index: int, pod: Pod, pod_reqs: Mapping[str, Req], node_reqs: Requirements
    ) -> Requirements | str:
        """Node requirements narrowed to the domains every relevant group allows, or why none do.

        ``pod_reqs`` are the pod's strict requirements (nodeSelector and required node affinity):
        they bound the domains a spread counts; preferences only narrow ``node_reqs``.
        """
        reqs = node_reqs
        owned = self.owned.get(index, ())
        inverse = self._selecting_groups(pod)[1]
        if not owned and not inverse:
            return reqs
        for group in (*owned, *inverse):
            pod_domains = pod_reqs.get(group.key) or Req.exists(group.key)
            node_domains = reqs.get(group.key) or Req.exists(group.key)
            self_selecting = group.selects(pod, self.namespace_labels)
            allowed = group.allowed(pod_domains, node_domains, self_selecting)
            narrowed = reqs.with_req(allowed)
            if narrowed[group.key].is_empty():
                return _explain(group, index)
            reqs = narrowed
        return reqs

    def record(self, index: int, placed: Placed) -> None:
        self.placed.append(placed)
        for key, by_value in self._by_label.items():
            value = placed.pod.labels.get(key)
            if value is not None:
                by_value.setdefault(value, []).append(placed)
        for group in self._selecting_groups(placed.pod)[0]:
            self._record_one(group, placed)
        for group in self.inverse_owned.get(index, ()):
            req = placed.requirements.get(group.key)
            if req is not None and not req.complement:
                for d in req.values:
                    group.record(d)


def _explain(group: TopologyGroup, index: int) -> str:
    g = group.gkey
    if not group.domains and g.key != LABEL_HOSTNAME:
        return (
            f"{group.kind.value} on {g.key}: no NodePool, instance type or node has a value for "
            f"{g.key}"
        )
    if group.kind is Kind.SPREAD:
        return f"topology spread constraint on {g.key} (maxSkew {g.max_skew}) cannot be satisfied"
    if group.kind is Kind.AFFINITY:
        return f"pod affinity on {g.key} has no domain with a matching pod"
    if index in group.owners:
        return f"pod anti-affinity on {g.key}: every allowed domain already has a matching pod"
    return f"an existing pod's anti-affinity on {g.key} excludes this pod from the allowed domains"
