"""The conversion webhook's ``POST /convert`` under fuzzed bodies, through its real aiohttp
handler (served plainly here; TLS is the listener's business): whatever arrives, the answer is
200 with a ConversionReview response (Success or Failure) or 400 with a message, never a 500.

Bodies: raw bytes, arbitrary JSON, ConversionReviews whose objects are NodePools, NodeClaims and
EC2NodeClasses of either version with random fields and compatibility annotations, and nesting
from 1 to 1,500 levels. Examples are derandomized, so CI runs the same ones every time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpenter_py.manager.webhook import CONVERT_PATH, WebhookServer
from karpenter_py.model.api.convert import (
    KUBELET_ANNOTATION,
    MAX_NESTING,
    UBUNTU_ANNOTATION,
    V1_FIELDS_ANNOTATION,
)

API_VERSIONS: Final = (
    "karpenter.sh/v1",
    "karpenter.sh/v1beta1",
    "karpenter.k8s.aws/v1",
    "karpenter.k8s.aws/v1beta1",
    "karpenter.sh/v2",
    "v1",
    "",
)
KINDS: Final = ("NodePool", "NodeClaim", "EC2NodeClass", "Pod")
# Field names conversion reads, so random objects reach its branches.
KEYS: Final = (
    "spec",
    "metadata",
    "template",
    "disruption",
    "nodeClassRef",
    "kubelet",
    "amiFamily",
    "amiSelectorTerms",
    "expireAfter",
    "consolidationPolicy",
    "consolidateAfter",
    "budgets",
    "labels",
    "annotations",
    "blockDeviceMappings",
    "requirements",
    "resources",
    "group",
    "kind",
    "name",
    "apiVersion",
    "alias",
    "path",
    "value",
    "karpenter.sh/nodepool",
)
REVIEW_KEYS: Final = ("apiVersion", "kind", "request", "uid", "desiredAPIVersion", "objects")

# What orjson reads: 64-bit integers, finite floats.
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(("WhenUnderutilized", "WhenEmpty", "Ubuntu", "AL2", "al2@latest", "Never"))
)


def json_of(keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=16,
    )


any_json = json_of(st.text(max_size=8))
fields = json_of(st.sampled_from(KEYS) | st.text(max_size=4))
annotation_values = (
    st.text(max_size=12)
    | any_json.map(lambda v: orjson.dumps(v).decode())
    | fields.map(lambda v: orjson.dumps([{"path": ["spec", "x"], "value": v}]).decode())
    | st.sampled_from(("NaN", "1e400", '[{"path": ["spec"], "value": 18446744073709551616}]'))
    | st.integers(1, 3000).map(lambda n: "[" * n + "]" * n)
    | any_json
)
annotation_maps = st.dictionaries(
    st.sampled_from((KUBELET_ANNOTATION, V1_FIELDS_ANNOTATION, UBUNTU_ANNOTATION, "team")),
    annotation_values,
    max_size=3,
)
metadata = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=6) | scalars,
        "annotations": annotation_maps | fields,
        "labels": st.dictionaries(st.just("karpenter.sh/nodepool"), st.text(max_size=6)) | fields,
    },
)
objects = st.fixed_dictionaries(
    {"apiVersion": st.sampled_from(API_VERSIONS), "kind": st.sampled_from(KINDS)},
    optional={"metadata": metadata | fields, "spec": fields, "status": fields},
)


def deep_review(depth: int) -> bytes:
    """A ConversionReview nesting ``depth`` levels: review, request, objects, the object and its
    spec are five, then arrays (written as text: orjson writes at most 255 levels)."""
    arrays = depth - 5
    return (
        b'{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": '
        b'{"uid": "u", "desiredAPIVersion": "karpenter.sh/v1", "objects": [{"apiVersion": '
        b'"karpenter.sh/v1beta1", "kind": "NodePool", "spec": {"x": '
        + b"[" * arrays
        + b"]" * arrays
        + b"}}]}}"
    )


requests = st.fixed_dictionaries(
    {},
    optional={
        "uid": st.text(max_size=4) | scalars,
        "desiredAPIVersion": st.sampled_from(API_VERSIONS) | scalars,
        "objects": st.lists(objects | fields, max_size=3) | scalars,
    },
)
reviews = st.fixed_dictionaries(
    {
        "apiVersion": st.just("apiextensions.k8s.io/v1") | st.text(max_size=4),
        "kind": st.just("ConversionReview") | st.text(max_size=4),
    },
    optional={"request": requests | scalars},
)
bodies = (
    st.binary(max_size=64)
    | (reviews | any_json | json_of(st.sampled_from(REVIEW_KEYS))).map(orjson.dumps)
    # Deep nesting where conversion walks (an object's spec), and bare, past orjson's limit.
    | st.integers(6, 1500).map(deep_review)
    | st.integers(1, 1500).map(lambda n: b"[" * n + b"]" * n)
)

BETA_CLAIM_POOLS: Final = {
    "default": {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"expireAfter": "48h"}}},
    }
}


async def lookup(name: str) -> dict[str, Any] | None:
    return BETA_CLAIM_POOLS.get(name)


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    server = WebhookServer(nodepool=lookup)
    async with TestClient(TestServer(server.application())) as c:
        yield c


async def check(client: TestClient[Any, Any], body: bytes) -> tuple[int, str]:
    resp = await client.post(CONVERT_PATH, data=body)
    text = await resp.text()
    assert resp.status in {200, 400}, text
    if resp.status == 400:
        assert text.startswith("bad ConversionReview: "), text
    else:
        answer = orjson.loads(text)
        assert (answer["apiVersion"], answer["kind"]) == (
            "apiextensions.k8s.io/v1",
            "ConversionReview",
        )
        assert answer["response"]["result"]["status"] in {"Success", "Failure"}
    return resp.status, text


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=bodies)
async def test_any_body_is_answered_with_a_review_or_a_400(
    client: TestClient[Any, Any], body: bytes
) -> None:
    await check(client, body)


@pytest.mark.parametrize(
    ("depth", "status", "answer"),
    [
        (MAX_NESTING, 200, "Success"),
        (
            MAX_NESTING + 1,
            400,
            "bad ConversionReview: ConversionReview nests deeper than 100 levels\n",
        ),
        (500, 400, "bad ConversionReview: ConversionReview nests deeper than 100 levels\n"),
        # Past orjson's own limit (1,024 levels) the body is not JSON it reads.
        (
            1100,
            400,
            "bad ConversionReview: depth limit exceeded: line 1 column 1240 (char 1239)\n",
        ),
    ],
)
async def test_deep_nesting_is_a_400_with_a_message(
    client: TestClient[Any, Any], depth: int, status: int, answer: str
) -> None:
    got, text = await check(client, deep_review(depth))
    if got == 200:
        text = orjson.loads(text)["response"]["result"]["status"]
    assert (got, text) == (status, answer)
