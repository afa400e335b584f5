"""Pure EC2NodeClass status logic: conditions and their Ready roll-up, keeping a part's value
on an AWS error, which NodeClaims hold a deletion, the finalizer patch, the version reader."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.aws.nodeclass import Failure, NodeClassResolver, ResolvedNodeClass
from karpenter_py.controllers.nodeclass.status import (
    DesiredCondition,
    KubernetesVersion,
    NodeClassStatus,
    apply_conditions,
    current_body,
    desired_conditions,
    finalizers_patch,
    referencing_nodeclaims,
    status_body,
)
from karpenter_py.kube.resources import EC2NODECLASSES
from karpenter_py.model.api.ec2nodeclass import AMI, EC2NodeClass, SecurityGroup, Subnet
from karpenter_py.model.api.nodeclaim import NodeClaim
from tests import factories
from tests.unit.fakes import FakeKube, deps

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NO_SUBNETS = Failure("SubnetsNotFound", "SubnetSelector did not match any Subnets")
AWS_DOWN = Failure("AMIsResolutionFailed", "failed to resolve AMIs: Throttling", transient=True)


def nodeclass(status: dict[str, Any] | None = None) -> EC2NodeClass:
    return factories.ec2nodeclass(
        role="r", selector={"a": "b"}, resource_version="7", generation=3, status=status or {}
    )


@pytest.mark.parametrize(
    ("failures", "expected"),
    [
        (
            {},
            [
                ("SubnetsReady", "True", "SubnetsReady", ""),
                ("SecurityGroupsReady", "True", "SecurityGroupsReady", ""),
                ("AMIsReady", "True", "AMIsReady", ""),
                ("InstanceProfileReady", "True", "InstanceProfileReady", ""),
                ("ValidationSucceeded", "True", "ValidationSucceeded", ""),
                ("Ready", "True", "Ready", ""),
            ],
        ),
        (
            {
                "SubnetsReady": NO_SUBNETS,
                "ValidationSucceeded": Failure("DependenciesNotReady", "waits"),
            },
            [
                ("SubnetsReady", "False", "SubnetsNotFound", NO_SUBNETS.message),
                ("SecurityGroupsReady", "True", "SecurityGroupsReady", ""),
                ("AMIsReady", "True", "AMIsReady", ""),
                ("InstanceProfileReady", "True", "InstanceProfileReady", ""),
                ("ValidationSucceeded", "False", "DependenciesNotReady", "waits"),
                (
                    "Ready",
                    "False",
                    "UnhealthyDependents",
                    "SubnetsReady=False, ValidationSucceeded=False",
                ),
            ],
        ),
    ],
)
def test_desired_conditions(
    failures: dict[str, Failure], expected: list[tuple[str, str, str, str]]
) -> None:
    assert desired_conditions(failures) == [DesiredCondition(*e) for e in expected]  # type: ignore[arg-type]


def test_transition_time_moves_only_on_flips() -> None:
    first = apply_conditions([], desired_conditions({}), now=NOW, generation=1)
    later = NOW + timedelta(minutes=5)
    same = apply_conditions(first, desired_conditions({}), now=later, generation=2)
    assert {c.last_transition_time for c in same} == {NOW}
    assert {c.observed_generation for c in same} == {2}
    flipped = apply_conditions(
        same, desired_conditions({"SubnetsReady": NO_SUBNETS}), now=later, generation=2
    )
    moved = {c.type for c in flipped if c.last_transition_time == later}
    assert moved == {"SubnetsReady", "Ready"}


def test_status_body_keeps_value_of_a_part_that_failed_transiently() -> None:
    old_ami = {"id": "ami-old", "requirements": []}
    nc = nodeclass({"amis": [old_ami], "subnets": [{"id": "subnet-old", "zone": "z"}]})
    resolved = ResolvedNodeClass(
        subnets=[],
        security_groups=[SecurityGroup(id="sg-1", name="n")],
        amis=[],
        instance_profile="c_1",
        failures={"AMIsReady": AWS_DOWN, "SubnetsReady": NO_SUBNETS},
    )
    body = status_body(nc, resolved, [])
    assert body == {
        "subnets": [],  # matched nothing: emptied
        "securityGroups": [{"id": "sg-1", "name": "n"}],
        "amis": [{"id": "ami-old", "requirements": []}],  # AWS error: kept
        "instanceProfile": "c_1",
        "conditions": [],
    }


def test_unchanged_status_compares_equal() -> None:
    resolved = ResolvedNodeClass(
        subnets=[Subnet(id="subnet-1", zone="z", zone_id="zi")],
        security_groups=[SecurityGroup(id="sg-1", name="n")],
        amis=[AMI(id="ami-1", name="a", requirements=[])],
        instance_profile="c_1",
    )
    conditions = apply_conditions([], desired_conditions({}), now=NOW, generation=3)
    body = status_body(nodeclass(), resolved, conditions)
    written = nodeclass(body)
    assert current_body(written) == status_body(written, resolved, conditions)
    assert current_body(nodeclass()) != body


def claim(name: str, group: str, kind: str, ref: str) -> NodeClaim:
    ref_ = {"group": group, "kind": kind, "name": ref}
    return factories.nodeclaim(name, launched=False, node_class_ref=ref_)


def test_referencing_nodeclaims() -> None:
    claims = [
        claim("b", "karpenter.k8s.aws", "EC2NodeClass", "default"),
        claim("a", "karpenter.k8s.aws", "EC2NodeClass", "default"),
        claim("c", "karpenter.k8s.aws", "EC2NodeClass", "other"),
        claim("d", "karpenter.kwok.sh", "KWOKNodeClass", "default"),
    ]
    assert referencing_nodeclaims(claims, "default") == ["a", "b"]
    assert referencing_nodeclaims(claims, "none") == []


@pytest.mark.parametrize(
    ("finalizers", "add", "expected"),
    [
        ([], True, ["karpenter.k8s.aws/termination"]),
        (["x"], True, ["x", "karpenter.k8s.aws/termination"]),
        (["karpenter.k8s.aws/termination", "x"], False, ["x"]),
        (["karpenter.k8s.aws/termination"], False, []),
    ],
)
def test_finalizers_patch(finalizers: list[str], add: bool, expected: list[str]) -> None:
    assert finalizers_patch("9", finalizers, add=add) == {
        "metadata": {"finalizers": expected, "resourceVersion": "9"}
    }


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"major": "1", "minor": "31"}, "1.31"),
        ({"major": "1", "minor": "30+", "gitVersion": "v1.30.4-eks"}, "1.30"),
        ({"major": "", "minor": "", "gitVersion": "v1.33.1"}, "1.33"),
    ],
)
def test_kubernetes_version(info: dict[str, str], expected: str) -> None:
    client = FakeKube()
    client.version_info = info
    clock = FakeClock(NOW)
    reader = KubernetesVersion(client, clock=clock)

    async def twice() -> list[str]:
        first = await reader()
        second = await reader()
        clock.step(301)
        return [first, second, await reader()]

    assert asyncio.run(twice()) == [expected] * 3
    assert len(client.calls_of("get")) == 2  # cached for 5 minutes


def test_kubernetes_version_read_by_concurrent_callers_is_one_get() -> None:
    client = FakeKube()
    client.version_info = {"major": "1", "minor": "31"}
    reader = KubernetesVersion(client, clock=FakeClock(NOW))

    async def together() -> list[str]:
        client.gate = asyncio.Event()  # hold the GET until every caller has asked
        async with asyncio.TaskGroup() as tg:
            reads = [tg.create_task(reader()) for _ in range(3)]
            await asyncio.sleep(0)
            client.gate.set()
        return [r.result() for r in reads]

    assert asyncio.run(together()) == ["1.31"] * 3
    assert len(client.calls_of("get")) == 1


# ----------------------------------------------------------------------------- ReservedCapacity

CR_DOWN = Failure(
    "CapacityReservationsResolutionFailed",
    "failed to resolve CapacityReservations: Throttling",
    transient=True,
)


@pytest.mark.parametrize(
    ("reserved_capacity", "failures", "expected"),
    [
        # gate off: the condition is neither written nor part of Ready (behaviour unchanged)
        (False, {}, None),
        (True, {}, ("True", "CapacityReservationsReady", "True", "Ready")),
        (
            True,
            {"CapacityReservationsReady": CR_DOWN},
            ("False", CR_DOWN.reason, "False", "UnhealthyDependents"),
        ),
    ],
)
def test_capacity_reservations_condition_only_with_the_gate(
    reserved_capacity: bool, failures: dict[str, Failure], expected: tuple[str, ...] | None
) -> None:
    got = {c.type: c for c in desired_conditions(failures, reserved_capacity=reserved_capacity)}
    if expected is None:
        assert "CapacityReservationsReady" not in got
        assert (got["Ready"].status, got["Ready"].reason) == ("True", "Ready")
        return
    cr = got["CapacityReservationsReady"]
    assert (cr.status, cr.reason, got["Ready"].status, got["Ready"].reason) == expected


def test_status_body_writes_capacity_reservations_only_with_the_gate() -> None:
    reservation = factories.capacity_reservation("cr-1")
    wire = {
        "id": "cr-1",
        "availabilityZone": "us-west-2a",
        "instanceType": "m5.large",
        "ownerID": "123456789012",
        "instanceMatchCriteria": "targeted",
        "reservationType": "default",
        "state": "active",  # interruptible: false is left out, as upstream's omitempty does
    }
    gate_off = ResolvedNodeClass(instance_profile="c_1")
    assert "capacityReservations" not in status_body(nodeclass(), gate_off, [])
    gate_on = ResolvedNodeClass(instance_profile="c_1", capacity_reservations=[reservation])
    body = status_body(nodeclass(), gate_on, [])
    assert body["capacityReservations"] == [wire]
    written = nodeclass(body)
    assert current_body(written, reserved_capacity=True) == status_body(written, gate_on, [])
    # an AWS error keeps the reservations the status had
    failed = ResolvedNodeClass(
        instance_profile="c_1",
        capacity_reservations=[],
        failures={"CapacityReservationsReady": CR_DOWN},
    )
    assert status_body(written, failed, [])["capacityReservations"] == [wire]


async def test_an_unreadable_ec2nodeclass_gets_validation_failed_and_one_warning_event() -> None:
    raw = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {
            "name": "default",
            "uid": "ec2nc-uid",
            "resourceVersion": "7",
            "generation": 3,
        },
        "spec": factories.ec2nodeclass_spec(alias="plan9@latest"),
        "status": {"conditions": []},
    }
    client = FakeKube((EC2NODECLASSES, raw))
    # Nothing is resolved for a class that does not parse: no resolver is needed.
    ctrl = NodeClassStatus(deps(client=client, clock=FakeClock(NOW)), cast(NodeClassResolver, None))

    assert await ctrl.reconcile("default") is None

    error = (
        "spec.amiSelectorTerms.0.alias: alias family 'plan9' is not supported, must be one of "
        "['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']"
    )
    stored = client.stored(EC2NODECLASSES, "default")["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in stored] == [
        ("ValidationSucceeded", "False", "EC2NodeClassValidationFailed", error),
        ("Ready", "False", "UnhealthyDependents", "ValidationSucceeded=False"),
    ]
    await ctrl.deps.recorder.flush()
    assert [
        (e["involvedObject"]["kind"], e["involvedObject"]["uid"], e["type"], e["reason"])
        for e in client.events
    ] == [("EC2NodeClass", "ec2nc-uid", "Warning", "EC2NodeClassValidationFailed")]
    assert [e["message"] for e in client.events] == [error]

    # Reported once: the next pass writes and publishes nothing.
    client.calls.clear()
    assert await ctrl.reconcile("default") is None
    await ctrl.deps.recorder.flush()
    assert (client.calls_of("patch"), len(client.events)) == ([], 1)
