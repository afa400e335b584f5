"""NodePool readiness: the condition table, minimal condition updates, the hash annotations and
the reconciler's writes against a recording fake client."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.nodepool.readiness import (
    DesiredCondition,
    NodePoolReadiness,
    hash_patch,
    nodeclaim_hash_migration,
    raw_nodeclass_key,
    readiness_conditions,
    updated_conditions,
    validation_message,
)
from karpenter_py.kube.resources import NODECLAIMS, NODEPOOLS
from karpenter_py.launcher.persist import nodepool_hash
from karpenter_py.model.api.meta import Condition
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import NodePoolSink
from tests import factories
from tests.unit.fakes import FakeKube, deps, wire

GROUP, KIND = "karpenter.kwok.sh", "KWOKNodeClass"
REF = (GROUP, KIND, "default")


def raw_pool(
    name: str = "pool",
    *,
    nodeclass: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return factories.nodepool_dict(
        name,
        uid="",
        generation=3,
        resource_version="100",
        annotations=dict(annotations or {}),
        labels=dict(labels or {}),
        node_class_ref={"group": GROUP, "kind": KIND, "name": nodeclass},
        status={"conditions": list(conditions or []), "nodes": 2},
    )


def summary(conds: tuple[DesiredCondition, ...]) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in conds]


# ----------------------------------------------------------------------------- decision table

VALID = None
INVALID = "spec.template.metadata.labels: bad key"


@pytest.mark.parametrize(
    ("validation_error", "ready", "expected"),
    [
        (
            VALID,
            True,
            [
                ("ValidationSucceeded", "True", "ValidationSucceeded"),
                ("NodeClassReady", "True", "NodeClassReady"),
                ("Ready", "True", "Ready"),
            ],
        ),
        (
            VALID,
            False,
            [
                ("ValidationSucceeded", "True", "ValidationSucceeded"),
                ("NodeClassReady", "False", "NodeClassNotReady"),
                ("Ready", "False", "UnhealthyDependents"),
            ],
        ),
        (
            VALID,
            None,
            [
                ("ValidationSucceeded", "True", "ValidationSucceeded"),
                ("NodeClassReady", "False", "NodeClassNotFound"),
                ("Ready", "False", "UnhealthyDependents"),
            ],
        ),
        (
            INVALID,
            True,
            [
                ("ValidationSucceeded", "False", "NodePoolValidationFailed"),
                ("NodeClassReady", "True", "NodeClassReady"),
                ("Ready", "False", "UnhealthyDependents"),
            ],
        ),
        (
            INVALID,
            False,
            [
                ("ValidationSucceeded", "False", "NodePoolValidationFailed"),
                ("NodeClassReady", "False", "NodeClassNotReady"),
                ("Ready", "False", "UnhealthyDependents"),
            ],
        ),
        (
            INVALID,
            None,
            [
                ("ValidationSucceeded", "False", "NodePoolValidationFailed"),
                ("NodeClassReady", "False", "NodeClassNotFound"),
                ("Ready", "False", "UnhealthyDependents"),
            ],
        ),
    ],
)
def test_condition_table(
    validation_error: str | None, ready: bool | None, expected: list[tuple[str, str, str]]
) -> None:
    conds = readiness_conditions(
        validation_error=validation_error, nodeclass=REF, nodeclass_ready=ready
    )
    assert summary(conds) == expected


def test_messages_name_the_nodeclass_and_the_unhealthy_dependents() -> None:
    _, nc, ready = readiness_conditions(validation_error=None, nodeclass=REF, nodeclass_ready=None)
    assert nc.message == 'KWOKNodeClass "default" (karpenter.kwok.sh) not found on cluster'
    assert ready.message == "NodeClassReady=False"
    _, nc, _ = readiness_conditions(validation_error=None, nodeclass=REF, nodeclass_ready=False)
    assert nc.message == 'KWOKNodeClass "default" (karpenter.kwok.sh) is not ready'
    v, _, ready = readiness_conditions(
        validation_error=INVALID, nodeclass=REF, nodeclass_ready=False
    )
    assert v.message == INVALID
    assert ready.message == "ValidationSucceeded=False, NodeClassReady=False"
    v, nc, ready = readiness_conditions(validation_error=None, nodeclass=REF, nodeclass_ready=True)
    assert (v.message, nc.message, ready.message) == ("", "", "")


def test_unreadable_reference_is_not_found() -> None:
    _, nc, _ = readiness_conditions(validation_error=INVALID, nodeclass=None, nodeclass_ready=None)
    assert (nc.status, nc.reason) == ("False", "NodeClassNotFound")
    assert "nodeClassRef" in nc.message


# ----------------------------------------------------------------------------- condition updates


def test_updated_conditions_moves_transition_time_only_on_flips() -> None:
    clock = FakeClock()
    t0 = clock.now()
    other = Condition(
        type="NodeRegistrationHealthy",
        status="Unknown",
        reason="AwaitingReconciliation",
        last_transition_time=t0,
    )
    not_found = readiness_conditions(validation_error=None, nodeclass=REF, nodeclass_ready=None)
    first = updated_conditions([other], not_found, now=t0, generation=1)
    assert first is not None
    assert [c.type for c in first] == [
        "NodeRegistrationHealthy",
        "ValidationSucceeded",
        "NodeClassReady",
        "Ready",
    ]
    assert first[0] == other  # other types survive untouched
    assert all(c.observed_generation == 1 for c in first[1:])

    # Same inputs later: nothing to write.
    assert updated_conditions(first, not_found, now=t0 + timedelta(minutes=1), generation=1) is None

    # NodeClass appears but is not ready: status stays False (time kept), reason changes.
    t1 = t0 + timedelta(minutes=2)
    not_ready = readiness_conditions(validation_error=None, nodeclass=REF, nodeclass_ready=False)
    second = updated_conditions(first, not_ready, now=t1, generation=1)
    assert second is not None
    by_type = {c.type: c for c in second}
    assert by_type["NodeClassReady"].reason == "NodeClassNotReady"
    assert by_type["NodeClassReady"].last_transition_time == t0
    assert by_type["Ready"].last_transition_time == t0
    assert by_type["ValidationSucceeded"].last_transition_time == t0
    # The input list is not modified.
    assert {c.type: c for c in first}["NodeClassReady"].reason == "NodeClassNotFound"

    # Ready: the flipped conditions move, ValidationSucceeded does not.
    t2 = t0 + timedelta(minutes=3)
    ready = readiness_conditions(validation_error=None, nodeclass=REF, nodeclass_ready=True)
    third = updated_conditions(second, ready, now=t2, generation=1)
    assert third is not None
    by_type = {c.type: c for c in third}
    assert by_type["NodeClassReady"].last_transition_time == t2
    assert by_type["Ready"].last_transition_time == t2
    assert by_type["Ready"].message == ""
    assert by_type["ValidationSucceeded"].last_transition_time == t0

    # A new generation alone is a change (observedGeneration), not a transition.
    fourth = updated_conditions(third, ready, now=t2 + timedelta(minutes=1), generation=2)
    assert fourth is not None
    assert all(c.observed_generation == 2 for c in fourth[1:])
    assert {c.type: c for c in fourth}["Ready"].last_transition_time == t2


# ----------------------------------------------------------------------------- hash, raw reads


def test_hash_patch_only_when_annotations_differ() -> None:
    np = NodePool.model_validate(raw_pool())
    h = nodepool_hash(np)
    assert hash_patch(np) == {
        "metadata": {
            "annotations": {
                "karpenter.sh/nodepool-hash": h,
                "karpenter.sh/nodepool-hash-version": "v3",
            }
        }
    }
    current = NodePool.model_validate(
        raw_pool(
            annotations={
                "karpenter.sh/nodepool-hash": h,
                "karpenter.sh/nodepool-hash-version": "v3",
            }
        )
    )
    assert hash_patch(current) is None
    old_version = NodePool.model_validate(
        raw_pool(
            annotations={
                "karpenter.sh/nodepool-hash": h,
                "karpenter.sh/nodepool-hash-version": "v2",
            }
        )
    )
    assert hash_patch(old_version) == {
        "metadata": {"annotations": {"karpenter.sh/nodepool-hash-version": "v3"}}
    }
    # The template drives the hash.
    relabelled = NodePool.model_validate(raw_pool(labels={"team": "a"}))
    assert nodepool_hash(relabelled) != h


HASH, VERSION = "karpenter.sh/nodepool-hash", "karpenter.sh/nodepool-hash-version"
DRIFTED = {
    "type": "Drifted",
    "status": "True",
    "reason": "NodePoolDrifted",
    "message": "NodePoolDrifted",
    "lastTransitionTime": "2025-01-01T00:00:00Z",
}


def claim(
    name: str, *, pool: str = "pool", annotations: dict[str, str], drifted: bool = False
) -> NodeClaim:
    return factories.nodeclaim(
        name,
        pool=pool,
        annotations=annotations,
        node_class_ref={"group": GROUP, "kind": KIND, "name": "default"},
        conditions=[DRIFTED] if drifted else [],
    )


@pytest.mark.parametrize(
    ("annotations", "drifted", "expected"),
    [
        ({HASH: "old", VERSION: "v3"}, False, None),  # current: left alone
        ({HASH: "old", VERSION: "v3"}, True, None),
        ({HASH: "old", VERSION: "v2"}, False, {VERSION: "v3", HASH: "new"}),
        ({HASH: "old"}, False, {VERSION: "v3", HASH: "new"}),  # no version at all
        ({}, False, {VERSION: "v3", HASH: "new"}),
        # Already Drifted: the old hash (and so the condition) stays.
        ({HASH: "old", VERSION: "v2"}, True, {VERSION: "v3"}),
    ],
)
def test_nodeclaim_hash_migration(
    annotations: dict[str, str], drifted: bool, expected: dict[str, str] | None
) -> None:
    patch = nodeclaim_hash_migration(claim("nc", annotations=annotations, drifted=drifted), "new")
    assert patch == (None if expected is None else {"metadata": {"annotations": expected}})


def test_raw_nodeclass_key() -> None:
    assert raw_nodeclass_key(raw_pool(nodeclass="x")) == (GROUP, KIND, "x")
    assert raw_nodeclass_key({"spec": {"template": {"spec": {}}}}) is None
    assert raw_nodeclass_key({"spec": "garbage"}) is None


def test_validation_message_is_compact() -> None:
    with pytest.raises(ValidationError) as info:
        NodePool.model_validate(raw_pool(labels={"a/b/c": "x"}))
    msg = validation_message(info.value)
    assert msg.startswith("spec.template.metadata.labels: ")
    assert "'a/b/c' is not a qualified name" in msg
    assert "errors.pydantic.dev" not in msg
    assert "Value error" not in msg


# ----------------------------------------------------------------------------- reconciler


def fake_kube(*raws: dict[str, Any]) -> FakeKube:
    """The API holding these raw NodePools."""
    return FakeKube(*((NODEPOOLS, raw) for raw in raws))


def pool_patches(client: FakeKube) -> list[tuple[str, str | None, Any]]:
    """(name, subresource, patch) of every NodePool patch that landed."""
    return [(c.name, c.subresource, c.body) for c in client.calls_of("patch", NODEPOOLS, ok=True)]


def claim_patches(client: FakeKube) -> list[tuple[str, Any]]:
    """(name, patch) of every NodeClaim patch that landed."""
    return [(c.name, c.body) for c in client.calls_of("patch", NODECLAIMS, ok=True)]


def gets(client: FakeKube) -> list[str]:
    return [c.name for c in client.calls_of("get")]


def synced_cluster() -> Cluster:
    cluster = Cluster()
    for kind in ("nodes", "nodeclaims", "pods", "nodepools", "daemonsets", "nodeclasses"):
        cluster.mark_synced(kind)
    return cluster


def controller(client: FakeKube, cluster: Cluster, clock: FakeClock) -> NodePoolReadiness:
    return NodePoolReadiness(deps(client=client, cluster=cluster, clock=clock))


async def test_reconcile_writes_hash_then_conditions_once() -> None:
    clock, cluster = FakeClock(), synced_cluster()
    raw = raw_pool()
    client = fake_kube(raw)
    cluster.upsert_nodepool(NodePool.model_validate(raw))
    cluster.upsert_nodeclass(REF, True)
    ctrl = controller(client, cluster, clock)

    await ctrl.reconcile("pool")
    assert [(n, s) for n, s, _ in pool_patches(client)] == [("pool", None), ("pool", "status")]
    meta_patch, status_patch = pool_patches(client)[0][2], pool_patches(client)[1][2]
    assert set(meta_patch["metadata"]["annotations"]) == {
        "karpenter.sh/nodepool-hash",
        "karpenter.sh/nodepool-hash-version",
    }
    # Conditional on the version the hash patch returned; status.conditions only.
    assert status_patch["metadata"] == {"resourceVersion": "101"}
    assert set(status_patch["status"]) == {"conditions"}
    conds = {c["type"]: c for c in status_patch["status"]["conditions"]}
    assert {t: c["status"] for t, c in conds.items()} == {
        "ValidationSucceeded": "True",
        "NodeClassReady": "True",
        "Ready": "True",
    }
    assert conds["Ready"]["observedGeneration"] == 3
    assert conds["Ready"]["message"] == ""
    assert (
        client.stored(NODEPOOLS, "pool")["status"]["nodes"] == 2
    )  # the counter's field is untouched

    # The watch delivers the written object: nothing more to do.
    cluster.upsert_nodepool(NodePool.model_validate(client.stored(NODEPOOLS, "pool")))
    client.calls.clear()
    await ctrl.reconcile("pool")
    assert pool_patches(client) == []


async def test_old_hash_version_moves_the_pools_nodeclaims_first() -> None:
    clock, cluster = FakeClock(), synced_cluster()
    raw = raw_pool(annotations={HASH: "12345", VERSION: "v2"})
    client = fake_kube(raw)
    np = NodePool.model_validate(raw)
    h = nodepool_hash(np)
    cluster.upsert_nodepool(np)
    cluster.upsert_nodeclass(REF, True)
    for nc in (
        claim("old", annotations={HASH: "12345", VERSION: "v2"}),
        claim("old-drifted", annotations={HASH: "999", VERSION: "v2"}, drifted=True),
        claim("unversioned", annotations={}),
        claim("current", annotations={HASH: "777", VERSION: "v3"}),
        claim("other-pool", pool="other", annotations={HASH: "12345", VERSION: "v2"}),
        claim("gone", annotations={VERSION: "v1"}),  # deleted meanwhile: skipped
    ):
        cluster.upsert_nodeclaim(nc)
        if nc.name != "gone":
            client.put(NODECLAIMS, wire(nc))
    ctrl = controller(client, cluster, clock)

    await ctrl.reconcile("pool")
    assert claim_patches(client) == [
        ("old", {"metadata": {"annotations": {VERSION: "v3", HASH: h}}}),
        ("old-drifted", {"metadata": {"annotations": {VERSION: "v3"}}}),
        ("unversioned", {"metadata": {"annotations": {VERSION: "v3", HASH: h}}}),
    ]
    # Then the pool's own annotations (and its conditions).
    assert pool_patches(client)[0] == (
        "pool",
        None,
        {"metadata": {"annotations": {HASH: h, VERSION: "v3"}}},
    )
    assert [s for _, s, _ in pool_patches(client)] == [None, "status"]

    # The pool at the current version: its NodeClaims are not looked at again.
    cluster.upsert_nodepool(NodePool.model_validate(client.stored(NODEPOOLS, "pool")))
    client.calls.clear()
    await ctrl.reconcile("pool")
    assert claim_patches(client) == []
    assert pool_patches(client) == []


async def test_nodeclass_change_requeues_referencing_pools_and_flips_ready() -> None:
    clock, cluster = FakeClock(), synced_cluster()
    raws = [raw_pool("a", nodeclass="missing"), raw_pool("b"), raw_pool("c", nodeclass="missing")]
    client = fake_kube(*raws)
    for raw in raws:
        cluster.upsert_nodepool(NodePool.model_validate(raw))
    cluster.upsert_nodeclass(REF, True)
    ctrl = controller(client, cluster, clock)

    await ctrl.reconcile("a")
    conds = {c["type"]: c for c in client.stored(NODEPOOLS, "a")["status"]["conditions"]}
    assert (conds["NodeClassReady"]["status"], conds["NodeClassReady"]["reason"]) == (
        "False",
        "NodeClassNotFound",
    )
    assert (conds["Ready"]["status"], conds["Ready"]["message"]) == (
        "False",
        "NodeClassReady=False",
    )
    cluster.upsert_nodepool(NodePool.model_validate(client.stored(NODEPOOLS, "a")))

    nodeclass = {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "missing"},
    }
    cluster.upsert_nodeclass((GROUP, KIND, "missing"), True)
    ctrl.on_nodeclass(nodeclass)
    queued = sorted(ctrl.queue.get_nowait() for _ in range(len(ctrl.queue)))
    assert queued == ["a", "c"]
    # Another kind with the same name does not match.
    ctrl.on_nodeclass({**nodeclass, "kind": "EC2NodeClass", "apiVersion": "karpenter.k8s.aws/v1"})
    assert len(ctrl.queue) == 0

    clock.step(60)
    await ctrl.reconcile("a")
    conds = {c["type"]: c for c in client.stored(NODEPOOLS, "a")["status"]["conditions"]}
    assert conds["Ready"]["status"] == "True"
    assert conds["Ready"]["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert conds["ValidationSucceeded"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"


async def test_invalid_nodepool_gets_validation_failed_from_the_raw_object() -> None:
    clock, cluster = FakeClock(), synced_cluster()
    raw = raw_pool(
        labels={"a/b/c": "x"},
        conditions=[
            {
                "type": "NodeRegistrationHealthy",
                "status": "True",
                "reason": "NodeRegistrationHealthy",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ],
    )
    client = fake_kube(raw)
    NodePoolSink(cluster).upsert(raw)
    assert "pool" not in cluster.nodepools
    assert "nodepools/pool" in cluster.invalid
    cluster.upsert_nodeclass(REF, True)
    ctrl = controller(client, cluster, clock)

    ctrl.on_nodeclass({"metadata": {"name": "default"}})  # invalid pools are requeued too
    assert ctrl.queue.get_nowait() == "pool"

    await ctrl.reconcile("pool")
    assert gets(client) == ["pool"]
    [(_, sub, patch)] = pool_patches(client)  # no hash: only the status
    assert sub == "status"
    assert patch["metadata"] == {"resourceVersion": "100"}
    conds = {c["type"]: c for c in patch["status"]["conditions"]}
    assert conds["NodeRegistrationHealthy"]["status"] == "True"  # kept
    assert conds["ValidationSucceeded"]["status"] == "False"
    assert conds["ValidationSucceeded"]["reason"] == "NodePoolValidationFailed"
    assert "'a/b/c' is not a qualified name" in conds["ValidationSucceeded"]["message"]
    assert conds["NodeClassReady"]["status"] == "True"
    assert (conds["Ready"]["status"], conds["Ready"]["message"]) == (
        "False",
        "ValidationSucceeded=False",
    )

    client.calls.clear()
    await ctrl.reconcile("pool")
    assert pool_patches(client) == []  # unchanged: no write


HUGE = "99999999999999999999h"  # passes the CRD pattern, past Go's time.Duration
DURATION_ERROR = (
    f"spec.disruption.consolidateAfter: invalid duration {HUGE!r}: out of range "
    "(at most 2562047h47m16.854775807s)"
)


async def test_unreadable_nodepool_gets_a_condition_and_one_warning_event() -> None:
    clock, cluster = FakeClock(), synced_cluster()
    raw = factories.nodepool_dict(
        "pool", uid="np-uid", resource_version="100", disruption={"consolidateAfter": HUGE}
    )
    client = fake_kube(raw)
    NodePoolSink(cluster).upsert(raw)
    cluster.upsert_nodeclass(REF, True)
    ctrl = controller(client, cluster, clock)

    await ctrl.reconcile("pool")
    conds = {c["type"]: c for c in client.stored(NODEPOOLS, "pool")["status"]["conditions"]}
    assert (
        conds["ValidationSucceeded"]["status"],
        conds["ValidationSucceeded"]["reason"],
        conds["ValidationSucceeded"]["message"],
    ) == ("False", "NodePoolValidationFailed", DURATION_ERROR)
    await ctrl.deps.recorder.flush()
    assert [
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["involvedObject"]["uid"])
        for e in client.events
    ] == [("NodePool", "pool", "np-uid")]
    assert [(e["type"], e["reason"], e["message"]) for e in client.events] == [
        ("Warning", "NodePoolValidationFailed", DURATION_ERROR)
    ]

    # Reported once: a later reconcile of the same error writes and publishes nothing.
    clock.step(600)
    client.calls.clear()
    await ctrl.reconcile("pool")
    await ctrl.deps.recorder.flush()
    assert pool_patches(client) == []
    assert len(client.events) == 1


async def test_invalid_in_cache_but_fixed_or_gone_in_the_api_writes_nothing() -> None:
    clock, cluster = FakeClock(), synced_cluster()
    NodePoolSink(cluster).upsert(raw_pool(labels={"a/b/c": "x"}))
    client = fake_kube(raw_pool())  # already fixed in the API
    ctrl = controller(client, cluster, clock)
    await ctrl.reconcile("pool")
    assert pool_patches(client) == []
    client.objects.clear()  # deleted
    await ctrl.reconcile("pool")
    assert pool_patches(client) == []


async def test_deleting_or_unknown_pools_are_left_alone() -> None:
    clock, cluster = FakeClock(), synced_cluster()
    raw = raw_pool()
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    client = fake_kube(raw)
    cluster.upsert_nodepool(NodePool.model_validate(raw))
    ctrl = controller(client, cluster, clock)
    await ctrl.reconcile("pool")
    await ctrl.reconcile("unknown")
    assert pool_patches(client) == []
    assert gets(client) == []


class RecordingMetrics(Metrics):
    def __init__(self) -> None:
        super().__init__()
        self.reconciles: list[tuple[str, str]] = []

    def observe_reconcile(self, controller: str, result: str, seconds: float) -> None:
        self.reconciles.append((controller, result))

    def observe_workqueue(self, name: str, **_: Any) -> None:
        pass


async def test_run_waits_for_sync_then_reconciles_with_metrics() -> None:
    clock, cluster = FakeClock(), Cluster()
    raw = raw_pool()
    client = fake_kube(raw)
    cluster.upsert_nodepool(NodePool.model_validate(raw))
    metrics = RecordingMetrics()
    ctrl = NodePoolReadiness(deps(client=client, cluster=cluster, clock=clock, metrics=metrics))
    ctrl.on_nodepool(raw)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(ctrl.run())
        await asyncio.sleep(0.3)
        assert pool_patches(client) == []  # not synced: no decisions
        for kind in ("nodes", "nodeclaims", "pods", "nodepools", "daemonsets", "nodeclasses"):
            cluster.mark_synced(kind)
        for _ in range(50):
            if len(pool_patches(client)) == 2:
                break
            await asyncio.sleep(0.05)
        task.cancel()
    assert [s for _, s, _ in pool_patches(client)] == [None, "status"]
    assert ("nodepool.readiness", "success") in metrics.reconciles
