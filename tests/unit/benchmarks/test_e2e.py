"""The end-to-end benchmark's pure parts: how ``--pods N`` splits over its Deployments, the
scale-in counts, and what its pod and NodeClaim watches remember."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from benchmarks.e2e import (
    BASIC,
    MIXED,
    ClaimWatch,
    PodWatch,
    Shape,
    apportion,
    first_n,
    pods_of,
    scaled,
    seconds_between,
    workload,
)
from tests import factories


class Ticks:
    """A clock that advances one second per reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def unschedulable(at: str) -> dict[str, object]:
    return factories.condition("PodScheduled", "False", at=at, reason="Unschedulable")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@pytest.mark.parametrize(
    ("total", "weights", "parts"),
    [
        (10, [1, 1], [5, 5]),
        (7, [1, 1], [4, 3]),  # the tie goes to the earlier weight
        (10, [3, 1], [8, 2]),  # 7.5 / 2.5: equal remainders, the earlier first
        (11, [5, 3, 2], [6, 3, 2]),  # 5.5 / 3.3 / 2.2: the largest remainder gets the one left
        (0, [2, 1], [0, 0]),
    ],
)
def test_apportion_sums_to_the_total(total: int, weights: Sequence[int], parts: list[int]) -> None:
    assert apportion(total, weights) == parts


@pytest.mark.parametrize(
    ("shapes", "total", "fraction", "out", "scaled_in"),
    [
        (BASIC, 1000, 0.7, [500, 500], [350, 350]),
        (
            MIXED,
            10000,
            0.7,
            [1000, 1000, 1000, 800, 800, 800, 800, 600, 600, 600, 500, 400, 400, 300, 200, 200],
            [700, 700, 700, 560, 560, 560, 560, 420, 420, 420, 350, 280, 280, 210, 140, 140],
        ),
    ],
)
def test_workload_and_its_scale_in(
    shapes: Sequence[Shape],
    total: int,
    fraction: float,
    out: list[int],
    scaled_in: list[int],
) -> None:
    load = workload(shapes, total)
    assert [n for _, n in load] == out
    assert pods_of(load) == total
    after = scaled(load, fraction)
    assert [n for _, n in after] == scaled_in
    assert [s.name for s, _ in after] == [s.name for s, _ in load]


def test_mixed_shapes_span_the_sizes_and_some_spread() -> None:
    assert (len(MIXED), sum(s.weight for s in MIXED)) == (16, 100)
    assert sum(s.spread for s in MIXED) == 6


def test_pod_watch_remembers_the_last_unschedulable_mark_and_what_runs() -> None:
    watch = PodWatch(clock=Ticks())
    marked = "2026-01-01T00:00:05Z"
    watch.replace([factories.pod_dict("a", phase="Pending")])  # t=1
    pending_b = factories.pod_dict("b", phase="Pending")
    pending_b["status"]["conditions"] = [unschedulable(marked)]
    watch.apply("ADDED", pending_b)  # t=2
    # Bound and running: the condition no longer says when it was unschedulable.
    watch.apply("MODIFIED", factories.pod_dict("b", node_name="n1"))  # t=3
    watch.apply("MODIFIED", factories.pod_dict("a", node_name="n1"))  # t=4
    assert (watch.live, watch.running) == ({"a", "b"}, {"a", "b"})
    assert watch.last_unschedulable() == at(marked)
    assert (watch.seen_at, watch.bound_at) == ({"a": 1.0, "b": 2.0}, {"b": 3.0, "a": 4.0})
    deleting_a = factories.pod_dict("a", node_name="n1")
    deleting_a["metadata"]["deletionTimestamp"] = factories.T0
    watch.apply("MODIFIED", deleting_a)
    watch.apply("DELETED", factories.pod_dict("b", node_name="n1"))
    assert (watch.live, watch.running) == (set(), set())
    assert watch.last_unschedulable() == at(marked)


def test_claim_watch_counts_and_the_last_creation() -> None:
    watch = ClaimWatch(clock=Ticks())
    watch.replace([factories.nodeclaim_dict("c1", created="2026-01-01T00:00:01Z")])
    watch.apply("ADDED", factories.nodeclaim_dict("c2", created="2026-01-01T00:00:09Z"))
    watch.apply("MODIFIED", factories.nodeclaim_dict("c2", created="2026-01-01T00:00:09Z"))
    watch.apply("DELETED", factories.nodeclaim_dict("c1", created="2026-01-01T00:00:01Z"))
    assert watch.counts == [(1.0, 1), (2.0, 2), (3.0, 1)]  # the update changes no count
    assert watch.last_created() == at("2026-01-01T00:00:09Z")
    assert seconds_between(at("2026-01-01T00:00:05Z"), watch.last_created()) == 4.0
    assert seconds_between(None, watch.last_created()) is None


class WallTicks:
    """A wall clock a second further on each call, from 00:00:00."""

    def __init__(self) -> None:
        self.now = at("2026-01-01T00:00:00Z")

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def test_the_schedulers_backlog_and_the_claims_after_the_last_mark() -> None:
    pods = PodWatch(clock=Ticks(), wall=WallTicks())
    for name in ("a", "b", "c"):
        pods.apply("ADDED", factories.pod_dict(name, phase="Pending"))
    pods.apply("MODIFIED", factories.pod_dict("a", node_name="n1"))  # bound at 00:00:01
    pods.apply("MODIFIED", factories.pod_dict("b", node_name="n1"))  # bound at 00:00:02
    # c is never bound. At 00:00:01 b and c wait; at 00:00:02 c alone; before any binding, all.
    assert [pods.unbound_at(at(f"2026-01-01T00:00:0{s}Z")) for s in (0, 1, 2)] == [3, 2, 1]
    claims = ClaimWatch(clock=Ticks())
    for name, created in (("c1", "00:00:01"), ("c2", "00:00:05"), ("c3", "00:00:09")):
        claims.apply("ADDED", factories.nodeclaim_dict(name, created=f"2026-01-01T{created}Z"))
    assert [claims.created_after(at(f"2026-01-01T00:00:0{s}Z")) for s in (0, 1, 5, 9)] == [
        3,
        2,
        1,
        0,
    ]


@pytest.mark.parametrize(
    ("times", "n", "since", "expected"),
    [
        ([12.0, 11.0, 14.0, 30.0], 3, 10.0, (4.0, 0.8)),  # the late fourth is not counted
        ([5.0, 11.0, 12.0], 2, 10.0, (2.0, 1.0)),  # before ``since``: another phase
        ([11.0], 2, 10.0, (None, None)),
    ],
)
def test_first_n_times_and_rate(
    times: list[float], n: int, since: float, expected: tuple[float | None, float | None]
) -> None:
    assert first_n(times, n, since) == expected
