"""The one "has the disrupted taint" rule, shared by disruption and termination."""

from __future__ import annotations

import pytest

from karpenter_py.model.core import DISRUPTED_TAINT, Taint, is_disrupted_taint


@pytest.mark.parametrize(
    ("key", "effect", "value", "expected"),
    [
        ("karpenter.sh/disrupted", "NoSchedule", "", True),
        # The value carries no meaning: a taint someone gave a value still counts.
        ("karpenter.sh/disrupted", "NoSchedule", "x", True),
        # Same key, other effect: not the taint disruption and termination put on a node.
        ("karpenter.sh/disrupted", "NoExecute", "", False),
        ("karpenter.sh/disrupted", "PreferNoSchedule", "", False),
        ("karpenter.sh/disruption", "NoSchedule", "", False),
        ("node.kubernetes.io/unschedulable", "NoSchedule", "", False),
    ],
)
def test_slim_view_and_api_json_agree(key, effect, value, expected):
    assert is_disrupted_taint(Taint(key=key, effect=effect, value=value)) is expected
    raw: dict[str, object] = {"key": key, "effect": effect}
    if value:
        raw["value"] = value
    assert is_disrupted_taint(raw) is expected


def test_the_constant_is_the_taint():
    assert Taint(key="karpenter.sh/disrupted", effect="NoSchedule") == DISRUPTED_TAINT
    assert is_disrupted_taint({"effect": "NoSchedule"}) is False
