"""Taints and tolerations: NodePool taints, startup taints, PreferNoSchedule, existing nodes."""

from __future__ import annotations

import pytest

from tests.unit.scheduling._helpers import (
    by_pod,
    claim_of,
    error_of,
    existing,
    make_node,
    pod,
    pool,
    run,
    taint,
)

GPU = taint("dedicated", "NoSchedule", "gpu")


def tolerate(key: str, value: str = "", effect: str = "", op: str = "Equal") -> dict[str, str]:
    out = {"key": key, "operator": op}
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    return out


def test_pool_taint_blocks_pods_without_toleration():
    plan = run([pod("p")], pools=[pool(taints=[GPU])])
    reason = error_of(plan, "p")
    assert "did not tolerate taint dedicated=gpu:NoSchedule" in reason


@pytest.mark.parametrize(
    "toleration",
    [
        tolerate("dedicated", "gpu"),
        tolerate("dedicated", "gpu", "NoSchedule"),
        tolerate("dedicated", op="Exists"),
        {"operator": "Exists"},
    ],
)
def test_pool_taint_tolerated(toleration):
    plan = run([pod("p", tolerations=[toleration])], pools=[pool(taints=[GPU])])
    nc = claim_of(plan, "p")
    assert nc.taints == (GPU,)


@pytest.mark.parametrize(
    "toleration",
    [
        tolerate("dedicated", "cpu"),
        tolerate("dedicated", "gpu", "NoExecute"),
        tolerate("other", op="Exists"),
    ],
)
def test_pool_taint_not_tolerated(toleration):
    plan = run([pod("p", tolerations=[toleration])], pools=[pool(taints=[GPU])])
    assert "did not tolerate" in error_of(plan, "p")


def test_tainted_pool_is_skipped_for_an_untainted_lower_weight_pool():
    pools = [pool("gpu", weight=50, taints=[GPU]), pool("general", weight=1)]
    plan = run(
        [pod("plain"), pod("gpu-job", "1", tolerations=[tolerate("dedicated", "gpu")])], pools=pools
    )
    assert claim_of(plan, "plain").node_pool == "general"
    assert claim_of(plan, "gpu-job").node_pool == "gpu"


def test_startup_taints_do_not_block():
    startup = taint("example.com/agent-not-ready", "NoSchedule")
    plan = run([pod("p")], pools=[pool(startup_taints=[startup])])
    nc = claim_of(plan, "p")
    assert nc.startup_taints == (startup,)
    assert nc.taints == ()


def test_prefer_no_schedule_is_tolerated_as_a_last_resort():
    soft = taint("spot-only", "PreferNoSchedule")
    plan = run([pod("p")], pools=[pool(taints=[soft])])
    nc = claim_of(plan, "p")
    assert nc.taints == (soft,)


def test_prefer_no_schedule_pool_loses_to_an_untainted_pool_before_relaxation():
    soft = taint("spot-only", "PreferNoSchedule")
    pools = [pool("soft", weight=100, taints=[soft]), pool("plain", weight=1)]
    plan = run([pod("p")], pools=pools)
    assert claim_of(plan, "p").node_pool == "plain"


def test_prefer_no_schedule_relaxation_is_the_last_one():
    """A pod with a preferred zone first gives up the zone, and only then tolerates the taint."""
    soft = taint("spot-only", "PreferNoSchedule")
    aff = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["zone-x"],
                            }
                        ]
                    },
                }
            ]
        }
    }
    plan = run([pod("p", affinity=aff)], pools=[pool(taints=[soft])])
    assert claim_of(plan, "p").node_pool == "default"
    assert not plan.errors


def test_no_schedule_taint_is_not_relaxed():
    plan = run(
        [pod("p")],
        pools=[pool(taints=[taint("hard")]), pool("soft", taints=[taint("s", "PreferNoSchedule")])],
    )
    assert claim_of(plan, "p").node_pool == "soft"


# ----------------------------------------------------------------------------- existing nodes


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
READINESS = {"key": "readiness.k8s.io/network", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}


def test_existing_node_taint_blocks_and_tolerating_pod_uses_it():
    node = existing(make_node("n1", taints=[DEDICATED]))
    plan = run(
        [pod("plain"), pod("db", "1", tolerations=[tolerate("dedicated", "db")])], existing=[node]
    )
    placements = by_pod(plan)
    assert placements["db"] == "node/n1"
    assert placements["plain"].startswith("claim-")


@pytest.mark.parametrize("taint_dict", [NOT_READY, UNREGISTERED, READINESS])
@pytest.mark.parametrize(
    ("pool_name", "initialized", "placed_on_node"),
    [
        ("default", False, True),  # managed, still booting: ephemeral taints ignored
        ("default", True, False),  # initialized: the taint is real
        ("", False, False),  # not Karpenter's node: taints are taken at face value
    ],
)
def test_ephemeral_taints_ignored_only_on_uninitialized_managed_nodes(
    taint_dict, pool_name, initialized, placed_on_node
):
    node = existing(
        make_node("n1", taints=[taint_dict]), pool_name=pool_name, initialized=initialized
    )
    plan = run([pod("p")], existing=[node])
    assert (by_pod(plan)["p"] == "node/n1") is placed_on_node


def test_non_ephemeral_taint_still_blocks_uninitialized_managed_node():
    node = existing(
        make_node("n1", taints=[NOT_READY, DEDICATED]), pool_name="default", initialized=False
    )
    plan = run([pod("p")], existing=[node])
    assert by_pod(plan)["p"].startswith("claim-")


def test_cordoned_node_is_skipped_unless_tolerated():
    from dataclasses import replace

    cordoned = existing(replace(make_node("n1"), unschedulable=True))
    tol = [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    ]
    plan = run([pod("plain"), pod("tolerant", "1", tolerations=tol)], existing=[cordoned])
    placements = by_pod(plan)
    assert placements["plain"].startswith("claim-")
    assert placements["tolerant"] == "node/n1"
