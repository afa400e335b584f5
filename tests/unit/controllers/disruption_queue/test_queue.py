"""The orchestration queue's steps against an in-memory API: what is written, in which order,
and what is undone when a command fails or is cancelled."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from karpenter_py.controllers.disruption.drift import DRIFT
from karpenter_py.controllers.disruption.emptiness import EMPTINESS
from karpenter_py.controllers.disruption.multinode import MULTI_NODE
from karpenter_py.controllers.disruption.queue import (
    WRITE_PARALLELISM,
    Entry,
    Outcome,
    command_timeout,
    set_disrupted_taint,
)
from karpenter_py.controllers.disruption.types import Command
from karpenter_py.kube.resources import NODECLAIMS, NODES
from tests.unit.controllers.disruption_queue.support import (
    DISRUPTED_TAINT,
    OTHER_TAINT,
    World,
)

REASON_CONDITION = "DisruptionReason"


async def settle(rounds: int = 50) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def entry(world: World, command: Command, timeout: float = 600.0) -> Entry:
    return Entry(id=1, command=command, started=world.clock.monotonic(), timeout=timeout)


def marked(world: World, name: str) -> bool:
    return world.state_node(name).marked_for_deletion


@pytest.mark.parametrize(
    ("queued", "seconds"),
    [(1, 600.0), (7500, 600.0), (10_000, 800.0), (45_000, 3600.0), (1_000_000, 3600.0)],
)
def test_timeout_is_80ms_per_queued_command_within_10m_and_1h(queued: int, seconds: float) -> None:
    assert command_timeout(queued) == pytest.approx(seconds)


async def test_delete_command_taints_sets_the_condition_then_deletes() -> None:
    w = World()
    w.add_node("n1")
    cmd = w.command("n1", method=EMPTINESS, explanation="1 node empty")
    e = entry(w, cmd)

    assert await w.queue.execute(e) == Outcome.SUCCEEDED

    assert w.api.taints("n1") == [OTHER_TAINT, DISRUPTED_TAINT]
    cond = w.api.conditions("n1")[REASON_CONDITION]
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "Empty", "1 node empty")
    assert w.api.log == [
        ("patch", "nodes", "n1"),
        ("patch", "nodeclaims", "n1"),
        ("delete", "nodeclaims", "n1"),
    ]
    assert w.api.raw(NODECLAIMS, "n1")["metadata"]["deletionTimestamp"]
    assert marked(w, "n1")
    assert e.deleted == ["n1"]
    assert (
        w.metric(
            "karpenter_nodeclaims_disrupted_total",
            reason="empty",
            nodepool="default",
            capacity_type="on-demand",
        )
        == 1.0
    )
    assert [(k, n, r) for k, n, r, _ in w.recorder.recorded] == [
        ("Node", "n1", "DisruptionTerminating"),
        ("NodeClaim", "n1", "DisruptionTerminating"),
    ]


async def test_replace_waits_for_initialized_replacements_before_deleting() -> None:
    w = World()
    w.add_node("n1")
    seen_marked_at_create: list[bool] = []
    create = w.api.create_nodeclaim

    async def spying_create(body: dict[str, Any]) -> dict[str, Any]:
        seen_marked_at_create.append(marked(w, "n1"))
        return await create(body)

    w.api.create_nodeclaim = spying_create  # type: ignore[method-assign]
    cmd = w.command("n1", replacements=[w.replacement()], explanation="1 -> 1 cheaper")
    e = entry(w, cmd)
    task = asyncio.create_task(w.queue.execute(e))
    await settle()

    # Steps 1-3: tainted and conditioned, replacement created while not yet marked; marked and
    # the replacement nominated only after it exists.
    assert seen_marked_at_create == [False]
    (replacement,) = e.replacements
    assert w.api.log == [
        ("patch", "nodes", "n1"),
        ("patch", "nodeclaims", "n1"),
        ("create", "nodeclaims", replacement),
    ]
    cond = w.api.conditions("n1")[REASON_CONDITION]
    assert (cond["status"], cond["reason"]) == ("True", "Underutilized")
    assert marked(w, "n1")
    assert w.cluster.is_nominated(replacement, w.clock.now())
    assert w.recorder.reasons() == ["DisruptionLaunching", "DisruptionLaunching"]

    # Step 4: nothing deleted while the replacement launches and registers.
    w.api.set_conditions(replacement, "Launched")
    w.clock.step(1.0)
    await settle()
    w.api.set_conditions(replacement, "Registered")
    w.clock.step(1.0)
    await settle()
    assert not task.done()
    assert ("delete", "nodeclaims", "n1") not in w.api.log
    assert w.recorder.reasons()[-2:] == ["DisruptionWaitingReadiness"] * 2

    # Step 5: once Initialized, the candidate goes.
    w.api.set_conditions(replacement, "Initialized")
    w.clock.step(1.0)
    await settle()
    assert await task == Outcome.SUCCEEDED
    assert w.api.log[-1] == ("delete", "nodeclaims", "n1")
    assert w.recorder.reasons()[-2:] == ["DisruptionTerminating"] * 2
    assert w.api.raw(NODECLAIMS, replacement)["metadata"].get("deletionTimestamp") is None


async def test_create_failure_untaints_clears_the_condition_and_never_marks() -> None:
    w = World()
    w.add_node("n1")
    w.api.fail.add(("create", "nodeclaims", "*"))
    cmd = w.command("n1", replacements=[w.replacement()])
    e = entry(w, cmd)

    assert await w.queue.execute(e) == Outcome.CREATE_FAILED

    assert w.api.taints("n1") == [OTHER_TAINT]
    assert REASON_CONDITION not in w.api.conditions("n1")
    assert not marked(w, "n1")
    assert e.replacements == []
    assert not any(verb == "delete" for verb, _, _ in w.api.log)
    assert (
        w.metric(
            "karpenter_voluntary_disruption_queue_failures_total",
            decision="replace",
            reason="underutilized",
            consolidation_type="single",
        )
        == 1.0
    )


async def test_timeout_rolls_back_and_leaves_the_replacement_as_capacity() -> None:
    w = World()
    w.add_node("n1")
    cmd = w.command("n1", replacements=[w.replacement()])
    e = entry(w, cmd, timeout=command_timeout(1))
    task = asyncio.create_task(w.queue.execute(e))
    await settle()
    (replacement,) = e.replacements
    assert marked(w, "n1")

    for _ in range(599):
        w.clock.step(1.0)
        await settle(5)
    assert not task.done()
    w.clock.step(1.0)
    await settle()

    assert await task == Outcome.TIMED_OUT
    assert w.api.taints("n1") == [OTHER_TAINT]
    assert REASON_CONDITION not in w.api.conditions("n1")
    assert not marked(w, "n1")
    assert ("delete", "nodeclaims", "n1") not in w.api.log
    assert w.api.raw(NODECLAIMS, replacement)["metadata"].get("deletionTimestamp") is None
    assert (
        w.metric(
            "karpenter_voluntary_disruption_queue_failures_total",
            decision="replace",
            reason="underutilized",
            consolidation_type="single",
        )
        == 1.0
    )


async def test_a_deleted_replacement_is_unrecoverable() -> None:
    w = World()
    w.add_node("n1")
    e = entry(w, w.command("n1", method=DRIFT, replacements=[w.replacement()]))
    task = asyncio.create_task(w.queue.execute(e))
    await settle()
    w.api.remove(NODECLAIMS, e.replacements[0])
    w.clock.step(1.0)
    await settle()

    assert await task == Outcome.REPLACEMENT_DELETED
    assert w.api.taints("n1") == [OTHER_TAINT]
    assert REASON_CONDITION not in w.api.conditions("n1")
    assert not marked(w, "n1")
    assert ("delete", "nodeclaims", "n1") not in w.api.log


async def test_taint_failure_aborts_a_replace_before_anything_is_created() -> None:
    w = World()
    w.add_node("n1")
    w.add_node("n2")
    w.api.fail.add(("patch", "nodes", "n2"))
    e = entry(w, w.command("n1", "n2", method=MULTI_NODE, replacements=[w.replacement()]))

    assert await w.queue.execute(e) == Outcome.TAINT_FAILED

    assert w.api.taints("n1") == [OTHER_TAINT]
    assert w.api.taints("n2") == [OTHER_TAINT]
    assert REASON_CONDITION not in w.api.conditions("n1")
    assert REASON_CONDITION not in w.api.conditions("n2")
    assert not any(verb == "create" for verb, _, _ in w.api.log)
    assert not marked(w, "n1")
    assert not marked(w, "n2")


async def test_taint_failure_does_not_stop_a_delete_only_command() -> None:
    w = World()
    w.add_node("n1")
    w.api.fail.add(("patch", "nodes", "n1"))
    e = entry(w, w.command("n1", method=EMPTINESS))

    assert await w.queue.execute(e) == Outcome.SUCCEEDED
    assert w.api.taints("n1") == [OTHER_TAINT]  # termination cordons it
    assert w.api.log[-1] == ("delete", "nodeclaims", "n1")


async def test_a_candidate_that_cannot_be_deleted_is_restored() -> None:
    w = World()
    w.add_node("n1")
    w.add_node("n2")
    w.api.fail.add(("delete", "nodeclaims", "n2"))
    e = entry(w, w.command("n1", "n2", method=EMPTINESS))
    task = asyncio.create_task(w.queue.execute(e))
    for _ in range(5):
        await settle()
        w.clock.step(1.0)
    assert await task == Outcome.DELETE_FAILED
    assert e.deleted == ["n1"]
    assert marked(w, "n1")  # really deleting
    assert not marked(w, "n2")
    assert w.api.taints("n2") == [OTHER_TAINT]
    assert REASON_CONDITION not in w.api.conditions("n2")
    assert w.api.taints("n1") == [OTHER_TAINT, DISRUPTED_TAINT]


async def test_taint_write_keeps_other_taints_and_is_idempotent() -> None:
    w = World()
    w.add_node("n1", taints=[OTHER_TAINT, {"key": "karpenter.sh/disrupted", "effect": "NoExecute"}])
    assert await set_disrupted_taint(w.client, "n1", present=True)
    assert await set_disrupted_taint(w.client, "n1", present=True)
    assert w.api.taints("n1") == [
        OTHER_TAINT,
        {"key": "karpenter.sh/disrupted", "effect": "NoExecute"},
        DISRUPTED_TAINT,
    ]
    assert w.api.log == [("patch", "nodes", "n1")]
    assert await set_disrupted_taint(w.client, "n1", present=False)
    assert w.api.taints("n1") == [
        OTHER_TAINT,
        {"key": "karpenter.sh/disrupted", "effect": "NoExecute"},
    ]
    w.api.remove(NODES, "n1")
    assert await set_disrupted_taint(w.client, "n1", present=False)
    assert not await set_disrupted_taint(w.client, "n1", present=True)


async def test_queued_nodes_are_known_from_add_until_the_command_finishes() -> None:
    w = World()
    w.add_node("n1")
    cmd = w.command("n1", replacements=[w.replacement()])
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(w.queue.run())
        await w.queue.wait_running()
        e = w.queue.add(cmd)
        assert not e.started_event.is_set()
        assert w.queue.queued_nodes() == frozenset({"n1"})
        assert w.queue.queued_nodeclaims() == frozenset({"n1"})
        assert (
            w.metric(
                "karpenter_voluntary_disruption_decisions_total",
                decision="replace",
                reason="underutilized",
                consolidation_type="single",
            )
            == 1.0
        )
        await e.wait_started()
        assert marked(w, "n1")  # step 3 done when the controller may decide again
        assert e.outcome.value == "Pending"
        w.api.set_conditions(e.replacements[0], "Launched", "Registered", "Initialized")
        w.clock.step(1.0)
        await settle()
        assert e.outcome == Outcome.SUCCEEDED
        assert len(w.queue) == 0
        assert w.queue.queued_nodes() == frozenset()
        assert list(w.queue.history) == [e]
        runner.cancel()


async def test_cancellation_writes_nothing_more_and_drops_the_marks() -> None:
    w = World()
    w.add_node("n1")
    cmd = w.command("n1", replacements=[w.replacement()])
    runner: asyncio.Task[None] | None = None
    with contextlib.suppress(asyncio.CancelledError):
        async with asyncio.TaskGroup() as tg:
            runner = tg.create_task(w.queue.run())
            await w.queue.wait_running()
            e = w.queue.add(cmd)
            await settle()
            assert marked(w, "n1")
            writes = list(w.api.log)
            runner.cancel()
    assert e.outcome == Outcome.CANCELLED
    assert w.api.log == writes  # no rollback writes from a process that lost the Lease
    assert not marked(w, "n1")
    assert w.api.taints("n1") == [OTHER_TAINT, DISRUPTED_TAINT]  # for the next leader to clean
    assert len(w.queue) == 0


@pytest.mark.parametrize(("candidates", "at_once"), [(3, 3), (25, WRITE_PARALLELISM)])
async def test_a_commands_writes_go_to_up_to_20_candidates_at_once(
    candidates: int, at_once: int
) -> None:
    w = World()
    names = [f"n{i:02d}" for i in range(candidates)]
    for name in names:
        w.add_node(name)
    in_flight: dict[str, int] = {"patch": 0, "delete": 0}
    most: dict[str, int] = {"patch": 0, "delete": 0}
    release = {"patch": asyncio.Event(), "delete": asyncio.Event()}

    def gated(verb: str, call: Any) -> Any:
        async def wrapper(*args: Any, **kw: Any) -> Any:
            in_flight[verb] += 1
            most[verb] = max(most[verb], in_flight[verb])
            await release[verb].wait()
            in_flight[verb] -= 1
            return await call(*args, **kw)

        return wrapper

    w.api.patch = gated("patch", w.api.patch)  # type: ignore[method-assign]
    w.api.delete = gated("delete", w.api.delete)  # type: ignore[method-assign]
    e = entry(w, w.command(*names, method=EMPTINESS))
    task = asyncio.create_task(w.queue.execute(e))
    await settle()
    assert in_flight == {"patch": at_once, "delete": 0}  # tainting, nothing deleted yet
    release["patch"].set()
    await settle()
    assert in_flight == {"patch": 0, "delete": at_once}
    release["delete"].set()

    assert await task == Outcome.SUCCEEDED
    assert most == {"patch": at_once, "delete": at_once}
    assert e.deleted == names  # in the command's order, whatever order the answers came in
    assert sorted(e.tainted) == names
    assert sorted(e.conditioned) == names
    assert all(w.api.taints(n) == [OTHER_TAINT, DISRUPTED_TAINT] for n in names)
    assert all(marked(w, n) for n in names)


async def test_a_cancelled_delete_step_keeps_the_marks_of_candidates_already_deleted() -> None:
    w = World()
    for name in ("n1", "n2"):
        w.add_node(name)
    hold = asyncio.Event()
    delete = w.api.delete

    async def slow_for_n2(resource: Any, name: str, **kw: Any) -> Any:
        if name == "n2":
            await hold.wait()  # n2's delete never answers before the cancellation
        return await delete(resource, name, **kw)

    w.api.delete = slow_for_n2  # type: ignore[method-assign]
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(w.queue.run())
        await w.queue.wait_running()
        e = w.queue.add(w.command("n1", "n2", method=EMPTINESS))
        await settle()
        assert e.deleted == ["n1"]
        runner.cancel()
    assert e.outcome == Outcome.CANCELLED
    assert marked(w, "n1")  # deleted: it stays marked, termination takes it
    assert not marked(w, "n2")
