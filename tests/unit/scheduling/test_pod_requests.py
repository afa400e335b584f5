"""Effective pod requests (k8s PodRequests) and what the solver does with them."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.model.core import container_requests, pod_from_dict
from tests.unit.scheduling._helpers import GI, claim_of, error_of, itype, pod, run

MI = 2**20


def c(
    cpu: str | None = None,
    mem: str | None = None,
    *,
    limits: dict[str, str] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    out: dict[str, Any] = {"name": "c", "resources": res}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"containers": [c("500m"), c("250m")]}, {"cpu": 750}, id="containers-sum"),
        pytest.param(
            {"containers": [c("1")], "initContainers": [c("3"), c("2")]},
            {"cpu": 3000},
            id="init-larger-than-sum",
        ),
        pytest.param(
            {"containers": [c("2")], "initContainers": [c("1")]}, {"cpu": 2000}, id="init-smaller"
        ),
        pytest.param(
            {"containers": [c("1")], "initContainers": [c("500m", sidecar=True)]},
            {"cpu": 1500},
            id="sidecar-adds-to-containers",
        ),
        pytest.param(
            # peak during init: sidecar (500m) + the 2-cpu init container started after it
            {"containers": [c("1")], "initContainers": [c("500m", sidecar=True), c("2")]},
            {"cpu": 2500},
            id="init-after-sidecar-peaks-with-it",
        ),
        pytest.param(
            # the 2-cpu init runs before the sidecar starts, so it does not stack with it
            {"containers": [c("1")], "initContainers": [c("2"), c("500m", sidecar=True)]},
            {"cpu": 2000},
            id="init-before-sidecar-does-not-stack",
        ),
        pytest.param(
            {"containers": [c("1", "1Gi")], "overhead": {"cpu": "250m", "memory": "64Mi"}},
            {"cpu": 1250, "memory": GI + 64 * MI},
            id="overhead",
        ),
        pytest.param(
            {"containers": [c(limits={"cpu": "2", "memory": "1Gi"})]},
            {"cpu": 2000, "memory": GI},
            id="limits-default-requests",
        ),
        pytest.param(
            {"containers": [c("500m", limits={"cpu": "2", "memory": "1Gi"})]},
            {"cpu": 500, "memory": GI},
            id="requests-win-over-limits-per-resource",
        ),
        pytest.param({"containers": [c()]}, {}, id="no-requests"),
        pytest.param(
            {"containers": [c("500m", "1Gi")], "resources": {"requests": {"cpu": "2"}}},
            {"cpu": 2000, "memory": GI},
            id="pod-level-requests-override-per-resource",
        ),
        pytest.param(
            {"containers": [c("500m")], "resources": {"limits": {"cpu": "3"}}},
            {"cpu": 3000},
            id="pod-level-limits-default-requests",
        ),
        pytest.param(
            {
                "containers": [c("500m", "1Gi")],
                "resources": {"requests": {"memory": "2Gi"}, "limits": {"cpu": "3"}},
            },
            {"cpu": 3000, "memory": 2 * GI},
            id="pod-level-limit-defaults-its-request-beside-other-requests",
        ),
        pytest.param(
            {
                "containers": [c("500m", "1Gi")],
                "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4", "memory": "3Gi"}},
            },
            {"cpu": 1000, "memory": 3 * GI},
            id="pod-level-request-wins-over-its-limit",
        ),
        pytest.param(
            {
                "containers": [
                    {"name": "c", "resources": {"requests": {"hugepages-2Mi": "4Mi"}}},
                ],
                "resources": {"limits": {"hugepages-2Mi": "16Mi", "cpu": "1"}},
            },
            {"cpu": 1000, "hugepages-2Mi": 4 * MI},
            id="pod-level-hugepages-limit-keeps-the-containers-request",
        ),
        pytest.param(
            {
                "containers": [c("500m")],
                "resources": {"limits": {"hugepages-2Mi": "16Mi"}},
            },
            {"cpu": 500, "hugepages-2Mi": 16 * MI},
            id="pod-level-hugepages-limit-without-container-request",
        ),
        pytest.param(
            {
                "containers": [c(limits={"cpu": "1"})],
                "initContainers": [c(limits={"cpu": "2", "memory": "1Gi"})],
            },
            {"cpu": 2000, "memory": GI},
            id="init-limits-default-requests",
        ),
        pytest.param(
            {
                "containers": [c(limits={"cpu": "1"})],
                "initContainers": [c(limits={"cpu": "250m"}, sidecar=True)],
            },
            {"cpu": 1250},
            id="sidecar-limits-default-requests",
        ),
    ],
)
def test_container_requests(spec, expected):
    assert container_requests(spec, "spec") == {**expected, "pods": 1}


def test_pod_requests_are_parsed_once_on_the_pod():
    p = pod_from_dict(
        {
            "metadata": {"name": "p"},
            "spec": {
                "containers": [c("1")],
                "initContainers": [c("250m", sidecar=True), c("3")],
                "overhead": {"cpu": "100m"},
            },
        }
    )
    assert p.requests == {"cpu": 3350, "pods": 1}


TYPES = [itype("c4", 4, 8), itype("c8", 8, 16), itype("c16", 16, 32)]


@pytest.mark.parametrize(
    ("spec", "expected_type"),
    [
        pytest.param({"containers": [c("3")]}, "c4", id="fits-smallest"),
        pytest.param({"containers": [c("1")], "initContainers": [c("6")]}, "c8", id="init-peak"),
        pytest.param(
            {"containers": [c("3")], "initContainers": [c("2", sidecar=True)]}, "c8", id="sidecar"
        ),
        pytest.param(
            {"containers": [c("3900m")], "overhead": {"cpu": "200m"}}, "c8", id="overhead"
        ),
        pytest.param({"containers": [c(limits={"cpu": "12"})]}, "c16", id="limits"),
    ],
)
def test_solver_sizes_nodes_by_effective_requests(spec, expected_type):
    p = pod_from_dict({"metadata": {"name": "p", "uid": "u"}, "spec": spec})
    plan = run([p], types=TYPES)
    assert not plan.errors
    nc = claim_of(plan, "p")
    assert nc.instance_type.name == expected_type
    assert nc.requests["cpu"] == p.requests["cpu"]
    assert nc.requests["pods"] == 1


@pytest.mark.parametrize(
    ("cpu", "mem", "extra", "fragments"),
    [
        ("100", "1Gi", {}, ["cpu 100 > largest 16"]),
        ("1", "100Gi", {}, ["memory 100Gi > largest 32Gi"]),
        ("1", "1Gi", {"nvidia.com/gpu": "1"}, ["nvidia.com/gpu"]),
    ],
)
def test_pod_too_large_for_every_type_is_unschedulable_with_a_resources_reason(
    cpu, mem, extra, fragments
):
    res = {"requests": {"cpu": cpu, "memory": mem, **extra}}
    big = pod_from_dict(
        {
            "metadata": {"name": "big", "uid": "u"},
            "spec": {"containers": [{"name": "c", "resources": res}]},
        }
    )
    plan = run([big, pod("ok")], types=TYPES)
    reason = error_of(plan, "big")
    assert "resources" in reason
    assert 'nodepool "default"' in reason
    for fragment in fragments:
        assert fragment in reason
    assert claim_of(plan, "ok").instance_type.name == "c4"


def test_pods_count_against_the_pods_resource():
    types = [itype("tiny-pods", 8, 16, pods=2)]
    plan = run([pod(f"p{i}") for i in range(5)], types=types)
    assert not plan.errors
    assert sorted(len(nc.pods) for nc in plan.new_node_claims) == [1, 2, 2]
