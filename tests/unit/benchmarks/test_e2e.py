"""The end-to-end benchmark's pure parts: how ``--pods N`` splits over its Deployments, the
scale-in counts, what its pod and NodeClaim watches remember, the provisioning rounds it reads
from the controller's log, the cluster's cost against the plan, and the controller's
environment for ``--no-nominate``."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from benchmarks.e2e import (
    BASIC,
    MIXED,
    NOMINATE_ENV,
    ClaimWatch,
    PodWatch,
    PriceKey,
    Shape,
    against_plan,
    apportion,
    cluster_cost,
    first_n,
    nominate_env,
    pods_of,
    provisioning_rounds,
    ratio_to_plan,
    scaled,
    seconds_between,
    workload,
)
from karpenter_py.cloudprovider.kwok import KWOK_NODE_LABEL
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.resources import NODECLAIMS, NODES, Resource
from karpenter_py.model.labels import LABEL_INSTANCE_TYPE
from karpenter_py.obs.logging import JsonFormatter
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


def test_pod_watch_counts_pods_bound_where_they_were_nominated() -> None:
    watch = PodWatch(clock=Ticks())
    watch.replace([factories.pod_dict(p, pending=True) for p in ("a", "b", "c", "d")])
    for name, node in (("a", "n1"), ("b", "n1"), ("c", "n2")):
        watch.apply("MODIFIED", factories.pod_dict(name, pending=True, nominated=node))
    watch.apply("MODIFIED", factories.pod_dict("c", pending=True, nominated="n3"))  # moved
    watch.apply("MODIFIED", factories.pod_dict("a", node_name="n1"))  # where nominated
    watch.apply("MODIFIED", factories.pod_dict("b", node_name="n2"))  # elsewhere
    watch.apply("MODIFIED", factories.pod_dict("c", node_name="n3"))
    watch.apply("MODIFIED", factories.pod_dict("d", node_name="n1"))  # never nominated
    watch.apply("ADDED", factories.pod_dict("e", pending=True, nominated="n1"))
    watch.apply("MODIFIED", factories.pod_dict("e", pending=True))  # cleared, then bound
    watch.apply("MODIFIED", factories.pod_dict("e", node_name="n2"))

    assert watch.nominations() == {
        "nominated": 4,
        "bound_where_nominated": 2,
        "bound_elsewhere_still_nominated": 1,
        "bound_elsewhere_nomination_cleared": 1,
    }


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


def log_line(at: str, message: str, **fields: object) -> str:
    """One line of the controller's log as its formatter writes it."""
    record = logging.makeLogRecord(
        {
            "name": "karpenter.provisioner",
            "levelno": logging.INFO,
            "levelname": "INFO",
            "msg": message,
            "created": datetime.fromisoformat(at).timestamp(),
            **fields,
        }
    )
    return JsonFormatter().format(record)


def round_line(at: str, pods: int, claims: int, existing: int = 0, errors: int = 0) -> str:
    return log_line(
        at,
        "provisioning round",
        pods=pods,
        nodeclaims=claims,
        existing=existing,
        unschedulable=errors,
        seconds=1.25,
    )


LOG = [
    round_line("2026-01-01T00:00:00.500+00:00", 3, 1),  # before the Deployments
    round_line("2026-01-01T00:00:01.000+00:00", 0, 0),  # a round without pods
    round_line("2026-01-01T00:00:02.000+00:00", 1000, 141),
    log_line("2026-01-01T00:00:02.100+00:00", "created nodeclaim", nodeclaim="default-abc"),
    "Traceback (most recent call last):",
    "",
    "[1, 2]",
    '{"message": "provisioning round", "pods": 5, "nodeclaims": 1}',  # no time, no fields
    log_line(  # a field that is not a number
        "2026-01-01T00:00:02.500+00:00",
        "provisioning round",
        pods=5,
        nodeclaims="one",
        existing=0,
        unschedulable=0,
        seconds=0.1,
    ),
    round_line("2026-01-01T00:00:04.000+00:00", 20, 3, existing=5, errors=2),
    round_line("2026-01-01T00:00:09.000+00:00", 7, 1),  # after every pod runs
]
ROUND_2 = {"pods": 1000, "nodeclaims": 141, "existing": 0, "unschedulable": 0, "seconds": 1.25}
ROUND_4 = {"pods": 20, "nodeclaims": 3, "existing": 5, "unschedulable": 2, "seconds": 1.25}
ROUND_9 = {"pods": 7, "nodeclaims": 1, "existing": 0, "unschedulable": 0, "seconds": 1.25}


@pytest.mark.parametrize(
    ("since", "until", "expected"),
    [
        ("2026-01-01T00:00:01Z", "2026-01-01T00:00:05Z", [ROUND_2, ROUND_4]),
        ("2026-01-01T00:00:01Z", None, [ROUND_2, ROUND_4, ROUND_9]),  # the pods never all ran
        # The log cuts times to the millisecond: a round in the same one as the start counts.
        ("2026-01-01T00:00:02.000900Z", "2026-01-01T00:00:04Z", [ROUND_2, ROUND_4]),
        ("2026-01-01T00:00:02.001Z", "2026-01-01T00:00:03.999Z", []),
    ],
)
def test_provisioning_rounds_from_the_controller_log(
    since: str, until: str | None, expected: list[dict[str, float]]
) -> None:
    assert provisioning_rounds(LOG, at(since), None if until is None else at(until)) == expected


@pytest.mark.parametrize(
    ("value", "plan", "ratio"),
    [
        (3.0, 2.0, 1.5),
        (1.0, 3.0, 0.3333),
        (2, 3, 0.6667),
        (None, 2.0, None),  # nothing measured
        (1.0, 0.0, None),  # no plan to hold it against
    ],
)
def test_ratio_to_plan(value: float | None, plan: float, ratio: float | None) -> None:
    assert ratio_to_plan(value, plan) == ratio


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (
            {"hourly": 1.234567, "nodes": 3, "in_flight": 1, "unpriced": 0},
            {
                "hourly_after_scale_out": 1.2346,
                "nodes_after_scale_out": 3,
                "nodeclaims_in_flight_after_scale_out": 1,
                "cost_ratio_to_plan_after_scale_out": 1.2346,
                "node_ratio_to_plan_after_scale_out": 1.5,
            },
        ),
        (  # one Node without a price: the sum is short, so no cost ratio
            {"hourly": 0.9, "nodes": 2, "in_flight": 0, "unpriced": 1},
            {
                "hourly_after_scale_out": 0.9,
                "nodes_after_scale_out": 2,
                "nodeclaims_in_flight_after_scale_out": 0,
                "cost_ratio_to_plan_after_scale_out": None,
                "node_ratio_to_plan_after_scale_out": 1.0,
            },
        ),
        (  # the pods never all ran
            None,
            {
                "hourly_after_scale_out": None,
                "nodes_after_scale_out": None,
                "nodeclaims_in_flight_after_scale_out": None,
                "cost_ratio_to_plan_after_scale_out": None,
                "node_ratio_to_plan_after_scale_out": None,
            },
        ),
    ],
)
def test_the_cluster_after_scale_out_against_the_plan(
    after: dict[str, Any] | None, expected: dict[str, Any]
) -> None:
    plan = {"plan_hourly": 1.0, "plan_nodes": 2}
    assert against_plan(after, 1.00001, 2) == {**plan, **expected}


@dataclass
class Listing:
    items: list[dict[str, Any]]


@dataclass
class FakeLister:
    """The one call ``cluster_cost`` makes of the client: list Nodes and NodeClaims."""

    objects: dict[Resource, list[dict[str, Any]]] = field(default_factory=dict)

    async def list(self, resource: Resource, **_: object) -> Listing:
        return Listing(self.objects.get(resource, []))


async def test_the_clusters_cost_after_scale_out_against_the_plan() -> None:
    prices: dict[PriceKey, float] = {
        ("big", "test-zone-a", "on-demand"): 0.4,
        ("small", "test-zone-a", "on-demand"): 0.1,
        ("small", "test-zone-b", "on-demand"): 0.15,
    }
    kwok = {KWOK_NODE_LABEL: "fake"}
    client = FakeLister(
        {
            NODES: [
                factories.node_dict(
                    "n1", labels={**factories.node_labels("default", "big"), **kwok}
                ),
                factories.node_dict(
                    "n2", labels={**factories.node_labels("default", "gone"), **kwok}
                ),
                factories.node_dict("other", labels=factories.node_labels("default", "big")),
            ],
            NODECLAIMS: [
                factories.nodeclaim_dict("n1"),  # its Node is counted
                factories.nodeclaim_dict(  # not launched: the cheapest type it allows
                    "c2",
                    launched=False,
                    requirements=[
                        {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": ["big", "small"]}
                    ],
                ),
            ],
        }
    )
    after = await cluster_cost(cast(KubeClient, client), prices)
    assert after == {"hourly": 0.5, "nodes": 2, "in_flight": 1, "unpriced": 1}
    assert against_plan({**after, "unpriced": 0}, 0.4, 2) == {
        "plan_hourly": 0.4,
        "plan_nodes": 2,
        "hourly_after_scale_out": 0.5,
        "nodes_after_scale_out": 2,
        "nodeclaims_in_flight_after_scale_out": 1,
        "cost_ratio_to_plan_after_scale_out": 1.25,
        "node_ratio_to_plan_after_scale_out": 1.0,
    }


@pytest.mark.parametrize(
    ("nominate", "known", "env"),
    [
        (True, {NOMINATE_ENV, "LOG_LEVEL"}, {NOMINATE_ENV: "true"}),
        (False, {NOMINATE_ENV, "LOG_LEVEL"}, {NOMINATE_ENV: "false"}),  # --no-nominate
        (True, {"LOG_LEVEL"}, {}),  # a controller without the setting nominates anyway
    ],
)
def test_nominate_env(nominate: bool, known: Collection[str], env: dict[str, str]) -> None:
    assert nominate_env(nominate, known) == env


def test_no_nominate_is_refused_where_the_controller_would_ignore_it() -> None:
    with pytest.raises(ValueError, match="no NOMINATE_PODS setting"):
        nominate_env(False, {"LOG_LEVEL"})
