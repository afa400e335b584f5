"""``pod.nomination``: planned pods' status.nominatedNodeName, written, moved, cleared, or left."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.provisioning.nominations import (
    GRACE,
    PodNominations,
    server_version,
    supports_nominations,
)
from karpenter_py.kube.errors import InvalidError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import PODS, Resource
from karpenter_py.state.cluster import Cluster
from tests.factories import node, nodeclaim, pod, pod_dict
from tests.unit.fakes import FakeKube, deps


@pytest.mark.parametrize(
    ("info", "version", "supported"),
    [
        ({"major": "1", "minor": "35"}, (1, 35), True),
        ({"major": "1", "minor": "37", "gitVersion": "v1.37.2"}, (1, 37), True),
        ({"major": "1", "minor": "34"}, (1, 34), False),  # alpha there, off by default
        ({"major": "1", "minor": "31+"}, (1, 31), False),  # a distribution's "31+"
        ({"major": "1", "minor": "36+"}, (1, 36), True),
        # An API server emulating an older release has that release's feature gates.
        ({"major": "1", "minor": "37", "emulationMajor": "1", "emulationMinor": "34"}, (1, 34), False),
        ({"major": "1", "minor": "37", "emulationMajor": "1", "emulationMinor": "35"}, (1, 35), True),
        ({"major": "2", "minor": "0"}, (2, 0), True),
        ({"major": "", "minor": ""}, None, False),
        ({}, None, False),
    ],
)  # fmt: skip
def test_the_feature_is_detected_from_the_api_servers_version(
    info: dict[str, Any], version: tuple[int, int] | None, supported: bool
) -> None:
    assert server_version(info) == version
    assert supports_nominations(info) is supported


UNREGISTERED = [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]


def world(*pods: dict[str, Any]) -> tuple[PodNominations, FakeKube, Cluster]:
    """nc1..nc3 launched and joined to Nodes ip-1..ip-3 not registered yet (nothing can bind
    there); nc4 in flight; ip-5 a node open for pods (no NodeClaim of ours)."""
    kube = FakeKube()
    kube.version_info = {"major": "1", "minor": "37"}
    c = Cluster()
    for i in (1, 2, 3, 4):
        c.upsert_nodeclaim(nodeclaim(f"nc{i}", provider_id=f"fake://i-{i}"))
    for i in (1, 2, 3):
        c.upsert_node(node(f"ip-{i}", provider_id=f"fake://i-{i}", taints=UNREGISTERED))
    c.upsert_node(node("ip-5", provider_id="fake://i-5"))
    for body in pods:
        kube.put(PODS, body)
        c.upsert_pod(pod(body["metadata"]["name"], **_kw(body)))
    n = PodNominations(deps(client=kube, cluster=c, clock=FakeClock()))

    def watch(resource: Resource, obj: KubeObject | None, name: str) -> None:
        """The pod watch, a moment after the write answered: the state takes the pod in, then
        the controller hears it."""

        def event(body: KubeObject) -> None:
            deliver(kube, c, name)
            n.on_pod(body)

        if resource == PODS and obj is not None:
            asyncio.get_running_loop().call_soon(event, copy.deepcopy(obj))

    kube.on_write = watch
    return n, kube, c


def opens(c: Cluster, name: str) -> None:
    """Registration lifted the unregistered taint."""
    n = int(name.removeprefix("ip-"))
    c.upsert_node(node(name, provider_id=f"fake://i-{n}"))


def _kw(body: dict[str, Any]) -> dict[str, Any]:
    status = body.get("status", {})
    return {
        "pending": True,
        "node_name": body["spec"].get("nodeName", ""),
        "nominated": status.get("nominatedNodeName"),
        "deleting": body["metadata"].get("deletionTimestamp"),
    }


def deliver(kube: FakeKube, c: Cluster, name: str) -> None:
    """The pod watch brings the stored pod back into the state."""
    stored = kube.stored(PODS, name, "default")
    c.upsert_pod(pod(name, **_kw(stored)))


def writes(kube: FakeKube) -> list[tuple[str, str | None, str | None]]:
    """(pod, subresource, nominatedNodeName written) of each pod patch."""
    return [
        (call.name, call.subresource, call.body["status"]["nominatedNodeName"])
        for call in kube.calls_of("patch", PODS)
    ]


async def test_pods_are_nominated_to_their_node_just_before_it_opens_and_only_then() -> None:
    n, kube, c = world(*(pod_dict(p, pending=True) for p in ("a", "b", "c")))
    assert await n.detect() is True
    c.pod_plans.plan("default/a", "nc1")
    c.pod_plans.plan("default/b", "nc4")  # in flight: no Node to name yet
    c.pod_plans.plan("default/c", "ip-5")  # open already: the scheduler would not try it again

    n.planned(["default/a", "default/b", "default/c"])
    for key in ("default/a", "default/b", "default/c"):
        await n.reconcile(key)  # the queue only ever takes back
    assert writes(kube) == []
    await n.settle("ip-1")  # registration is about to lift ip-1's unregistered taint
    await n.settle("ip-5")

    assert writes(kube) == [("a", "status", "ip-1")]
    call = kube.calls_of("patch", PODS)[0]
    # The UID guards against a pod recreated under the same name.
    assert call.body["metadata"] == {"uid": "uid-default-a"}
    assert kube.stored(PODS, "a", "default")["status"]["nominatedNodeName"] == "ip-1"
    assert n.writes == {"set": 1, "moved": 0, "cleared": 0}


async def test_a_nomination_moves_with_the_plan_and_is_cleared_when_the_plan_goes() -> None:
    n, kube, c = world(pod_dict("a", pending=True))
    await n.detect()
    c.pod_plans.plan("default/a", "nc1")
    await n.settle("ip-1")

    c.pod_plans.plan("default/a", "nc2")  # a later round planned it elsewhere
    await n.settle("ip-2")  # before the queue took the old one back: moved in one write
    c.pod_plans.plan("default/a", "nc3")
    await n.reconcile("default/a")  # the plan moved on: taken back now
    await n.settle("ip-3")
    c.delete_nodeclaim("nc3")  # its NodeClaim went (a failed launch, say)
    await n.reconcile("default/a")
    await n.reconcile("default/a")  # nothing left to do

    assert writes(kube) == [
        ("a", "status", "ip-1"),
        ("a", "status", "ip-2"),
        ("a", "status", None),
        ("a", "status", "ip-3"),
        ("a", "status", None),
    ]
    assert "nominatedNodeName" not in kube.stored(PODS, "a", "default")["status"]
    assert n.writes == {"set": 2, "moved": 1, "cleared": 2}


async def test_ours_still_unbound_a_grace_after_its_node_opened_is_taken_back() -> None:
    n, kube, c = world(pod_dict("a", pending=True))
    await n.detect()
    c.pod_plans.plan("default/a", "nc1")
    await n.settle("ip-1")
    deliver(kube, c, "a")
    opens(c, "ip-1")
    clock = n.deps.clock
    assert isinstance(clock, FakeClock)

    clock.step(GRACE - 5)
    early = await n.reconcile("default/a")
    clock.step(5)
    late = await n.reconcile("default/a")

    assert early is not None
    assert early.requeue_after == 5
    assert late is None
    assert writes(kube) == [("a", "status", "ip-1"), ("a", "status", None)]


async def test_a_nomination_the_scheduler_cleared_is_written_again_only_before_the_node_opens() -> (
    None
):
    n, kube, c = world(pod_dict("a", pending=True))
    await n.detect()
    c.pod_plans.plan("default/a", "nc1")
    await n.settle("ip-1")

    def scheduler_clears() -> None:  # an attempt while nothing could bind on ip-1 yet
        kube.stored(PODS, "a", "default")["status"].pop("nominatedNodeName", None)
        deliver(kube, c, "a")

    scheduler_clears()
    await n.reconcile("default/a")  # every other node's arrival would clear it: no churn
    await n.settle("ip-1")  # a registration retried before the node opened writes it again
    scheduler_clears()
    opens(c, "ip-1")
    await n.settle("ip-1")  # a registration retried after the node opened writes nothing
    await n.reconcile("default/a")

    assert writes(kube) == [("a", "status", "ip-1"), ("a", "status", "ip-1")]


async def test_a_pod_recreated_under_the_same_name_is_dropped_not_retried() -> None:
    n, kube, c = world(pod_dict("a", pending=True))
    await n.detect()
    c.pod_plans.plan("default/a", "nc1")
    kube.fail("patch", "a", InvalidError(status=422, verb="patch", name="a"))

    assert await n.reconcile("default/a") is None
    assert n.writes == {"set": 0, "moved": 0, "cleared": 0}


@pytest.mark.parametrize(
    "body",
    [
        pod_dict("a", node_name="ip-2"),  # bound: the scheduler's now
        pod_dict("a", pending=True, nominated="ip-2"),  # a nomination someone else wrote
        pod_dict("a", pending=True, deleting="2026-01-01T00:00:00Z"),
    ],
)
async def test_the_scheduler_is_never_fought(body: dict[str, Any]) -> None:
    n, kube, c = world(body)
    await n.detect()
    c.pod_plans.plan("default/a", "nc1")

    await n.reconcile("default/a")
    await n.settle("ip-1")

    assert writes(kube) == []


@pytest.mark.parametrize(
    ("enabled", "minor"),
    [(False, "37"), (True, "34")],
    ids=["setting-off", "server-without-the-feature"],
)
async def test_nothing_is_written_without_the_setting_or_the_feature(
    enabled: bool, minor: str
) -> None:
    n, kube, c = world(pod_dict("a", pending=True))
    kube.version_info = {"major": "1", "minor": minor}
    n.enabled = enabled
    c.pod_plans.plan("default/a", "nc1")

    assert await n.detect() is False
    n.planned(["default/a"])
    await n.settle("ip-1")
    await n.reconcile("default/a")

    assert writes(kube) == []
    assert len(n.queue) == 0


async def test_settle_nominates_every_pod_planned_on_a_node_before_it_registers() -> None:
    n, kube, c = world(*(pod_dict(p, pending=True) for p in ("a", "b", "c")))
    await n.detect()
    c.pod_plans.plan("default/a", "nc1")
    c.pod_plans.plan("default/b", "ip-1")
    c.pod_plans.plan("default/c", "nc2")

    await n.settle("ip-1")

    assert sorted(writes(kube)) == [("a", "status", "ip-1"), ("b", "status", "ip-1")]


async def test_settle_never_raises_and_leaves_the_retry_to_the_queue() -> None:
    n, kube, c = world(pod_dict("a", pending=True))
    await n.detect()
    c.pod_plans.plan("default/a", "nc1")
    kube.fail("patch", "a", RuntimeError("boom"))

    await n.settle("ip-1")

    assert len(n.queue) == 1


async def test_settle_writes_again_what_an_attempt_cleared_before_the_node_opens() -> None:
    n, kube, c = world(pod_dict("a", pending=True))
    await n.detect()
    c.pod_plans.plan("default/a", "nc1")
    echo = n.on_pod
    cleared: list[str] = []

    def scheduler_clears_once(obj: KubeObject) -> None:
        """Another node opened just after our write was seen: the scheduler tried the pod on
        ip-1, which is not open yet, and cleared the nomination."""
        echo(obj)
        if not cleared:
            cleared.append(obj["metadata"]["name"])
            kube.stored(PODS, "a", "default")["status"].pop("nominatedNodeName")
            deliver(kube, c, "a")

    n.on_pod = scheduler_clears_once  # type: ignore[method-assign]
    await n.settle("ip-1")

    assert cleared == ["a"]
    assert writes(kube) == [("a", "status", "ip-1"), ("a", "status", "ip-1")]
    assert kube.stored(PODS, "a", "default")["status"]["nominatedNodeName"] == "ip-1"


async def test_no_nominations_while_a_deep_backlog_waits() -> None:
    n, kube, c = world(*(pod_dict(p, pending=True) for p in ("a", "b", "c")))
    await n.detect()
    for p in ("a", "b", "c"):
        c.pod_plans.plan(f"default/{p}", "nc1")
    n.max_waiting = 2

    c.upsert_pod(pod("d", phase="Pending"))  # not tried by the scheduler yet: it waits too
    await n.settle("ip-1")  # four pods wait: deeper than 2
    c.delete_pod("default/c")
    c.upsert_pod(pod("d", node_name="ip-5"))
    assert c.waiting_pods() == 2
    await n.settle("ip-1")

    assert n.skipped == 1
    assert sorted(writes(kube)) == [("a", "status", "ip-1"), ("b", "status", "ip-1")]
