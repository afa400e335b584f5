"""PodDisruptionBudgets as the cluster model keeps them: which pods, and how many may go now."""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_py.model.core import LabelSelector, Pod


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None  # None selects nothing (an absent selector)
    disruptions_allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: Pod) -> bool:
        return (
            pod.namespace == self.namespace
            and self.selector is not None
            and self.selector.matches(pod.labels)
        )
