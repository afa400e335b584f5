"""The kubelet compatibility annotation read back (pure): what convert.to_v1 writes for a v1beta1
kubelet block, and which kubelet settings a node then gets (upstream v1.0's precedence)."""

from __future__ import annotations

import json

import pytest

from karpenter_py.model.api.convert import (
    KUBELET_ANNOTATION,
    ConversionError,
    kubelet_from_annotation,
    kubelet_in_effect,
    to_v1,
)

FULL_V1BETA1 = {
    "clusterDNS": ["10.0.1.100"],
    "maxPods": 20,
    "podsPerCore": 2,
    "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
    "kubeReserved": {"cpu": "200m", "memory": "100Mi", "ephemeral-storage": "3Gi"},
    "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
    "evictionSoft": {"memory.available": "500Mi"},
    "evictionSoftGracePeriod": {"memory.available": "1m"},
    "evictionMaxPodGracePeriod": 60,
    "imageGCHighThresholdPercent": 85,
    "imageGCLowThresholdPercent": 80,
    "cpuCFSQuota": True,
}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, None),
        ({"other": "x"}, None),
        ({KUBELET_ANNOTATION: "{}"}, {}),
        ({KUBELET_ANNOTATION: json.dumps(FULL_V1BETA1)}, FULL_V1BETA1),
        # Fields v1beta1 never had are ignored, as a Go unmarshal into its struct ignores them.
        (
            {KUBELET_ANNOTATION: '{"maxPods":110,"containerLogMaxSize":"10Mi"}'},
            {"maxPods": 110},
        ),
        (
            {KUBELET_ANNOTATION: '{"clusterDNS":["169.254.20.10"],"maxPods":null}'},
            {"clusterDNS": ["169.254.20.10"]},
        ),
    ],
)
def test_kubelet_from_annotation(
    annotations: dict[str, str], expected: dict[str, object] | None
) -> None:
    assert kubelet_from_annotation(annotations) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "{maxPods: 20}",
            f"annotation {KUBELET_ANNOTATION} is not valid JSON: Expecting property name "
            "enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ("[20]", f"annotation {KUBELET_ANNOTATION} is not a JSON object"),
        (
            '{"maxPods":"many"}',
            f"annotation {KUBELET_ANNOTATION}: maxPods: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        (
            '{"maxPods":-1,"kubeReserved":{"cpu":"lots"}}',
            f"annotation {KUBELET_ANNOTATION}: maxPods: Input should be greater than or equal "
            "to 0; kubeReserved.cpu: Value error, 'lots' is not a Kubernetes quantity (for "
            "example 16, '500m', '64Gi')",
        ),
    ],
)
def test_unreadable_annotation_is_a_conversion_error(text: str, message: str) -> None:
    with pytest.raises(ConversionError) as err:
        kubelet_from_annotation({KUBELET_ANNOTATION: text})
    assert str(err.value) == message


CLASS_KUBELET = {"maxPods": 110, "clusterDNS": ["10.100.0.10"]}


@pytest.mark.parametrize(
    ("annotations", "nodeclass_kubelet", "expected"),
    [
        ({}, None, None),
        ({}, CLASS_KUBELET, CLASS_KUBELET),
        ({KUBELET_ANNOTATION: '{"maxPods":20}'}, None, {"maxPods": 20}),
        # Upstream: the annotation wins over the EC2NodeClass's spec.kubelet, whole (no merge).
        ({KUBELET_ANNOTATION: '{"maxPods":20}'}, CLASS_KUBELET, {"maxPods": 20}),
        ({KUBELET_ANNOTATION: "{}"}, CLASS_KUBELET, {}),
    ],
)
def test_kubelet_in_effect(
    annotations: dict[str, str],
    nodeclass_kubelet: dict[str, object] | None,
    expected: dict[str, object] | None,
) -> None:
    assert kubelet_in_effect(annotations, nodeclass_kubelet) == expected


def test_what_to_v1_writes_reads_back_as_the_v1beta1_block() -> None:
    v1beta1 = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"name": "default"},
                    "requirements": [],
                    "kubelet": FULL_V1BETA1,
                }
            }
        },
    }
    converted = to_v1(v1beta1).object
    metadata = converted["metadata"]
    assert isinstance(metadata, dict)
    assert kubelet_from_annotation(metadata["annotations"]) == FULL_V1BETA1
