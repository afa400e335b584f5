"""Each provider's node repair policies, as upstream's providers define them."""

from __future__ import annotations

from collections.abc import Sequence

from karpenter_py.cloudprovider.aws.provider import REPAIR_POLICIES
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.cloudprovider.protocol import RepairPolicy
from tests.unit.fakes import FakeNodeAPI


def table(policies: Sequence[RepairPolicy]) -> list[tuple[str, str, float]]:
    return [(p.condition_type, p.condition_status, p.toleration_seconds) for p in policies]


def test_kwok_repairs_a_node_not_ready_for_30_minutes() -> None:
    assert table(KwokCloudProvider(FakeNodeAPI(), []).repair_policies()) == [
        ("Ready", "False", 1800.0),
        ("Ready", "Unknown", 1800.0),
    ]


def test_aws_adds_the_node_monitoring_agent_conditions() -> None:
    assert table(REPAIR_POLICIES) == [
        ("Ready", "False", 1800.0),
        ("Ready", "Unknown", 1800.0),
        ("AcceleratedHardwareReady", "False", 600.0),
        ("StorageReady", "False", 1800.0),
        ("NetworkingReady", "False", 1800.0),
        ("KernelReady", "False", 1800.0),
        ("ContainerRuntimeReady", "False", 1800.0),
    ]
