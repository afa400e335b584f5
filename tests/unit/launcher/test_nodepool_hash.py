"""nodepool_hash equals upstream Karpenter's NodePool.Hash() (karpenter.sh/nodepool-hash v3).

testdata/nodepool_hashes.json holds, for each NodePool of testdata/nodepool_hash_cases.yaml,
the hash upstream's own Go code computes (hack/hashoracle/gen.sh regenerates it; the file names
the upstream version in gen.sh). Matching it exactly is what lets a cluster move between
upstream and karpenter-py without every node turning NodePoolDrifted.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.launcher.persist import nodepool_hash
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.hashing import fnv1_64, hash_time

GOLDEN: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "testdata" / "nodepool_hashes.json").read_text()
)
BY_NAME = {case["name"]: case for case in GOLDEN}


def test_golden_covers_the_template() -> None:
    assert len(GOLDEN) == 27
    assert len(BY_NAME) == len(GOLDEN)


@pytest.mark.parametrize("case", GOLDEN, ids=[c["name"] for c in GOLDEN])
def test_matches_upstream(case: dict[str, Any]) -> None:
    assert nodepool_hash(NodePool.model_validate(case["nodePool"])) == case["hash"]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        # Requirements are `hash:"ignore"`: editing them is never drift.
        ("minimal", "minimal-other-requirements", True),
        ("minimal", "minimal-no-requirements", True),
        ("minimal", "metadata-empty", True),
        ("expire-1h30m", "expire-5400s", True),  # the value counts, not its spelling
        ("labels-two", "labels-two-reordered", True),
        ("taints-two", "taints-two-reordered", True),
        ("minimal", "labels-one", False),  # a label edit is drift
        ("labels-one", "labels-two", False),
        ("minimal", "labels-empty-map", False),  # Go: an empty map is not a nil one
        ("minimal", "taints-empty-list", False),
        ("minimal", "expire-never", False),
        ("taint-with-value", "taint-without-value", False),
        ("startup-taint", "startup-taint-as-taint", False),
        ("tgp-0s", "tgp-1h", False),
        ("minimal", "tgp-0s", False),  # a zero terminationGracePeriod is still set
    ],
)
def test_upstream_properties(a: str, b: str, same: bool) -> None:
    assert (BY_NAME[a]["hash"] == BY_NAME[b]["hash"]) is same
    ours_a = nodepool_hash(NodePool.model_validate(BY_NAME[a]["nodePool"]))
    ours_b = nodepool_hash(NodePool.model_validate(BY_NAME[b]["nodePool"]))
    assert (ours_a == ours_b) is same


def test_edits_on_the_model() -> None:
    """Drift's own path: the pool object edited in place, not re-read from JSON."""
    np = NodePool.model_validate(BY_NAME["everything"]["nodePool"])
    h = nodepool_hash(np)
    np.spec.template.spec.requirements = []
    assert nodepool_hash(np) == h
    np.spec.template.metadata.labels["team"] = "b"
    assert nodepool_hash(np) != h


def test_nodepool_fields_outside_the_template_do_not_count() -> None:
    raw = json.loads(json.dumps(BY_NAME["minimal"]["nodePool"]))
    raw["spec"]["weight"] = 50
    raw["spec"]["limits"] = {"cpu": "100"}
    raw["spec"]["disruption"] = {"consolidateAfter": "1m", "consolidationPolicy": "WhenEmpty"}
    raw["metadata"]["labels"] = {"a": "b"}
    assert nodepool_hash(NodePool.model_validate(raw)) == BY_NAME["minimal"]["hash"]


@pytest.mark.parametrize(
    ("data", "want"),
    [
        # Go's hash/fnv New64 (FNV-1, not FNV-1a) on these inputs.
        (b"", 0xCBF29CE484222325),
        (b"a", 0xAF63BD4C8601B7BE),
        (b"foobar", 0x340D8765A4DDA9C2),
    ],
)
def test_fnv1_64(data: bytes, want: int) -> None:
    assert fnv1_64(data) == want


def test_time_in_another_zone_is_the_same_instant() -> None:
    utc = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert hash_time(utc.astimezone()) == hash_time(utc)
