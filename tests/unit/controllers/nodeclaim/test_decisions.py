"""Pure lifecycle decisions: registration patch, initialization checks, liveness, Ready."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.controllers.nodeclaim.initialization import initialization_problem
from karpenter_py.controllers.nodeclaim.launch import populate
from karpenter_py.controllers.nodeclaim.lifecycle import (
    initialize_conditions,
    metadata_patch,
    set_ready,
)
from karpenter_py.controllers.nodeclaim.liveness import liveness_decision
from karpenter_py.controllers.nodeclaim.registration import merge_taints, sync_node_patch
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import node_from_dict
from tests import factories

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def claim(**overrides: Any) -> NodeClaim:
    """``section__key=value`` replaces one field of the body (``metadata__labels=...``)."""
    body = factories.nodeclaim_dict(
        "nc",
        pool="pool",
        uid="uid-1",
        resource_version="5",
        labels={"team": "a"},
        annotations={"example.com/a": "1"},
        finalizers=[],
        created=None,
        expire_after=None,
        launched=False,
        node_class_ref={"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "d"},
        requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]},
        ],
        taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}],
        startup_taints=[{"key": "agent", "effect": "NoExecute"}],
        resources={"cpu": "1", "example.com/dongle": "1"},
    )
    for path, value in overrides.items():
        section, _, key = path.partition("__")
        body[section][key] = value
    return NodeClaim.model_validate(body)


def raw_node(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "n",
            "resourceVersion": "9",
            "labels": {"kubernetes.io/os": "linux"},
            **meta,
        },
        "spec": {
            "providerID": "kwok://n",
            "taints": [
                {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                {"key": "team", "value": "b", "effect": "NoSchedule"},
            ],
        },
    }


# ----------------------------------------------------------------------------- registration


def test_registration_patch_adopts_the_node() -> None:
    patch = sync_node_patch(raw_node(), claim())
    assert patch is not None
    meta = patch["metadata"]
    assert meta["resourceVersion"] == "9"  # optimistic lock: lists are replaced wholesale
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    assert meta["labels"] == {
        "karpenter.sh/nodepool": "pool",
        "team": "a",
        "karpenter.sh/registered": "true",
    }
    assert meta["annotations"] == {"example.com/a": "1"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "name": "nc",
            "uid": "uid-1",
            "blockOwnerDeletion": True,
        }
    ]
    # team:NoSchedule already there (values may differ: key+effect match), unregistered removed
    assert patch["spec"]["taints"] == [
        {"key": "team", "value": "b", "effect": "NoSchedule"},
        {"key": "agent", "effect": "NoExecute"},
    ]


def test_registration_patch_is_idempotent() -> None:
    nc = claim()
    node = raw_node()
    patch = sync_node_patch(node, nc)
    assert patch is not None
    node["metadata"].update({k: v for k, v in patch["metadata"].items() if k != "labels"})
    node["metadata"]["labels"].update(patch["metadata"]["labels"])
    node["spec"]["taints"] = patch["spec"]["taints"]
    assert sync_node_patch(node, nc) is None


def test_do_not_sync_taints_only_drops_the_unregistered_taint() -> None:
    nc = claim(metadata__labels={"karpenter.sh/do-not-sync-taints": "true"})
    patch = sync_node_patch(raw_node(), nc)
    assert patch is not None
    assert patch["spec"]["taints"] == [{"key": "team", "value": "b", "effect": "NoSchedule"}]


def test_existing_owner_and_finalizer_are_kept() -> None:
    owner = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "nc", "uid": "uid-1"}
    node = raw_node(finalizers=["other", "karpenter.sh/termination"], ownerReferences=[owner])
    patch = sync_node_patch(node, claim())
    assert patch is not None
    assert "finalizers" not in patch["metadata"]
    assert "ownerReferences" not in patch["metadata"]


@pytest.mark.parametrize(
    ("existing", "extra", "expected"),
    [
        ([], [{"key": "a", "effect": "NoSchedule"}], [{"key": "a", "effect": "NoSchedule"}]),
        (
            [{"key": "a", "value": "1", "effect": "NoSchedule"}],
            [
                {"key": "a", "value": "2", "effect": "NoSchedule"},
                {"key": "a", "effect": "NoExecute"},
            ],
            [
                {"key": "a", "value": "1", "effect": "NoSchedule"},
                {"key": "a", "effect": "NoExecute"},
            ],
        ),
        (
            [{"key": "a", "effect": "NoSchedule"}],
            [{"key": "a", "effect": "NoSchedule"}] * 2,
            [{"key": "a", "effect": "NoSchedule"}],
        ),
    ],
)
def test_merge_taints(existing: list[Any], extra: list[Any], expected: list[Any]) -> None:
    assert merge_taints(existing, extra) == expected


# ----------------------------------------------------------------------------- initialization


def node_view(
    *, ready: bool = True, taints: list[Any] | None = None, alloc: dict[str, str] | None = None
) -> Any:
    return node_from_dict(
        {
            "metadata": {"name": "n"},
            "spec": {"taints": taints or []},
            "status": {
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "allocatable": alloc
                if alloc is not None
                else {"cpu": "2", "example.com/dongle": "1"},
            },
        }
    )


@pytest.mark.parametrize(
    ("node", "reason"),
    [
        (node_view(), None),
        (node_view(ready=False), "NodeNotReady"),
        (node_view(taints=[{"key": "agent", "effect": "NoExecute"}]), "StartupTaintsExist"),
        (node_view(taints=[{"key": "agent", "effect": "NoSchedule"}]), None),  # other effect
        (
            node_view(taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
            "KnownEphemeralTaintsExist",
        ),
        (
            node_view(taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]),
            "KnownEphemeralTaintsExist",
        ),
        (
            node_view(
                taints=[
                    {
                        "key": "node.cloudprovider.kubernetes.io/uninitialized",
                        "value": "true",
                        "effect": "NoSchedule",
                    }
                ]
            ),
            "KnownEphemeralTaintsExist",
        ),
        (
            node_view(taints=[{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]),
            "KnownEphemeralTaintsExist",
        ),
        (
            node_view(taints=[{"key": "readiness.k8s.io/net", "effect": "NoSchedule"}]),
            "KnownEphemeralTaintsExist",
        ),
        (node_view(alloc={"cpu": "2", "example.com/dongle": "0"}), "ResourceNotRegistered"),
        (node_view(alloc={"cpu": "2"}), "ResourceNotRegistered"),
    ],
)
def test_initialization_checks(node: Any, reason: str | None) -> None:
    problem = initialization_problem(node, claim())
    assert (problem[0] if problem else None) == reason


# ----------------------------------------------------------------------------- liveness


def with_conditions(**conds: tuple[str, float]) -> NodeClaim:
    nc = claim()
    for type_, (status, ago) in conds.items():
        nc.status.set_condition(type_, status, now=NOW - timedelta(seconds=ago))  # type: ignore[arg-type]
    return nc


@pytest.mark.parametrize(
    ("nc", "delete", "requeue"),
    [
        (claim(), None, None),  # no Launched condition yet
        (with_conditions(Launched=("Unknown", 60)), None, 240),
        (with_conditions(Launched=("Unknown", 300)), "launch_timeout", None),
        (with_conditions(Launched=("False", 301)), "launch_timeout", None),
        (with_conditions(Launched=("True", 600)), None, 300),
        (with_conditions(Launched=("True", 900)), "registration_timeout", None),
        (with_conditions(Launched=("True", 5000), Registered=("True", 10)), None, None),
    ],
)
def test_liveness(nc: NodeClaim, delete: str | None, requeue: float | None) -> None:
    decision = liveness_decision(nc, NOW)
    assert decision.delete_reason == delete
    assert decision.requeue_after == (pytest.approx(requeue) if requeue is not None else None)


def test_liveness_timeouts_are_configurable() -> None:
    nc = with_conditions(Launched=("True", 20))
    assert (
        liveness_decision(nc, NOW, registration_timeout=10).delete_reason == "registration_timeout"
    )
    assert liveness_decision(nc, NOW, registration_timeout=30).requeue_after == pytest.approx(10)


# ----------------------------------------------------------------------------- conditions, writes


def test_conditions_start_unknown_and_ready_follows() -> None:
    nc = claim()
    initialize_conditions(nc, NOW)
    assert [(c.type, c.status) for c in nc.status.conditions] == [
        ("Launched", "Unknown"),
        ("Registered", "Unknown"),
        ("Initialized", "Unknown"),
    ]
    set_ready(nc, NOW)
    assert nc.status.get_condition("Ready").status == "Unknown"  # type: ignore[union-attr]
    nc.status.set_condition("Registered", "False", now=NOW, reason="MultipleNodesFound")
    set_ready(nc, NOW)
    assert nc.status.get_condition("Ready").status == "False"  # type: ignore[union-attr]
    for t in ("Launched", "Registered", "Initialized"):
        nc.status.set_condition(t, "True", now=NOW)
    set_ready(nc, NOW)
    assert nc.is_ready()
    assert nc.status.is_true("Ready")


def test_populate_gives_user_labels_priority() -> None:
    nc = claim()
    launched = claim(
        metadata__labels={
            "team": "provider",
            "node.kubernetes.io/instance-type": "m",
            "zone-ish": "x",
        }
    )
    launched.status.provider_id = "kwok://nc"
    launched.status.capacity = {"cpu": "4"}
    launched.status.allocatable = {"cpu": "3900m"}
    populate(nc, launched)
    assert nc.metadata.labels["team"] == "a"  # the NodeClaim's own label wins
    assert nc.metadata.labels["zone-ish"] == "x"  # provider-resolved label kept
    assert nc.metadata.labels["node.kubernetes.io/instance-type"] == "m"
    assert "topology.kubernetes.io/zone" not in nc.metadata.labels  # two values: not implied
    assert (nc.status.provider_id, nc.status.capacity, nc.status.allocatable) == (
        "kwok://nc",
        {"cpu": "4"},
        {"cpu": "3900m"},
    )


def test_metadata_patch_only_carries_changes() -> None:
    before = claim()
    after = before.model_copy(deep=True)
    assert metadata_patch(before, after) == {}
    after.metadata.labels["new"] = "1"
    del after.metadata.labels["team"]
    after.metadata.finalizers.append("karpenter.sh/termination")
    assert metadata_patch(before, after) == {
        "labels": {"new": "1", "team": None},
        "finalizers": ["karpenter.sh/termination"],
    }
