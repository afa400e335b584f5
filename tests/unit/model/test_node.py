"""The slim Node view: its conditions (what node repair reads) and readiness."""

from __future__ import annotations

import pytest

from karpenter_py.model.core import NodeCondition, node_from_dict
from karpenter_py.model.fields import ParseError


def test_conditions_keep_type_status_and_transition_time_not_the_heartbeat() -> None:
    node = node_from_dict(
        {
            "metadata": {"name": "n"},
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "KubeletNotReady",
                        "lastHeartbeatTime": "2026-03-01T10:05:00Z",
                        "lastTransitionTime": "2026-03-01T10:00:00Z",
                    },
                    {"type": "KernelReady", "status": "True"},
                ]
            },
        }
    )
    assert node.conditions == (
        NodeCondition("Ready", "False", "2026-03-01T10:00:00Z"),
        NodeCondition("KernelReady", "True", ""),
    )
    assert node.ready is False
    assert node.condition("KernelReady") == NodeCondition("KernelReady", "True", "")
    assert node.condition("StorageReady") is None


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([], False),
        ([{"type": "Ready", "status": "True"}], True),
        ([{"type": "Ready", "status": "Unknown"}], False),
        ([{"type": "MemoryPressure", "status": "True"}], False),
    ],
)
def test_ready_is_the_ready_condition(conditions: list[dict[str, str]], ready: bool) -> None:
    node = node_from_dict({"metadata": {"name": "n"}, "status": {"conditions": conditions}})
    assert node.ready is ready


def test_a_condition_without_a_string_type_is_an_error_with_its_path() -> None:
    with pytest.raises(ParseError) as err:
        node_from_dict({"metadata": {"name": "n"}, "status": {"conditions": [{"type": 1}]}})
    assert err.value.path == "node.status.conditions[0].type"
