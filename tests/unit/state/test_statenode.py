"""How the state judges a node Karpenter has not finished setting up (issue 17, fault 1).

A kubelet may register a launched instance's Node bare (user data without ``--node-labels``);
registration copies the NodeClaim's labels and taints over a moment later. Until the node is
initialized, upstream's state judges it by its NodeClaim, so the provisioner counts it as the
capacity it is instead of launching again for the pods it was bought for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.core import Node, Taint
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.statenode import StateNode
from tests import factories

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
POOL = "p"
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
TEAM = {"key": "team", "value": "a", "effect": "NoSchedule"}
AGENT = {"key": "agent", "effect": "NoExecute"}  # the claim's startup taint
# What registration copies from the claim (its labels, plus the launch's single-valued
# requirement), and what the Node then says of itself.
CLAIM_LABELS = {
    "karpenter.sh/nodepool": POOL,
    "team": "a",
    "karpenter.sh/capacity-type": "spot",
}
REGISTERED = {**CLAIM_LABELS, "karpenter.sh/registered": "true"}
INITIALIZED = {**REGISTERED, "karpenter.sh/initialized": "true"}


def claim(*conditions: str) -> NodeClaim:
    """The launched claim of node "n" (``conditions`` True, the others not reported yet)."""
    return factories.nodeclaim(
        "nc",
        pool=POOL,
        node_name="n",
        labels={"team": "a"},
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]},
        ],
        taints=[TEAM],
        startup_taints=[AGENT],
        conditions=[factories.condition(c) for c in conditions],
        capacity={"cpu": "4", "memory": "16Gi", "pods": "110"},
    )


@dataclass(frozen=True)
class Case:
    node: Node | None
    nodeclaim: NodeClaim | None
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    registered: bool
    initialized: bool


def taint(t: dict[str, str]) -> Taint:
    return Taint(key=t["key"], effect=t["effect"], value=t.get("value", ""))


CASES = {
    "registered bare: the node's own labels plus the claim's, the claim's taints": Case(
        node=factories.node("n", labels={"kubernetes.io/os": "linux"}, taints=[UNREGISTERED]),
        nodeclaim=claim("Launched"),
        labels={"kubernetes.io/hostname": "n", "kubernetes.io/os": "linux", **CLAIM_LABELS},
        taints=(taint(TEAM),),
        registered=False,
        initialized=False,
    ),
    "registered, not initialized: the startup taint is expected to go": Case(
        node=factories.node("n", labels=REGISTERED, taints=[TEAM, AGENT]),
        nodeclaim=claim("Launched", "Registered"),
        labels={"kubernetes.io/hostname": "n", **REGISTERED},
        taints=(taint(TEAM),),
        registered=True,
        initialized=False,
    ),
    "initialized: the Node speaks for itself (a label changed since is the Node's)": Case(
        node=factories.node("n", labels={**INITIALIZED, "team": "b"}, taints=[AGENT]),
        nodeclaim=claim("Launched", "Registered", "Initialized"),
        labels={"kubernetes.io/hostname": "n", **INITIALIZED, "team": "b"},
        taints=(taint(AGENT),),
        registered=True,
        initialized=True,
    ),
    "a node Karpenter does not manage": Case(
        node=factories.node("n", labels={"team": "a"}, taints=[UNREGISTERED]),
        nodeclaim=None,
        labels={"kubernetes.io/hostname": "n", "team": "a"},
        taints=(taint(UNREGISTERED),),
        registered=True,
        initialized=True,
    ),
    "in flight: what its node will carry": Case(
        node=None,
        nodeclaim=claim("Launched"),
        labels=CLAIM_LABELS,
        taints=(taint(TEAM),),
        registered=False,
        initialized=False,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_node_is_judged_by_its_nodeclaim_until_initialized(case: Case) -> None:
    sn = StateNode(node=case.node, nodeclaim=case.nodeclaim)
    assert dict(sn.labels) == case.labels
    assert sn.node_pool == case.labels.get("karpenter.sh/nodepool", "")
    assert sn.taints == case.taints
    assert (sn.registered, sn.initialized) == (case.registered, case.initialized)


TOLERATES_TEAM = [{"key": "team", "operator": "Exists"}]


@pytest.mark.parametrize(
    ("node", "tolerations", "new_claims", "on_existing"),
    [
        pytest.param(
            factories.node("n", taints=[UNREGISTERED]),
            TOLERATES_TEAM,
            0,
            {"n": ["web"]},
            id="registered-bare",
        ),
        # The claim's taint will be synced onto the node: a pod that does not tolerate it needs
        # another.
        pytest.param(
            factories.node("n", taints=[UNREGISTERED]),
            [],
            1,
            {},
            id="registered-bare-intolerant-pod",
        ),
        pytest.param(
            factories.node("n", labels=REGISTERED, taints=[TEAM, AGENT]),
            TOLERATES_TEAM,
            0,
            {"n": ["web"]},
            id="labels-synced-startup-taint-left",
        ),
    ],
)
def test_a_pod_for_the_pool_goes_to_the_node_its_claim_makes(
    node: Node,
    tolerations: list[dict[str, str]],
    new_claims: int,
    on_existing: dict[str, list[str]],
) -> None:
    """The issue's round: a pod that selects ``karpenter.sh/nodepool`` finds the in-flight node
    whatever its Node carries yet, and no second node is bought for it."""
    cluster = Cluster()
    cluster.upsert_nodepool(factories.nodepool(POOL))
    cluster.upsert_nodeclass(factories.KWOK_NODECLASS_KEY, True)
    cluster.upsert_nodeclaim(claim("Launched"))
    cluster.upsert_node(node)
    cluster.upsert_pod(
        factories.pod(
            "web",
            pending=True,
            nodeSelector={"karpenter.sh/nodepool": POOL},
            tolerations=tolerations,
        )
    )
    inp = solve_input(
        cluster.snapshot(NOW), instance_types={POOL: kwok_catalog()}, options=SolveOptions()
    )
    plan = solve(inp)
    assert len(plan.new_node_claims) == new_claims
    assert {p.node_name: [pod.name for pod in p.pods] for p in plan.existing} == on_existing
