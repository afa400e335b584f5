"""Pools sharing instance-type tables (``IndexCache``): which pools share one, and that a pool
over a shared table answers exactly as its index built alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.core import Pod
from karpenter_py.model.core import SelectorRequirement as Sel
from karpenter_py.scheduling.inputs import PoolTemplate, SolveInput
from karpenter_py.scheduling.instances import IndexCache, PoolIndex
from karpenter_py.scheduling.requirements import Req
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.scheduling.typetable import iter_bits
from tests.unit.scheduling._helpers import (
    ARCH,
    CAPACITY_TYPE,
    NODEPOOL,
    ZONE,
    pod,
    pool,
    taint,
)

TYPES = kwok_catalog()
CPU = "karpenter.kwok.sh/instance-cpu"
FAMILY = "karpenter.kwok.sh/instance-family"


def daemonset(name: str, **spec: Any) -> Pod:
    return pod(name, "100m", "64Mi", ns="kube-system", owner="DaemonSet", **spec)


ON_AMD64 = daemonset("amd64-agent", nodeSelector={ARCH: "amd64"})
ON_TEAM_A = daemonset("team-a-agent", nodeSelector={"team": "a"})
EVERYWHERE = daemonset("agent")


@pytest.mark.parametrize(
    ("one", "other", "daemonsets", "shared"),
    [
        pytest.param(
            pool("a", requirements=[Sel(ARCH, "In", ("amd64",))]),
            pool(
                "b",
                requirements=[
                    Sel(CPU, "Lt", ("9",)),
                    Sel(
                        FAMILY,
                        "In",
                        (
                            "c",
                            "m",
                        ),
                    ),
                ],
            ),
            [],
            True,
            id="requirements on type labels only narrow the types: shared",
        ),
        pytest.param(
            pool("a", labels={"team": "a"}),
            pool("b", labels={"team": "b"}, taints=[taint("dedicated")]),
            [],
            True,
            id="labels and taints no DaemonSet reads: shared",
        ),
        pytest.param(
            pool("a", requirements=[Sel(CAPACITY_TYPE, "In", ("spot",))]),
            pool("b", requirements=[Sel(CAPACITY_TYPE, "In", ("on-demand",))]),
            [],
            False,
            id="capacity types pick offerings: not shared",
        ),
        pytest.param(
            pool("a", requirements=[Sel(ZONE, "In", ("test-zone-a",))]),
            pool("b"),
            [],
            False,
            id="zones pick offerings: not shared",
        ),
        pytest.param(
            pool("a", requirements=[Sel(ARCH, "In", ("amd64",))]),
            pool("b", requirements=[Sel(ARCH, "In", ("arm64",))]),
            [ON_AMD64, EVERYWHERE],
            True,
            id="a DaemonSet on a label every type fixes: shared",
        ),
        pytest.param(
            pool("a", labels={"team": "a"}),
            pool("b", labels={"team": "b"}),
            [ON_TEAM_A],
            False,
            id="a DaemonSet selecting a pool label: not shared",
        ),
        pytest.param(
            pool("a"),
            pool("b", taints=[taint("dedicated")]),
            [EVERYWHERE],
            False,
            id="a DaemonSet one pool's taint keeps off: not shared",
        ),
    ],
)
def test_which_pools_share_a_table(
    one: PoolTemplate, other: PoolTemplate, daemonsets: list[Pod], shared: bool
) -> None:
    cache = IndexCache()
    first = cache.get(one, TYPES, daemonsets)
    second = cache.get(other, TYPES, daemonsets)
    assert (first.table is second.table) == shared


POOLS = [
    pool("spot-c", requirements=[Sel(CAPACITY_TYPE, "In", ("spot",)), Sel(FAMILY, "In", ("c",))]),
    pool("small-amd", requirements=[Sel(CPU, "Lt", ("5",)), Sel(ARCH, "In", ("amd64",))]),
    pool("arm", requirements=[Sel(ARCH, "In", ("arm64",))], labels={"team": "a"}),
    pool("zone-a", requirements=[Sel(ZONE, "In", ("test-zone-a",)), Sel(FAMILY, "NotIn", ("m",))]),
    pool("everything", weight=0),
    pool("none", requirements=[Sel(FAMILY, "In", ("no-such-family",))]),
]
DAEMONSETS = [
    ON_AMD64,
    ON_TEAM_A,
    daemonset(
        "ports",
        nodeSelector={ARCH: "arm64"},
        containers=[
            {
                "name": "app",
                "image": "pause",
                "ports": [{"containerPort": 9100, "hostPort": 9100}],
                "resources": {"requests": {"cpu": "50m"}},
            }
        ],
    ),
]


def _names(idx: PoolIndex, mask: int) -> list[str]:
    return sorted(idx.types[i].name for i in iter_bits(mask))


def _view(idx: PoolIndex) -> dict[str, object]:
    """What the solver reads of an index, with type numbers turned into names."""
    zone_a = Req.in_(ZONE, ("test-zone-a",))
    reqs = idx.requirements.with_req(zone_a)
    return {
        "types": _names(idx, idx.all),
        "offers": [(o[0], o[1]) for o in idx.offers(idx.requirements)],
        "cheapest": [(o[0], o[1], o[3]) for o in idx.cheapest_offerings(idx.all, reqs)[:5]],
        "fit": _names(idx, idx.fit_mask({"cpu": 3500, "memory": 2**30})),
        "zone a": _names(idx, idx.reqs_mask({ZONE: zone_a}) & idx.offering_mask(reqs)),
        "zones": idx.label_values(ZONE),
        "keys": idx.label_keys(),
        "ports": [(p, _names(idx, m)) for p, m in idx.daemon_port_masks],
        "overhead": sorted(
            (idx.types[i].name, tuple(sorted(idx.daemon_requests[i].items())))
            for i in iter_bits(idx.all)
        ),
        "largest": idx.largest("cpu"),
        "limits": _names(idx, idx.limits_mask({"cpu": 8000})),
        "headroom": {k: v for k, v in idx.headroom(idx.all, {}).items() if v > 0},
        "capacity types": idx.capacity_types(idx.all, reqs),
        "rejected": idx.rejected,
    }


@pytest.mark.parametrize("one", POOLS, ids=[p.name for p in POOLS])
def test_a_pool_over_a_shared_table_answers_as_alone(one: PoolTemplate) -> None:
    cache = IndexCache()
    for other in POOLS:  # the tables are built by whichever pool comes first
        cache.get(other, TYPES, DAEMONSETS)
    assert _view(cache.get(one, TYPES, DAEMONSETS)) == _view(PoolIndex(one, TYPES, DAEMONSETS))


def _decisions(pools: Sequence[PoolTemplate], cache: IndexCache | None) -> list[tuple[object, ...]]:
    pods = [
        pod(f"{name}-{i}", cpu, "1Gi", nodeSelector={NODEPOOL: name, **extra})
        for i, (name, cpu, extra) in enumerate(
            [
                ("everything", "3", {}),
                ("small-amd", "1", {}),
                ("arm", "500m", {"team": "a"}),
                ("arm", "2", {}),
                ("zone-a", "1", {ZONE: "test-zone-a"}),
                ("spot-c", "1", {CAPACITY_TYPE: "spot"}),
                ("none", "1", {}),
            ]
        )
    ]
    plan = solve(
        SolveInput(
            pods=pods,
            pools=pools,
            instance_types={p.name: TYPES for p in pools},
            daemonsets=DAEMONSETS,
        ),
        indexes=cache,
    )
    return [
        *(
            (c.node_pool, c.instance_type.name, [it.name for it in c.instance_types], c.requests)
            for c in plan.new_node_claims
        ),
        *((e.pod.key, e.reason) for e in plan.errors),
    ]


def test_a_solve_over_shared_tables_decides_as_over_pools_alone() -> None:
    alone = _decisions(POOLS, None)
    # A claim in each pool but "none", whose pod is the one error.
    assert sorted(str(d[0]) for d in alone) == [
        "arm",
        "default/none-6",
        "everything",
        "small-amd",
        "spot-c",
        "zone-a",
    ]
    assert _decisions(POOLS, IndexCache()) == alone


def test_a_table_dropped_from_the_cache_takes_its_pools_along() -> None:
    spot = pool("spot", requirements=[Sel(CAPACITY_TYPE, "In", ("spot",))])
    on_demand = pool("on-demand", requirements=[Sel(CAPACITY_TYPE, "In", ("on-demand",))])
    cache = IndexCache(tables=1)
    first = cache.get(spot, TYPES, ())
    cache.get(on_demand, TYPES, ())  # its table pushes the spot pool's out
    again = cache.get(spot, TYPES, ())
    assert (again is first, cache.misses, cache.hits) == (False, 3, 0)
