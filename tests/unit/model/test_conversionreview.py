"""The ConversionReview handler (apiextensions.k8s.io/v1 request and response shapes)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from karpenter_py.model.api.conversionreview import ReviewError, review_response
from karpenter_py.model.api.convert import (
    KUBELET_ANNOTATION,
    UBUNTU_ANNOTATION,
    V1_FIELDS_ANNOTATION,
)

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


V1_CLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}]},
}


def with_annotation(obj: dict[str, Any], key: str, value: object) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "annotations": {key: value}}}


def saved_text(value: str) -> str:
    """A v1-fields annotation putting back ``spec.x`` as ``value`` (JSON text)."""
    return f'[{{"path": ["spec", "x"], "value": {value}}}]'


def saved(value: int) -> str:
    return saved_text(str(value))


def nested(depth: int) -> str:
    """JSON arrays ``depth`` levels deep."""
    return "[" * depth + "]" * depth


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
        # What fuzzed bodies reached (an exception, HTTP 500, before): a Failure with the reason.
        (
            review("karpenter.sh/v1beta1", [with_annotation(V1_POOL, KUBELET_ANNOTATION, 5)]),
            f"NodePool default: metadata.annotations[{KUBELET_ANNOTATION!r}] is not a string",
        ),
        (
            review("karpenter.sh/v1", [with_annotation(BETA_POOL, V1_FIELDS_ANNOTATION, [])]),
            f"NodePool default: metadata.annotations[{V1_FIELDS_ANNOTATION!r}] is not a string",
        ),
        (
            review("karpenter.k8s.aws/v1beta1", [with_annotation(V1_CLASS, UBUNTU_ANNOTATION, 1)]),
            f"EC2NodeClass default: metadata.annotations[{UBUNTU_ANNOTATION!r}] is not a string",
        ),
        (
            review(
                "karpenter.k8s.aws/v1beta1",
                [{**V1_CLASS, "spec": {"role": "r", "amiSelectorTerms": 5}}],
            ),
            "EC2NodeClass default: spec.amiSelectorTerms is not a list",
        ),
        (
            review(
                "karpenter.sh/v1",
                [with_annotation(BETA_POOL, V1_FIELDS_ANNOTATION, saved(2**64))],
            ),
            f"NodePool default: annotation {V1_FIELDS_ANNOTATION}: 18446744073709551616 is "
            "outside the 64-bit integer range",
        ),
        (
            review(
                "karpenter.sh/v1",
                [with_annotation(BETA_POOL, V1_FIELDS_ANNOTATION, saved(-(2**63) - 1))],
            ),
            f"NodePool default: annotation {V1_FIELDS_ANNOTATION}: -9223372036854775809 is "
            "outside the 64-bit integer range",
        ),
        (
            review(
                "karpenter.sh/v1",
                [with_annotation(BETA_POOL, V1_FIELDS_ANNOTATION, saved_text("NaN"))],
            ),
            f"NodePool default: annotation {V1_FIELDS_ANNOTATION} is not valid JSON: "
            "NaN is not a JSON number",
        ),
        (
            review(
                "karpenter.sh/v1",
                [with_annotation(BETA_POOL, V1_FIELDS_ANNOTATION, saved_text("1e400"))],
            ),
            f"NodePool default: annotation {V1_FIELDS_ANNOTATION}: inf is not a finite number",
        ),
        (
            review(
                "karpenter.sh/v1",
                [with_annotation(BETA_POOL, V1_FIELDS_ANNOTATION, saved_text(nested(101)))],
            ),
            f"NodePool default: annotation {V1_FIELDS_ANNOTATION}: nests deeper than 100 levels",
        ),
        (
            review(
                "karpenter.sh/v1",
                [with_annotation(BETA_POOL, V1_FIELDS_ANNOTATION, saved_text(nested(5000)))],
            ),
            f"NodePool default: annotation {V1_FIELDS_ANNOTATION} is not valid JSON: "
            "it nests too deep",
        ),
    ],
)
def test_failure_result_carries_a_message(request_: dict[str, Any], message: str) -> None:
    answer = review_response(request_)
    assert orjson.loads(orjson.dumps(answer)) == answer  # what the webhook sends back
    assert answer == {
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
        # ~500 levels ran Python out of stack (RecursionError, HTTP 500) while converting.
        (
            review("karpenter.sh/v1", [{**BETA_POOL, "spec": orjson.loads(nested(500))}]),
            "ConversionReview nests deeper than 100 levels",
        ),
        (
            review("karpenter.sh/v1beta1", [{**V1_POOL, "spec": {"x": orjson.loads(nested(96))}}]),
            "ConversionReview nests deeper than 100 levels",
        ),
    ],
)
def test_malformed_review_is_rejected(body: object, message: str) -> None:
    with pytest.raises(ReviewError) as err:
        review_response(body)
    assert str(err.value) == message
