"""What ``karpenter-py plan`` hands the solver: pods expanded from workloads, pools, capacity."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from karpenter_py.cli.main import main
from tests.unit.cli.conftest import (
    TINY_CATALOG,
    Captured,
    Writer,
    node,
    nodeclaim,
    nodepool,
    pod,
    workload,
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def pending_names(captured: Captured) -> list[str]:
    return [p.key for p in captured.input.pods]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(
            workload("Deployment", "inflate", replicas=3),
            ["default/inflate-0", "default/inflate-1", "default/inflate-2"],
            id="deployment-replicas",
        ),
        pytest.param(workload("Deployment", "one"), ["default/one-0"], id="deployment-default-1"),
        pytest.param(workload("Deployment", "none", replicas=0), [], id="deployment-zero"),
        pytest.param(
            workload("StatefulSet", "db", namespace="shop", replicas=2),
            ["shop/db-0", "shop/db-1"],
            id="statefulset-ordinals",
        ),
        pytest.param(
            workload("ReplicaSet", "rs", replicas=2),
            ["default/rs-0", "default/rs-1"],
            id="replicaset",
        ),
        pytest.param(
            workload("ReplicationController", "rc", replicas=1), ["default/rc-0"], id="rc"
        ),
        pytest.param(workload("Job", "batch"), ["default/batch-0"], id="job-default-parallelism"),
        pytest.param(
            workload("Job", "wide", parallelism=3),
            ["default/wide-0", "default/wide-1", "default/wide-2"],
            id="job-parallelism",
        ),
        pytest.param(
            workload("Job", "capped", parallelism=5, completions=2),
            ["default/capped-0", "default/capped-1"],
            id="job-completions-cap",
        ),
        pytest.param(
            workload("Job", "paused", parallelism=4, suspend=True), [], id="job-suspended"
        ),
        pytest.param(pod("solo"), ["default/solo"], id="pod"),
        pytest.param(pod("bound", nodeName="elsewhere"), [], id="bound-pod-not-pending"),
        pytest.param(
            {**pod("done"), "status": {"phase": "Succeeded"}}, [], id="terminal-pod-skipped"
        ),
        pytest.param(
            {
                **pod("ds-pod"),
                "metadata": {
                    "name": "ds-pod",
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "DaemonSet",
                            "name": "x",
                            "uid": "1",
                            "controller": True,
                        }
                    ],
                },
            },
            [],
            id="daemonset-owned-pod-skipped",
        ),
    ],
)
def test_pending_pods(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    captured: Captured,
    doc: dict[str, object],
    expected: list[str],
) -> None:
    code, _, _ = run(capsys, "-f", write(nodepool(), doc), "--instance-types", catalog_file)
    assert code == 0
    assert pending_names(captured) == expected
    assert all(p.unschedulable for p in captured.input.pods)  # PodScheduled=False Unschedulable


def test_deployment_pods_carry_template_and_controller_labels(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    doc = workload("Deployment", "web", labels={"app": "web", "tier": "front"}, replicas=2)
    assert run(capsys, "-f", write(nodepool(), doc), "--instance-types", catalog_file)[0] == 0
    pods = captured.input.pods
    assert len(pods) == 2
    hashes = {p.labels["pod-template-hash"] for p in pods}
    assert len(hashes) == 1  # one ReplicaSet
    (template_hash,) = hashes
    for p in pods:
        assert p.labels["app"] == "web"
        assert p.labels["tier"] == "front"
        assert p.requests["cpu"] == 500
        assert [(o.kind, o.name, o.controller) for o in p.owners] == [
            ("ReplicaSet", f"web-{template_hash}", True)
        ]


def test_statefulset_and_job_pod_labels(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    docs = (nodepool(), workload("StatefulSet", "db", replicas=2), workload("Job", "migrate"))
    assert run(capsys, "-f", write(*docs), "--instance-types", catalog_file)[0] == 0
    by_name = {p.name: p for p in captured.input.pods}
    assert by_name["db-1"].labels["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert by_name["db-1"].labels["apps.kubernetes.io/pod-index"] == "1"
    assert by_name["migrate-0"].labels["batch.kubernetes.io/job-name"] == "migrate"
    assert by_name["migrate-0"].labels["job-name"] == "migrate"


def test_expansion_is_deterministic(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    path = write(nodepool(), workload("Deployment", "web", replicas=3))
    for _ in range(2):
        assert run(capsys, "-f", path, "--instance-types", catalog_file)[0] == 0
    first, second = ([(p.key, dict(p.labels)) for p in inp.pods] for inp in captured.inputs)
    assert first == second


def test_daemonset_is_overhead_not_pending(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    ds = workload("DaemonSet", "agent", namespace="kube-system")
    assert run(capsys, "-f", write(nodepool(), ds), "--instance-types", catalog_file)[0] == 0
    assert captured.input.pods == ()
    (template,) = captured.input.daemonsets
    assert template.namespace == "kube-system"
    assert template.is_daemonset_pod()
    assert template.requests["cpu"] == 500


def test_nodes_with_bound_pods_are_existing_capacity(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    docs = (
        nodepool(),
        pod("pending"),
        pod("running", nodeName="node-1", cpu="1"),
        node("node-1", cpu="4"),  # bound pod listed before its node: order does not matter
        node("node-2", pool=""),
    )
    assert run(capsys, "-f", write(*docs), "--instance-types", catalog_file)[0] == 0
    inp = captured.input
    assert [p.key for p in inp.pods] == ["default/pending"]
    existing = {e.node.name: e for e in inp.existing}
    assert set(existing) == {"node-1", "node-2"}
    assert [p.key for p in existing["node-1"].pods] == ["default/running"]
    assert existing["node-1"].node_pool == "default"
    assert existing["node-1"].node.allocatable["cpu"] == 4000
    assert existing["node-2"].node_pool == ""
    assert existing["node-2"].pods == ()


def test_pod_bound_to_unknown_node_warns(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    code, _, err = run(
        capsys,
        "-f",
        write(nodepool(), pod("lost", nodeName="ghost")),
        "--instance-types",
        catalog_file,
    )
    assert code == 0
    assert "warning:" in err
    assert "ghost" in err
    assert captured.input.existing == ()


def test_every_pool_gets_the_whole_catalog(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    docs = (nodepool("a"), nodepool("b", weight=50))
    assert run(capsys, "-f", write(*docs), "--instance-types", catalog_file)[0] == 0
    inp = captured.input
    assert [p.name for p in inp.pools] == ["a", "b"]
    assert {p.name: p.weight for p in inp.pools} == {"a": 0, "b": 50}
    names = [r["name"] for r in TINY_CATALOG]
    for pool in ("a", "b"):
        assert [it.name for it in inp.instance_types[pool]] == names


def test_nodepool_template_becomes_pool_template(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    np = nodepool(
        "gpu",
        template_spec={
            "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                {"key": "example.com/tier", "operator": "Exists", "minValues": 1},
            ],
            "taints": [{"key": "gpu", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "boot", "value": "yes", "effect": "NoExecute"}],
        },
        limits={"cpu": "100", "memory": "400Gi"},
    )
    np["spec"]["template"]["metadata"] = {"labels": {"team": "ml"}}  # type: ignore[index]
    assert run(capsys, "-f", write(np), "--instance-types", catalog_file)[0] == 0
    (pool,) = captured.input.pools
    assert pool.name == "gpu"
    assert dict(pool.labels) == {"team": "ml"}
    assert [(r.key, r.operator, r.values, r.min_values) for r in pool.requirements] == [
        ("kubernetes.io/arch", "In", ("amd64",), None),
        ("example.com/tier", "Exists", (), 1),
    ]
    assert [(t.key, t.value, t.effect) for t in pool.taints] == [("gpu", "", "NoSchedule")]
    assert [(t.key, t.value, t.effect) for t in pool.startup_taints] == [
        ("boot", "yes", "NoExecute")
    ]
    assert pool.limits == {"cpu": 100_000, "memory": 400 * 2**30}
    assert pool.node_class_ref == ("karpenter.kwok.sh", "KWOKNodeClass", "default")


def test_ignored_kinds_list_kind_and_empty_documents(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    docs = (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"ports": [{"port": 80}]},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"}},
        "\n",  # an empty document
        nodepool(),
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [pod("from-list-0"), pod("from-list-1", "shop")],
        },
    )
    code, _, err = run(capsys, "-f", write(*docs), "--instance-types", catalog_file)
    assert (code, err) == (0, "")
    assert pending_names(captured) == ["default/from-list-0", "shop/from-list-1"]


def test_several_files_directory_and_stdin(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    captured: Captured,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pools = write(nodepool(), name="pools.yaml")
    write(pod("a"), name="manifests/a.yaml")
    write(pod("b"), name="manifests/b.yml")
    write(pod("z"), name="manifests/notes.txt")  # not a manifest extension: not read
    stdin = "apiVersion: v1\nkind: Pod\nmetadata: {name: c}\nspec: {containers: [{name: x}]}\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    directory = str(Path(pools).parent / "manifests")
    code, _, _ = run(
        capsys, "-f", pools, "-f", directory, "-f", "-", "--instance-types", catalog_file
    )
    assert code == 0
    assert pending_names(captured) == ["default/a", "default/b", "default/c"]


def test_nodeclaims_in_flight_registered_and_unlaunched(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    docs = (
        nodepool(),
        nodeclaim("default-flying"),  # launched, its Node not in the input: in-flight capacity
        nodeclaim("default-landed", node_name="node-1"),  # its Node is given: the Node stands
        node("node-1"),
        nodeclaim("default-planned", launched=False),  # not launched, sized for nothing: no room
        pod("on-the-way", nodeName="default-flying"),
    )
    code, _, err = run(capsys, "-f", write(*docs), "--instance-types", catalog_file)
    assert code == 0
    assert "default-planned" in err
    assert "not launched" in err
    existing = {e.node.name: e for e in captured.input.existing}
    assert set(existing) == {"node-1", "default-flying"}
    flying = existing["default-flying"]
    assert flying.in_flight
    assert not flying.initialized
    assert flying.node_pool == "default"
    assert flying.node.allocatable == {"cpu": 3900, "memory": 7 * 2**30, "pods": 110}
    # Single-valued In requirements become labels; multi-valued ones do not.
    assert flying.node.labels["node.kubernetes.io/instance-type"] == "c-4x-amd64-linux"
    assert flying.node.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert "kubernetes.io/os" not in flying.node.labels
    assert [(t.key, t.value) for t in flying.node.taints] == [("team", "a")]  # no startup taints
    assert [p.key for p in flying.pods] == ["default/on-the-way"]
    assert not existing["node-1"].in_flight


def test_pool_usage_counts_its_nodes(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    other = {**nodepool("other"), "status": {"resources": {"cpu": "3"}}}
    docs = (
        nodepool("default", limits={"cpu": "10"}),
        other,
        node("node-1", cpu="4", memory="16Gi"),
        node("node-2", cpu="2", memory="8Gi"),
        node("unmanaged", pool=""),
    )
    assert run(capsys, "-f", write(*docs), "--instance-types", catalog_file)[0] == 0
    pools = {p.name: p for p in captured.input.pools}
    assert pools["default"].usage == {"nodes": 2, "cpu": 6000, "memory": 24 * 2**30, "pods": 220}
    assert pools["default"].limits == {"cpu": 10_000}
    assert pools["other"].usage == {"cpu": 3000}  # no nodes in the input: status.resources


def test_pool_usage_charges_nodeclaims_not_launched_yet(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    # As the controller's provisioner: a NodeClaim in flight counts against its NodePool's
    # limits at what it was sized for, so a burst cannot overshoot them.
    planned = nodeclaim("default-planned", launched=False)
    planned["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}  # type: ignore[index]
    docs = (nodepool("default", limits={"cpu": "10"}), node("node-1", cpu="4"), planned)
    code, _, err = run(capsys, "-f", write(*docs), "--instance-types", catalog_file)
    assert code == 0
    assert err.count("default-planned") == 1
    (pool,) = captured.input.pools
    assert pool.usage == {"nodes": 2, "cpu": 5000, "memory": 17 * 2**30, "pods": 110}
    existing = {e.node.name: e for e in captured.input.existing}
    assert set(existing) == {"node-1", "default-planned"}
    assert existing["default-planned"].in_flight
    assert existing["default-planned"].node.allocatable == {"cpu": 1000, "memory": 2**30}


MIRROR_ANNOTATION = {"kubernetes.io/config.mirror": "abc"}


@pytest.mark.parametrize(
    ("doc", "pending", "on_node"),
    [
        pytest.param(pod("plain", nodeName="node-1"), [], ["default/plain"], id="bound"),
        pytest.param(
            {
                **pod("static", nodeName="node-1"),
                "metadata": {"name": "static", "annotations": MIRROR_ANNOTATION},
            },
            [],
            ["default/static"],
            id="bound-mirror-pod-uses-capacity",
        ),
        pytest.param(
            {
                **pod("leaving", nodeName="node-1"),
                "metadata": {"name": "leaving", "deletionTimestamp": "2025-01-01T00:00:00Z"},
            },
            [],
            ["default/leaving"],
            id="bound-terminating-pod-still-uses-capacity",
        ),
        pytest.param(
            {**pod("done", nodeName="node-1"), "status": {"phase": "Failed"}},
            [],
            [],
            id="bound-terminal",
        ),
        pytest.param(
            {
                **pod("going"),
                "metadata": {"name": "going", "deletionTimestamp": "2025-01-01T00:00:00Z"},
            },
            [],
            [],
            id="unbound-terminating-skipped",
        ),
    ],
)
def test_which_pods_count(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    captured: Captured,
    doc: dict[str, object],
    pending: list[str],
    on_node: list[str],
) -> None:
    assert (
        run(capsys, "-f", write(nodepool(), node("node-1"), doc), "--instance-types", catalog_file)[
            0
        ]
        == 0
    )
    assert pending_names(captured) == pending
    (existing,) = captured.input.existing
    assert [p.key for p in existing.pods] == on_node


def test_api_list_responses_are_read(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    # What GET /api/v1/pods returns: items without kind/apiVersion.
    items = [
        {k: v for k, v in pod(name).items() if k not in ("kind", "apiVersion")}
        for name in ("a", "b")
    ]
    pod_list = {
        "apiVersion": "v1",
        "kind": "PodList",
        "metadata": {"resourceVersion": "7"},
        "items": items,
    }
    assert run(capsys, "-f", write(nodepool(), pod_list), "--instance-types", catalog_file)[0] == 0
    assert pending_names(captured) == ["default/a", "default/b"]


def test_namespace_labels_reach_the_solver(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str, captured: Captured
) -> None:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "shop", "labels": {"team": "a"}},
    }
    docs = (nodepool(), namespace, pod("a", "shop"), pod("b", "undeclared"))
    assert run(capsys, "-f", write(*docs), "--instance-types", catalog_file)[0] == 0
    assert captured.namespace_labels == [
        {
            "shop": {"team": "a", "kubernetes.io/metadata.name": "shop"},
            "undeclared": {"kubernetes.io/metadata.name": "undeclared"},
        }
    ]
