"""The ConversionReview handler (apiextensions.k8s.io/v1 request and response shapes)."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.model.api.conversionreview import ReviewError, review_response

BETA_POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1beta1",
    "kind": "NodePool",
    "metadata": {"name": "default", "uid": "u-1", "resourceVersion": "7"},
    "spec": {
        "template": {"spec": {"requirements": [], "nodeClassRef": {"name": "default"}}},
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
    },
}
V1_POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default", "uid": "u-1", "resourceVersion": "7"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [],
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
            }
        },
        "disruption": {"consolidateAfter": "30s", "consolidationPolicy": "WhenEmpty"},
    },
}


def review(desired: object, objects: object, uid: object = "r-1") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    }


def test_success_converts_every_object_in_order() -> None:
    beta_other = {**BETA_POOL, "metadata": {"name": "other"}}
    assert review_response(review("karpenter.sh/v1", [BETA_POOL, beta_other])) == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {
            "uid": "r-1",
            "convertedObjects": [V1_POOL, {**V1_POOL, "metadata": {"name": "other"}}],
            "result": {"status": "Success"},
        },
    }


def test_success_back_to_v1beta1() -> None:
    answer: Any = review_response(review("karpenter.sh/v1beta1", [V1_POOL]))
    converted = answer["response"]["convertedObjects"]
    assert converted[0]["apiVersion"] == "karpenter.sh/v1beta1"
    assert converted[0]["spec"]["template"]["spec"]["nodeClassRef"] == {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert converted[0]["metadata"] == V1_POOL["metadata"]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            review("karpenter.sh/v2", [BETA_POOL]),
            "NodePool default: cannot convert NodePool to 'karpenter.sh/v2'",
        ),
        (
            review("karpenter.sh/v1", [{"apiVersion": "v1", "kind": "Pod"}]),
            "objects[0]: no conversion for Pod v1",
        ),
        (review("", [BETA_POOL]), "request.desiredAPIVersion is required"),
        (review("karpenter.sh/v1", None), "request.objects must be a list"),
    ],
)
def test_failure_result_carries_a_message(request_: dict[str, Any], message: str) -> None:
    assert review_response(request_) == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {
            "uid": "r-1",
            "convertedObjects": [],
            "result": {"status": "Failure", "message": message},
        },
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "expected a ConversionReview object"),
        (
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
            "expected ConversionReview apiextensions.k8s.io/v1, got 'AdmissionReview' "
            "'admission.k8s.io/v1'",
        ),
        (review("karpenter.sh/v1", [], uid=None), "ConversionReview has no request.uid"),
    ],
)
def test_malformed_review_is_rejected(body: object, message: str) -> None:
    with pytest.raises(ReviewError) as err:
        review_response(body)
    assert str(err.value) == message
