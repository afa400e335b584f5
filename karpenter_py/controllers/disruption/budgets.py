"""Disruption budgets: how many of a NodePool's nodes may be disrupted now, and why not more.

A budget caps concurrent disruptions at ``nodes`` (a count, or a percentage of the pool rounded
up), optionally only inside a UTC cron window (``schedule`` + ``duration``) and only for some
reasons. Of the budgets that are active and apply to a reason, the smallest wins; a pool with no
active budget is unlimited (``UNLIMITED``). A budget that cannot be evaluated (bad ``nodes``,
bad cron, schedule without duration) makes the whole pool allow 0 for every reason: a typo must
stop disruption, not unleash it.

Everything here is pure: ``now`` is an argument and times are UTC.

The cron dialect is the one upstream parses budgets with (robfig/cron's standard parser), plus
``7`` as Sunday: five fields ``minute hour day-of-month month day-of-week``; ``*`` (or ``?``),
lists ``a,b``, ranges ``a-b``, steps ``*/n``, ``a-b/n`` and ``a/n`` (= ``a``-max/n); month names
``jan``..``dec`` and weekday names ``sun``..``sat`` in any case; macros ``@yearly``
(``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``) and ``@hourly``. When both
day fields are restricted a day matches either (the classic OR rule); a field counts as
unrestricted when it is ``*``/``?`` with no step above 1.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Final

from karpenter_py.model.api.base import as_utc
from karpenter_py.model.api.common import parse_duration
from karpenter_py.model.api.nodeclaim import CONDITION_INSTANCE_TERMINATING
from karpenter_py.model.api.nodepool import Budget, NodePool
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode

UNLIMITED: Final = 2**31 - 1
"""What a pool with no active budget allows: upstream's math.MaxInt32 (also what its
``karpenter_nodepools_allowed_disruptions`` gauge reports), far above any real pool size."""

# ----------------------------------------------------------------------------- cron


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int  # the highest value ``*`` stands for
    explicit_high: int  # the highest value that may be written (7 for day-of-week)
    names: Mapping[str, int]


_MONTH_NAMES: Final = {
    name: i + 1
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
_WEEKDAY_NAMES: Final = {
    name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
}
_MINUTE: Final = _Field("minute", 0, 59, 59, {})
_HOUR: Final = _Field("hour", 0, 23, 23, {})
_DAY: Final = _Field("day-of-month", 1, 31, 31, {})
_MONTH: Final = _Field("month", 1, 12, 12, _MONTH_NAMES)
_WEEKDAY: Final = _Field("day-of-week", 0, 6, 7, _WEEKDAY_NAMES)
_FIELDS: Final = (_MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)

MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# The longest a month can be (February counts 29: a leap year always comes round).
_MONTH_MAX_DAYS: Final = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_NUMBER: Final = re.compile(r"^[0-9]+$")
# No schedule that passes parse_cron is more than 8 years from its next hit (29 February
# across a non-leap century year); searching further means something is badly wrong.
_SEARCH_YEARS: Final = 10


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed five-field cron schedule, evaluated in UTC at minute resolution."""

    text: str
    minutes: tuple[int, ...]  # sorted
    hours: tuple[int, ...]  # sorted
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, day: date) -> bool:
        in_days = day.day in self.days
        in_weekdays = day.isoweekday() % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays

    def next_after(self, moment: datetime) -> datetime:
        """The first matching minute strictly after ``moment`` (aware UTC).

        Skips whole months, days and hours that cannot match, so a yearly schedule takes a few
        dozen steps, not half a million minutes.
        """
        t = as_utc(moment).replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = t.year + _SEARCH_YEARS
        while t.year <= limit:
            if t.month not in self.months:
                t = _first_of_next_month(t)
                continue
            if not self.day_matches(t.date()):
                t = _next_day(t)
                continue
            i = bisect.bisect_left(self.hours, t.hour)
            if i == len(self.hours):
                t = _next_day(t)
                continue
            if self.hours[i] != t.hour:
                t = t.replace(hour=self.hours[i], minute=0)
            j = bisect.bisect_left(self.minutes, t.minute)
            if j == len(self.minutes):
                t = t.replace(minute=0) + timedelta(hours=1)
                continue
            return t.replace(minute=self.minutes[j])
        raise ValueError(f"schedule {self.text!r} has no time within {_SEARCH_YEARS} years")


def _first_of_next_month(t: datetime) -> datetime:
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    return t.replace(year=year, month=month, day=1, hour=0, minute=0)


def _next_day(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0) + timedelta(days=1)


def _value(text: str, spec: _Field) -> int:
    named = spec.names.get(text.lower())
    if named is not None:
        return named
    if _NUMBER.match(text) is None:
        known = f" or a name ({', '.join(spec.names)})" if spec.names else ""
        raise ValueError(f"{text!r} is not a number{known}")
    value = int(text)
    if not spec.low <= value <= spec.explicit_high:
        raise ValueError(f"{value} is out of range {spec.low}-{spec.explicit_high}")
    return value


def _item(item: str, spec: _Field) -> tuple[set[int], bool]:
    """One comma-separated part: its values, and whether it is an unrestricted ``*``."""
    range_part, slash, step_part = item.partition("/")
    step = 1
    if slash:
        if _NUMBER.match(step_part) is None or int(step_part) == 0:
            raise ValueError(f"step {step_part!r} is not a positive number")
        step = int(step_part)
    if range_part in ("*", "?"):
        low, high, star = spec.low, spec.high, step == 1
    else:
        first, dash, last = range_part.partition("-")
        low = _value(first, spec)
        # "a/n" runs from a to the field's end, as robfig/cron reads it.
        high = _value(last, spec) if dash else (spec.high if slash else low)
        star = False
        if low > high:
            raise ValueError(f"range runs backwards ({low} > {high})")
    values = set(range(low, high + 1, step))
    if spec is _WEEKDAY and 7 in values:
        values = (values - {7}) | {0}  # 7 is Sunday too
    return values, star


def _field(text: str, spec: _Field) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for item in text.split(","):
        if not item:
            raise ValueError(f"{spec.name} {text!r}: empty list entry")
        try:
            item_values, item_star = _item(item, spec)
        except ValueError as err:
            raise ValueError(f"{spec.name} {item!r}: {err}") from None
        values |= item_values
        star = star or item_star
    return frozenset(values), star


def parse_cron(text: str) -> CronSchedule:
    """Parse a budget schedule (see the module docstring); ValueError names what is wrong."""
    body = text.strip()
    if not body:
        raise ValueError("schedule is empty")
    if body.upper().startswith(("TZ=", "CRON_TZ=")):
        raise ValueError(f"schedule {text!r}: time zones are not supported (schedules run in UTC)")
    if body.startswith("@"):
        expanded = MACROS.get(body.lower())
        if expanded is None:
            raise ValueError(
                f"schedule {text!r}: unknown macro; use one of {', '.join(sorted(MACROS))}"
            )
        body = expanded
    parts = body.split()
    if len(parts) != len(_FIELDS):
        raise ValueError(
            f"schedule {text!r}: expected 5 fields (minute hour day-of-month month "
            f"day-of-week), got {len(parts)}"
        )
    try:
        parsed = [_field(part, spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    except ValueError as err:
        raise ValueError(f"schedule {text!r}: {err}") from None
    (minutes, _), (hours, _), (days, days_star), (months, _), (weekdays, weekdays_star) = parsed
    schedule = CronSchedule(
        text=text,
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=days,
        months=months,
        weekdays=weekdays,
        days_restricted=not days_star,
        weekdays_restricted=not weekdays_star,
    )
    _check_can_fire(schedule)
    return schedule


def _check_can_fire(schedule: CronSchedule) -> None:
    # Only a day-of-month list alone can be impossible (30 February); any weekday matches weekly.
    if not schedule.days_restricted or schedule.weekdays_restricted:
        return
    first_day = min(schedule.days)
    if any(first_day <= _MONTH_MAX_DAYS[m] for m in schedule.months):
        return
    months = ", ".join(name for name, m in _MONTH_NAMES.items() if m in schedule.months)
    raise ValueError(
        f"schedule {schedule.text!r} never fires: day-of-month {first_day} does not occur "
        f"in {months}"
    )


def next_hit(schedule: str, after: datetime) -> datetime:
    """The first minute matching ``schedule`` strictly after ``after`` (UTC)."""
    return parse_cron(schedule).next_after(after)


# ----------------------------------------------------------------------------- budgets


def _window(budget: Budget) -> tuple[CronSchedule, timedelta] | None:
    """The budget's parsed schedule and duration; None when it has neither (always active)."""
    if budget.schedule is None and budget.duration is None:
        return None
    if budget.schedule is None or budget.duration is None:
        raise ValueError("schedule and duration must be set together")
    schedule = parse_cron(budget.schedule)
    try:
        duration = parse_duration(budget.duration)
    except ValueError as err:
        raise ValueError(f"duration {budget.duration!r}: {err}") from None
    if duration < timedelta(0):
        raise ValueError(f"duration {budget.duration!r} is negative")
    return schedule, duration


def budget_active(budget: Budget, now: datetime) -> bool:
    """True when the budget is in force at ``now``.

    No schedule: always. Otherwise, as upstream: the first schedule hit strictly after
    ``now - duration`` is at or before ``now`` (so the window is [hit, hit + duration)).
    Raises ValueError for a budget that cannot be evaluated.
    """
    window = _window(budget)
    if window is None:
        return True
    schedule, duration = window
    now = as_utc(now)
    return schedule.next_after(now - duration) <= now


def budget_nodes(nodes: str, pool_size: int) -> int:
    """A budget's ``nodes`` for a pool of ``pool_size``: a count, or a percentage rounded up."""
    text = nodes
    if text.endswith("%"):
        number = text[:-1]
        if _NUMBER.match(number) is None or int(number) > 100:
            raise ValueError(f"nodes {nodes!r} is not a percentage from 0% to 100%")
        return -(-int(number) * pool_size // 100)  # ceiling without floats
    if _NUMBER.match(text) is None:
        raise ValueError(f"nodes {nodes!r} is not a node count or a percentage such as '10%'")
    return int(text)


def budget_applies(budget: Budget, reason: str) -> bool:
    """Budgets without ``reasons`` apply to every reason."""
    return not budget.reasons or str(reason) in budget.reasons


@dataclass(frozen=True, slots=True)
class _Evaluated:
    budget: Budget
    active: bool
    value: int  # UNLIMITED when inactive


def _evaluate(nodepool: NodePool, pool_size: int, now: datetime) -> list[_Evaluated]:
    """Every budget, evaluated; ValueError (naming the budget) if any cannot be."""
    out = []
    for i, budget in enumerate(nodepool.spec.disruption.budgets):
        try:
            active = budget_active(budget, now)
            value = budget_nodes(budget.nodes, pool_size)
        except ValueError as err:
            raise ValueError(f"budgets[{i}]: {err}") from None
        out.append(_Evaluated(budget, active, value if active else UNLIMITED))
    return out


def allowed_disruptions(nodepool: NodePool, reason: str, *, pool_size: int, now: datetime) -> int:
    """How many of the pool's nodes may be disrupting for ``reason`` at once.

    The minimum over active budgets that apply to ``reason``; ``UNLIMITED`` when none does; 0
    when any budget of the pool (whatever its reasons) cannot be evaluated (fail closed).
    """
    try:
        evaluated = _evaluate(nodepool, pool_size, now)
    except ValueError:
        return 0
    return min((e.value for e in evaluated if budget_applies(e.budget, reason)), default=UNLIMITED)


@dataclass(frozen=True, slots=True)
class PoolUsage:
    """What budgets count for one NodePool."""

    size: int = 0  # managed, initialized nodes not InstanceTerminating
    disrupting: int = 0  # of those: NotReady or marked for deletion


def _counts_towards_pool(node: StateNode) -> bool:
    # Upstream's Managed() is "has a NodeClaim"; a label alone does not make a node Karpenter's.
    if node.nodeclaim is None or node.node is None or not node.initialized:
        return False
    return bool(node.node_pool) and not node.nodeclaim.status.is_true(
        CONDITION_INSTANCE_TERMINATING
    )


def pool_node_counts(nodes: Iterable[StateNode]) -> dict[str, PoolUsage]:
    """Pool size and nodes already disrupting, per NodePool name (upstream's helpers.go)."""
    sizes: dict[str, int] = {}
    disrupting: dict[str, int] = {}
    for node in nodes:
        if not _counts_towards_pool(node):
            continue
        pool = node.node_pool
        sizes[pool] = sizes.get(pool, 0) + 1
        assert node.node is not None
        if not node.node.ready or node.marked_for_deletion:
            disrupting[pool] = disrupting.get(pool, 0) + 1
    return {pool: PoolUsage(size, disrupting.get(pool, 0)) for pool, size in sizes.items()}


def budget_mapping(snapshot: Snapshot, reason: str, now: datetime) -> dict[str, int]:
    """Per NodePool name: disruptions still allowed for ``reason``, i.e. what its budgets allow
    minus the nodes already disrupting (NotReady or marked for deletion), floored at 0."""
    usage = pool_node_counts(snapshot.nodes)
    out = {}
    for name, nodepool in snapshot.nodepools.items():
        pool = usage.get(name, PoolUsage())
        allowed = allowed_disruptions(nodepool, reason, pool_size=pool.size, now=now)
        out[name] = max(0, allowed - pool.disrupting)
    return out


# ----------------------------------------------------------------------------- explanations

# How far ahead explain_budget follows overlapping windows before calling one continuous.
_MAX_WINDOW_HITS: Final = 2000


def window_end(budget: Budget, now: datetime) -> datetime | None:
    """When the active window containing ``now`` closes (overlapping windows merge).

    None when the budget has no schedule, is not active at ``now``, or its windows keep
    overlapping (active continuously).
    Raises ValueError for a budget that cannot be evaluated.
    """
    window = _window(budget)
    if window is None:
        return None
    schedule, duration = window
    now = as_utc(now)
    hit = schedule.next_after(now - duration)
    if hit > now:
        return None  # not active now
    end = hit + duration
    for _ in range(_MAX_WINDOW_HITS):
        hit = schedule.next_after(hit)
        if hit >= end:
            return end
        end = hit + duration
    return None


def next_budget_change(nodepool: NodePool, now: datetime) -> datetime | None:
    """The next moment after ``now`` at which one of the pool's scheduled budgets comes into or
    goes out of force; None when no scheduled budget will. A budget that cannot be evaluated
    is skipped: the pool allows 0 until someone fixes it, which is a cluster change."""
    moments: list[datetime] = []
    for budget in nodepool.spec.disruption.budgets:
        try:
            window = _window(budget)
            if window is None or window[1] <= timedelta(0):
                continue  # always in force, or never
            if budget_active(budget, now):
                end = window_end(budget, now)
                if end is not None:
                    moments.append(end)
            else:
                moments.append(window[0].next_after(now))  # no hit in (now - duration, now]
        except ValueError:
            continue
    return min(moments, default=None)


def _format_time(moment: datetime, now: datetime) -> str:
    moment, now = as_utc(moment), as_utc(now)
    if moment.date() == now.date():
        return moment.strftime("%H:%M UTC")
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _describe(e: _Evaluated, reason: str, pool_size: int) -> str:
    nodes = e.budget.nodes
    if nodes.endswith("%"):
        return f"budget {nodes} of {_plural(pool_size, 'node')} allows {e.value} for {reason}"
    return f"budget {nodes} for {reason}"


def explain_budget(
    nodepool: NodePool,
    reason: str,
    now: datetime,
    *,
    pool_size: int = 0,
    disrupting: int = 0,
) -> str:
    """Why the pool's budget for ``reason`` stands where it does, in words a person can act on.

    ``pool_size`` and ``disrupting`` are the pool's counts (``pool_node_counts``). Examples:
    "budget 0 for Underutilized until 17:00 UTC", "budget 10% of 3 nodes allows 1 for Drifted
    while 1 is disrupting", "budget is invalid: budgets[0]: nodes 'ten' is not ...". The window
    end named is that of the binding budget (the first active one with the smallest value).
    """
    try:
        evaluated = _evaluate(nodepool, pool_size, now)
    except ValueError as err:
        return f"budget is invalid: {err}"
    binding = _binding(e for e in evaluated if e.active and budget_applies(e.budget, reason))
    if binding is None:
        return f"no active budget limits {reason} disruptions"
    parts = [_describe(binding, reason, pool_size)]
    if disrupting:
        parts.append(f"while {disrupting} {'is' if disrupting == 1 else 'are'} disrupting")
    end = window_end(binding.budget, now)
    if end is not None:
        parts.append(f"until {_format_time(end, now)}")
    elif binding.budget.schedule is not None:
        parts.append(
            f"(schedule {binding.budget.schedule!r} with duration {binding.budget.duration} "
            "keeps it active continuously)"
        )
    remaining = max(0, binding.value - disrupting)
    if remaining:
        parts.append(f"({remaining} more may start)")
    return " ".join(parts)


def _binding(evaluated: Iterable[_Evaluated]) -> _Evaluated | None:
    best: _Evaluated | None = None
    for e in evaluated:
        if best is None or e.value < best.value:
            best = e
    return best
