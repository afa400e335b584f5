"""Informer restarts as counters: what each reflector's statistics grew by since the last pass."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from karpenter_py.informer.reflector import ReflectorStatistics
from karpenter_py.manager.informermetrics import InformerMetrics
from karpenter_py.obs.metrics import Metrics


@dataclass
class Counted:
    name: str
    watches: int = 0
    lists: int = 0
    errors: int = 0

    def statistics(self) -> ReflectorStatistics:
        return ReflectorStatistics(
            synced=self.lists > 0,
            resource_version=None,
            lists=self.lists,
            relists=max(0, self.lists - 1),
            watches=self.watches,
            events=0,
            bookmarks=0,
            errors=self.errors,
            last_error=None,
        )


NAMES = (
    "karpenter_informer_watch_restarts_total",
    "karpenter_informer_relists_total",
    "karpenter_informer_errors_total",
)


@pytest.mark.parametrize(
    ("passes", "want"),
    [
        pytest.param([(0, 0, 0)], (0.0, 0.0, 0.0), id="not started"),
        pytest.param([(1, 1, 0)], (0.0, 0.0, 0.0), id="the first list and watch"),
        pytest.param([(1, 1, 0), (4, 1, 2)], (3.0, 0.0, 2.0), id="three re-watches, two errors"),
        pytest.param([(2, 1, 0), (3, 2, 0), (5, 3, 1)], (4.0, 2.0, 1.0), id="relists add up"),
    ],
)
def test_counters_grow_by_what_the_statistics_grew(
    passes: list[tuple[int, int, int]], want: tuple[float, float, float]
) -> None:
    m = Metrics()
    pods = Counted("pods")
    informers = InformerMetrics(m, [pods])
    for watches, lists, errors in passes:
        pods.watches, pods.lists, pods.errors = watches, lists, errors
        informers.update()
    got = tuple(m.registry.get_sample_value(n, {"informer": "pods"}) for n in NAMES)
    assert got == want
