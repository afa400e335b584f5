"""A cluster-state metrics pass: sync gauges, node count, NodePool usage and limits, and one
``karpenter_pods_state`` series per pod, removed when the pod goes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.manager.statemetrics import StateMetrics, owner_link, run_state_metrics
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod, node_from_dict, pod_from_dict
from karpenter_py.obs.metrics import POD_STATE_LABELS, Metrics
from karpenter_py.state.cluster import KINDS, Cluster
from tests import factories
from tests.unit.obs.exposition import scrape, series, value


def nodepool() -> NodePool:
    return factories.nodepool(
        limits={"cpu": "1000", "memory": "1000Gi"},
        status={
            "resources": {
                "cpu": "3500m",
                "memory": "8Gi",
                "ephemeral-storage": "20Gi",
                "nodes": "1",
            }
        },
    )


def pod(name: str, node: str = "", phase: str = "Pending", owner: str = "web-7d9") -> Pod:
    return factories.pod(
        name,
        namespace="shop",
        uid=f"uid-{name}",
        node_name=node,
        phase=phase,
        owner_name=owner,
        cpu=None,
        memory=None,
    )


def cluster_with_two_pods() -> Cluster:
    cluster = Cluster()
    cluster.upsert_nodepool(nodepool())
    cluster.upsert_node(
        node_from_dict(
            {
                "metadata": {
                    "name": "n1",
                    "labels": {
                        "karpenter.sh/nodepool": "default",
                        "topology.kubernetes.io/zone": "zone-a",
                        "kubernetes.io/arch": "amd64",
                        "karpenter.sh/capacity-type": "spot",
                        "node.kubernetes.io/instance-type": "c-4x-amd64-linux",
                    },
                },
                "spec": {"providerID": "kwok://n1"},
            }
        )
    )
    cluster.upsert_pod(pod("running", node="n1", phase="Running"))
    cluster.upsert_pod(pod("waiting"))
    return cluster


def labels_of(samples: dict[Any, float]) -> dict[str, dict[str, str]]:
    """pods_state series by pod name."""
    out = {}
    for labels, v in series(samples, "karpenter_pods_state").items():
        assert v == 1.0
        d = dict(labels)
        assert set(d) == set(POD_STATE_LABELS)
        out[d["name"]] = d
    return out


def test_a_pass_sets_pod_states_and_nodepool_usage_and_limits() -> None:
    cluster, metrics = cluster_with_two_pods(), Metrics()
    StateMetrics(cluster, metrics, FakeClock()).update()
    s = scrape(metrics)

    pods = labels_of(s)
    assert pods["running"] == {
        "name": "running",
        "namespace": "shop",
        "owner": "/apis/apps/v1/namespaces/shop/replicasets/web-7d9",
        "node": "n1",
        "scheduled": "true",
        "nodepool": "default",
        "zone": "zone-a",
        "arch": "amd64",
        "capacity_type": "spot",
        "instance_type": "c-4x-amd64-linux",
        "phase": "Running",
    }
    assert pods["waiting"] == {
        **dict.fromkeys(POD_STATE_LABELS, ""),
        "name": "waiting",
        "namespace": "shop",
        "owner": "/apis/apps/v1/namespaces/shop/replicasets/web-7d9",
        "scheduled": "false",
        "phase": "Pending",
    }

    usage = {dict(k)["resource_type"]: v for k, v in series(s, "karpenter_nodepools_usage").items()}
    assert usage == {"cpu": 3.5, "memory": 8 * 2**30, "ephemeral_storage": 20 * 2**30, "nodes": 1}
    assert value(s, "karpenter_nodepools_limit", nodepool="default", resource_type="cpu") == 1000
    assert value(s, "karpenter_nodepools_limit", nodepool="default", resource_type="memory") == (
        1000 * 2**30
    )
    assert value(s, "karpenter_cluster_state_node_count") == 1


def test_deleted_pods_lose_their_series_and_changed_pods_move() -> None:
    cluster, metrics = cluster_with_two_pods(), Metrics()
    state = StateMetrics(cluster, metrics, FakeClock())
    state.update()

    cluster.delete_pod("shop/waiting")
    cluster.upsert_pod(pod("running", node="n1", phase="Succeeded"))
    state.update()

    s = scrape(metrics)
    assert set(labels_of(s)) == {"running"}
    assert labels_of(s)["running"]["phase"] == "Succeeded"
    assert len(series(s, "karpenter_pods_state")) == 1


def test_nodepool_series_go_with_the_nodepool() -> None:
    cluster, metrics = cluster_with_two_pods(), Metrics()
    state = StateMetrics(cluster, metrics, FakeClock())
    state.update()
    cluster.delete_nodepool("default")
    state.update()
    s = scrape(metrics)
    assert series(s, "karpenter_nodepools_usage") == {}
    assert series(s, "karpenter_nodepools_limit") == {}


def test_sync_gauges_follow_the_sync_gate() -> None:
    cluster, metrics, clock = Cluster(), Metrics(), FakeClock()
    state = StateMetrics(cluster, metrics, clock)
    state.update()
    clock.step(7.0)
    state.update()
    s = scrape(metrics)
    assert value(s, "karpenter_cluster_state_synced") == 0
    assert value(s, "karpenter_cluster_state_unsynced_time_seconds") == 7.0

    for kind in KINDS:
        cluster.mark_synced(kind)
    state.update()
    s = scrape(metrics)
    assert value(s, "karpenter_cluster_state_synced") == 1
    assert value(s, "karpenter_cluster_state_unsynced_time_seconds") == 0


def test_owner_link_without_owners_is_empty() -> None:
    bare = pod_from_dict({"metadata": {"name": "p"}, "spec": {}})
    assert owner_link(bare) == ""


async def test_the_loop_refreshes_every_interval() -> None:
    cluster, metrics, clock = cluster_with_two_pods(), Metrics(), FakeClock()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(run_state_metrics(cluster, metrics, clock, interval=5.0))
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(series(scrape(metrics), "karpenter_pods_state")) == 2
        cluster.delete_pod("shop/waiting")
        clock.step(5.0)
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(series(scrape(metrics), "karpenter_pods_state")) == 1
        task.cancel()


@pytest.mark.parametrize(
    ("owner", "link"),
    [
        (
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1"},
            "/apis/apps/v1/namespaces/ns/replicasets/web-1",
        ),
        (
            {"apiVersion": "example.com/v1alpha1", "kind": "Workflow", "name": "w"},
            "/apis/example.com/v1alpha1/namespaces/ns/workflows/w",
        ),
        (
            {"kind": "Job", "name": "j"},
            "/apis/batch/v1/namespaces/ns/jobs/j",
        ),  # hand-written: known kinds filled in
    ],
)
def test_owner_link_uses_the_owner_reference_api_version(
    owner: dict[str, str] | None, link: str
) -> None:
    meta: dict[str, object] = {"name": "p", "namespace": "ns", "ownerReferences": [owner]}
    assert owner_link(pod_from_dict({"metadata": meta, "spec": {"containers": []}})) == link
