"""The kubelet-setting readers of ``cloudprovider.aws.knobs`` (pure; ``knobs_for`` and
``ephemeral_storage_for`` are covered with the instance types they size, in
test_instancetype_knobs.py)."""

from __future__ import annotations

import logging

import pytest

from karpenter_py.cloudprovider.aws import instancetypes, knobs
from karpenter_py.cloudprovider.aws.knobs import _int_setting, _resource_setting

MI = 2**20
GI = 2**30


@pytest.mark.parametrize(
    ("kubelet", "expected", "warned"),
    [
        ({}, None, False),
        ({"maxPods": None}, None, False),
        ({"maxPods": 8}, 8, False),
        ({"maxPods": 0}, 0, False),
        # a bool is an int in Python, not in the kubelet's configuration
        ({"maxPods": True}, None, True),
        ({"maxPods": "8"}, None, True),
        ({"maxPods": "self.vcpu * 8"}, None, True),
    ],
)
def test_int_setting(
    caplog: pytest.LogCaptureFixture,
    kubelet: dict[str, object],
    expected: int | None,
    warned: bool,
) -> None:
    with caplog.at_level(logging.WARNING, logger="karpenter.aws.instancetypes"):
        assert _int_setting(kubelet, "maxPods", "default") == expected
    assert [r.getMessage() for r in caplog.records] == (
        ["kubelet setting ignored: not an integer"] if warned else []
    )


@pytest.mark.parametrize(
    ("kubelet", "expected", "warnings"),
    [
        ({}, {}, 0),
        ({"kubeReserved": "1Gi"}, {}, 0),
        ({"kubeReserved": {"cpu": "250m", "memory": "1Gi"}}, {"cpu": 250, "memory": GI}, 0),
        ({"kubeReserved": {"ephemeral-storage": "2Gi"}}, {"ephemeral-storage": 2 * GI}, 0),
        ({"kubeReserved": {"cpu": 1, "memory": "300Mi"}}, {"cpu": 1000, "memory": 300 * MI}, 0),
        # one bad quantity is dropped, the others kept
        ({"kubeReserved": {"cpu": "1", "memory": "vcpu * 10"}}, {"cpu": 1000}, 1),
    ],
)
def test_resource_setting(
    caplog: pytest.LogCaptureFixture,
    kubelet: dict[str, object],
    expected: dict[str, int],
    warnings: int,
) -> None:
    with caplog.at_level(logging.WARNING, logger="karpenter.aws.instancetypes"):
        assert _resource_setting(kubelet, "kubeReserved", "default") == expected
    assert len(caplog.records) == warnings


def test_instancetypes_reexports_the_one_knobs_for() -> None:
    assert instancetypes.knobs_for is knobs.knobs_for
    assert instancetypes.ephemeral_storage_for is knobs.ephemeral_storage_for
