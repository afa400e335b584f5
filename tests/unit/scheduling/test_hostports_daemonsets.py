"""Host port conflicts and DaemonSet overhead on new NodeClaims."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.model.core import Pod
from karpenter_py.state.ingest import daemonset_template
from tests import factories
from tests.unit.scheduling._helpers import (
    by_pod,
    claim_of,
    error_of,
    existing,
    itype,
    make_node,
    pod,
    pool,
    run,
    taint,
)

TYPES = [itype("small", 2, 4), itype("medium", 4, 8), itype("large", 8, 16)]


def with_ports(
    name: str,
    *ports: tuple[int, str, str],
    cpu: str = "100m",
    owner: str | None = None,
    **kw: Any,
) -> Pod:
    container_ports = [
        {"containerPort": p, "hostPort": p, "protocol": proto, **({"hostIP": ip} if ip else {})}
        for p, proto, ip in ports
    ]
    container = {"name": "app", "resources": {"requests": {"cpu": cpu}}, "ports": container_ports}
    return factories.pod(
        name,
        uid=f"uid-{name}",
        owner=owner,
        owner_name=name,
        phase="",
        created="",
        containers=[container],
        **kw,
    )


# ----------------------------------------------------------------------------- host ports


@pytest.mark.parametrize(
    ("a", "b", "same_node"),
    [
        ((8080, "TCP", ""), (8080, "TCP", ""), False),
        ((8080, "TCP", ""), (8080, "UDP", ""), True),
        ((8080, "TCP", ""), (8081, "TCP", ""), True),
        ((8080, "TCP", "10.0.0.1"), (8080, "TCP", "10.0.0.2"), True),
        ((8080, "TCP", "10.0.0.1"), (8080, "TCP", "10.0.0.1"), False),
        ((8080, "TCP", "0.0.0.0"), (8080, "TCP", "10.0.0.2"), False),
    ],
)
def test_host_port_conflicts_on_new_nodes(a, b, same_node):
    plan = run([with_ports("a", a), with_ports("b", b)], types=TYPES)
    assert not plan.errors
    placements = by_pod(plan)
    assert (placements["a"] == placements["b"]) is same_node


def test_host_port_conflict_on_existing_node():
    user = with_ports("user", (9000, "TCP", ""))
    node = existing(make_node("n1", cpu="8"), [user])
    plan = run(
        [with_ports("clash", (9000, "TCP", "")), with_ports("fine", (9001, "TCP", ""))],
        existing=[node],
        types=TYPES,
    )
    placements = by_pod(plan)
    assert placements["fine"] == "node/n1"
    assert placements["clash"].startswith("claim-")


def test_many_pods_with_the_same_host_port_get_a_node_each():
    plan = run([with_ports(f"p{i}", (53, "UDP", "")) for i in range(4)], types=TYPES)
    assert len(plan.new_node_claims) == 4


# ----------------------------------------------------------------------------- daemonsets


def ds(
    name: str, cpu: str = "1", *, ports: tuple[tuple[int, str, str], ...] = (), **spec: Any
) -> Pod:
    """A DaemonSet's pod (the DaemonSet named as the pod)."""
    if ports:
        return with_ports(name, *ports, cpu=cpu, owner="DaemonSet", **spec)
    return pod(name, cpu, None, owner="DaemonSet", **spec)


def test_daemonset_overhead_pushes_the_choice_to_a_larger_type():
    workload = [pod("p", "1500m", None)]
    assert claim_of(run(workload, types=TYPES), "p").instance_type.name == "small"
    plan = run(workload, types=TYPES, daemonsets=[ds("agent", "1")])
    nc = claim_of(plan, "p")
    assert nc.instance_type.name == "medium"
    assert nc.requests["cpu"] == 2500  # the pod plus the daemonset
    assert [it.name for it in nc.instance_types] == ["medium", "large"]


def test_daemonset_overhead_is_reserved_once_per_node():
    plan = run(
        [pod(f"p{i}", "500m", None) for i in range(4)], types=TYPES, daemonsets=[ds("agent", "1")]
    )
    assert len(plan.new_node_claims) == 1
    nc = plan.new_node_claims[0]
    assert nc.requests["cpu"] == 4 * 500 + 1000
    assert nc.instance_type.name == "medium"


@pytest.mark.parametrize(
    ("daemonset", "expected_type"),
    [
        (ds("no-toleration"), "small"),
        (ds("tolerates", tolerations=[{"key": "dedicated", "operator": "Exists"}]), "medium"),
        (ds("tolerates-all", tolerations=[{"operator": "Exists"}]), "medium"),
        (ds("wrong-toleration", tolerations=[{"key": "other", "operator": "Exists"}]), "small"),
    ],
)
def test_daemonset_must_tolerate_pool_taints_to_count(daemonset, expected_type):
    tainted = pool(taints=[taint("dedicated")])
    p = pod("p", "1500m", None, tolerations=[{"key": "dedicated", "operator": "Exists"}])
    plan = run([p], pools=[tainted], types=TYPES, daemonsets=[daemonset])
    assert claim_of(plan, "p").instance_type.name == expected_type


def test_daemonset_ignores_prefer_no_schedule_taints():
    soft = pool(taints=[taint("soft", "PreferNoSchedule")])
    plan = run([pod("p", "1500m", None)], pools=[soft], types=TYPES, daemonsets=[ds("agent")])
    assert claim_of(plan, "p").instance_type.name == "medium"


def test_daemonset_startup_taints_do_not_exclude_it():
    pools = [pool(startup_taints=[taint("agent-not-ready")])]
    plan = run([pod("p", "1500m", None)], pools=pools, types=TYPES, daemonsets=[ds("agent")])
    assert claim_of(plan, "p").instance_type.name == "medium"


@pytest.mark.parametrize(
    ("spec", "counted"),
    [
        ({"nodeSelector": {"kubernetes.io/arch": "arm64"}}, False),
        ({"nodeSelector": {"kubernetes.io/arch": "amd64"}}, True),
        ({"nodeSelector": {"karpenter.sh/initialized": "true"}}, True),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/arch",
                                            "operator": "In",
                                            "values": ["arm64"],
                                        }
                                    ]
                                },
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/os",
                                            "operator": "In",
                                            "values": ["linux"],
                                        }
                                    ]
                                },
                            ]
                        }
                    }
                }
            },
            True,
        ),
    ],
)
def test_daemonset_node_requirements_decide_whether_it_counts(spec, counted):
    plan = run([pod("p", "1500m", None)], types=TYPES, daemonsets=[ds("agent", **spec)])
    assert claim_of(plan, "p").instance_type.name == ("medium" if counted else "small")


def test_daemonset_overhead_per_instance_type():
    """A daemonset that only runs on 'small' nodes does not shrink the other types: the claim's
    reservation is the smallest overhead over its remaining options."""
    only_small = ds("agent", "1", nodeSelector={"node.kubernetes.io/instance-type": "small"})
    plan = run([pod("p", "1500m", None)], types=TYPES, daemonsets=[only_small])
    nc = claim_of(plan, "p")
    assert nc.instance_type.name == "medium"
    assert nc.requests["cpu"] == 1500


def test_daemonset_too_big_for_every_type_makes_pods_unschedulable():
    plan = run([pod("p", "1", None)], types=TYPES, daemonsets=[ds("hog", "8")])
    reason = error_of(plan, "p")
    assert "daemonset overhead" in reason


def test_daemonset_host_ports_conflict_with_pod_host_ports():
    agent = ds("exporter", "100m", ports=((9100, "TCP", ""),))
    plan = run([with_ports("p", (9100, "TCP", ""))], types=TYPES, daemonsets=[agent])
    assert "9100" in error_of(plan, "p")


def test_daemonset_host_ports_only_block_types_it_runs_on():
    types = [itype("amd", 2, 4, price=0.1), itype("arm", 2, 4, arch="arm64", price=0.2)]
    agent = ds(
        "exporter", "100m", ports=((9100, "TCP", ""),), nodeSelector={"kubernetes.io/arch": "amd64"}
    )
    # q is too big to share p's node, so it shows which type an unconstrained pod gets
    plan = run(
        [with_ports("p", (9100, "TCP", ""), cpu="500m"), pod("q", "1800m")],
        types=types,
        daemonsets=[agent],
    )
    assert claim_of(plan, "p").instance_type.name == "arm"
    assert claim_of(plan, "q").instance_type.name == "amd"


# ----------------------------------------------------------------------------- limits-only daemonsets


def daemonset_obj(resources: dict[str, Any], *, init: bool = False) -> dict[str, Any]:
    """A DaemonSet as the API server returns it: its template is never defaulted, so a limit
    without a request stays that way."""
    box = {"name": "agent", "image": "agent", "resources": resources}
    spec: dict[str, Any] = {"containers": [box]}
    if init:
        spec = {"containers": [{"name": "main", "image": "agent"}], "initContainers": [box]}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-uid"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec},
        },
    }


@pytest.mark.parametrize(
    ("resources", "init", "expected"),
    [
        ({"limits": {"cpu": "1", "memory": "1Gi"}}, False, {"cpu": 1000, "memory": 2**30}),
        ({"requests": {"cpu": "250m"}, "limits": {"cpu": "1"}}, False, {"cpu": 250}),
        (
            {"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            False,
            {"cpu": 250, "memory": 512 * 2**20},
        ),
        ({"limits": {"cpu": "3"}}, True, {"cpu": 3000}),
        ({"limits": {"example.com/dongle": "2"}}, False, {"example.com/dongle": 2}),
        ({}, False, {}),
    ],
)
def test_daemonset_template_limits_reserve_as_requests(resources, init, expected):
    template = daemonset_template(daemonset_obj(resources, init=init))
    assert template.is_daemonset_pod()
    assert dict(template.requests) == {**expected, "pods": 1}


@pytest.mark.parametrize(
    ("pod_cpu", "ds_limit", "expected_type", "claim_cpu"),
    [
        ("500m", "1", "small", 1500),  # 2 cpu holds both
        ("1500m", "1", "medium", 2500),  # small cannot hold both
        ("3500m", "1", "large", 4500),
        ("500m", "7500m", "large", 8000),
    ],
)
def test_limits_only_daemonset_overhead_sizes_the_node(pod_cpu, ds_limit, expected_type, claim_cpu):
    agent = daemonset_template(daemonset_obj({"limits": {"cpu": ds_limit}}))
    plan = run([pod("p", pod_cpu, None)], types=TYPES, daemonsets=[agent])
    nc = claim_of(plan, "p")
    assert nc.instance_type.name == expected_type
    assert nc.requests["cpu"] == claim_cpu


def test_limits_only_daemonset_that_leaves_no_room_makes_the_pod_unschedulable():
    agent = daemonset_template(daemonset_obj({"limits": {"cpu": "7500m", "memory": "1Gi"}}))
    plan = run([pod("p", "1", None), pod("q", "500m", None)], types=TYPES, daemonsets=[agent])
    assert error_of(plan, "p") == (
        'incompatible with every nodepool: nodepool "default": no instance type has enough '
        "resources after daemonset overhead (cpu 1 > largest 500m)"
    )
    nc = claim_of(plan, "q")
    assert nc.instance_type.name == "large"
    assert nc.requests["cpu"] == 8000
    assert nc.requests["memory"] == 2**30


def test_a_daemonset_limit_without_its_request_reserves_the_limit_per_resource():
    """Issue 18's case: ``requests: {cpu: 1}`` and ``limits: {memory: 10000Gi}``. The memory
    limit is its request (as the API server defaults a pod, resource by resource), so no node
    can take the daemonset and pods that would need room beside it stay unschedulable."""
    agent = daemonset_template(
        daemonset_obj({"requests": {"cpu": "1"}, "limits": {"memory": "10000Gi"}})
    )
    assert dict(agent.requests) == {"cpu": 1000, "memory": 10000 * 2**30, "pods": 1}
    plan = run([pod("p", "500m", None)], types=TYPES, daemonsets=[agent])
    assert error_of(plan, "p") == (
        'incompatible with every nodepool: nodepool "default": no instance type holds the '
        "daemonsets alone (memory 10000Gi > largest 16Gi)"
    )
    assert plan.new_node_claims == ()
