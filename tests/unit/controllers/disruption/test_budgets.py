"""Disruption budgets: the cron dialect, active windows, counts, and the per-pool mapping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.controllers.disruption.budgets import (
    UNLIMITED,
    PoolUsage,
    allowed_disruptions,
    budget_active,
    budget_mapping,
    budget_nodes,
    explain_budget,
    next_budget_change,
    next_hit,
    parse_cron,
    pool_node_counts,
    window_end,
)
from karpenter_py.controllers.disruption.types import Reason
from karpenter_py.model.api.nodepool import Budget, NodePool
from karpenter_py.model.labels import LABEL_NODE_INITIALIZED
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode
from tests import factories

# A Monday.
MON = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def pool(name: str, *budgets: dict[str, Any]) -> NodePool:
    return factories.nodepool(name, disruption={"budgets": list(budgets)})


# ----------------------------------------------------------------------------- cron


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("* * * * *", "2024-01-01 12:00", "2024-01-01 12:01"),
        ("* * * * *", "2024-01-01 12:00:30", "2024-01-01 12:01"),  # strictly after
        ("0 * * * *", "2024-01-01 12:00", "2024-01-01 13:00"),
        ("*/15 * * * *", "2024-01-01 12:00", "2024-01-01 12:15"),
        ("*/15 * * * *", "2024-01-01 12:50", "2024-01-01 13:00"),
        ("10-40/10 * * * *", "2024-01-01 12:35", "2024-01-01 12:40"),
        ("10-40/10 * * * *", "2024-01-01 12:40", "2024-01-01 13:10"),
        ("5/20 * * * *", "2024-01-01 12:30", "2024-01-01 12:45"),  # a/n = a-59/n
        ("0,30 9 * * *", "2024-01-01 09:00", "2024-01-01 09:30"),
        ("0 9 * * *", "2024-01-01 09:00", "2024-01-02 09:00"),
        ("0 9 * * *", "2024-12-31 10:00", "2025-01-01 09:00"),  # year rolls over
        ("0 9 * * mon-fri", "2024-01-05 10:00", "2024-01-08 09:00"),  # Friday -> Monday
        ("0 9 * * MON-FRI", "2024-01-05 10:00", "2024-01-08 09:00"),  # names in any case
        ("0 0 * * 0", "2024-01-01 12:00", "2024-01-07 00:00"),
        ("0 0 * * 7", "2024-01-01 12:00", "2024-01-07 00:00"),  # 7 is Sunday too
        ("0 0 * * sun", "2024-01-01 12:00", "2024-01-07 00:00"),
        ("0 0 * * 5-7", "2024-01-01 12:00", "2024-01-05 00:00"),
        ("0 0 * * sat-7", "2024-01-01 12:00", "2024-01-06 00:00"),
        ("0 0 * * */2", "2024-01-01 12:00", "2024-01-02 00:00"),  # sun, tue, thu, sat
        ("0 0 1 * *", "2024-01-01 12:00", "2024-02-01 00:00"),
        ("0 0 31 * *", "2024-02-01 00:00", "2024-03-31 00:00"),  # skips short months
        ("0 0 29 2 *", "2024-03-01 00:00", "2028-02-29 00:00"),  # next leap year
        ("0 0 29 2 *", "2097-01-01 00:00", "2104-02-29 00:00"),  # 2100 is not a leap year
        ("0 0 1 jan,jul *", "2024-02-01 00:00", "2024-07-01 00:00"),
        ("0 0 1 Jun-Aug *", "2024-08-01 00:00", "2025-06-01 00:00"),
        ("30 4 1-7 * *", "2024-01-03 05:00", "2024-01-04 04:30"),
        # Both day fields restricted: either matches (the 13th, or any Friday).
        ("0 0 13 * fri", "2024-01-01 12:00", "2024-01-05 00:00"),
        ("0 0 13 * fri", "2024-01-05 00:00", "2024-01-12 00:00"),
        ("0 0 13 * fri", "2024-01-12 00:00", "2024-01-13 00:00"),
        # One of them "*": only the other counts.
        ("0 0 13 * *", "2024-01-01 12:00", "2024-01-13 00:00"),
        ("0 0 * * fri", "2024-01-01 12:00", "2024-01-05 00:00"),
        ("0 0 ? * fri", "2024-01-01 12:00", "2024-01-05 00:00"),
        # */1 is still "*"; */2 restricts (robfig/cron's rule), so OR applies with friday.
        ("0 0 */1 * fri", "2024-01-01 12:00", "2024-01-05 00:00"),
        ("0 0 */2 * fri", "2024-01-01 12:00", "2024-01-03 00:00"),
        ("@yearly", "2024-01-01 12:00", "2025-01-01 00:00"),
        ("@annually", "2024-01-01 12:00", "2025-01-01 00:00"),
        ("@monthly", "2024-01-01 12:00", "2024-02-01 00:00"),
        ("@weekly", "2024-01-01 12:00", "2024-01-07 00:00"),
        ("@daily", "2024-01-01 12:00", "2024-01-02 00:00"),
        ("@midnight", "2024-01-01 12:00", "2024-01-02 00:00"),
        ("@hourly", "2024-01-01 12:00", "2024-01-01 13:00"),
        ("  0   9  *  *  *  ", "2024-01-01 08:00", "2024-01-01 09:00"),
    ],
)
def test_next_hit(schedule: str, after: str, expected: str) -> None:
    assert next_hit(schedule, at(after)) == at(expected)


def test_next_hit_accepts_naive_time_as_utc() -> None:
    assert next_hit("0 9 * * *", datetime(2024, 1, 1, 8, 0)) == at("2024-01-01 09:00")  # noqa: DTZ001


def test_parsed_fields() -> None:
    s = parse_cron("0,30 9-11 */10 jan,dec 1-5")
    assert s.minutes == (0, 30)
    assert s.hours == (9, 10, 11)
    assert s.days == frozenset({1, 11, 21, 31})
    assert s.months == frozenset({1, 12})
    assert s.weekdays == frozenset({1, 2, 3, 4, 5})
    assert (s.days_restricted, s.weekdays_restricted) == (True, True)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("", "schedule is empty"),
        ("   ", "schedule is empty"),
        (
            "* * * *",
            "schedule '* * * *': expected 5 fields (minute hour day-of-month month "
            "day-of-week), got 4",
        ),
        (
            "0 0 * * * *",
            "schedule '0 0 * * * *': expected 5 fields (minute hour day-of-month month "
            "day-of-week), got 6",
        ),
        ("60 * * * *", "schedule '60 * * * *': minute '60': 60 is out of range 0-59"),
        ("0 24 * * *", "schedule '0 24 * * *': hour '24': 24 is out of range 0-23"),
        ("0 0 0 * *", "schedule '0 0 0 * *': day-of-month '0': 0 is out of range 1-31"),
        ("0 0 32 * *", "schedule '0 0 32 * *': day-of-month '32': 32 is out of range 1-31"),
        ("0 0 * 13 *", "schedule '0 0 * 13 *': month '13': 13 is out of range 1-12"),
        ("0 0 * * 8", "schedule '0 0 * * 8': day-of-week '8': 8 is out of range 0-7"),
        (
            "0 0 * foo *",
            "schedule '0 0 * foo *': month 'foo': 'foo' is not a number or a name "
            "(jan, feb, mar, apr, may, jun, jul, aug, sep, oct, nov, dec)",
        ),
        (
            "0 0 * * monday",
            "schedule '0 0 * * monday': day-of-week 'monday': 'monday' is not a number or a "
            "name (sun, mon, tue, wed, thu, fri, sat)",
        ),
        ("x * * * *", "schedule 'x * * * *': minute 'x': 'x' is not a number"),
        ("-1 * * * *", "schedule '-1 * * * *': minute '-1': '' is not a number"),
        ("*/0 * * * *", "schedule '*/0 * * * *': minute '*/0': step '0' is not a positive number"),
        ("*/x * * * *", "schedule '*/x * * * *': minute '*/x': step 'x' is not a positive number"),
        ("5-1 * * * *", "schedule '5-1 * * * *': minute '5-1': range runs backwards (5 > 1)"),
        (
            "0 0 * * fri-mon",
            "schedule '0 0 * * fri-mon': day-of-week 'fri-mon': range runs backwards (5 > 1)",
        ),
        ("1,,2 * * * *", "schedule '1,,2 * * * *': minute '1,,2': empty list entry"),
        ("1, * * * *", "schedule '1, * * * *': minute '1,': empty list entry"),
        (
            "@every 5m",
            "schedule '@every 5m': unknown macro; use one of @annually, @daily, @hourly, "
            "@midnight, @monthly, @weekly, @yearly",
        ),
        (
            "TZ=Europe/Paris 0 9 * * *",
            "schedule 'TZ=Europe/Paris 0 9 * * *': time zones are not supported "
            "(schedules run in UTC)",
        ),
        (
            "0 0 30 2 *",
            "schedule '0 0 30 2 *' never fires: day-of-month 30 does not occur in feb",
        ),
        (
            "0 0 31 apr,jun,sep,nov *",
            "schedule '0 0 31 apr,jun,sep,nov *' never fires: day-of-month 31 does not occur "
            "in apr, jun, sep, nov",
        ),
    ],
)
def test_parse_errors(schedule: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_cron(schedule)
    assert str(err.value) == message


def test_impossible_days_are_fine_with_a_weekday() -> None:
    # OR semantics: 30 February never comes, but Mondays in February do.
    assert next_hit("0 0 30 2 mon", MON) == at("2024-02-05 00:00")


def test_next_hit_skips_ahead_instead_of_walking_minutes() -> None:
    # A yearly schedule is found from anywhere in the year without a minute-by-minute walk.
    schedule = parse_cron("59 23 31 12 *")
    assert schedule.next_after(at("2024-01-01 00:00")) == at("2024-12-31 23:59")


# ----------------------------------------------------------------------------- active windows


def budget(schedule: str | None = None, duration: str | None = None, **kw: Any) -> Budget:
    return Budget.model_validate({"nodes": "0", "schedule": schedule, "duration": duration, **kw})


@pytest.mark.parametrize(
    ("schedule", "duration", "now", "active"),
    [
        ("0 9 * * *", "8h", "2024-01-01 08:59:59", False),
        ("0 9 * * *", "8h", "2024-01-01 09:00", True),
        ("0 9 * * *", "8h", "2024-01-01 12:00", True),
        ("0 9 * * *", "8h", "2024-01-01 16:59:59", True),
        ("0 9 * * *", "8h", "2024-01-01 17:00", False),  # [hit, hit + duration)
        ("0 22 * * *", "4h", "2024-01-01 21:59", False),
        ("0 22 * * *", "4h", "2024-01-02 01:59", True),  # across midnight
        ("0 22 * * *", "4h", "2024-01-02 02:00", False),
        ("0 9 * * mon-fri", "8h", "2024-01-06 10:00", False),  # Saturday
        ("0 9 * * mon-fri", "8h", "2024-01-05 10:00", True),
        ("@daily", "1h30m", "2024-01-01 01:29", True),
        ("@daily", "1h30m", "2024-01-01 01:30", False),
        ("@hourly", "10m", "2024-01-01 12:09", True),
        ("@hourly", "10m", "2024-01-01 12:10", False),
        ("0 0 1 1 *", "24h", "2024-01-01 23:59", True),
        ("0 0 1 1 *", "24h", "2024-01-02 00:00", False),
    ],
)
def test_budget_window(schedule: str, duration: str, now: str, active: bool) -> None:
    assert budget_active(budget(schedule, duration), at(now)) is active


def test_budget_without_schedule_is_always_active() -> None:
    assert budget_active(budget(), MON) is True


def test_budget_active_rejects_bad_schedules() -> None:
    with pytest.raises(ValueError) as err:
        budget_active(budget("61 * * * *", "1h"), MON)
    assert str(err.value) == "schedule '61 * * * *': minute '61': 61 is out of range 0-59"


def test_budget_active_rejects_schedule_without_duration() -> None:
    b = Budget.model_construct(nodes="0", schedule="@daily", duration=None, reasons=None)
    with pytest.raises(ValueError) as err:
        budget_active(b, MON)
    assert str(err.value) == "schedule and duration must be set together"


# ----------------------------------------------------------------------------- counts


@pytest.mark.parametrize(
    ("nodes", "pool_size", "expected"),
    [
        ("10%", 3, 1),  # rounded up
        ("10%", 10, 1),
        ("15%", 10, 2),
        ("10%", 11, 2),
        ("1%", 101, 2),
        ("50%", 3, 2),
        ("100%", 7, 7),
        ("0%", 50, 0),
        ("10%", 0, 0),
        ("5", 100, 5),
        ("5", 2, 5),  # counts are not capped by the pool size
        ("0", 10, 0),
    ],
)
def test_budget_nodes(nodes: str, pool_size: int, expected: int) -> None:
    assert budget_nodes(nodes, pool_size) == expected


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ("101%", "nodes '101%' is not a percentage from 0% to 100%"),
        ("%", "nodes '%' is not a percentage from 0% to 100%"),
        ("1.5%", "nodes '1.5%' is not a percentage from 0% to 100%"),
        ("ten", "nodes 'ten' is not a node count or a percentage such as '10%'"),
        ("-1", "nodes '-1' is not a node count or a percentage such as '10%'"),
        ("", "nodes '' is not a node count or a percentage such as '10%'"),
        (" 5", "nodes ' 5' is not a node count or a percentage such as '10%'"),
    ],
)
def test_budget_nodes_errors(nodes: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        budget_nodes(nodes, 10)
    assert str(err.value) == message


NOON = at("2024-01-01 12:00")  # inside "0 9 * * *" for 8h, outside "0 18 * * *" for 1h


@pytest.mark.parametrize(
    ("budgets", "reason", "pool_size", "expected"),
    [
        ([], Reason.UNDERUTILIZED, 10, UNLIMITED),
        ([{"nodes": "10%"}], Reason.UNDERUTILIZED, 10, 1),
        ([{"nodes": "10%"}], Reason.DRIFTED, 30, 3),
        # Most restrictive wins.
        ([{"nodes": "50%"}, {"nodes": "3"}], Reason.EMPTY, 10, 3),
        ([{"nodes": "50%"}, {"nodes": "30"}], Reason.EMPTY, 10, 5),
        # Reasons filter which budgets count.
        ([{"nodes": "0", "reasons": ["Drifted"]}], Reason.UNDERUTILIZED, 10, UNLIMITED),
        ([{"nodes": "0", "reasons": ["Drifted"]}], Reason.DRIFTED, 10, 0),
        (
            [{"nodes": "0", "reasons": ["Drifted", "Empty"]}, {"nodes": "20%"}],
            Reason.EMPTY,
            10,
            0,
        ),
        (
            [{"nodes": "0", "reasons": ["Drifted", "Empty"]}, {"nodes": "20%"}],
            Reason.UNDERUTILIZED,
            10,
            2,
        ),
        ([{"nodes": "0", "reasons": []}], Reason.UNDERUTILIZED, 10, 0),  # empty = all
        # Inactive scheduled budgets do not count.
        (
            [{"nodes": "0", "schedule": "0 18 * * *", "duration": "1h"}, {"nodes": "4"}],
            Reason.UNDERUTILIZED,
            10,
            4,
        ),
        (
            [{"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}, {"nodes": "4"}],
            Reason.UNDERUTILIZED,
            10,
            0,
        ),
        ([{"nodes": "0", "schedule": "0 18 * * *", "duration": "1h"}], Reason.EMPTY, 10, UNLIMITED),
        # A cron error anywhere fails the whole pool closed, whatever the reasons.
        (
            [{"nodes": "10", "schedule": "61 * * * *", "duration": "1h", "reasons": ["Drifted"]}],
            Reason.UNDERUTILIZED,
            10,
            0,
        ),
        (
            [{"nodes": "100%"}, {"nodes": "1", "schedule": "0 0 30 2 *", "duration": "1h"}],
            Reason.EMPTY,
            10,
            0,
        ),
    ],
)
def test_allowed_disruptions(
    budgets: list[dict[str, Any]], reason: Reason, pool_size: int, expected: int
) -> None:
    assert allowed_disruptions(pool("p", *budgets), reason, pool_size=pool_size, now=NOON) == (
        expected
    )


def test_default_budget_is_ten_percent() -> None:
    np = factories.nodepool("p")
    assert allowed_disruptions(np, Reason.DRIFTED, pool_size=25, now=NOON) == 3


def test_unparsable_nodes_fails_closed() -> None:
    np = pool("p", {"nodes": "5"})
    np.spec.disruption.budgets.append(Budget.model_construct(nodes="ten", reasons=["Drifted"]))
    for reason in Reason:
        assert allowed_disruptions(np, reason, pool_size=10, now=NOON) == 0


# ----------------------------------------------------------------------------- the mapping


def state_node(
    name: str,
    pool_name: str,
    *,
    ready: bool = True,
    initialized: bool = True,
    marked: bool = False,
    terminating: bool = False,
    managed: bool = True,
) -> StateNode:
    labels = factories.node_labels(pool_name, "m5.large")
    if not initialized:
        del labels[LABEL_NODE_INITIALIZED]
    conditions = [factories.condition(t) for t in ("Launched", "Registered", "Initialized")]
    if terminating:
        conditions.append(factories.condition("InstanceTerminating"))
    if not managed:
        return StateNode(node=factories.node(name, labels={}, ready=ready), nodeclaim=None)
    return StateNode(
        node=factories.node(name, labels=labels, ready=ready),
        nodeclaim=factories.nodeclaim(name, pool=pool_name, conditions=conditions),
        marked_for_deletion=marked,
    )


def snapshot(nodes: list[StateNode], nodepools: list[NodePool]) -> Snapshot:
    return Snapshot(
        now=NOON,
        nodes=tuple(nodes),
        pods_by_node={},
        pending=(),
        reschedulable=(),
        nodepools={np.metadata.name: np for np in nodepools},
        daemonsets=(),
        namespace_labels={},
    )


NODES = [
    state_node("a1", "a"),
    state_node("a2", "a"),
    state_node("a3", "a", ready=False),  # counts, and is disrupting
    state_node("a4", "a", marked=True),  # counts, and is disrupting
    state_node("a5", "a", initialized=False),  # not counted
    state_node("a6", "a", terminating=True),  # not counted
    state_node("b1", "b"),
    state_node("u1", "", managed=False),  # not Karpenter's
    StateNode(node=factories.node("u2", labels={"karpenter.sh/nodepool": "a"}), nodeclaim=None),
    StateNode(node=None, nodeclaim=factories.nodeclaim("a7", pool="a")),  # in flight
]


def test_pool_node_counts() -> None:
    assert pool_node_counts(NODES) == {"a": PoolUsage(size=4, disrupting=2), "b": PoolUsage(1, 0)}


@pytest.mark.parametrize(
    ("budgets_a", "expected_a"),
    [
        ({"nodes": "50%"}, 0),  # ceil(50% of 4) = 2, minus 2 disrupting
        ({"nodes": "75%"}, 1),  # 3 - 2
        ({"nodes": "1"}, 0),  # floored at 0, not -1
        ({"nodes": "10"}, 8),
    ],
)
def test_budget_mapping(budgets_a: dict[str, Any], expected_a: int) -> None:
    snap = snapshot(
        NODES,
        [
            pool("a", budgets_a),
            pool("b", {"nodes": "3"}),
            pool("c", {"nodes": "10%"}),  # no nodes: 10% of 0
            pool("d", {"nodes": "0", "schedule": "0 18 * * *", "duration": "1h"}),
        ],
    )
    assert budget_mapping(snap, Reason.UNDERUTILIZED, NOON) == {
        "a": expected_a,
        "b": 3,
        "c": 0,
        "d": UNLIMITED,
    }


def test_budget_mapping_filters_by_reason() -> None:
    snap = snapshot(NODES, [pool("b", {"nodes": "0", "reasons": ["Empty"]}, {"nodes": "2"})])
    assert budget_mapping(snap, Reason.EMPTY, NOON) == {"b": 0}
    assert budget_mapping(snap, Reason.DRIFTED, NOON) == {"b": 2}


# ----------------------------------------------------------------------------- explanations


@pytest.mark.parametrize(
    ("budgets", "reason", "now", "size", "disrupting", "expected"),
    [
        (
            [{"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}],
            Reason.UNDERUTILIZED,
            NOON,
            3,
            0,
            "budget 0 for Underutilized until 17:00 UTC",
        ),
        (
            [{"nodes": "0", "schedule": "0 22 * * *", "duration": "10h"}],
            Reason.DRIFTED,
            at("2024-01-01 23:00"),
            3,
            0,
            "budget 0 for Drifted until 2024-01-02 08:00 UTC",
        ),
        (
            [{"nodes": "10%"}],
            Reason.UNDERUTILIZED,
            NOON,
            3,
            1,
            "budget 10% of 3 nodes allows 1 for Underutilized while 1 is disrupting",
        ),
        (
            [{"nodes": "10%"}],
            Reason.EMPTY,
            NOON,
            1,
            0,
            "budget 10% of 1 node allows 1 for Empty (1 more may start)",
        ),
        (
            [{"nodes": "2"}, {"nodes": "0", "reasons": ["Drifted"]}],
            Reason.DRIFTED,
            NOON,
            5,
            0,
            "budget 0 for Drifted",
        ),
        (
            [{"nodes": "2"}, {"nodes": "0", "reasons": ["Drifted"]}],
            Reason.EMPTY,
            NOON,
            5,
            2,
            "budget 2 for Empty while 2 are disrupting",
        ),
        (
            [{"nodes": "0", "schedule": "* * * * *", "duration": "1h"}],
            Reason.EMPTY,
            NOON,
            5,
            0,
            "budget 0 for Empty (schedule '* * * * *' with duration 1h keeps it active "
            "continuously)",
        ),
        (
            [{"nodes": "0", "schedule": "0 18 * * *", "duration": "1h"}],
            Reason.EMPTY,
            NOON,
            5,
            0,
            "no active budget limits Empty disruptions",
        ),
        (
            [{"nodes": "5"}, {"nodes": "1", "schedule": "0 0 * 13 *", "duration": "1h"}],
            Reason.EMPTY,
            NOON,
            5,
            0,
            "budget is invalid: budgets[1]: schedule '0 0 * 13 *': month '13': 13 is out of "
            "range 1-12",
        ),
    ],
)
def test_explain_budget(
    budgets: list[dict[str, Any]],
    reason: Reason,
    now: datetime,
    size: int,
    disrupting: int,
    expected: str,
) -> None:
    np = pool("p", *budgets)
    assert explain_budget(np, reason, now, pool_size=size, disrupting=disrupting) == expected


def test_overlapping_windows_merge() -> None:
    # Hits every 2h, each open for 3h: the windows chain until the last hit of the day.
    b = budget("0 0-6/2 * * *", "3h")
    assert window_end(b, at("2024-01-01 01:00")) == at("2024-01-01 09:00")
    assert window_end(b, at("2024-01-01 10:00")) is None  # not active
    assert window_end(budget(), NOON) is None


def test_window_end_at_the_boundary() -> None:
    b = budget("0 9 * * *", "8h")
    assert window_end(b, at("2024-01-01 09:00")) == at("2024-01-01 17:00")
    assert window_end(b, at("2024-01-01 16:59")) == at("2024-01-01 17:00")
    assert window_end(b, at("2024-01-01 17:00")) is None
    assert window_end(b, at("2024-01-01 17:00") - timedelta(seconds=1)) == at("2024-01-01 17:00")


@pytest.mark.parametrize(
    ("budgets", "expected"),
    [
        ([], None),
        ([{"nodes": "0"}], None),  # always in force
        # In force at noon: it goes out at 17:00.
        ([{"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}], "2024-01-01 17:00"),
        # Out of force at noon: it comes in at 18:00.
        ([{"nodes": "0", "schedule": "0 18 * * *", "duration": "1h"}], "2024-01-01 18:00"),
        # The earliest of several.
        (
            [
                {"nodes": "0", "schedule": "0 18 * * *", "duration": "1h"},
                {"nodes": "1", "schedule": "0 9 * * *", "duration": "8h"},
                {"nodes": "10%"},
            ],
            "2024-01-01 17:00",
        ),
        ([{"nodes": "0", "schedule": "61 * * * *", "duration": "1h"}], None),  # unreadable
    ],
)
def test_next_budget_change(budgets: list[dict[str, Any]], expected: str | None) -> None:
    assert next_budget_change(pool("p", *budgets), NOON) == (
        at(expected) if expected is not None else None
    )
