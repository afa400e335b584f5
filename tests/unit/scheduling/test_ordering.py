"""Pod order, the retry loop, and which NodeClaim under construction a pod joins."""

from __future__ import annotations

from collections import Counter
from typing import Any

from karpenter_py.model.core import SelectorRequirement
from tests.unit.scheduling._helpers import (
    HOSTNAME,
    ZONE,
    by_pod,
    error_of,
    existing,
    make_node,
    pod,
    pool,
    run,
    spread,
)


def anti(labels: dict[str, str], key: str = HOSTNAME) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
            ]
        }
    }


def test_larger_pods_are_placed_first():
    """One slot on an existing node and a pool that cannot launch: the biggest pod gets the slot."""
    node = existing(make_node("n1", cpu="2", mem="4Gi"))
    pods = [pod("small", "500m"), pod("big", "1500m", "64Mi"), pod("mid", "1", "1Gi")]
    plan = run(pods, existing=[node], pools=[])
    assert by_pod(plan) == {"big": "node/n1", "small": "node/n1"}
    assert "no NodePools" in error_of(plan, "mid")


def test_memory_breaks_cpu_ties_then_creation_time_then_uid():
    node = existing(make_node("n1", cpu="1", mem="4Gi"))
    pods = [
        pod("late", "1", "1Gi", created="2024-01-02T00:00:00Z"),
        pod("early", "1", "1Gi", created="2024-01-01T00:00:00Z"),
        pod("fat", "1", "2Gi", created="2024-01-03T00:00:00Z"),
    ]
    plan = run(pods, existing=[node], pools=[])
    assert by_pod(plan) == {"fat": "node/n1"}
    no_fat = run(pods[:2], existing=[node], pools=[])
    assert by_pod(no_fat) == {"early": "node/n1"}
    same_time = [pod("b", "1"), pod("a", "1")]  # equal in everything: uid decides
    assert by_pod(run(same_time, existing=[node], pools=[])) == {"a": "node/n1"}


def test_retry_loop_interleaves_pods_to_respect_skew():
    """Upstream's motivating example: A pods can only go to zone-a, B pods only to zone-b, and they
    share one zonal spread; placing them in the order they come would break the skew."""
    zones_ab = pool(requirements=[SelectorRequirement(ZONE, "In", ("zone-a", "zone-b"))])
    labels = {"app": "x"}
    tsc = [spread(ZONE, labels)]
    pods = [
        pod(
            f"a{i}",
            "1",
            labels=labels,
            nodeSelector={ZONE: "zone-a"},
            topologySpreadConstraints=tsc,
        )
        for i in range(5)
    ] + [
        pod(
            f"b{i}",
            "500m",
            labels=labels,
            nodeSelector={ZONE: "zone-b"},
            topologySpreadConstraints=tsc,
        )
        for i in range(5)
    ]
    plan = run(pods, pools=[zones_ab])
    assert not plan.errors
    zones = Counter(nc.labels[ZONE] for nc in plan.new_node_claims for _ in nc.pods)
    assert zones == {"zone-a": 5, "zone-b": 5}


def test_pod_joins_the_claim_with_the_fewest_pods():
    x = {"app": "x"}
    pods = [
        pod("y", "6", labels={"app": "y"}, affinity=anti(x)),  # keeps x pods off its node
        *[pod(f"x{i}", "1", labels=x) for i in range(3)],
        pod("z", "100m"),
    ]
    plan = run(pods)
    placements = by_pod(plan)
    assert placements["x0"] == placements["x1"] == placements["x2"] != placements["y"]
    assert placements["z"] == placements["y"]


def test_existing_nodes_beat_claims_under_construction():
    node = existing(make_node("n1", cpu="1", mem="1Gi"))
    plan = run([pod("first", "2"), pod("second", "500m")], existing=[node])
    placements = by_pod(plan)
    assert placements["first"].startswith("claim-")
    assert placements["second"] == "node/n1"
