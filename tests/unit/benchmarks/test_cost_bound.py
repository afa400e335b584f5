"""The cost benchmark's LP lower bound on tiny cases worked out by hand, and its workload pods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from benchmarks.cost import BoundError, Workload, _Service, kwok_gpu_catalog, lower_bound, web
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.core import Pod, SelectorRequirement, pod_from_dict
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.inputs import PoolTemplate, SolveInput
from tests import factories
from tests.unit.scheduling._helpers import CAPACITY_TYPE, GI, INSTANCE_TYPE, itype, pod, pool, taint

OD = ("on-demand",)


def pods(n: int, cpu: str, mem: str = "1Gi", prefix: str = "p", **spec: Any) -> list[Pod]:
    return [pod(f"{prefix}-{i}", cpu, mem, **spec) for i in range(n)]


def daemonset(name: str, cpu: str, **spec: Any) -> Pod:
    """A DaemonSet's pod template: what it reserves on every node."""
    return factories.pod(
        name, namespace="kube-system", cpu=cpu, memory=None, owner=None, phase="", **spec
    )


def bound(
    workload: Sequence[Pod],
    types: Sequence[InstanceType],
    *,
    daemonsets: Sequence[Pod] = (),
    nodepool: PoolTemplate | None = None,
) -> float:
    np_ = nodepool or pool()
    inp = SolveInput(
        pods=workload, pools=[np_], instance_types={np_.name: types}, daemonsets=daemonsets
    )
    return lower_bound(inp).cost


# Two types, the bigger one cheaper per CPU unless a case says otherwise; memory is plentiful.
A2 = itype("a", 2, 64, price=1.0, capacity_types=OD)
B4 = itype("b", 4, 64, price=1.5, capacity_types=OD)
A2_CHEAP = itype("a", 2, 64, price=0.5, capacity_types=OD)


@pytest.mark.parametrize(
    ("workload", "types", "daemonsets", "expected"),
    [
        pytest.param(
            pods(3, "1"),
            [A2, B4],
            [],
            3 / 4 * 1.5,
            id="fractional nodes of the cheaper-per-cpu type",
        ),
        pytest.param(
            pods(1, "3", prefix="big") + pods(2, "1"),
            [A2_CHEAP, B4],
            [],
            3 / 4 * 1.5 + 2 / 2 * 0.5,
            id="a class that fits only the big type pays for it; the rest takes the cheap one",
        ),
        pytest.param(
            pods(4, "500m", "4Gi"),
            [
                itype("a", 2, 4, price=1.0, capacity_types=OD),
                itype("b", 2, 16, price=2.0, capacity_types=OD),
            ],
            [],
            2.0,
            id="memory binds: one pod per small node, four per big one",
        ),
        pytest.param(
            pods(4, "100m"),
            [itype("a", 4, 64, price=1.0, capacity_types=OD, pods=2)],
            [],
            2.0,
            id="the pods resource binds",
        ),
        pytest.param(
            pods(3, "1"),
            [A2_CHEAP, B4],
            [daemonset("agent", "500m")],
            3 / 1.5 * 0.5,
            id="daemonset overhead on every type: 1.5 and 3.5 cpu left",
        ),
        pytest.param(
            pods(3, "1"),
            [A2_CHEAP, B4],
            [daemonset("agent", "1", nodeSelector={INSTANCE_TYPE: "a"})],
            3 / 4 * 1.5,
            id="overhead only where the daemonset runs: a keeps 1 cpu ($0.5/cpu), b all 4",
        ),
        pytest.param(
            pods(1, "1", prefix="od", nodeSelector={CAPACITY_TYPE: "on-demand"}) + pods(1, "1"),
            [itype("a", 2, 64, price=1.0, spot_price=0.6)],
            [],
            0.5 * 1.0 + 0.5 * 0.6,
            id="an on-demand pod pays on-demand, a flexible one spot",
        ),
        pytest.param(
            [pod(f"p-{i}", "1", "1Gi", labels={"i": str(i)}) for i in range(6)],
            [A2, B4],
            [],
            6 / 4 * 1.5,
            id="labels do not split a class",
        ),
    ],
)
def test_bound(
    workload: list[Pod], types: list[InstanceType], daemonsets: list[Pod], expected: float
) -> None:
    assert bound(workload, types, daemonsets=daemonsets) == pytest.approx(expected, rel=1e-9)


def test_pool_requirements_restrict_the_types() -> None:
    arm = pool(requirements=[SelectorRequirement("kubernetes.io/arch", "In", ("arm64",))])
    types = [A2_CHEAP, itype("g", 2, 64, price=2.0, capacity_types=OD, arch="arm64")]
    assert bound(pods(4, "1"), types, nodepool=arm) == pytest.approx(2 * 2.0, rel=1e-9)


@pytest.mark.parametrize(
    ("workload", "nodepool", "message"),
    [
        pytest.param(pods(1, "5"), pool(), "fits no instance type", id="too big for every type"),
        pytest.param(
            pods(1, "1"),
            pool(taints=[taint("dedicated")]),
            "fits no instance type",
            id="does not tolerate the pool's taint",
        ),
    ],
)
def test_bound_fails_loudly(workload: list[Pod], nodepool: PoolTemplate, message: str) -> None:
    with pytest.raises(BoundError, match=message):
        bound(workload, [A2, B4], nodepool=nodepool)


def test_pruning_dominated_columns_keeps_the_optimum() -> None:
    w: Workload = web()
    inp = SolveInput(
        pods=w.pods,
        pools=[w.pool],
        instance_types={w.pool.name: kwok_catalog()},
        daemonsets=w.daemonsets,
    )
    pruned, full = lower_bound(inp), lower_bound(inp, prune=False)
    assert full.columns == 72  # the linux half of the 144 kwok types, one price each
    assert pruned.cost == pytest.approx(full.cost, rel=1e-9)


def test_service_pod_requests_are_max_of_init_and_containers() -> None:
    svc = _Service(
        name="s",
        replicas=1,
        app=("500m", "1Gi"),
        native_sidecar=("100m", "128Mi"),
        log_sidecar=None,
        init=("3", "512Mi"),
    )
    p = pod_from_dict({"metadata": {"name": "s-0"}, "spec": svc.spec()})
    # cpu: the init container beside the native sidecar (3 + 0.1); memory: app + sidecar.
    expected = {"cpu": 3100, "memory": GI + 128 * 2**20, "pods": 1}
    assert dict(p.requests) == expected
    assert svc.expected_requests() == expected


def test_gpu_catalog_adds_priced_gpu_types() -> None:
    gpu = {it.name: it for it in kwok_gpu_catalog() if it.capacity.get("nvidia.com/gpu")}
    g4 = gpu["g-4x-amd64-linux"]
    # kwok's s-4x: 0.025 * 4 vCPU + 0.001 * 16 GiB in GB, plus one GPU at 0.40; spot at 70 %.
    on_demand = 0.1 + 0.001 * 16 * GI / 1e9 + 0.40
    assert (len(gpu), g4.capacity["nvidia.com/gpu"], g4.requirements["nvidia.com/gpu.present"]) == (
        7,
        1,
        frozenset({"true"}),
    )
    assert sorted({round(o.price, 9) for o in g4.offerings}) == [
        round(0.7 * on_demand, 9),
        round(on_demand, 9),
    ]
