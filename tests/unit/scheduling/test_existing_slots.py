"""``ExistingSlots``: a pod skips only blocks of existing nodes none of which has the CPU or
memory it asks for, sees the others' nodes in order, and a slot is made from its base only when
a pod is tried on it."""

from __future__ import annotations

import pytest

from karpenter_py.scheduling.existing import ExistingBase, existing_slot_parts
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.scheduling.scheduler import ExistingSlots
from tests import factories
from tests.unit.scheduling._helpers import existing, make_node

GI = 2**30


def base(rooms: list[tuple[int, int]]) -> ExistingBase:
    # Listed in reverse: the base orders nodes by name (first fit), whatever the input order.
    nodes = [
        existing(make_node(f"n{i:03d}", cpu=f"{cpu}m", mem=str(memory)))
        for i, (cpu, memory) in enumerate(rooms)
    ]
    return ExistingBase(nodes[::-1], existing_slot_parts)


# 64 nodes in two blocks of 32: block 0 is full but for n005 (2 CPU, 1 GiB); block 1 has
# n040 (500m, 8 GiB) and n063 (4 CPU, 4 GiB).
ROOMS = [(0, 0)] * 64
ROOMS[5] = (2000, GI)
ROOMS[40] = (500, 8 * GI)
ROOMS[63] = (4000, 4 * GI)


@pytest.mark.parametrize(
    ("requests", "blocks"),
    [
        ({"cpu": 1000, "memory": GI}, [0, 1]),
        ({"cpu": 3000}, [1]),
        ({"memory": 6 * GI}, [1]),
        # Block 1's most CPU (n063) and most memory (n040) are on different nodes: it is
        # scanned, and has_room refuses each node.
        ({"cpu": 3000, "memory": 6 * GI}, [1]),
        ({"cpu": 5000}, []),
        ({"nvidia.com/gpu": 1}, [0, 1]),  # not filtered: has_room decides
    ],
)
def test_blocks_seen(requests: dict[str, int], blocks: list[int]) -> None:
    slots = ExistingSlots(base(ROOMS))
    seen = list(slots.candidates(requests))
    assert seen == [i for b in blocks for i in range(b * 32, b * 32 + 32)]
    assert slots.made() == []  # looking at blocks makes no slot


def test_a_block_is_remeasured_when_a_slot_takes_a_pod() -> None:
    slots = ExistingSlots(base(ROOMS))
    slots[5].remaining = {"cpu": 500, "memory": GI // 2}
    slots.update(5)
    assert list(slots.candidates({"cpu": 1000})) == list(range(32, 64))
    assert (slots.cpu, slots.memory) == ([500, 4000], [GI // 2, 8 * GI])
    # The base every other solve starts from is untouched.
    assert (slots.base.cpu, slots.base.memory) == ((2000, 4000), (GI, 8 * GI))
    assert slots.base.parts[5].remaining["cpu"] == 2000
    assert [s.name for s in slots.made()] == ["n005"]


@pytest.mark.parametrize(
    ("start", "seen"),
    [
        (0, [*range(32), *range(32, 64)]),
        (5, [*range(5, 32), *range(32, 64)]),
        (40, [*range(40, 64)]),
        (64, []),
    ],
)
def test_a_scan_resumes_where_a_signature_left_off(start: int, seen: list[int]) -> None:
    slots = ExistingSlots(base(ROOMS))
    assert list(slots.candidates({"cpu": 100}, start)) == seen


def test_slots_are_in_first_fit_order_and_made_once() -> None:
    slots = ExistingSlots(base(ROOMS))
    assert slots.base.names[:3] == ("n000", "n001", "n002")
    assert len(slots) == 64
    made = slots[40]
    assert slots[40] is made
    assert (made.name, made.remaining["cpu"], made.remaining["memory"]) == ("n040", 500, 8 * GI)


def _fields(b: ExistingBase) -> tuple[object, ...]:
    return (
        b.names,
        b.initialized,
        [dict(p.remaining) for p in b.parts],
        b.cpu,
        b.memory,
        {v: len(s) for v, s in b.domains("kubernetes.io/hostname").items()},
        {v: [len(pods) for pods in lists] for v, lists in b.pods.by_label("app").items()},
    )


def test_a_base_is_reused_for_the_same_nodes_and_patched_where_pods_changed() -> None:
    cache = IndexCache()
    nodes = [
        existing(make_node(f"n{i}"), [factories.pod(f"p{i}", cpu="1", labels={"app": "a"})])
        for i in range(40)
    ]
    first = cache.existing_base(nodes)
    assert cache.existing_base(list(nodes)) is first
    first.domains("kubernetes.io/hostname")  # built once, kept by the patched base
    changed = list(nodes)
    changed[33] = existing(make_node("n33"), [])  # n33's pod left (a new Node object: labels too)
    changed[7] = existing(nodes[7].node, [])  # n7's pod left
    patched = cache.existing_base(changed)
    assert patched is not first
    assert _fields(patched) == _fields(ExistingBase(changed, existing_slot_parts))
    assert patched.names is first.names  # patched, not built again
    assert patched.parts[1] is first.parts[1]  # n1 (n0, n1, n10, ... by name) untouched
    # A different set of nodes builds a new base.
    fewer = cache.existing_base(nodes[:10])
    assert _fields(fewer) == _fields(ExistingBase(nodes[:10], existing_slot_parts))


def _zoned() -> ExistingSlots:
    # n00..n69: zone a, b, c in turn, except every tenth node, which has no zone label;
    # n35 is full.
    nodes = []
    for i in range(70):
        labels = {} if i % 10 == 0 else {"topology.kubernetes.io/zone": "abc"[i % 3]}
        cpu = "0" if i == 35 else "4"
        nodes.append(existing(make_node(f"n{i:02d}", cpu=cpu, labels=labels)))
    return ExistingSlots(ExistingBase(nodes, existing_slot_parts))


ZONE = "topology.kubernetes.io/zone"


@pytest.mark.parametrize(
    ("domains", "start", "requests", "seen"),
    [
        # Zone a, and the nodes without a zone (the full check decides for those).
        (
            [(ZONE, frozenset("a"))],
            0,
            {},
            [
                0,
                3,
                6,
                9,
                10,
                12,
                15,
                18,
                20,
                21,
                24,
                27,
                30,
                33,
                36,
                39,
                40,
                42,
                45,
                48,
                50,
                51,
                54,
                57,
                60,
                63,
                66,
                69,
            ],
        ),
        ([(ZONE, frozenset("a"))], 40, {}, [40, 42, 45, 48, 50, 51, 54, 57, 60, 63, 66, 69]),
        ([(ZONE, frozenset("bc"))], 60, {}, [60, 61, 62, 64, 65, 67, 68]),
        # A second key is checked by value: no node has it, so it keeps them all.
        ([(ZONE, frozenset("b")), ("team", frozenset("x"))], 60, {}, [60, 61, 64, 67]),
        # No node has 5 CPUs: every block is skipped. Blocks hold 4 CPUs (n35 alone is full).
        ([(ZONE, frozenset("c"))], 30, {"cpu": 5000}, []),
        (
            [(ZONE, frozenset("c"))],
            30,
            {"cpu": 4000},
            [30, 32, 35, 38, 40, 41, 44, 47, 50, 53, 56, 59, 60, 62, 65, 68],
        ),
    ],
)
def test_within_yields_the_slots_of_the_allowed_domains_in_order(
    domains: list[tuple[str, frozenset[str]]], start: int, requests: dict[str, int], seen: list[int]
) -> None:
    slots = _zoned()
    assert list(slots.within(domains, requests, start)) == seen
    assert slots.base.values(ZONE)[:4] == (None, "b", "c", "a")


def test_a_simulations_base_is_cut_from_the_full_one() -> None:
    cache = IndexCache()
    nodes = [
        existing(
            make_node(f"n{i:02d}", labels={ZONE: "abc"[i % 3]}),
            [factories.pod(f"p{i}", cpu="1", labels={"app": "ab"[i % 2]})],
            initialized=i % 7 != 0,
        )
        for i in range(50)
    ]
    full = cache.existing_base(nodes)
    full.pods.by_label("app")  # the parent's merged index, which the cut one filters
    full.domains(ZONE)
    gone = {3, 4, 17, 35, 49}
    left = [ex for i, ex in enumerate(nodes) if i not in gone]
    cut = cache.existing_base(left)
    fresh = ExistingBase(left, existing_slot_parts)
    assert cut is not full
    assert _fields(cut) == _fields(fresh)
    assert cut.values(ZONE) == fresh.values(ZONE)
    assert cut.allowed(ZONE, frozenset("a")) == fresh.allowed(ZONE, frozenset("a"))
    # Zones a, b, c: 17, 17, 16 nodes; gone: n03 (a), n04 and n49 (b), n17 and n35 (c).
    assert {v: len(s) for v, s in cut.domains(ZONE).items()} == {"a": 16, "b": 15, "c": 14}
    assert cut.position == fresh.position
    # The cut base is the simulation's own: the full one still serves the next simulation.
    assert cache.existing_base(nodes) is full


def test_parts_of_nodes_no_base_holds_are_forgotten() -> None:
    cache = IndexCache()
    nodes = [existing(make_node(f"n{i:02d}")) for i in range(40)]
    cache.existing_base(nodes)
    for r in range(1, 1501):
        # A pod bound to one node: that node is a new ExistingNode, the base is patched.
        k = r % 40
        nodes[k] = existing(nodes[k].node, [factories.pod(f"p{r}", cpu="10m")])
        cache.existing_base(list(nodes))
    # 40 + 1,145 parts went past 4 x 40 + 1,024: only the 4 held bases' 43 nodes stayed
    # (their 40, and the 3 nodes changed since the oldest of them), then 355 more rounds.
    assert len(cache._existing) == 43 + 355
