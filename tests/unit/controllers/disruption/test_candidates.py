"""Disruption candidates: costs, emptiness, who qualifies (and why not), method filters, order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.controllers.disruption.candidates import (
    build_candidates,
    consolidation_block,
    drift_block,
    emptiness_block,
    is_empty,
    make_candidate,
    order_for_consolidation,
    order_for_drift,
    pod_block,
    reschedule_cost,
    savings_ratio,
)
from karpenter_py.controllers.disruption.types import Candidate
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod
from karpenter_py.model.disruptioncost import disruption_cost, eviction_cost, lifetime_remaining
from karpenter_py.model.instancetype import Offering, make_instance_type
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODE_INITIALIZED,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.state.pdb import PodDisruptionBudget
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode
from tests import factories

T0 = datetime(2026, 1, 1, tzinfo=UTC)  # factories.T0: creation and condition times
NOW = T0 + timedelta(hours=1)

M5 = make_instance_type(
    name="m5.large",
    requirements={},
    capacity={"cpu": 2000, "pods": 110},
    offerings=[
        Offering("test-zone-a", "on-demand", 0.096),
        Offering("test-zone-a", "spot", 0.035),
        Offering("test-zone-b", "on-demand", 0.1, available=False),  # still prices a node
        Offering("test-zone-d", "on-demand", float("nan")),
    ],
)
TYPES = {"default": [M5]}


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def cond(type_: str, status: str = "True", when: datetime = T0) -> dict[str, Any]:
    return factories.condition(type_, status, at=stamp(when))


LIFECYCLE = [cond(t) for t in ("Launched", "Registered", "Initialized")]


def pod(name: str = "p", *, namespace: str = "default", **kw: Any) -> Pod:
    fields = {k: kw.pop(k) for k in ("phase", "deletion_timestamp", "start_time") if k in kw}
    return replace(factories.pod(name, namespace=namespace, node_name="n1", **kw), **fields)


def daemon_pod(name: str = "ds", **kw: Any) -> Pod:
    return pod(name, owner="DaemonSet", **kw)


def mirror_pod(name: str = "static", **kw: Any) -> Pod:
    return pod(name, owner="Node", annotations={"kubernetes.io/config.mirror": "x"}, **kw)


def deletion_cost(value: str) -> dict[str, str]:
    return {"controller.kubernetes.io/pod-deletion-cost": value}


# ----------------------------------------------------------------------------- costs


@pytest.mark.parametrize(
    ("annotations", "priority", "expected"),
    [
        ({}, None, 1.0),
        (deletion_cost(str(2**27)), None, 2.0),
        (deletion_cost(str(-(2**27))), None, 0.0),
        (deletion_cost(str(2**26)), 2**24, 2.0),
        (deletion_cost("1e9"), None, 1.0 + 1953125 / 2**18),
        (deletion_cost("-5e8"), None, 1.0 - 1953125 / 2**19),
        (deletion_cost("2147483647"), None, 10.0),  # clamped
        (deletion_cost("-2147483647"), None, -10.0),
        ({}, 2**25, 2.0),
        ({}, -(2**25), 0.0),
        ({}, 2000000000, 10.0),  # system-cluster-critical clamps
        ({}, -2147483648, -10.0),
        (deletion_cost("abc"), None, 1.0),  # bad values are ignored
        (deletion_cost(""), None, 1.0),
        (deletion_cost("inf"), None, 1.0),
        (deletion_cost("NaN"), None, 1.0),
        (deletion_cost(" 5"), 2**25, 2.0),
    ],
)
def test_eviction_cost(annotations: dict[str, str], priority: int | None, expected: float) -> None:
    assert eviction_cost(pod(annotations=annotations, priority=priority)) == expected


@pytest.mark.parametrize(
    ("pods", "cost", "empty"),
    [
        ([], 1.0, True),
        ([pod()], 2.0, False),
        ([pod("a"), pod("b")], 3.0, False),
        ([daemon_pod()], 1.0, True),  # daemonsets stay with the node
        ([mirror_pod()], 1.0, True),
        ([pod(phase="Succeeded")], 1.0, True),
        ([pod(phase="Failed")], 1.0, True),
        ([pod(deletion_timestamp="2026-01-01T00:30:00Z")], 1.0, True),  # a ReplicaSet's
        # A terminating StatefulSet pod is not: its replacement starts only once it is gone.
        ([pod(owner="StatefulSet", deletion_timestamp="2026-01-01T00:30:00Z")], 2.0, False),
        ([pod(owner="StatefulSet", phase="Succeeded")], 1.0, True),
        ([daemon_pod(deletion_timestamp="2026-01-01T00:30:00Z")], 1.0, True),
        # Costs clamped to <= 0 still leave the node empty, and never go below the base.
        ([pod(annotations=deletion_cost(str(-(2**27))))], 1.0, True),
        ([pod(priority=-(2**26))], 1.0, True),
        ([pod(priority=-(2**26)), pod("b")], 2.0, False),
        # Any positive cost, however small, makes the node non-empty.
        ([pod(annotations=deletion_cost(str(1 - 2**27)))], 1.0 + 2**-27, False),
        ([pod(priority=2**25), daemon_pod()], 3.0, False),
    ],
)
def test_reschedule_cost_and_emptiness(pods: list[Pod], cost: float, empty: bool) -> None:
    assert reschedule_cost(pods) == cost
    assert is_empty(pods) is empty


def claim(expire_after: str = "10h", created: datetime | None = T0, **kw: Any) -> NodeClaim:
    nc = factories.nodeclaim("n1", expire_after=expire_after, created=stamp(T0), **kw)
    nc.metadata.creation_timestamp = created
    return nc


@pytest.mark.parametrize(
    ("expire_after", "created", "now", "remaining"),
    [
        ("10h", T0, T0, 1.0),
        ("10h", T0, T0 + timedelta(hours=2, minutes=30), 0.75),
        ("10h", T0, T0 + timedelta(hours=10), 0.0),
        ("10h", T0, T0 + timedelta(hours=30), 0.0),
        ("10h", T0, T0 - timedelta(hours=1), 1.0),  # clock skew: clamped
        ("Never", T0, T0 + timedelta(days=400), 1.0),
        ("10h", None, T0, 1.0),
    ],
)
def test_lifetime_remaining(
    expire_after: str, created: datetime | None, now: datetime, remaining: float
) -> None:
    assert lifetime_remaining(claim(expire_after, created), now) == remaining


@pytest.mark.parametrize(
    ("pods", "expire_after", "now", "expected"),
    [
        ([pod("a"), pod("b")], "10h", T0 + timedelta(hours=2, minutes=30), 1.5),
        ([pod("a"), pod("b")], "Never", T0 + timedelta(days=90), 2.0),
        ([pod("a"), pod("b")], "10h", T0 + timedelta(hours=11), 0.0),
        # All the node's pods count here, daemonsets included (upstream's rule).
        ([pod("a"), daemon_pod()], "10h", T0 + timedelta(hours=5), 1.0),
        ([pod("a", priority=2**25)], "Never", T0, 2.0),
        ([], "10h", T0, 0.0),
    ],
)
def test_disruption_cost(
    pods: list[Pod], expire_after: str, now: datetime, expected: float
) -> None:
    assert disruption_cost(pods, claim(expire_after), now) == expected


# ----------------------------------------------------------------------------- building


def labels(pool: str = "default", *, instance_type: str = "m5.large", **kw: Any) -> dict[str, str]:
    return factories.node_labels(pool, instance_type, **kw)


def state_node(
    name: str = "n1",
    *,
    pool: str = "default",
    node_labels: dict[str, str] | None = None,
    node_annotations: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    tgp: str | None = None,
    last_pod_event: datetime | None = None,
    **kw: Any,
) -> StateNode:
    nc = factories.nodeclaim(
        name,
        pool=pool,
        conditions=conditions if conditions is not None else LIFECYCLE,
        termination_grace_period=tgp,
    )
    nc.status.last_pod_event_time = last_pod_event
    return StateNode(
        node=factories.node(
            name,
            labels=node_labels if node_labels is not None else labels(pool),
            annotations=node_annotations,
        ),
        nodeclaim=nc,
        **kw,
    )


def snapshot(
    nodes: list[StateNode],
    pods: dict[str, list[Pod]] | None = None,
    *,
    pdbs: Sequence[PodDisruptionBudget] = (),
    nodepools: list[NodePool] | None = None,
) -> Snapshot:
    pools = nodepools if nodepools is not None else [factories.nodepool("default")]
    return Snapshot(
        now=NOW,
        nodes=tuple(nodes),
        pods_by_node={k: tuple(v) for k, v in (pods or {}).items()},
        pending=(),
        reschedulable=(),
        nodepools={np.metadata.name: np for np in pools},
        daemonsets=(),
        namespace_labels={},
        pdbs={p.key: p for p in pdbs},
    )


def pdb(name: str, allowed: int, namespace: str = "shop", app: str = "web") -> PodDisruptionBudget:
    return factories.pdb(name, {"app": app}, namespace=namespace, disruptions_allowed=allowed)


WEB = {"app": "web"}
UNINITIALIZED = {k: v for k, v in labels().items() if k != LABEL_NODE_INITIALIZED}
NO_POOL_LABEL = {k: v for k, v in labels().items() if k != LABEL_NODEPOOL}


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (
            StateNode(node=factories.node("n1"), nodeclaim=None),
            "not managed by Karpenter (no NodeClaim)",
        ),
        (  # a NodePool label is no NodeClaim
            StateNode(node=factories.node("n1", labels=labels()), nodeclaim=None),
            "node has a karpenter.sh/nodepool label but no NodeClaim (never disrupted)",
        ),
        (
            StateNode(node=None, nodeclaim=factories.nodeclaim("n1")),
            "NodeClaim has no Node yet (still launching or registering)",
        ),
        (state_node(node_labels=UNINITIALIZED), "node is not initialized yet"),
        (state_node(marked_for_deletion=True), "node is already being deleted"),
        (state_node(nominated=True), "node is nominated for pending pods"),
        (
            state_node(node_annotations={"karpenter.sh/do-not-disrupt": "true"}),
            'node has annotation karpenter.sh/do-not-disrupt: "true"',
        ),
        (state_node(node_labels=NO_POOL_LABEL), "node has no karpenter.sh/nodepool label"),
        (state_node(pool="gone"), "NodePool 'gone' not found"),
    ],
)
def test_node_level_reasons(node: StateNode, expected: str) -> None:
    candidates, reasons = build_candidates(snapshot([node]), TYPES, now=NOW)
    assert candidates == []
    assert reasons == {"n1": expected}


def test_node_do_not_disrupt_other_values_do_not_block() -> None:
    node = state_node(node_annotations={"karpenter.sh/do-not-disrupt": "false"})
    candidates, reasons = build_candidates(snapshot([node]), TYPES, now=NOW)
    assert [c.name for c in candidates] == ["n1"]
    assert reasons == {}


@pytest.mark.parametrize("key", ["n1", "n1-claim", "kwok://n1"])
def test_queued_nodes_are_not_candidates(key: str) -> None:
    node = StateNode(
        node=factories.node("n1", labels=labels()),
        nodeclaim=factories.nodeclaim("n1-claim", node_name="n1", conditions=LIFECYCLE),
    )
    _, reasons = build_candidates(snapshot([node]), TYPES, now=NOW, queued={key})
    assert reasons == {"n1": "node is already queued for disruption"}


DND = {"karpenter.sh/do-not-disrupt": "true"}


def dnd(value: str) -> dict[str, str]:
    return {"karpenter.sh/do-not-disrupt": value}


@pytest.mark.parametrize(
    ("pods", "pdbs", "expected"),
    [
        ([], [], None),
        (
            [pod("db-0", namespace="shop", annotations=DND)],
            [],
            'pod shop/db-0 has annotation karpenter.sh/do-not-disrupt: "true"',
        ),
        # Only active pods protect their node; daemonset and mirror pods do too.
        ([pod("db-0", annotations=DND, phase="Succeeded")], [], None),
        ([pod("db-0", annotations=DND, deletion_timestamp="2026-01-01T00:30:00Z")], [], None),
        (
            [daemon_pod(annotations=DND)],
            [],
            'pod default/ds has annotation karpenter.sh/do-not-disrupt: "true"',
        ),
        ([pod("db-0", annotations={"karpenter.sh/do-not-disrupt": "false"})], [], None),
        # A duration protects the pod while it has run less than that long (NOW is 01:00)...
        (
            [pod("db-0", annotations=dnd("30m"), start_time="2026-01-01T00:50:00Z")],
            [],
            'pod default/db-0 has annotation karpenter.sh/do-not-disrupt: "30m" '
            "(protected until 01:20:00 UTC)",
        ),
        ([pod("db-0", annotations=dnd("30m"), start_time="2026-01-01T00:30:00Z")], [], None),
        ([pod("db-0", annotations=dnd("59m59s"), start_time="2026-01-01T00:00:00Z")], [], None),
        # ...and, failing safe, while it has not started.
        (
            [pod("db-0", annotations=dnd("30m"))],
            [],
            'pod default/db-0 has annotation karpenter.sh/do-not-disrupt: "30m" '
            "(the pod has not started)",
        ),
        # Values that are neither "true" nor a positive duration protect nothing.
        ([pod("db-0", annotations=dnd("soon"), start_time="2026-01-01T00:50:00Z")], [], None),
        ([pod("db-0", annotations=dnd("-5m"), start_time="2026-01-01T00:50:00Z")], [], None),
        ([pod("db-0", annotations=dnd("0"))], [], None),
        (
            [pod("web-1", namespace="shop", labels=WEB)],
            [pdb("web", 0)],
            "PDB shop/web allows 0 disruptions (it covers pod shop/web-1)",
        ),
        ([pod("web-1", namespace="shop", labels=WEB)], [pdb("web", 1)], None),
        ([pod("web-1", namespace="other", labels=WEB)], [pdb("web", 0)], None),  # other namespace
        ([pod("api-1", namespace="shop", labels={"app": "api"})], [pdb("web", 0)], None),
        # Pods that will not be evicted cannot be blocked by a PDB.
        ([pod("web-1", namespace="shop", labels=WEB, phase="Failed")], [pdb("web", 0)], None),
        ([mirror_pod(namespace="shop", labels=WEB)], [pdb("web", 0)], None),
        (
            [pod("web-1", namespace="shop", labels=WEB)],
            [pdb("web", 5), pdb("web-too", 5)],
            "pod shop/web-1 is covered by 2 PDBs (shop/web, shop/web-too); eviction supports only one",
        ),
    ],
)
def test_pod_level_reasons(
    pods: list[Pod], pdbs: list[PodDisruptionBudget], expected: str | None
) -> None:
    snap = snapshot([state_node()], {"n1": pods}, pdbs=pdbs)
    assert pod_block(pods, snap) == expected
    candidates, reasons = build_candidates(snap, TYPES, now=NOW)
    assert reasons == ({} if expected is None else {"n1": expected})
    assert len(candidates) == (1 if expected is None else 0)


def test_pod_block_takes_a_candidate() -> None:
    snap = snapshot([state_node()], {"n1": [daemon_pod(annotations=DND)]})
    candidate = make_candidate(state_node(), factories.nodepool(), TYPES, [], NOW)
    # The candidate's own pods exclude daemonsets; the snapshot's node pods do not.
    assert (
        pod_block(candidate, snap)
        == 'pod default/ds has annotation karpenter.sh/do-not-disrupt: "true"'
    )


@pytest.mark.parametrize(
    ("eventual", "tgp", "candidate"),
    [
        (False, None, False),
        (False, "1h", False),
        (True, None, False),
        (True, "1h", True),  # drift with a terminationGracePeriod ignores pod blocks
    ],
)
def test_eventual_class_waives_pod_blocks_with_tgp(
    eventual: bool, tgp: str | None, candidate: bool
) -> None:
    pods = [pod("db-0", namespace="shop", annotations=DND)]
    snap = snapshot([state_node(tgp=tgp)], {"n1": pods})
    candidates, reasons = build_candidates(snap, TYPES, now=NOW, eventual=eventual)
    assert [c.name for c in candidates] == (["n1"] if candidate else [])
    assert reasons == (
        {}
        if candidate
        else {"n1": 'pod shop/db-0 has annotation karpenter.sh/do-not-disrupt: "true"'}
    )


def test_node_level_blocks_are_not_waived() -> None:
    snap = snapshot([state_node(tgp="1h", nominated=True)])
    _, reasons = build_candidates(snap, TYPES, now=NOW, eventual=True)
    assert reasons == {"n1": "node is nominated for pending pods"}


@pytest.mark.parametrize(
    ("node_labels", "instance_type", "capacity_type", "zone", "price"),
    [
        (labels(), "m5.large", "on-demand", "test-zone-a", 0.096),
        (labels(capacity_type="spot"), "m5.large", "spot", "test-zone-a", 0.035),
        (labels(zone="test-zone-b"), "m5.large", "on-demand", "test-zone-b", 0.1),
        (labels(zone="test-zone-c"), "m5.large", "on-demand", "test-zone-c", 0.0),  # no offering
        (labels(zone="test-zone-d"), "m5.large", "on-demand", "test-zone-d", 0.0),  # NaN price
        (labels(instance_type="c5.xlarge"), "", "on-demand", "test-zone-a", 0.0),  # unknown type
        ({**labels(), LABEL_CAPACITY_TYPE: ""}, "m5.large", "", "test-zone-a", 0.0),
    ],
)
def test_candidate_price_and_labels(
    node_labels: dict[str, str], instance_type: str, capacity_type: str, zone: str, price: float
) -> None:
    candidates, _ = build_candidates(
        snapshot([state_node(node_labels=node_labels)]), TYPES, now=NOW
    )
    (c,) = candidates
    assert (c.instance_type_name, c.capacity_type, c.zone, c.price) == (
        instance_type,
        capacity_type,
        zone,
        price,
    )


def test_reserved_offering_matches_the_nodes_reservation() -> None:
    it = make_instance_type(
        name="m5.large",
        requirements={},
        capacity={},
        offerings=[
            Offering(
                "test-zone-a",
                "reserved",
                0.02,
                labels={"karpenter.k8s.aws/capacity-reservation-id": "cr-1"},
            ),
            Offering(
                "test-zone-a",
                "reserved",
                0.05,
                labels={"karpenter.k8s.aws/capacity-reservation-id": "cr-2"},
            ),
        ],
    )
    node_labels = {
        **labels(capacity_type="reserved"),
        "karpenter.k8s.aws/capacity-reservation-id": "cr-2",
    }
    candidates, _ = build_candidates(
        snapshot([state_node(node_labels=node_labels)]), {"default": [it]}, now=NOW
    )
    assert candidates[0].price == 0.05


def test_candidate_pods_and_cost() -> None:
    pods = [pod("a"), pod("b", priority=2**25), daemon_pod(), pod("done", phase="Succeeded")]
    snap = snapshot([state_node()], {"n1": pods})
    (c,) = build_candidates(snap, TYPES, now=T0 + timedelta(hours=360))[0]
    assert [p.name for p in c.pods] == ["a", "b"]
    # All four pods cost 1 + 2 + 1 + 1 = 5, halfway through a 720h life.
    assert c.disruption_cost == 2.5
    assert c.nodepool.metadata.name == "default"
    assert c.nodeclaim_name == "n1"


def test_build_candidates_keeps_snapshot_order_and_explains_the_rest() -> None:
    nodes = [
        state_node("n3"),
        StateNode(node=factories.node("other"), nodeclaim=None),
        state_node("n1"),
        state_node("n2", marked_for_deletion=True),
    ]
    candidates, reasons = build_candidates(snapshot(nodes), TYPES, now=NOW)
    assert [c.name for c in candidates] == ["n3", "n1"]
    assert reasons == {
        "other": "not managed by Karpenter (no NodeClaim)",
        "n2": "node is already being deleted",
    }


# ----------------------------------------------------------------------------- method filters


def nodepool(**disruption: Any) -> NodePool:
    return factories.nodepool("default", disruption=disruption or None)


def candidate(
    np: NodePool | None = None,
    pods: Sequence[Pod] = (),
    *,
    node_labels: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    last_pod_event: datetime | None = None,
) -> Candidate:
    node = state_node(
        node_labels=node_labels,
        conditions=conditions if conditions is not None else [*LIFECYCLE, cond("Consolidatable")],
        last_pod_event=last_pod_event,
    )
    return make_candidate(node, np or nodepool(), TYPES, pods, NOW)


def static_pool() -> NodePool:
    np = nodepool()
    np.spec.replicas = 3
    return np


NOT_CONSOLIDATABLE = [*LIFECYCLE, cond("Consolidatable", "False")]


@pytest.mark.parametrize(
    ("cand", "expected"),
    [
        (candidate(), "node is empty: only emptiness deletes it"),  # emptiness owns empty nodes
        (candidate(pods=[pod()]), None),
        (candidate(static_pool()), "NodePool 'default' is static (spec.replicas is set)"),
        (
            candidate(node_labels={k: v for k, v in labels().items() if k != LABEL_INSTANCE_TYPE}),
            "node has no node.kubernetes.io/instance-type label",
        ),
        (
            candidate(node_labels={k: v for k, v in labels().items() if k != LABEL_CAPACITY_TYPE}),
            "node has no karpenter.sh/capacity-type label",
        ),
        (
            candidate(node_labels={k: v for k, v in labels().items() if k != LABEL_TOPOLOGY_ZONE}),
            "node has no topology.kubernetes.io/zone label",
        ),
        (
            candidate(node_labels=labels(instance_type="c5.xlarge")),
            "instance type c5.xlarge is not offered by NodePool 'default'",
        ),
        (
            candidate(node_labels=labels(zone="test-zone-c", capacity_type="spot")),
            "no spot offering of m5.large in test-zone-c to price the node with",
        ),
        (
            candidate(node_labels=labels(zone="test-zone-d")),
            "the on-demand price of m5.large in test-zone-d is unknown",
        ),
        (
            candidate(nodepool(consolidateAfter="Never")),
            "NodePool 'default' has consolidateAfter: Never (consolidation is off)",
        ),
        (
            candidate(nodepool(consolidationPolicy="WhenEmpty"), [pod("a"), pod("b")]),
            "NodePool 'default' has consolidationPolicy WhenEmpty and the node is not empty "
            "(2 pods to move)",
        ),
        (
            candidate(nodepool(consolidationPolicy="WhenEmpty")),
            "node is empty: only emptiness deletes it",
        ),
        (
            candidate(nodepool(consolidationPolicy="WhenEmpty"), [daemon_pod()]),
            "node is empty: only emptiness deletes it",
        ),
        (candidate(nodepool(consolidationPolicy="Balanced"), [pod()]), None),
        (
            candidate(
                nodepool(consolidateAfter="30s"),
                [pod()],
                conditions=NOT_CONSOLIDATABLE,
                last_pod_event=NOW - timedelta(seconds=12),
            ),
            "consolidateAfter 30s not yet passed since last pod event "
            "(consolidatable at 01:00:18 UTC, in 18s)",
        ),
        (
            candidate(nodepool(consolidateAfter="2h"), [pod()], conditions=NOT_CONSOLIDATABLE),
            "consolidateAfter 2h not yet passed since initialization "
            "(consolidatable at 02:00:00 UTC, in 3600s)",
        ),
        (
            candidate(nodepool(consolidateAfter="30m"), [pod()], conditions=NOT_CONSOLIDATABLE),
            "consolidateAfter 30m has passed since initialization but the NodeClaim is not "
            "Consolidatable yet",
        ),
        (
            candidate(pods=[pod()], conditions=[cond("Launched"), cond("Registered")]),
            "NodeClaim is not Consolidatable yet",
        ),
        # No Consolidatable condition at all means "not yet", whatever the clock says.
        (
            candidate(nodepool(consolidateAfter="30m"), [pod()], conditions=LIFECYCLE),
            "consolidateAfter 30m has passed since initialization but the NodeClaim is not "
            "Consolidatable yet",
        ),
    ],
)
def test_consolidation_block(cand: Candidate, expected: str | None) -> None:
    assert consolidation_block(cand, NOW) == expected


@pytest.mark.parametrize(
    ("cand", "expected"),
    [
        (candidate(), None),
        (candidate(pods=[daemon_pod()]), None),
        # Price does not matter for deleting an empty node, nor does the policy.
        (candidate(node_labels=labels(instance_type="c5.xlarge")), None),
        (candidate(nodepool(consolidationPolicy="WhenEmpty")), None),
        (candidate(pods=[pod()]), "node is not empty (1 pod to move)"),
        (candidate(static_pool()), "NodePool 'default' is static (spec.replicas is set)"),
        (
            candidate(nodepool(consolidateAfter="Never")),
            "NodePool 'default' has consolidateAfter: Never (consolidation is off)",
        ),
        (
            candidate(
                nodepool(consolidateAfter="5m"),
                conditions=NOT_CONSOLIDATABLE,
                last_pod_event=NOW - timedelta(minutes=1),
            ),
            "consolidateAfter 5m not yet passed since last pod event "
            "(consolidatable at 01:04:00 UTC, in 240s)",
        ),
    ],
)
def test_emptiness_block(cand: Candidate, expected: str | None) -> None:
    assert emptiness_block(cand, NOW) == expected


DRIFTED = [*LIFECYCLE, cond("Drifted")]


@pytest.mark.parametrize(
    ("cand", "static", "expected"),
    [
        (candidate(conditions=DRIFTED), False, None),
        (candidate(), False, "NodeClaim is not drifted"),
        (
            candidate(conditions=[*LIFECYCLE, cond("Drifted", "False")]),
            False,
            "NodeClaim is not drifted",
        ),
        # Drift needs no price: unknown instance types are still replaced.
        (candidate(conditions=DRIFTED, node_labels=labels(instance_type="c5.xlarge")), False, None),
        (
            candidate(static_pool(), conditions=DRIFTED),
            False,
            "NodePool 'default' is static (spec.replicas is set); static drift replaces its nodes",
        ),
        (candidate(static_pool(), conditions=DRIFTED), True, None),
        (candidate(conditions=DRIFTED), True, "NodePool 'default' is not static"),
    ],
)
def test_drift_block(cand: Candidate, static: bool, expected: str | None) -> None:
    assert drift_block(cand, static=static) == expected


# ----------------------------------------------------------------------------- ordering


def priced(name: str, price: float, pods: int, drifted_at: datetime | None = None) -> Candidate:
    conditions = LIFECYCLE if drifted_at is None else [*LIFECYCLE, cond("Drifted", when=drifted_at)]
    node = state_node(name, conditions=conditions)
    base = make_candidate(node, nodepool(), TYPES, [pod(f"{name}-{i}") for i in range(pods)], NOW)
    return replace(base, price=price)


def test_savings_ratio() -> None:
    assert savings_ratio(priced("a", 0.3, 2)) == pytest.approx(0.1)  # 0.3 / (1 + 2)
    assert savings_ratio(priced("b", 0.5, 0)) == 0.5


def test_order_for_consolidation() -> None:
    cands = [
        priced("cheap-busy", 0.1, 9),  # 0.01
        priced("pricey-idle", 0.8, 1),  # 0.4
        priced("unknown", 0.0, 0),  # 0.0
        priced("mid", 0.4, 3),  # 0.1
        priced("mid-twin", 0.4, 3),  # 0.1, tie broken by name
        priced("pricey-busy", 0.8, 7),  # 0.1
    ]
    assert [c.name for c in order_for_consolidation(cands)] == [
        "pricey-idle",
        "mid",
        "mid-twin",
        "pricey-busy",
        "cheap-busy",
        "unknown",
    ]


def test_order_for_drift() -> None:
    cands = [
        priced("busy-old", 0.1, 2, drifted_at=T0 - timedelta(hours=5)),
        priced("empty-new", 0.1, 0, drifted_at=T0),
        priced("busy-new", 0.1, 1, drifted_at=T0),
        priced("not-drifted", 0.1, 0),
        priced("empty-old", 0.1, 0, drifted_at=T0 - timedelta(hours=1)),
        priced("busy-older", 0.1, 1, drifted_at=T0 - timedelta(days=1)),
    ]
    assert [c.name for c in order_for_drift(cands)] == [
        "empty-old",
        "empty-new",
        "not-drifted",
        "busy-older",
        "busy-old",
        "busy-new",
    ]
