"""Places a pod can go during a solve: a NodeClaim being built, or an existing node.

Both answer ``try_add`` with None (the pod was added) or a reason it does not fit. Checks run
cheapest first and a claim remembers which pod shapes it has already refused since it last
changed, so the usual case (a full node) costs one dictionary lookup.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Final

from karpenter_py.model.core import HostPort, Taint
from karpenter_py.model.labels import LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE
from karpenter_py.model.quantity import Resources
from karpenter_py.scheduling.hostports import conflict
from karpenter_py.scheduling.instances import PoolIndex
from karpenter_py.scheduling.podstate import PodState
from karpenter_py.scheduling.requirements import WELL_KNOWN, Req, Requirements, compatible
from karpenter_py.scheduling.reservations import ReservationLedger
from karpenter_py.scheduling.taints import describe, untolerated
from karpenter_py.scheduling.topology import Placed, Topology

# Keys whose narrowing changes which offerings (not just which types) remain.
_OFFERING_KEYS: Final = frozenset({LABEL_TOPOLOGY_ZONE, LABEL_CAPACITY_TYPE})
_NEGATIVE: Final = frozenset({"NotIn", "DoesNotExist"})


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


class _Place(ABC):
    """What a new claim and an existing node share: ``try_add``'s refusal cache and its walk of a
    pod's volume alternatives. Inherited, not called: the solver's innermost path pays no extra
    call for sharing it."""

    __slots__ = ()

    _refused: dict[tuple[object, ...], int]
    requirements: Requirements
    version: int

    def try_add(
        self,
        st: PodState,
        topology: Topology,
        signature: tuple[object, ...],
        volumes: tuple[Requirements, ...] = (),
    ) -> str | None:
        if self._refused.get(signature) == self.version:
            return "does not fit (unchanged since last check)"
        why = self._static_checks(st)
        if why is not None:
            self._refused[signature] = self.version
            return why
        reqs = self.requirements & st.requirements
        if volumes:
            return self._try_volumes(st, topology, signature, reqs, volumes)
        return self._place(st, topology, reqs)

    def refuses_for_good(self, signature: tuple[object, ...]) -> bool:
        """Whether the last ``try_add`` of this signature failed on what adding pods cannot undo
        (room, taints, labels, ports), not on topology."""
        return self._refused.get(signature) == self.version

    def _try_volumes(
        self,
        st: PodState,
        topology: Topology,
        signature: tuple[object, ...],
        reqs: Requirements,
        volumes: tuple[Requirements, ...],
    ) -> str | None:
        """As upstream: each volume alternative in turn, the pod placed with the first that
        fits."""
        why: str | None = None
        only_conflicts = True
        for alternative in volumes:
            conflict = self._volume_conflict(reqs, alternative)
            if conflict is not None:
                why = f"incompatible volume requirements, {conflict}"
                continue
            only_conflicts = False
            why = self._place(st, topology, reqs & alternative)
            if why is None:
                return None
        if only_conflicts:  # decided by the place's requirements alone: remember it
            self._refused[signature] = self.version
        return why

    @abstractmethod
    def _static_checks(self, st: PodState) -> str | None:
        """Why the pod cannot go here whatever topology says, or None."""

    @abstractmethod
    def _volume_conflict(self, reqs: Requirements, alternative: Requirements) -> str | None:
        """Why a volume alternative cannot go with this place's requirements, or None."""

    @abstractmethod
    def _place(self, st: PodState, topology: Topology, reqs: Requirements) -> str | None:
        """Add the pod with ``reqs`` if topology and resources allow; None when added."""


class NewClaim(_Place):
    """A NodeClaim under construction: its pods, requirements and remaining instance-type options."""

    __slots__ = (
        "_refused",
        "headroom",
        "hostname",
        "index",
        "ledger",
        "mask",
        "min_values_relaxed",
        "pods",
        "ports",
        "relax_min_values",
        "requests",
        "requirements",
        "version",
    )

    def __init__(
        self,
        index: PoolIndex,
        hostname: str,
        mask: int,
        *,
        relax_min_values: bool = False,
        pinned: Requirements | None = None,
        ledger: ReservationLedger | None = None,
    ) -> None:
        self.index = index
        # The solve's reservation room (None: no reserved offering anywhere, nothing to count).
        self.ledger = ledger
        # MIN_VALUES_POLICY=BestEffort: the first pod may lower minValues to what its types offer;
        # later pods must then keep that many distinct values (as upstream's in-flight claims).
        self.relax_min_values = relax_min_values
        self.min_values_relaxed = False
        self.hostname = hostname
        self.mask = mask
        self.requirements = index.requirements.with_req(Req.in_(LABEL_HOSTNAME, (hostname,)))
        if pinned:
            # Domains the claim must keep (the packing step moves pods only within theirs).
            self.requirements = self.requirements & pinned
            mask &= index.reqs_mask(pinned) & index.offering_mask(self.requirements)
            self.mask = mask
        self.requests: Resources = {}
        self.pods: list[PodState] = []
        self.ports: list[HostPort] = []
        self.version = 0
        self._refused: dict[tuple[object, ...], int] = {}
        self.headroom = index.headroom(mask, {})

    def has_room(self, requests: Mapping[str, int]) -> bool:
        """A necessary condition: some remaining option could still hold ``requests``."""
        headroom = self.headroom
        for name, amount in requests.items():  # an explicit loop: this runs per pod per candidate
            if amount > headroom.get(name, 0):
                return False
        return True

    def try_add_all(self, states: Sequence[PodState], topology: Topology) -> bool:
        """Add every pod of ``states`` at once, or none (False: add them one by one instead).
        For pods alike in signature, without host ports or volumes, that no topology group
        narrows (the packing step's pods): one check of their combined requests, one commit."""
        first = states[0]
        if self.ledger is not None:
            return False  # one by one, so each pod's reservations are counted
        if first.pod.host_ports or any(st.signature != first.signature for st in states):
            return False
        if self._static_checks(first) is not None:
            return False
        reqs = self.requirements & first.requirements
        for st in states:
            if topology.narrow(st.index, st.pod, st.strict_requirements, reqs) is not reqs:
                return False
        total = dict(self.requests)
        for name, amount in first.pod.requests.items():
            total[name] = total.get(name, 0) + amount * len(states)
        mask = self._narrow_types(reqs) & self.index.fit_mask(total)
        if not mask:
            return False
        if self._min_values(reqs, mask) is not None:
            if self.pods or not self.relax_min_values:
                return False
            reqs = relax_min_values(reqs, self.index, mask)
            self.min_values_relaxed = True
        self._commit(states, topology, reqs, mask, total)
        return True

    def _volume_conflict(self, reqs: Requirements, alternative: Requirements) -> str | None:
        # A volume alternative narrows the claim (so zones restrict offerings), not the pod's
        # affinity; labels the claim does not define yet are the instance types' to give.
        return compatible(reqs, alternative, allow_undefined=WELL_KNOWN)

    def _place(self, st: PodState, topology: Topology, reqs: Requirements) -> str | None:
        # Pod domains come from the strict requirements: a preferred node affinity may steer the
        # node, but must not shrink the domains a spread's skew is computed over.
        narrowed = topology.narrow(st.index, st.pod, st.strict_requirements, reqs)
        if isinstance(narrowed, str):
            return narrowed
        mask = self._narrow_types(narrowed)
        if st.pod.host_ports and self.index.daemon_port_masks:
            free, clash = self.index.ports_mask(st.pod.host_ports)
            if clash is not None and not mask & free:
                return (
                    f"host port {clash.port}/{clash.protocol} is taken by a daemonset on every "
                    "remaining instance type"
                )
            mask &= free
        total = _add(self.requests, st.pod.requests)
        mask &= self.index.fit_mask(total)
        if not mask:
            return "no instance type satisfies the combined requirements and resources"
        kept = None
        if self.ledger is not None:
            narrowed, mask, kept = self.ledger.fit(self.index, self.hostname, narrowed, mask)
            if not mask:
                return "every remaining instance type needs a capacity reservation that is full"
        why = self._min_values(narrowed, mask)
        if why is not None:
            if self.pods or not self.relax_min_values:
                return why
            narrowed = relax_min_values(narrowed, self.index, mask)
            self.min_values_relaxed = True
        self._commit((st,), topology, narrowed, mask, total)
        if kept is not None and self.ledger is not None:
            self.ledger.hold(self.hostname, kept)
        return None

    def _static_checks(self, st: PodState) -> str | None:
        """Checks that depend only on the pod's shape and this claim's state."""
        if not self.has_room(st.pod.requests):
            return "no remaining instance type has room"
        taint = untolerated(self.index.taints, st.tolerations)
        if taint is not None:
            return f"did not tolerate taint {describe(taint)}"
        port = conflict(self.ports, st.pod.host_ports)
        if port is not None:
            return f"host port {port.port}/{port.protocol} is already in use"
        if not st.requirements:
            return None
        return compatible(self.requirements, st.requirements, allow_undefined=WELL_KNOWN)

    def _narrow_types(self, reqs: Requirements) -> int:
        mask = self.mask
        offering_changed = False
        for key, req in reqs.items():
            if self.requirements.get(key) is not req:
                mask &= self.index.req_mask(req)
                offering_changed = (
                    offering_changed or key in _OFFERING_KEYS or key in self.index.offering_keys
                )
        if offering_changed:
            mask &= self.index.offering_mask(reqs)
        return mask

    def _min_values(self, reqs: Requirements, mask: int) -> str | None:
        for key, req in reqs.items():
            if (
                req.min_values is not None
                and self.index.distinct_values(key, req, mask) < req.min_values
            ):
                return f"minValues {req.min_values} for {key} cannot be met by the remaining instance types"
        return None

    def _commit(
        self,
        states: Sequence[PodState],
        topology: Topology,
        reqs: Requirements,
        mask: int,
        total: Resources,
    ) -> None:
        self.requirements = reqs
        self.mask = mask
        self.requests = total
        self.version += 1
        self.headroom = self.index.headroom(mask, total)
        for st in states:
            self.pods.append(st)
            self.ports.extend(st.pod.host_ports)
            topology.record(st.index, Placed(st.pod, reqs, self.index.taints))


def relax_min_values(reqs: Requirements, index: PoolIndex, mask: int) -> Requirements:
    """Lower every minValues the types in ``mask`` cannot meet to what they do offer."""
    for key, req in reqs.items():
        if req.min_values is None:
            continue
        have = index.distinct_values(key, req, mask)
        if have < req.min_values:
            # minValues must be at least 1 on a NodeClaim; 0 means there is nothing to keep.
            reqs = reqs.replaced(req.with_min_values(have or None))
    return reqs


class ExistingSlot(_Place):
    """A node (or in-flight NodeClaim) in the cluster with room left on it."""

    __slots__ = (
        "_refused",
        "initialized",
        "name",
        "pods",
        "ports",
        "remaining",
        "requirements",
        "taints",
        "version",
    )

    def __init__(
        self,
        *,
        name: str,
        requirements: Requirements,
        taints: tuple[Taint, ...],
        remaining: Resources,
        ports: list[HostPort],
        initialized: bool,
    ) -> None:
        self.name = name
        self.requirements = requirements
        self.taints = taints
        self.remaining = remaining
        self.ports = ports
        self.initialized = initialized
        self.pods: list[PodState] = []
        self.version = 0
        self._refused: dict[tuple[object, ...], int] = {}

    def _volume_conflict(self, reqs: Requirements, alternative: Requirements) -> str | None:
        # The node's labels must satisfy the alternative as they are (upstream's Compatible
        # without undefined well-known labels): a volume cannot attach to a node lacking them.
        return compatible(self.requirements, alternative)

    def _place(self, st: PodState, topology: Topology, reqs: Requirements) -> str | None:
        # Pod domains come from the strict requirements: a preferred node affinity may steer the
        # node, but must not shrink the domains a spread's skew is computed over.
        narrowed = topology.narrow(st.index, st.pod, st.strict_requirements, reqs)
        if isinstance(narrowed, str):
            return narrowed
        if narrowed is not reqs:
            why = self._topology_fits(reqs, narrowed)
            if why is not None:
                return why
        self.remaining = {k: v - st.pod.requests.get(k, 0) for k, v in self.remaining.items()}
        self.pods.append(st)
        self.ports.extend(st.pod.host_ports)
        self.version += 1
        topology.record(st.index, Placed(st.pod, self.requirements, self.taints))
        return None

    def _topology_fits(self, reqs: Requirements, narrowed: Requirements) -> str | None:
        """The node's labels must satisfy what topology added: a node without the topology key
        is in no domain, so it cannot host a pod that needs one (upstream's Compatible check)."""
        for key, req in narrowed.items():
            value = self.requirements.get(key)
            if value is None:
                if req is not reqs.get(key) and req.operator() not in _NEGATIVE:
                    return f'node has no "{key}" label, which the pod\'s topology needs'
            elif req is not value and len(req.intersect(value)) == 0:
                return f"topology requires {req}, node has {value}"
        return None

    def has_room(self, requests: Mapping[str, int]) -> bool:
        remaining = self.remaining
        for name, amount in requests.items():
            if amount > remaining.get(name, 0):
                return False
        return True

    def _static_checks(self, st: PodState) -> str | None:
        for name, amount in st.pod.requests.items():
            if amount > self.remaining.get(name, 0):
                return f"not enough {name}"
        taint = untolerated(self.taints, st.tolerations)
        if taint is not None:
            return f"did not tolerate taint {describe(taint)}"
        port = conflict(self.ports, st.pod.host_ports)
        if port is not None:
            return f"host port {port.port}/{port.protocol} is already in use"
        if not st.requirements:
            return None
        return compatible(self.requirements, st.requirements)
