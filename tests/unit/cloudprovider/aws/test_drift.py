"""EC2NodeClass drift: the static hash and the dynamic checks against the live instance."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.cloudprovider.aws.drift import (
    EC2NODECLASS_HASH_VERSION,
    drift_reason,
    ec2nodeclass_hash,
)
from karpenter_py.cloudprovider.aws.instance import Instance
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.labels import (
    AWS_ANNOTATION_EC2NODECLASS_HASH,
    AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION,
    AWS_ANNOTATION_UBUNTU_COMPATIBILITY,
)
from tests import factories

BASE_SPEC: dict[str, Any] = factories.ec2nodeclass_spec()
# Pinned: a change of the hash function drifts every node of every cluster on upgrade, so it
# must come with a new EC2NODECLASS_HASH_VERSION.
BASE_HASH = "986084368371350953"


def nodeclass(spec: dict[str, Any] | None = None, **status: Any) -> EC2NodeClass:
    return factories.ec2nodeclass(
        base_spec=spec if spec is not None else BASE_SPEC,
        status={
            "subnets": [
                {"id": "subnet-a", "zone": "us-west-2a"},
                {"id": "subnet-b", "zone": "us-west-2b"},
            ],
            "securityGroups": [{"id": "sg-1"}, {"id": "sg-2"}],
            "amis": [
                {"id": "ami-new", "requirements": []},
                {"id": "ami-arm", "requirements": []},
            ],
            "instanceProfile": "profile",
            **status,
        },
    )


def edited(**changes: Any) -> dict[str, Any]:
    """BASE_SPEC with top-level fields replaced (None removes one)."""
    spec = copy.deepcopy(BASE_SPEC)
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def instance(
    image: str = "ami-new",
    subnet: str = "subnet-a",
    sgs: tuple[str, ...] = ("sg-1", "sg-2"),
    reservation: str = "",
) -> Instance:
    return Instance(
        capacity_reservation_id=reservation,
        id="i-0abc",
        instance_type="m5.large",
        zone="us-west-2a",
        capacity_type="on-demand",
        image_id=image,
        subnet_id=subnet,
        security_group_ids=sgs,
        state="running",
        launch_time=datetime(2026, 1, 1, tzinfo=UTC),
        private_dns_name="ip-10-0-0-1.us-west-2.compute.internal",
    )


def claim(
    hash_: str | None = BASE_HASH, version: str | None = EC2NODECLASS_HASH_VERSION
) -> NodeClaim:
    annotations = {}
    if hash_ is not None:
        annotations[AWS_ANNOTATION_EC2NODECLASS_HASH] = hash_
    if version is not None:
        annotations[AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION] = version
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    return factories.nodeclaim(
        "c", pool="", launched=False, annotations=annotations, node_class_ref=ref
    )


def test_hash_is_pinned_and_stable() -> None:
    assert ec2nodeclass_hash(nodeclass()) == BASE_HASH
    assert ec2nodeclass_hash(nodeclass()) == ec2nodeclass_hash(nodeclass())
    assert EC2NODECLASS_HASH_VERSION == "v4"


def test_hash_ignores_status_and_key_order() -> None:
    other_status = nodeclass(amis=[], subnets=[], securityGroups=[], instanceProfile="")
    reordered = dict(reversed(list(BASE_SPEC.items())))
    tags_a = nodeclass(edited(tags={"a": "1", "b": "2"}))
    tags_b = nodeclass(edited(tags={"b": "2", "a": "1"}))
    assert ec2nodeclass_hash(other_status) == BASE_HASH
    assert ec2nodeclass_hash(nodeclass(reordered)) == BASE_HASH
    assert ec2nodeclass_hash(tags_a) == ec2nodeclass_hash(tags_b)


UNCHANGED: list[tuple[str, dict[str, Any]]] = [
    ("subnet selector", edited(subnetSelectorTerms=[{"id": "subnet-123"}])),
    ("security group selector", edited(securityGroupSelectorTerms=[{"name": "nodes"}])),
    # amiFamily AL2023 with id terms resolves to the family alias al2023 implies.
    ("ami selector + amiFamily", edited(amiSelectorTerms=[{"id": "ami-123"}], amiFamily="AL2023")),
    ("ami selector by tags", edited(amiSelectorTerms=[{"tags": {"a": "b"}}], amiFamily="AL2023")),
    ("ami alias version", edited(amiSelectorTerms=[{"alias": "al2023@v20250101"}])),
    (
        "capacity reservation selector",
        edited(capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}]),
    ),
    ("role", edited(role="AnotherRole")),
    ("role -> instanceProfile", edited(role=None, instanceProfile="my-profile")),
    ("ipPrefixCount", edited(ipPrefixCount=2)),
]


@pytest.mark.parametrize("spec", [c[1] for c in UNCHANGED], ids=[c[0] for c in UNCHANGED])
def test_hash_unchanged_by_dynamic_fields(spec: dict[str, Any]) -> None:
    assert ec2nodeclass_hash(nodeclass(spec)) == BASE_HASH


CHANGED: list[tuple[str, dict[str, Any]]] = [
    ("userData", edited(userData="#!/bin/bash\necho hi\n")),
    ("tags", edited(tags={"team": "a"})),
    ("tags value", edited(tags={"team": "b"})),
    ("kubelet", edited(kubelet={"maxPods": 110})),
    ("kubelet value", edited(kubelet={"maxPods": 58})),
    (
        "blockDeviceMappings",
        edited(
            blockDeviceMappings=[
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}
            ]
        ),
    ),
    ("metadataOptions", edited(metadataOptions={"httpTokens": "optional"})),
    ("metadataOptions hop limit", edited(metadataOptions={"httpPutResponseHopLimit": 2})),
    ("detailedMonitoring", edited(detailedMonitoring=True)),
    ("alias family", edited(amiSelectorTerms=[{"alias": "bottlerocket@latest"}])),
    ("amiFamily Custom", edited(amiSelectorTerms=[{"id": "ami-123"}], amiFamily="Custom")),
    ("associatePublicIPAddress", edited(associatePublicIPAddress=False)),
]


@pytest.mark.parametrize("spec", [c[1] for c in CHANGED], ids=[c[0] for c in CHANGED])
def test_hash_changed_by_static_fields(spec: dict[str, Any]) -> None:
    assert ec2nodeclass_hash(nodeclass(spec)) != BASE_HASH


def test_changed_hashes_are_distinct() -> None:
    hashes = [ec2nodeclass_hash(nodeclass(spec)) for _, spec in CHANGED]
    assert len(set(hashes)) == len(hashes)


def test_hash_is_a_decimal_string() -> None:
    for _, spec in CHANGED + UNCHANGED:
        h = ec2nodeclass_hash(nodeclass(spec))
        assert h.isdigit()
        assert int(h) < 16**15


DRIFT: list[tuple[str, NodeClaim, EC2NodeClass, Instance, str]] = [
    ("nothing moved", claim(), nodeclass(), instance(), ""),
    (
        "static field changed",
        claim(),
        nodeclass(edited(userData="echo")),
        instance(),
        "NodeClassDrift",
    ),
    ("launched with another hash", claim("123"), nodeclass(), instance(), "NodeClassDrift"),
    ("hash version mismatch: no static drift", claim("123", "v3"), nodeclass(), instance(), ""),
    ("no version annotation: no static drift", claim("123", None), nodeclass(), instance(), ""),
    ("no hash annotation: no static drift", claim(None), nodeclass(), instance(), ""),
    ("AMI no longer in status", claim(), nodeclass(), instance(image="ami-old"), "AMIDrift"),
    ("second AMI of status is fine", claim(), nodeclass(), instance(image="ami-arm"), ""),
    (
        "subnet no longer in status",
        claim(),
        nodeclass(),
        instance(subnet="subnet-x"),
        "SubnetDrift",
    ),
    ("other subnet of status is fine", claim(), nodeclass(), instance(subnet="subnet-b"), ""),
    ("SG missing one", claim(), nodeclass(), instance(sgs=("sg-1",)), "SecurityGroupDrift"),
    (
        "SG one extra",
        claim(),
        nodeclass(),
        instance(sgs=("sg-1", "sg-2", "sg-3")),
        "SecurityGroupDrift",
    ),
    ("SG another", claim(), nodeclass(), instance(sgs=("sg-1", "sg-9")), "SecurityGroupDrift"),
    ("SG none on the instance", claim(), nodeclass(), instance(sgs=()), "SecurityGroupDrift"),
    ("SG same set, other order", claim(), nodeclass(), instance(sgs=("sg-2", "sg-1")), ""),
    ("SG same set, repeated", claim(), nodeclass(), instance(sgs=("sg-2", "sg-1", "sg-1")), ""),
    (
        "empty status lists: not resolved yet, no drift",
        claim(),
        nodeclass(amis=[], subnets=[], securityGroups=[]),
        instance(image="ami-old", subnet="subnet-x", sgs=("sg-9",)),
        "",
    ),
    ("empty amis only", claim(), nodeclass(amis=[]), instance(image="ami-old"), ""),
    ("empty subnets only", claim(), nodeclass(subnets=[]), instance(subnet="subnet-x"), ""),
    ("empty SGs only", claim(), nodeclass(securityGroups=[]), instance(sgs=("sg-9",)), ""),
    (
        "static drift is reported before dynamic",
        claim("123"),
        nodeclass(),
        instance(image="ami-old", subnet="subnet-x", sgs=()),
        "NodeClassDrift",
    ),
    (
        "AMI before subnet before SG",
        claim(),
        nodeclass(),
        instance(image="ami-old", subnet="subnet-x", sgs=()),
        "AMIDrift",
    ),
    (
        "subnet before SG",
        claim(),
        nodeclass(),
        instance(subnet="subnet-x", sgs=()),
        "SubnetDrift",
    ),
]


@pytest.mark.parametrize(
    ("nodeclaim", "nc", "inst", "expected"), [c[1:] for c in DRIFT], ids=[c[0] for c in DRIFT]
)
def test_drift_reason(
    nodeclaim: NodeClaim, nc: EC2NodeClass, inst: Instance, expected: str
) -> None:
    assert drift_reason(nodeclaim, nc, inst) == expected


CR = factories.capacity_reservation("cr-1").model_dump(mode="json", by_alias=True)
RESERVATION_DRIFT: list[tuple[str, bool, list[dict[str, Any]], str, str]] = [
    ("reservation still selected", True, [CR], "cr-1", ""),
    ("reservation no longer selected", True, [], "cr-1", "CapacityReservationDrift"),
    ("another reservation selected", True, [CR], "cr-2", "CapacityReservationDrift"),
    ("not in a reservation", True, [], "", ""),
    ("gate off: reservations are not checked", False, [], "cr-1", ""),
]


@pytest.mark.parametrize(
    ("gate", "reservations", "instance_in", "expected"),
    [c[1:] for c in RESERVATION_DRIFT],
    ids=[c[0] for c in RESERVATION_DRIFT],
)
def test_capacity_reservation_drift(
    gate: bool, reservations: list[dict[str, Any]], instance_in: str, expected: str
) -> None:
    nc = nodeclass(capacityReservations=reservations)
    inst = instance(reservation=instance_in)
    assert drift_reason(claim(), nc, inst, reserved_capacity=gate) == expected


def test_selector_edit_alone_is_not_drift() -> None:
    # The selector moved but status still resolves to what the instance runs on.
    nc = nodeclass(edited(subnetSelectorTerms=[{"id": "subnet-a"}], role="Other"))
    assert drift_reason(claim(), nc, instance()) == ""


def test_unpinned_ubuntu_class_is_never_drifted() -> None:
    # Its AMI terms are the conversion's placeholder: what the instance runs is not comparable.
    nc = nodeclass(amis=[{"id": "ami-other", "requirements": []}])
    nc.metadata.annotations[AWS_ANNOTATION_UBUNTU_COMPATIBILITY] = "amiFamily,incompatible"
    assert drift_reason(claim("123"), nc, instance(image="ami-old")) == ""
    nc.metadata.annotations[AWS_ANNOTATION_UBUNTU_COMPATIBILITY] = "amiFamily"
    assert drift_reason(claim("123"), nc, instance(image="ami-old")) == "NodeClassDrift"
