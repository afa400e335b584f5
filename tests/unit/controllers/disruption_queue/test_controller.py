"""The disruption controller's pass: hygiene, budget signals, Unconsolidatable and timeout
events, the nothing-changed skip, validation and the hand-off to the queue (decisions injected)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.disruption import events
from karpenter_py.controllers.disruption.controller import Disruption
from karpenter_py.controllers.disruption.decide import Facts, next_command
from karpenter_py.controllers.disruption.drift import DRIFT
from karpenter_py.controllers.disruption.multinode import MULTI_NODE
from karpenter_py.controllers.disruption.singlenode import SINGLE_NODE
from karpenter_py.controllers.disruption.types import Decision, Timeout
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.resources import NODECLAIMS, NODES
from karpenter_py.state.ingest import NodePoolSink
from tests import factories
from tests.unit.controllers.disruption_queue.support import (
    DISRUPTED_TAINT,
    OTHER_TAINT,
    World,
)
from tests.unit.fakes import FakeKube

REASON_CONDITION = "DisruptionReason"
STRAY_CONDITION = {
    "type": REASON_CONDITION,
    "status": "True",
    "reason": "Underutilized",
    "message": "",
    "lastTransitionTime": factories.T0,
}
LIFECYCLE = [
    {"type": t, "status": "True", "reason": t, "lastTransitionTime": factories.T0}
    for t in ("Launched", "Registered", "Initialized")
]


class FakeDecide:
    def __init__(self, *decisions: Decision) -> None:
        self.decisions = list(decisions)
        self.facts: list[Facts] = []

    def __call__(self, facts: Facts) -> Decision:
        self.facts.append(facts)
        return self.decisions.pop(0) if len(self.decisions) > 1 else self.decisions[0]


def controller(w: World, decide: Any, **kw: Any) -> Disruption:
    return Disruption(
        w.queue.deps,
        w.rounds,
        queue=w.queue,
        offload=False,
        decide=decide,
        **kw,
    )


async def test_hygiene_removes_stray_taints_and_conditions_only_where_no_command_owns_them() -> (
    None
):
    w = World()
    stray = [OTHER_TAINT, DISRUPTED_TAINT]
    for name in ("stray", "queued", "deleting"):
        w.add_node(name, taints=stray, nodeclaim_conditions=[*LIFECYCLE, STRAY_CONDITION])
    await w.api.delete(NODECLAIMS, "deleting")
    d = controller(w, FakeDecide(Decision()))
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(w.queue.run())
        await w.queue.wait_running()
        w.queue.add(w.command("queued", method=DRIFT, replacements=[w.replacement()]))
        await asyncio.sleep(0)
        w.api.log.clear()

        removed = await d.cleanup_strays(w.cluster.snapshot(w.clock.now()))

        assert removed == 2
        assert w.api.log == [("patch", "nodes", "stray"), ("patch", "nodeclaims", "stray")]
        assert w.api.taints("stray") == [OTHER_TAINT]
        assert REASON_CONDITION not in w.api.conditions("stray")
        assert set(w.api.conditions("stray")) == {"Launched", "Registered", "Initialized"}
        for kept in ("queued", "deleting"):
            assert w.api.taints(kept) == stray
            assert REASON_CONDITION in w.api.conditions(kept)
        runner.cancel()


async def test_nothing_changed_skips_the_decision_until_the_forced_recheck() -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    decide = FakeDecide(Decision(unchanged={"n1": "no disruption method applies"}))
    d = controller(w, decide)

    assert await d.reconcile() is False
    assert await d.reconcile() is False
    assert len(decide.facts) == 1
    assert d.skipped == 1
    w.clock.step(300)
    assert await d.reconcile() is False
    assert len(decide.facts) == 2
    # A change in the cluster (any mutation bumps the generation) re-runs at once.
    w.api.set_conditions("n1", "Consolidatable")
    assert await d.reconcile() is False
    assert len(decide.facts) == 3
    assert decide.facts[-1].indexes is w.rounds.indexes
    assert d.report()["unchanged"] == {"n1": "no disruption method applies"}


class CountingDecide:
    """The real decision, with every answer kept."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []

    def __call__(self, facts: Facts) -> Decision:
        self.decisions.append(next_command(facts))
        return self.decisions[-1]


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


NOMINATED = "node is nominated for pending pods"
NOT_CONSOLIDATABLE = (
    "consolidateAfter 0s has passed since initialization but the NodeClaim is not "
    "Consolidatable yet"
)


@pytest.mark.parametrize(
    ("consolidate_after", "nominated_for", "due", "first", "then"),
    [
        # A nomination for 25 s: the pass runs again at 25 s, not at the forced 5 min one.
        ("0s", 25.0, 25.0, NOMINATED, NOT_CONSOLIDATABLE),
        # Initialized at 00:00, now 01:00: consolidateAfter 62m5s passes 125 s from now.
        (
            "62m5s",
            None,
            125.0,
            "consolidateAfter 62m5s not yet passed since initialization "
            "(consolidatable at 01:02:05 UTC, in 125s)",
            "consolidateAfter 62m5s has passed since initialization but the NodeClaim is not "
            "Consolidatable yet",
        ),
    ],
)
async def test_the_loop_decides_again_when_a_time_based_reason_runs_out(
    consolidate_after: str, nominated_for: float | None, due: float, first: str, then: str
) -> None:
    w = World(factories.nodepool("default", disruption={"consolidateAfter": consolidate_after}))
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    start = w.clock.now()
    if nominated_for is not None:
        w.cluster.nominate("n1", start + timedelta(seconds=nominated_for))
    decide = CountingDecide()
    d = controller(w, decide, period=10.0)
    async with asyncio.TaskGroup() as tg:
        loop = tg.create_task(d.run())
        await settle()
        assert [x.unchanged for x in decide.decisions] == [{"n1": first}]
        assert decide.decisions[0].recheck_at == start + timedelta(seconds=due)
        assert d.report()["recheckAt"] == (start + timedelta(seconds=due)).isoformat()
        # Nothing changes in the cluster: the periodic passes before the moment are skipped...
        passes = int(due // 10)
        for _ in range(passes):
            w.clock.step(10)
            await settle()
        assert (d.passes, d.skipped, len(decide.decisions)) == (passes + 1, passes, 1)
        # ...and the loop wakes at the moment itself and decides again.
        w.clock.step(due - 10 * passes)
        await settle()
        assert (d.passes, d.skipped) == (passes + 2, passes)
        assert [x.unchanged for x in decide.decisions] == [{"n1": first}, {"n1": then}]
        assert decide.decisions[1].recheck_at is None
        loop.cancel()


# Past Go's time.Duration: the CRD pattern admits it, the NodePool model does not.
HUGE = "99999999999999999999h"
OUT_OF_RANGE = f"invalid duration {HUGE!r}: out of range (at most 2562047h47m16.854775807s)"


@pytest.mark.parametrize(
    ("bad_fields", "field"),
    [
        ({"disruption": {"consolidateAfter": HUGE}}, "spec.disruption.consolidateAfter"),
        (
            {"disruption": {"budgets": [{"nodes": "1", "schedule": "@daily", "duration": HUGE}]}},
            "spec.disruption.budgets.0.duration",
        ),
        ({"expire_after": HUGE}, "spec.template.spec.expireAfter"),
        ({"termination_grace_period": HUGE}, "spec.template.spec.terminationGracePeriod"),
    ],
    ids=["consolidateAfter", "budget-duration", "expireAfter", "terminationGracePeriod"],
)
async def test_a_nodepool_that_cannot_be_read_stops_no_other_pools_decision(
    bad_fields: dict[str, Any], field: str
) -> None:
    w = World(factories.nodepool("default", disruption={"consolidateAfter": "0s"}))
    # Through the informer's sink, as the controller gets it: the bad pool is set aside
    # (nodepool.readiness reports it on the object).
    NodePoolSink(w.cluster).upsert(factories.nodepool_dict("bad", **bad_fields))
    consolidatable = [*LIFECYCLE, factories.condition("Consolidatable")]
    w.add_node("good-node", nodeclaim_conditions=consolidatable)
    w.add_node("bad-node", pool="bad", nodeclaim_conditions=consolidatable)
    decide = CountingDecide()
    d = controller(w, decide, validation_delay=0.0)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(w.queue.run())
        await w.queue.wait_running()
        assert await d.reconcile() is True
        runner.cancel()

    [decision] = decide.decisions
    assert [(c.method.name, [x.name for x in c.candidates]) for c in decision.commands] == [
        ("emptiness", ["good-node"])
    ]
    assert decision.unchanged == {"bad-node": "NodePool 'bad' not found"}
    # Tainted, marked and deleted: only the good pool's node was touched.
    assert w.api.log == [
        ("patch", "nodes", "good-node"),
        ("patch", "nodeclaims", "good-node"),
        ("delete", "nodeclaims", "good-node"),
    ]
    assert sorted(w.cluster.nodepools) == ["default"]
    assert list(w.cluster.invalid) == ["nodepools/bad"]
    assert f"{field}\n  Value error, {OUT_OF_RANGE}" in w.cluster.invalid["nodepools/bad"]


async def test_unconsolidatable_events_carry_the_reason_and_repeat_after_15_minutes() -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    why = "pod default/web is annotated karpenter.sh/do-not-disrupt"
    d = controller(w, FakeDecide(Decision(unchanged={"n1": why})), recheck_after=60)

    await d.reconcile()
    w.clock.step(61)
    await d.reconcile()
    assert [e for e in w.recorder.recorded if e[2] == "Unconsolidatable"] == [
        ("Node", "n1", "Unconsolidatable", why),
        ("NodeClaim", "n1", "Unconsolidatable", why),
    ]
    w.clock.step(900)
    await d.reconcile()
    assert len([e for e in w.recorder.recorded if e[2] == "Unconsolidatable"]) == 4


async def test_zero_budget_publishes_disruption_blocked_and_sets_the_gauge() -> None:
    w = World(factories.nodepool("default", disruption={"budgets": [{"nodes": "0"}]}))
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    d = controller(w, FakeDecide(Decision()))

    await d.reconcile()
    await d.reconcile()
    blocked = [e for e in w.recorder.recorded if e[2] == "DisruptionBlocked"]
    assert [(k, n) for k, n, _, _ in blocked] == [("NodePool", "default")] * 3
    assert {m.split(":")[0] for _, _, _, m in blocked} == {
        f"No allowed disruptions for disruption reason {r}"
        for r in ("Empty", "Drifted", "Underutilized")
    }
    for reason in ("Empty", "Drifted", "Underutilized"):
        assert (
            w.metric("karpenter_nodepools_allowed_disruptions", nodepool="default", reason=reason)
            == 0.0
        )
    w.clock.step(60)
    await d.reconcile()
    assert len([e for e in w.recorder.recorded if e[2] == "DisruptionBlocked"]) == 6


async def test_a_drift_command_goes_to_the_queue_without_validation() -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    cmd = w.command("n1", method=DRIFT, replacements=[w.replacement()])
    d = controller(w, FakeDecide(Decision(commands=(cmd,))))
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(w.queue.run())
        await w.queue.wait_running()
        assert await d.reconcile() is True
        assert w.queue.queued_nodes() == frozenset({"n1"})
        # The pass returns once the candidate is marked: the next one's budgets count it.
        assert w.state_node("n1").marked_for_deletion
        assert d.report()["queue"][0]["candidates"] == ["n1"]
        runner.cancel()


async def test_a_rejected_consolidation_publishes_consolidation_rejected() -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)  # not Consolidatable: revalidation fails
    cmd = w.command("n1", method=SINGLE_NODE)
    d = controller(w, FakeDecide(Decision(commands=(cmd,))), validation_delay=15.0)
    task = asyncio.create_task(d.reconcile())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done()  # waiting out the validation delay
    w.clock.step(15)
    assert await task is False
    rejected = [e for e in w.recorder.recorded if e[2] == "ConsolidationRejected"]
    assert [(k, n) for k, n, _, _ in rejected] == [("Node", "n1"), ("NodeClaim", "n1")]
    assert d.last_rejection
    assert rejected[0][3] == f"Disruption command rejected at validation: {d.last_rejection}"
    assert (
        w.metric(
            "karpenter_voluntary_disruption_failed_validations_total", consolidation_type="single"
        )
        == 1.0
    )
    assert len(w.queue) == 0


async def test_a_command_that_fails_to_start_waits_for_the_next_period() -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    w.api.fail.add(("create", "nodeclaims", "*"))
    cmd = w.command("n1", method=DRIFT, replacements=[w.replacement()])
    d = controller(w, FakeDecide(Decision(commands=(cmd,))))
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(w.queue.run())
        await w.queue.wait_running()
        assert await d.reconcile() is False
        assert [e.outcome.value for e in w.queue.history] == ["ReplacementCreateFailed"]
        assert w.api.taints("n1") == [OTHER_TAINT]
        runner.cancel()
    # The saving it would have made is reported as blocked.
    assert blocked(w) == {"budget": 0.0, "validation": 0.0, "start_failed": cmd.savings}


# Two methods cut short: multi-node after 60 of its 100 candidates, single-node with candidates
# of a pool that no longer exists left over (no event for it).
TIMEOUTS = (
    Timeout(MULTI_NODE, 60.0, 60, 40, ("default",)),
    Timeout(SINGLE_NODE, 180.0, 12, 88, ("default", "gone")),
)


async def test_a_timeout_is_reported_counted_published_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    decide = FakeDecide(Decision(timed_out=TIMEOUTS))
    d = controller(w, decide, multi_node_timeout=30.0, single_node_timeout=90.0)

    with caplog.at_level(logging.WARNING, logger="karpenter.disruption"):
        assert await d.reconcile() is False

    # The controller's limits (the settings) reach the decision.
    assert (decide.facts[0].multi_node_timeout, decide.facts[0].single_node_timeout) == (30, 90)
    assert d.report()["timedOut"] == [
        {
            "method": "multi-node-consolidation",
            "examined": 60,
            "unexamined": 40,
            "limitSeconds": 60.0,
            "nodepools": ["default"],
        },
        {
            "method": "single-node-consolidation",
            "examined": 12,
            "unexamined": 88,
            "limitSeconds": 180.0,
            "nodepools": ["default", "gone"],
        },
    ]
    timeouts = "karpenter_voluntary_disruption_consolidation_timeouts_total"
    assert w.metric(timeouts, consolidation_type="multi") == 1.0
    assert w.metric(timeouts, consolidation_type="single") == 1.0
    multi = "multi-node-consolidation stopped at its time limit of 60s with 40 of 100 candidates "
    single = "single-node-consolidation stopped at its time limit of 180s with 88 of 100 "
    assert [e for e in w.recorder.recorded if e[2] == "ConsolidationTimedOut"] == [
        ("NodePool", "default", "ConsolidationTimedOut", multi + "unexamined"),
        ("NodePool", "default", "ConsolidationTimedOut", single + "candidates unexamined"),
    ]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [(r.getMessage(), r.__dict__["timeout"]) for r in warnings] == [
        (multi + "unexamined", d.report()["timedOut"][0]),
        (single + "candidates unexamined", d.report()["timedOut"][1]),
    ]


@pytest.mark.parametrize(
    ("second", "published"),
    [
        # The same method again on the same pool within the window: one event, whatever the
        # counts (they change every pass).
        (Timeout(MULTI_NODE, 60.0, 70, 30, ("default",)), 1),
        # Another method is another event.
        (Timeout(SINGLE_NODE, 180.0, 5, 95, ("default",)), 2),
    ],
)
def test_timeout_events_are_deduplicated_per_pool_and_method(
    second: Timeout, published: int
) -> None:
    recorder = EventRecorder(FakeKube(), clock=FakeClock())
    pools = {"default": factories.nodepool("default")}
    events.timed_out(recorder, TIMEOUTS[0], pools)
    events.timed_out(recorder, second, pools)
    assert (recorder.suppressed, recorder.pending) == (2 - published, published)


async def test_an_ignored_do_not_disrupt_value_is_published_on_its_pod() -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    values = {"ok": "true", "later": "30m", "soon": "soon", "negative": "-5m", "none": None}
    for name, value in values.items():
        annotations = {"karpenter.sh/do-not-disrupt": value} if value is not None else None
        w.cluster.upsert_pod(factories.pod(name, node_name="n1", annotations=annotations))
    d = controller(w, FakeDecide(Decision()))
    await d.reconcile()
    assert sorted(e for e in w.recorder.recorded if e[0] == "Pod") == [
        (
            "Pod",
            "negative",
            "InvalidDoNotDisruptAnnotation",
            "Invalid karpenter.sh/do-not-disrupt annotation value '-5m', ignoring annotation. "
            "Use 'true' or a duration like '5m', '1h'",
        ),
        (
            "Pod",
            "soon",
            "InvalidDoNotDisruptAnnotation",
            "Invalid karpenter.sh/do-not-disrupt annotation value 'soon', ignoring annotation. "
            "Use 'true' or a duration like '5m', '1h'",
        ),
    ]


async def test_a_pass_prices_the_nodes_it_decided_on_and_drops_nodes_that_went() -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)
    w.add_node("n2", instance_type="c-4x-amd64-linux", nodeclaim_conditions=LIFECYCLE)
    d = controller(w, FakeDecide(Decision()))
    c2 = w.instance_type("c-2x-amd64-linux").offerings
    c4 = w.instance_type("c-4x-amd64-linux").offerings
    p2 = next(o.price for o in c2 if (o.zone, o.capacity_type) == ("test-zone-a", "on-demand"))
    p4 = next(o.price for o in c4 if (o.zone, o.capacity_type) == ("test-zone-a", "on-demand"))
    labels = {"nodepool": "default", "capacity_type": "on-demand", "zone": "test-zone-a"}

    await d.reconcile()
    assert (
        w.metric(
            "karpenter_nodes_hourly_price",
            node_name="n1",
            instance_type="c-2x-amd64-linux",
            **labels,
        )
        == p2
    )
    assert (
        w.metric(
            "karpenter_nodes_hourly_price",
            node_name="n2",
            instance_type="c-4x-amd64-linux",
            **labels,
        )
        == p4
    )
    assert w.metric("karpenter_nodepools_hourly_price", nodepool="default") == p2 + p4
    offering = {"capacity_type": "on-demand", "zone": "test-zone-a"}
    assert (
        w.metric(
            "karpenter_cloudprovider_instance_type_offering_price_estimate",
            instance_type="c-2x-amd64-linux",
            **offering,
        )
        == p2
    )

    w.api.remove(NODECLAIMS, "n2")
    w.api.remove(NODES, "n2")
    await d.reconcile()
    assert (
        w.metrics.registry.get_sample_value(
            "karpenter_nodes_hourly_price",
            {"node_name": "n2", "instance_type": "c-4x-amd64-linux", **labels},
        )
        is None
    )
    assert w.metric("karpenter_nodepools_hourly_price", nodepool="default") == p2


def blocked(w: World) -> dict[str, float]:
    return {
        r: w.metric("karpenter_voluntary_disruption_blocked_savings_hourly", reason=r)
        for r in ("budget", "validation", "start_failed")
    }


async def test_blocked_savings_of_a_pass_that_found_nothing_are_the_budgets() -> None:
    w = World()
    d = controller(w, FakeDecide(Decision(budget_blocked=0.5)))
    await d.reconcile()
    assert blocked(w) == {"budget": 0.5, "validation": 0.0, "start_failed": 0.0}


async def test_a_command_rejected_at_validation_is_a_blocked_saving() -> None:
    w = World()
    w.add_node("n1", nodeclaim_conditions=LIFECYCLE)  # not Consolidatable: revalidation fails
    cmd = w.command("n1", method=SINGLE_NODE)
    d = controller(w, FakeDecide(Decision(commands=(cmd,))), validation_delay=0.0)
    assert await d.reconcile() is False
    assert blocked(w) == {"budget": 0.0, "validation": cmd.savings, "start_failed": 0.0}
