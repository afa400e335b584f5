"""The pure drift checks: static hash, requirements, instance type gone, and when to look."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.controllers.nodeclaim.drift import (
    INSTANCE_TYPE_NOT_FOUND,
    NODEPOOL_DRIFTED,
    REQUIREMENTS_DRIFTED,
    instance_type_check_due,
    instance_type_drift,
    nodepool_drift,
    requirements_drift,
    static_drift,
)
from karpenter_py.launcher.persist import nodepool_hash
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.instancetype import InstanceType, Offering, make_instance_type
from tests import factories

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
LABELS = {
    "karpenter.sh/nodepool": "pool",
    "node.kubernetes.io/instance-type": "m-4x",
    "topology.kubernetes.io/zone": "z1",
    "karpenter.sh/capacity-type": "on-demand",
    "kubernetes.io/arch": "amd64",
    "team": "a",
}


def pool(
    requirements: list[dict[str, Any]] | None = None,
    *,
    labels: dict[str, str] | None = None,
    expire_after: str = "720h",
) -> NodePool:
    return factories.nodepool(
        "pool", requirements=requirements, labels=labels, expire_after=expire_after
    )


def claim(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    created: datetime | None = NOW - timedelta(hours=2),
) -> NodeClaim:
    return factories.nodeclaim(
        "nc",
        pool="",
        uid="uid-nc",
        launched=False,
        labels=LABELS if labels is None else labels,
        annotations=annotations,
        created=None if created is None else created.isoformat(),
        expire_after=None,
    )


def hashed(np: NodePool, version: str = "v3") -> dict[str, str]:
    return {
        "karpenter.sh/nodepool-hash": nodepool_hash(np),
        "karpenter.sh/nodepool-hash-version": version,
    }


# ----------------------------------------------------------------------------- static drift

ORIGINAL = pool()
EDITED = pool(labels={"team": "b"})  # template labels are part of the hash
LONGER = pool(expire_after="1000h")


@pytest.mark.parametrize(
    ("annotations", "np", "expected"),
    [
        (hashed(ORIGINAL), ORIGINAL, ""),
        (hashed(ORIGINAL), EDITED, NODEPOOL_DRIFTED),
        (hashed(ORIGINAL), LONGER, NODEPOOL_DRIFTED),
        # requirements are not hashed: only requirements drift looks at them
        (hashed(ORIGINAL), pool([{"key": "team", "operator": "Exists"}]), ""),
        (hashed(ORIGINAL, version="v2"), EDITED, ""),  # another hash algorithm: no comparison
        ({"karpenter.sh/nodepool-hash": nodepool_hash(ORIGINAL)}, EDITED, ""),  # no version
        ({"karpenter.sh/nodepool-hash-version": "v3"}, EDITED, ""),  # no hash
        ({}, EDITED, ""),
    ],
)
def test_static_drift(annotations: dict[str, str], np: NodePool, expected: str) -> None:
    assert static_drift(claim(annotations=annotations), np) == expected


# ----------------------------------------------------------------------------- requirements drift


def req(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        ([], ""),
        ([req("node.kubernetes.io/instance-type", "In", "m-4x", "c-4x")], ""),
        ([req("node.kubernetes.io/instance-type", "In", "c-4x")], REQUIREMENTS_DRIFTED),
        ([req("karpenter.sh/capacity-type", "In", "spot")], REQUIREMENTS_DRIFTED),
        ([req("karpenter.sh/capacity-type", "NotIn", "on-demand")], REQUIREMENTS_DRIFTED),
        ([req("topology.kubernetes.io/zone", "NotIn", "z2")], ""),
        ([req("team", "Exists")], ""),
        ([req("team", "DoesNotExist")], REQUIREMENTS_DRIFTED),
        ([req("team", "In", "a", "b")], ""),
        ([req("team", "In", "b")], REQUIREMENTS_DRIFTED),
        # a beta key is normalised before comparing
        ([req("beta.kubernetes.io/arch", "In", "arm64")], REQUIREMENTS_DRIFTED),
        ([req("beta.kubernetes.io/arch", "In", "amd64")], ""),
        # keys the NodeClaim has no label for: absence is fine, a custom key is drift, a
        # well-known key is tolerated (upstream Compatible)
        ([req("example.com/gpu", "DoesNotExist")], ""),
        ([req("example.com/gpu", "NotIn", "yes")], ""),
        ([req("example.com/gpu", "Exists")], REQUIREMENTS_DRIFTED),
        ([req("example.com/gpu", "In", "yes")], REQUIREMENTS_DRIFTED),
        ([req("kubernetes.io/os", "In", "linux")], ""),
        ([req("karpenter.kwok.sh/instance-cpu", "Gt", "2")], ""),
    ],
)
def test_requirements_drift(requirements: list[dict[str, Any]], expected: str) -> None:
    assert requirements_drift(claim(), pool(requirements)) == expected


@pytest.mark.parametrize(
    ("cpu", "requirement", "expected"),
    [
        ("4", req("cpu", "Gt", "2"), ""),
        ("4", req("cpu", "Gt", "4"), REQUIREMENTS_DRIFTED),
        ("4", req("cpu", "Lt", "8"), ""),
        ("4", req("cpu", "Lte", "3"), REQUIREMENTS_DRIFTED),
        ("4", req("cpu", "Gte", "4"), ""),
    ],
)
def test_requirements_drift_integer_bounds(
    cpu: str, requirement: dict[str, Any], expected: str
) -> None:
    nc = claim({**LABELS, "cpu": cpu})
    assert requirements_drift(nc, pool([requirement])) == expected


def test_static_drift_is_reported_before_requirements_drift() -> None:
    nc = claim(annotations=hashed(ORIGINAL))
    np = pool([req("team", "In", "b")], labels={"team": "b"})
    assert nodepool_drift(nc, np) == NODEPOOL_DRIFTED
    assert nodepool_drift(claim(annotations=hashed(np)), np) == REQUIREMENTS_DRIFTED
    assert nodepool_drift(claim(annotations=hashed(ORIGINAL)), ORIGINAL) == ""


# ----------------------------------------------------------------------------- instance type gone


def offering(
    zone: str, ct: str, *, available: bool = True, labels: dict[str, str] | None = None
) -> Offering:
    return Offering(
        zone=zone, capacity_type=ct, price=1.0, available=available, labels=labels or {}
    )


def itype(name: str, *offerings: Offering) -> InstanceType:
    return make_instance_type(
        name=name,
        requirements={"kubernetes.io/arch": "amd64"},
        capacity={"cpu": 4000, "memory": 16 << 30, "pods": 110},
        offerings=offerings,
    )


M4X = itype("m-4x", offering("z1", "on-demand"), offering("z2", "spot"))
C4X = itype("c-4x", offering("z1", "on-demand"))


def labels(**changes: str | None) -> dict[str, str]:
    out = dict(LABELS)
    for key, value in changes.items():
        real = {
            "it": "node.kubernetes.io/instance-type",
            "zone": "topology.kubernetes.io/zone",
            "ct": "karpenter.sh/capacity-type",
            "rid": "karpenter.k8s.aws/capacity-reservation-id",
        }[key]
        if value is None:
            out.pop(real, None)
        else:
            out[real] = value
    return out


@pytest.mark.parametrize(
    ("nc_labels", "types", "expected"),
    [
        (labels(), [M4X, C4X], ""),
        (labels(), [C4X], INSTANCE_TYPE_NOT_FOUND),  # the type is no longer offered
        (labels(), [], INSTANCE_TYPE_NOT_FOUND),
        (labels(it=None), [M4X], INSTANCE_TYPE_NOT_FOUND),  # no instance-type label at all
        (labels(zone="z2"), [M4X], INSTANCE_TYPE_NOT_FOUND),  # z2 only sells spot
        (labels(zone="z2", ct="spot"), [M4X], ""),
        (labels(zone="z3"), [M4X], INSTANCE_TYPE_NOT_FOUND),
        (labels(ct="spot"), [M4X], INSTANCE_TYPE_NOT_FOUND),
        # unknown zone / capacity type labels: any offering will do (well-known keys)
        (labels(zone=None), [M4X], ""),
        (labels(zone=None, ct=None), [M4X], ""),
        # an unavailable offering is still offered: not drift
        (labels(), [itype("m-4x", offering("z1", "on-demand", available=False))], ""),
    ],
)
def test_instance_type_drift(
    nc_labels: dict[str, str], types: list[InstanceType], expected: str
) -> None:
    assert instance_type_drift(claim(nc_labels), types) == expected


RESERVED_ONLY = itype(
    "m-4x", offering("z1", "reserved", labels={"karpenter.k8s.aws/capacity-reservation-id": "cr-1"})
)
ON_DEMAND_ONLY = itype("m-4x", offering("z1", "on-demand"))
SPOT_ONLY = itype("m-4x", offering("z1", "spot"))


@pytest.mark.parametrize(
    ("nc_labels", "types", "expected"),
    [
        (labels(ct="reserved", rid="cr-1"), [RESERVED_ONLY], ""),
        # the reservation ID is the provider's to judge
        (labels(ct="reserved", rid="cr-2"), [RESERVED_ONLY], ""),
        # a reserved node demoted to on-demand (label not updated yet) is not drifted
        (labels(ct="reserved", rid="cr-1"), [ON_DEMAND_ONLY], ""),
        (labels(ct="reserved", rid="cr-1"), [SPOT_ONLY], INSTANCE_TYPE_NOT_FOUND),
        # only reserved NodeClaims get the on-demand allowance
        (labels(ct="on-demand"), [RESERVED_ONLY], INSTANCE_TYPE_NOT_FOUND),
    ],
)
def test_instance_type_drift_reserved(
    nc_labels: dict[str, str], types: list[InstanceType], expected: str
) -> None:
    assert instance_type_drift(claim(nc_labels), types) == expected


@pytest.mark.parametrize(
    ("age", "last_found", "due"),
    [
        (timedelta(minutes=59, seconds=59), None, False),  # younger than 1 h: never
        (timedelta(hours=1), None, True),
        (timedelta(hours=3), None, True),
        (timedelta(hours=3), NOW - timedelta(minutes=29, seconds=59), False),
        (timedelta(hours=3), NOW - timedelta(minutes=30), True),
        (timedelta(hours=3), NOW - timedelta(hours=2), True),
    ],
)
def test_instance_type_check_due(age: timedelta, last_found: datetime | None, due: bool) -> None:
    assert instance_type_check_due(claim(created=NOW - age), NOW, last_found) is due


def test_no_creation_time_means_no_instance_type_check() -> None:
    assert instance_type_check_due(claim(created=None), NOW, None) is False
