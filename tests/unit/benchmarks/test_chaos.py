"""The chaos runner's pure parts: when a run counts as converged, the seeded workload, the
percentiles and the per-scenario summary it writes."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

from benchmarks.chaos import (
    GENERATION_LABEL,
    Listed,
    Workload,
    chaos_nodepool,
    cloud_instance,
    converged,
    drifted_away,
    hostile_bodies,
    ice_offerings,
    percentile,
    sqs_batches,
    summarize,
    table,
)
from benchmarks.invariants import Instance
from karpenter_py.cloudprovider.kwok import KWOK_NODE_LABEL
from karpenter_py.model.labels import AWS_LABEL_INSTANCE_CPU, LABEL_NODEPOOL, TAINT_DISRUPTED_KEY
from tests import factories
from tests.unit.scheduling._helpers import itype

NOT_INITIALIZED = [factories.condition("Launched"), factories.condition("Initialized", "False")]


def running(name: str) -> dict[str, Any]:
    return factories.pod_dict(name, node_name="n")


@pytest.mark.parametrize(
    ("seen", "replicas", "expected"),
    [
        pytest.param(
            Listed([factories.nodeclaim_dict("a")], [], [running("p"), running("q")]),
            2,
            True,
            id="all running, claim initialized",
        ),
        pytest.param(
            Listed(
                [factories.nodeclaim_dict("a")],
                [],
                [running("p"), factories.pod_dict("q", pending=True)],
            ),
            2,
            False,
            id="a pod pending",
        ),
        pytest.param(
            Listed([factories.nodeclaim_dict("a")], [], [running("p")]),
            2,
            False,
            id="a pod not created yet",
        ),
        pytest.param(
            Listed(
                [
                    factories.nodeclaim_dict("a"),
                    factories.nodeclaim_dict("b", conditions=NOT_INITIALIZED),
                ],
                [],
                [running("p")],
            ),
            1,
            False,
            id="a claim still launching",
        ),
        pytest.param(
            Listed(
                [factories.nodeclaim_dict("a", deleting="2026-01-01T00:00:00Z")], [], [running("p")]
            ),
            1,
            False,
            id="a claim being deleted",
        ),
    ],
)
def test_converged(seen: Listed, replicas: int, expected: bool) -> None:
    assert converged(seen, replicas) is expected


NEW = {GENERATION_LABEL: "3"}
INITIALIZED = [factories.condition(t) for t in ("Launched", "Registered", "Initialized")]
DRIFTED = [*INITIALIZED, factories.condition("Drifted", reason="NodePoolDrifted")]
TAINTED = [{"key": TAINT_DISRUPTED_KEY, "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        pytest.param(
            Listed([factories.nodeclaim_dict("a", labels=NEW)], [factories.node_dict("a")], []),
            True,
            id="made from the new template",
        ),
        pytest.param(
            Listed(
                [factories.nodeclaim_dict("a", labels=NEW), factories.nodeclaim_dict("b")], [], []
            ),
            False,
            id="one claim of the old template left",
        ),
        pytest.param(
            Listed([factories.nodeclaim_dict("a", labels=NEW, conditions=DRIFTED)], [], []),
            False,
            id="a new claim found Drifted",
        ),
        pytest.param(
            Listed(
                [factories.nodeclaim_dict("a", labels=NEW)],
                [factories.node_dict("a", taints=TAINTED)],
                [],
            ),
            False,
            id="a node still tainted",
        ),
    ],
)
def test_drifted_away(seen: Listed, expected: bool) -> None:
    assert drifted_away(seen) is expected


def test_the_workload_is_the_seeds() -> None:
    first = Workload.drawn(random.Random("kill-random/0"))
    assert first == Workload.drawn(random.Random("kill-random/0"))
    assert (first.replicas, first.cpu) == (13, "1")
    spec = first.body()["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {LABEL_NODEPOOL: "chaos"}
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "512Mi"}


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([3.0], 95, 3.0),
        ([4.0, 1.0, 3.0, 2.0], 50, 2.0),
        ([4.0, 1.0, 3.0, 2.0], 95, 4.0),
        ([float(i) for i in range(1, 21)], 95, 19.0),
        ([float(i) for i in range(1, 21)], 0, 1.0),
    ],
)
def test_percentile_nearest_rank(values: Sequence[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


def result(scenario: str, converge: float | None, violations: int = 0) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "faults": 1,
        "converge_s": converge,
        "violations": [f"v{i}" for i in range(violations)],
    }


def test_summary_per_scenario_and_table() -> None:
    results = [
        result("a", 2.0),
        result("a", 4.0, violations=2),
        result("a", None, 1),
        result("b", 1.5),
    ]
    summary = summarize(["a", "b"], results)
    assert {k: v for k, v in summary.items() if k != "results"} == {
        "runs": 4,
        "violations": 3,
        "scenarios": [
            {
                "name": "a",
                "runs": 3,
                "faults": 3,
                "violations": 3,
                "converge_p50_s": 2.0,
                "converge_p95_s": 4.0,
            },
            {
                "name": "b",
                "runs": 1,
                "faults": 1,
                "violations": 0,
                "converge_p50_s": 1.5,
                "converge_p95_s": 1.5,
            },
        ],
    }
    assert summary["results"] == results
    assert table(summary).splitlines() == [
        "scenario  runs  faults  violations  p50 s  p95 s",
        "a            3       3           3    2.0    4.0",
        "b            1       1           0    1.5    1.5",
        "total        4                   3              ",
    ]


def test_the_instances_are_the_kwok_nodes_bare_ones_too() -> None:
    nodes = [
        factories.node_dict("a", labels={KWOK_NODE_LABEL: "fake", LABEL_NODEPOOL: "chaos"}),
        factories.node_dict("bare", labels={KWOK_NODE_LABEL: "fake"}),
        factories.node_dict("static", provider_id="aws:///zone/i-1"),
    ]
    assert Listed([], nodes, []).instances() == [
        Instance("kwok://a", "a"),
        Instance("kwok://bare", "bare"),
    ]


def test_the_aws_world_s_instances_are_moto_s_with_their_nodeclaim_tag() -> None:
    nodes = [factories.node_dict("a", labels={KWOK_NODE_LABEL: "fake"})]
    cloud = [
        cloud_instance(
            factories.ec2_instance_dict("i-1", "us-west-2b", {"karpenter.sh/nodeclaim": "c-1"})
        ),
        cloud_instance(factories.ec2_instance_dict("i-2", tags={"Name": "x"})),
    ]
    assert Listed([], nodes, [], cloud).instances() == [
        Instance("aws:///us-west-2b/i-1", "c-1"),
        Instance("aws:///us-west-2a/i-2", ""),
    ]


@pytest.mark.parametrize(
    ("world", "group", "kind", "cpu_key"),
    [
        ("kwok", "karpenter.kwok.sh", "KWOKNodeClass", "karpenter.kwok.sh/instance-cpu"),
        ("aws", "karpenter.k8s.aws", "EC2NodeClass", "karpenter.k8s.aws/instance-cpu"),
    ],
)
def test_the_chaos_pool_is_e2e_s_pool_of_the_world_with_small_types_and_no_consolidation(
    world: Any, group: str, kind: str, cpu_key: str
) -> None:
    pool = chaos_nodepool(world)
    template = pool["spec"]["template"]["spec"]
    assert pool["metadata"] == {"name": "chaos"}
    assert template["nodeClassRef"] == {"group": group, "kind": kind, "name": "default"}
    assert template["requirements"] == [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": cpu_key, "operator": "Lt", "values": ["5"]},
    ]
    assert pool["spec"]["disruption"] == {
        "consolidateAfter": "Never",
        "budgets": [{"nodes": "100%"}],
    }


def test_ice_fails_the_cheapest_small_on_demand_offerings_then_every_one() -> None:
    zones = ("z1", "z2")
    types = [
        itype(name, cpu, 2 * cpu, zones=zones, labels={AWS_LABEL_INSTANCE_CPU: str(cpu)})
        for name, cpu in (("a", 2), ("b", 4), ("big", 8))
    ]
    some, everything = ice_offerings(types, random.Random("aws-ice/0"))
    assert some == {(t, z, "on-demand") for t in ("a", "b") for z in zones}
    assert everything == {(t, z, "on-demand") for t in ("a", "b", "big") for z in zones}


def test_hostile_bodies_hold_the_real_message_once_among_malformed_ones() -> None:
    real = json.dumps({"detail-type": "EC2 Spot Instance Interruption Warning", "id": "real"})
    bodies = hostile_bodies(random.Random("hostile-messages/0"), real, 1000)
    assert len(bodies) == 1000
    assert bodies.count(real) == 1
    again = hostile_bodies(random.Random("hostile-messages/0"), real, 1000)
    # The seed draws the same bodies; only a warning's own id and time are not the seed's.
    assert [len(b) for b in bodies] == [len(b) for b in again]
    assert max(len(b.encode()) for b in bodies) <= 256 * 1024
    assert min(len(b) for b in bodies) >= 1  # SQS refuses an empty body
    assert len(set(bodies)) < 1000  # some sent twice


def test_sqs_batches_keep_the_order_ten_at_most_and_256_kb_together() -> None:
    big = "x" * (200 * 1024)
    bodies = ["a"] * 12 + [big, big, "b"]
    assert sqs_batches(bodies) == [["a"] * 10, ["a", "a", big], [big, "b"]]
