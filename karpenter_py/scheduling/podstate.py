"""A pod's scheduling state during one solve: what it currently insists on, and how to relax it.

Under ``PREFERENCE_POLICY=Respect`` a pod first asks for everything, its preferences included:
the heaviest preferred node-affinity term and every preferred pod (anti-)affinity term are
treated as required, and ScheduleAnyway spread constraints as DoNotSchedule. When it cannot be
placed, ``relax`` drops one preference in upstream's order and the pod is retried:

1. the first required node-affinity term, if there are other OR-ed terms to fall back to;
2. the heaviest preferred pod-affinity term;
3. the heaviest preferred pod-anti-affinity term;
4. the heaviest preferred node-affinity term;
5. one ScheduleAnyway topology spread constraint;
6. tolerate every PreferNoSchedule taint (only when some NodePool has one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter_py.model.core import (
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PreferredNodeTerm,
    SelectorRequirement,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from karpenter_py.scheduling.requirements import Requirements
from karpenter_py.scheduling.taints import PREFER_NO_SCHEDULE_TOLERATION
from karpenter_py.scheduling.topology import is_hard

RequirementsCache = dict[tuple[object, ...], Requirements]


def requirements_for(
    cache: RequirementsCache,
    node_selector: Mapping[str, str],
    terms: tuple[tuple[SelectorRequirement, ...], ...],
) -> Requirements:
    """Requirements from a nodeSelector plus node selector terms, memoised per solve: pods of one
    workload share them, and sharing one object lets intersections short-cut on identity."""
    key: tuple[object, ...] = (tuple(sorted(node_selector.items())), terms)
    cached = cache.get(key)
    if cached is None:
        cached = Requirements.from_labels(node_selector)
        for t in terms:
            cached = cached & Requirements.from_selectors(t)
        cache[key] = cached
    return cached


@dataclass(eq=False, slots=True)
class PodState:
    pod: Pod
    index: int
    required_terms: list[NodeSelectorTerm]
    preferred_node: list[PreferredNodeTerm]
    preferred_affinity: list[WeightedPodAffinityTerm]
    preferred_anti_affinity: list[WeightedPodAffinityTerm]
    spread: list[TopologySpreadConstraint]
    tolerations: tuple[Toleration, ...]
    requirements: Requirements = field(default_factory=Requirements)
    strict_requirements: Requirements = field(default_factory=Requirements)
    cache: RequirementsCache = field(default_factory=dict)
    signature: tuple[object, ...] = ()
    relaxations: list[str] = field(default_factory=list)

    @staticmethod
    def of(
        pod: Pod, index: int, *, respect_preferences: bool, cache: RequirementsCache
    ) -> PodState:
        state = PodState(
            pod=pod,
            index=index,
            required_terms=list(pod.required_node_terms),
            preferred_node=sorted(pod.preferred_node_terms, key=lambda t: -t.weight)
            if respect_preferences
            else [],
            preferred_affinity=sorted(pod.preferred_pod_affinity, key=lambda t: -t.weight)
            if respect_preferences
            else [],
            preferred_anti_affinity=sorted(pod.preferred_pod_anti_affinity, key=lambda t: -t.weight)
            if respect_preferences
            else [],
            spread=[t for t in pod.topology_spread if respect_preferences or is_hard(t)],
            tolerations=pod.tolerations,
            cache=cache,
        )
        state.refresh()
        return state

    def refresh(self) -> None:
        first = (self.required_terms[0].match_expressions,) if self.required_terms else ()
        self.strict_requirements = requirements_for(self.cache, self.pod.node_selector, first)
        if self.preferred_node:
            self.requirements = requirements_for(
                self.cache,
                self.pod.node_selector,
                (*first, self.preferred_node[0].term.match_expressions),
            )
        else:
            self.requirements = self.strict_requirements
        # What a node's refusal depends on besides topology: claims cache refusals by it.
        self.signature = (
            id(self.requirements),
            tuple(sorted(self.pod.requests.items())),
            self.tolerations,
            self.pod.host_ports,
        )

    @property
    def affinity_terms(self) -> list[PodAffinityTerm]:
        return [*self.pod.pod_affinity, *(t.term for t in self.preferred_affinity)]

    @property
    def anti_affinity_terms(self) -> list[PodAffinityTerm]:
        return [*self.pod.pod_anti_affinity, *(t.term for t in self.preferred_anti_affinity)]

    def node_selector_terms(self) -> tuple[Requirements, ...]:
        """Every alternative the pod's required node affinity allows (for spread node filters)."""
        if not self.pod.required_node_terms:
            return (requirements_for(self.cache, self.pod.node_selector, ()),)
        return tuple(
            requirements_for(self.cache, self.pod.node_selector, (t.match_expressions,))
            for t in self.pod.required_node_terms
        )

    def relax(self, *, may_tolerate_prefer_no_schedule: bool) -> bool:
        """Drop the next preference; False when nothing is left to give up."""
        if len(self.required_terms) > 1:
            self.required_terms.pop(0)
            self.relaxations.append("dropped a required node affinity term")
        elif self.preferred_affinity:
            self.preferred_affinity.pop(0)
            self.relaxations.append("dropped a preferred pod affinity term")
        elif self.preferred_anti_affinity:
            self.preferred_anti_affinity.pop(0)
            self.relaxations.append("dropped a preferred pod anti-affinity term")
        elif self.preferred_node:
            self.preferred_node.pop(0)
            self.relaxations.append("dropped a preferred node affinity term")
        elif any(not is_hard(t) for t in self.spread):
            soft = next(t for t in self.spread if not is_hard(t))
            self.spread.remove(soft)
            self.relaxations.append(
                f"dropped ScheduleAnyway topology spread on {soft.topology_key}"
            )
        elif (
            may_tolerate_prefer_no_schedule
            and PREFER_NO_SCHEDULE_TOLERATION not in self.tolerations
        ):
            self.tolerations = (*self.tolerations, PREFER_NO_SCHEDULE_TOLERATION)
            self.relaxations.append("tolerated PreferNoSchedule taints")
        else:
            return False
        self.refresh()
        return True
