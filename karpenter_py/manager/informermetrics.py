"""The informers' restarts as counters, read from each reflector's statistics.

A reflector counts its watches, lists and failures itself (``Reflector.statistics``); this adds
what grew since the last look to ``karpenter_informer_watch_restarts_total`` (every watch after
the first), ``karpenter_informer_relists_total`` and ``karpenter_informer_errors_total``,
labelled by informer name. ``run_state_metrics`` calls it every pass, on every replica.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from karpenter_py.informer.reflector import ReflectorStatistics
from karpenter_py.obs.metrics import Metrics


class Counted(Protocol):
    """What is read of a reflector."""

    @property
    def name(self) -> str: ...

    def statistics(self) -> ReflectorStatistics: ...


class InformerMetrics:
    def __init__(self, metrics: Metrics, reflectors: Sequence[Counted]) -> None:
        self.metrics = metrics
        self.reflectors = reflectors
        self._last: dict[str, tuple[int, int, int]] = {}  # informer -> (restarts, relists, errors)

    def update(self) -> None:
        m = self.metrics
        for r in self.reflectors:
            now = _counts(r.statistics())
            last = self._last.get(r.name, (0, 0, 0))
            for counter, value, before in zip(
                (m.informer_watch_restarts, m.informer_relists, m.informer_errors),
                now,
                last,
                strict=True,
            ):
                counter.labels(informer=r.name).inc(max(0, value - before))
            self._last[r.name] = now


def _counts(stats: ReflectorStatistics) -> tuple[int, int, int]:
    return max(0, stats.watches - 1), stats.relists, stats.errors
