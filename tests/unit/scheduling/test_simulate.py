"""``simulate``: the solver without some nodes, and the index cache it relies on."""

from __future__ import annotations

from datetime import UTC, datetime

from karpenter_py.aio.clock import FakeClock
from karpenter_py.launcher.launch import UnavailableOfferings
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.scheduling.simulate import simulate
from karpenter_py.state.cluster import Cluster
from tests.factories import KWOK_NODECLASS_KEY, node, node_labels, nodeclaim, nodepool, pod

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)
TYPES = kwok_catalog()


def cluster(*nodes: tuple[str, str, list[str]]) -> Cluster:
    """Nodes of pool "default" as (name, instance type, [pod cpu requests])."""
    c = Cluster()
    c.upsert_nodepool(
        nodepool(requirements=[{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}])
    )
    c.upsert_nodeclass(KWOK_NODECLASS_KEY, True)
    for name, it, cpus in nodes:
        c.upsert_node(node(name, labels=node_labels("default", it)))
        c.upsert_nodeclaim(nodeclaim(f"nc-{name}", node_name=name))
        for i, cpu in enumerate(cpus):
            c.upsert_pod(pod(f"{name}-p{i}", node_name=name, cpu=cpu, memory="256Mi"))
    return c


def test_pods_of_a_removed_node_move_to_room_elsewhere() -> None:
    c = cluster(("a", "c-4x-amd64-linux", ["1"]), ("b", "c-4x-amd64-linux", ["1"]))
    sim = simulate(c.snapshot(NOW), ["a"], instance_types={"default": TYPES})
    assert sim.all_scheduled
    assert [p.key for p in sim.moved] == ["default/a-p0"]
    assert sim.replacements == ()
    assert [(e.node_name, [p.key for p in e.pods]) for e in sim.plan.existing] == [
        ("b", ["default/a-p0"])
    ]


def test_pods_without_room_need_a_replacement() -> None:
    c = cluster(("a", "c-4x-amd64-linux", ["3"]), ("b", "c-4x-amd64-linux", ["3"]))
    sim = simulate(c.snapshot(NOW), ["a"], instance_types={"default": TYPES})
    assert sim.all_scheduled
    (replacement,) = sim.replacements
    assert [p.key for p in replacement.pods] == ["default/a-p0"]
    assert replacement.instance_type.name == "c-4x-amd64-linux"


def test_a_pod_that_fits_nowhere_is_an_error() -> None:
    c = cluster(("a", "c-4x-amd64-linux", ["1"]))
    sim = simulate(c.snapshot(NOW), ["a"], instance_types={})  # no pool can launch
    assert not sim.all_scheduled
    assert [e.pod.key for e in sim.errors] == ["default/a-p0"]


def test_moving_onto_an_uninitialized_node_is_an_error() -> None:
    c = cluster(("a", "c-4x-amd64-linux", ["1"]))
    labels = node_labels("default", "c-4x-amd64-linux")
    del labels["karpenter.sh/initialized"]
    c.upsert_node(node("fresh", labels=labels))
    c.upsert_nodeclaim(nodeclaim("nc-fresh", node_name="fresh"))
    sim = simulate(c.snapshot(NOW), ["a"], instance_types={"default": TYPES})
    assert [(e.pod.key, e.reason) for e in sim.errors] == [
        ("default/a-p0", "would schedule to node fresh, not initialized yet")
    ]


def test_a_pending_pod_that_fails_does_not_block() -> None:
    c = cluster(("a", "c-4x-amd64-linux", ["1"]), ("b", "c-4x-amd64-linux", []))
    c.upsert_pod(pod("huge", pending=True, cpu="500"))
    sim = simulate(c.snapshot(NOW), ["a"], instance_types={"default": TYPES})
    assert sim.all_scheduled
    assert [e.pod.key for e in sim.plan.errors] == ["default/huge"]


def test_cached_indexes_give_the_same_plan() -> None:
    c = cluster(("a", "c-4x-amd64-linux", ["3", "1"]), ("b", "c-8x-amd64-linux", ["2"]))
    c.upsert_pod(pod("new", pending=True, cpu="6"))
    snap = c.snapshot(NOW)
    inp = solve_input(snap, instance_types={"default": TYPES}, options=SolveOptions())
    cache = IndexCache()
    cold = solve(inp)
    first = solve(inp, indexes=cache)
    second = solve(inp, indexes=cache)
    shape = [
        (nc.instance_type.name, [p.key for p in nc.pods], len(nc.instance_types))
        for nc in cold.new_node_claims
    ]
    for plan in (first, second):
        assert [
            (nc.instance_type.name, [p.key for p in nc.pods], len(nc.instance_types))
            for nc in plan.new_node_claims
        ] == shape
    assert (cache.misses, cache.hits) == (1, 1)


def test_index_cache_misses_on_a_new_list_or_daemonsets() -> None:
    c = cluster(("a", "c-4x-amd64-linux", []))
    snap = c.snapshot(NOW)
    pool = solve_input(snap, instance_types={"default": TYPES}, options=SolveOptions()).pools[0]
    cache = IndexCache()
    one = cache.get(pool, TYPES, ())
    assert cache.get(pool, TYPES, ()) is one
    assert cache.get(pool, list(TYPES), ()) is not one  # an equal but new list
    assert cache.get(pool, TYPES, (pod("ds", owner="DaemonSet"),)) is not one
    assert (cache.misses, cache.hits) == (3, 1)


def test_unavailable_offerings_hand_back_the_same_list_until_marks_change() -> None:
    clock = FakeClock()
    ice = UnavailableOfferings(clock=clock, ttl=10)
    first = ice.apply(TYPES)
    assert ice.apply(TYPES) is first
    ice.mark_unavailable("c-4x-amd64-linux", "test-zone-a", "spot")
    masked = ice.apply(TYPES)
    assert masked is not first
    assert ice.apply(TYPES) is masked
    it = next(t for t in masked if t.name == "c-4x-amd64-linux")
    assert [
        o.available for o in it.offerings if (o.zone, o.capacity_type) == ("test-zone-a", "spot")
    ] == [False]
    clock.step(11)
    assert ice.apply(TYPES) is not masked
