"""Metrics: upstream names and label names in the exposition, private registries."""

from __future__ import annotations

import re

import pytest

from karpenter_py.obs.metrics import CONTENT_TYPE, POD_STATE_LABELS, Metrics

# name -> label names, as upstream (kubernetes-sigs/karpenter, operatorpkg, controller-runtime).
UPSTREAM: dict[str, tuple[str, ...]] = {
    "karpenter_build_info": ("commit", "goarch", "goversion", "version"),
    "karpenter_nodeclaims_created_total": ("min_values_relaxed", "nodepool", "reason"),
    "karpenter_nodeclaims_terminated_total": ("capacity_type", "nodepool", "zone"),
    "karpenter_nodeclaims_disrupted_total": ("capacity_type", "nodepool", "reason"),
    "karpenter_nodeclaims_unhealthy_disrupted_total": (
        "capacity_type",
        "condition",
        "image_id",
        "nodepool",
    ),
    "karpenter_nodes_created_total": ("nodepool", "zone"),
    "karpenter_nodes_terminated_total": ("nodepool", "zone"),
    "karpenter_nodes_drained_total": ("nodepool",),
    "karpenter_pods_state": tuple(sorted(POD_STATE_LABELS)),
    "karpenter_pods_eviction_requests_total": ("code",),
    "karpenter_pods_drained_total": ("reason",),
    "karpenter_scheduler_queue_depth": ("controller", "scheduling_id"),
    "karpenter_scheduler_unschedulable_pods_count": ("controller",),
    "karpenter_scheduler_ignored_pods_count": (),
    "karpenter_cluster_state_synced": (),
    "karpenter_cluster_state_node_count": (),
    "karpenter_nodepools_usage": ("nodepool", "resource_type"),
    "karpenter_nodepools_limit": ("nodepool", "resource_type"),
    "karpenter_cloudprovider_errors_total": ("controller", "error", "method", "provider"),
    "client_go_request_total": ("code", "method"),
    "workqueue_depth": ("controller", "name"),
    "leader_election_master_status": ("name",),
}
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "karpenter_scheduler_scheduling_duration_seconds": ("controller",),
    "karpenter_cloudprovider_duration_seconds": ("controller", "method", "provider"),
    "client_go_request_duration_seconds": ("group", "kind", "subresource", "verb", "version"),
}

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group("labels") or ""))
        out.setdefault(m.group("name"), []).append((labels, float(m.group("value"))))
    return out


def populate(m: Metrics) -> None:
    m.nodeclaims_created.labels(
        reason="provisioned", nodepool="default", min_values_relaxed="false"
    ).inc()
    m.nodeclaims_terminated.labels(nodepool="default", capacity_type="spot", zone="a").inc()
    m.nodeclaims_disrupted.labels(reason="empty", nodepool="default", capacity_type="spot").inc()
    m.nodeclaims_unhealthy_disrupted.labels(
        condition="ready", nodepool="default", capacity_type="spot", image_id="ami-1"
    ).inc()
    m.nodes_created.labels(nodepool="default", zone="a").inc(2)
    m.nodes_terminated.labels(nodepool="default", zone="a").inc()
    m.nodes_drained.labels(nodepool="default").inc()
    m.pods_state.labels(**dict.fromkeys(POD_STATE_LABELS, "x")).set(1)
    m.pods_eviction_requests.labels(code="200").inc()
    m.pods_drained.labels(reason="Empty").inc()
    m.scheduler_scheduling_duration.labels(controller="provisioner").observe(0.2)
    m.scheduler_queue_depth.labels(controller="provisioner", scheduling_id="1").set(3)
    m.scheduler_unschedulable_pods.labels(controller="provisioner").set(1)
    m.scheduler_ignored_pods.set(0)
    m.cluster_state_synced.set(1)
    m.cluster_state_node_count.set(4)
    m.nodepools_usage.labels(nodepool="default", resource_type="cpu").set(8)
    m.nodepools_limit.labels(nodepool="default", resource_type="cpu").set(1000)
    m.cloudprovider_duration.labels(controller="launch", method="Create", provider="kwok").observe(
        0.1
    )
    m.cloudprovider_errors.labels(
        controller="launch", method="Create", provider="kwok", error="InsufficientCapacityError"
    ).inc()
    m.workqueue_depth.labels(name="termination", controller="termination").set(0)
    m.leader_election_master_status.labels(name="karpenter-leader-election").set(1)
    m.observe_kube_request("update/status", "nodeclaims.karpenter.sh", 200, 0.01)


def test_render_exposes_upstream_names_and_labels():
    m = Metrics(version="1.2.3", commit="abc")
    populate(m)
    payload, content_type = m.render()
    assert content_type == CONTENT_TYPE
    assert content_type.startswith("text/plain")
    got = samples(payload.decode())
    for name, labels in UPSTREAM.items():
        assert name in got, name
        for sample_labels, _ in got[name]:
            assert tuple(sorted(sample_labels)) == labels, name
    for name, labels in HISTOGRAMS.items():
        for suffix in ("_bucket", "_sum", "_count"):
            assert name + suffix in got, name + suffix
        sample_labels, _ = got[name + "_count"][0]
        assert tuple(sorted(sample_labels)) == labels, name


def test_values_and_no_created_series():
    m = Metrics()
    populate(m)
    got = samples(m.render()[0].decode())
    assert got["karpenter_nodes_created_total"] == [({"nodepool": "default", "zone": "a"}, 2.0)]
    assert got["karpenter_cluster_state_node_count"] == [({}, 4.0)]
    # client_golang never exports *_created; neither do we
    assert not [n for n in got if n.endswith("_created")]


def test_build_info_is_one_with_version():
    m = Metrics(version="0.9.0", commit="deadbeef")
    ((labels, value),) = samples(m.render()[0].decode())["karpenter_build_info"]
    assert value == 1.0
    assert labels["version"] == "0.9.0"
    assert labels["commit"] == "deadbeef"
    assert labels["goversion"].startswith("python3.")


def test_every_family_is_namespaced_sensibly():
    names = Metrics().names()
    assert set(UPSTREAM) | set(HISTOGRAMS) <= names
    for name in names:
        assert name.startswith(
            (
                "karpenter_",
                "client_go_",
                "workqueue_",
                "controller_runtime_",
                "leader_election_",
                "process_",
            )
        )
    # client_golang's process collector: memory for the controller dashboard
    assert "process_resident_memory_bytes" in names


def test_registries_are_private():
    a, b = Metrics(), Metrics()
    a.nodes_drained.labels(nodepool="p").inc()
    assert "karpenter_nodes_drained_total{" not in b.render()[0].decode()


def test_kube_request_observer_maps_verbs():
    m = Metrics()
    m.observe_kube_request("evict", "pods", 429, 0.02)
    m.observe_kube_request("list", "nodes", 0, 1.0)
    got = samples(m.render()[0].decode())
    totals = {(s["code"], s["method"]) for s, _ in got["client_go_request_total"]}
    assert totals == {("429", "POST"), ("<error>", "GET")}
    counts = {
        (s["verb"], s["group"], s["kind"], s["subresource"])
        for s, _ in got["client_go_request_duration_seconds_count"]
    }
    assert counts == {("CREATE", "", "pods", "eviction"), ("LIST", "", "nodes", "")}


def test_wrong_labels_are_rejected():
    m = Metrics()
    with pytest.raises(ValueError):
        m.nodeclaims_created.labels(nodepool="x")  # missing reason / min_values_relaxed
