"""A v1beta1 NodeClaim's expireAfter in v1 (pure): upstream's webhook copies the
``template.spec.expireAfter`` of the NodePool the claim's ``karpenter.sh/nodepool`` label names,
and leaves the CRD default (720h) when there is no label or no such NodePool."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.model.api import NodeClaim
from karpenter_py.model.api.conversionreview import (
    failure_response,
    nodepools_needed,
    review_response,
)
from karpenter_py.model.api.convert import (
    V1_FIELDS_ANNOTATION,
    NodePools,
    nodepool_needed,
    to_v1,
)

EC2_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def beta_claim(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "default-abcde",
        "labels": {"karpenter.sh/nodepool": "default"} if labels is None else labels,
    }
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": meta,
        "spec": {"requirements": [], "nodeClassRef": {"name": "default"}},
    }


def v1_pool(expire_after: str | None) -> dict[str, Any]:
    tspec: dict[str, Any] = {"requirements": [], "nodeClassRef": EC2_REF}
    if expire_after is not None:
        tspec["expireAfter"] = expire_after
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": tspec}},
    }


@pytest.mark.parametrize(
    ("claim", "pools", "expire_after", "read_as", "change"),
    [
        (  # the pool's expiry (a v1beta1 pool's disruption.expireAfter, moved by conversion)
            beta_claim(),
            {"default": v1_pool("48h")},
            "48h",
            "48h",
            "spec.expireAfter: 48h, from NodePool default",
        ),
        (
            beta_claim(),
            {"default": v1_pool("Never")},
            "Never",
            "Never",
            "spec.expireAfter: Never, from NodePool default",
        ),
        # No such NodePool: nothing set, the CRD default applies (upstream does the same).
        (beta_claim(), {}, None, "720h", None),
        (beta_claim(), {"other": v1_pool("48h")}, None, "720h", None),
        # No nodepool label (a standalone NodeClaim): nothing to look up.
        (beta_claim(labels={}), {"default": v1_pool("48h")}, None, "720h", None),
        # A pool whose template has no expireAfter (not defaulted by an API server) sets nothing.
        (beta_claim(), {"default": v1_pool(None)}, None, "720h", None),
        # A v1 claim read through v1beta1 comes back with its own expiry (lossless round trip).
        (
            beta_claim(
                annotations={
                    V1_FIELDS_ANNOTATION: '[{"path":["spec","expireAfter"],"value":"24h"}]'
                }
            ),
            {"default": v1_pool("48h")},
            "24h",
            "24h",
            None,
        ),
    ],
)
def test_v1beta1_nodeclaim_expire_after(
    claim: dict[str, Any],
    pools: NodePools,
    expire_after: str | None,
    read_as: str,
    change: str | None,
) -> None:
    out = to_v1(claim, pools)
    spec = out.object["spec"]
    assert isinstance(spec, dict)
    assert spec.get("expireAfter") == expire_after
    # What the v1 model (and so the controller) reads, the CRD default included.
    assert NodeClaim.model_validate(out.object).spec.expire_after == read_as
    assert [c for c in out.changes if c.startswith("spec.expireAfter")] == (
        [change] if change is not None else []
    )


@pytest.mark.parametrize(
    ("obj", "desired", "needed"),
    [
        (beta_claim(), "karpenter.sh/v1", "default"),
        (beta_claim(), "karpenter.sh/v1beta1", None),
        (beta_claim(labels={}), "karpenter.sh/v1", None),
        ({**beta_claim(), "apiVersion": "karpenter.sh/v1"}, "karpenter.sh/v1beta1", None),
        (v1_pool("48h") | {"apiVersion": "karpenter.sh/v1beta1"}, "karpenter.sh/v1", None),
        ("not an object", "karpenter.sh/v1", None),
    ],
)
def test_nodepool_needed(obj: object, desired: str, needed: str | None) -> None:
    assert nodepool_needed(obj, desired) == needed


def review(desired: object, objects: object) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r-1", "desiredAPIVersion": desired, "objects": objects},
    }


def test_review_names_and_uses_the_nodepools() -> None:
    other = beta_claim(labels={"karpenter.sh/nodepool": "batch"})
    body = review("karpenter.sh/v1", [beta_claim(), other, beta_claim(), beta_claim(labels={})])
    assert nodepools_needed(body) == ["batch", "default"]
    assert nodepools_needed(review("karpenter.sh/v1", "nope")) == []
    answer = review_response(body, {"default": v1_pool("48h")})
    response = answer["response"]
    assert isinstance(response, dict)
    assert [o["spec"].get("expireAfter") for o in response["convertedObjects"]] == [
        "48h",
        None,
        "48h",
        None,
    ]


def test_failure_response() -> None:
    assert failure_response(review("karpenter.sh/v1", []), "getting NodePool x: refused") == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {
            "uid": "r-1",
            "convertedObjects": [],
            "result": {"status": "Failure", "message": "getting NodePool x: refused"},
        },
    }
