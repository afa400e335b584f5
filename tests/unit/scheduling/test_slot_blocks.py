"""``SlotBlocks``: a pod skips only blocks of existing nodes none of which has the CPU or memory
it asks for, and sees the others' nodes in order."""

from __future__ import annotations

import pytest

from karpenter_py.scheduling.claims import ExistingSlot
from karpenter_py.scheduling.requirements import Requirements
from karpenter_py.scheduling.scheduler import SlotBlocks

GI = 2**30


def slots(rooms: list[tuple[int, int]]) -> list[ExistingSlot]:
    return [
        ExistingSlot(
            name=f"n{i:03d}",
            requirements=Requirements.from_labels({}),
            taints=(),
            remaining={"cpu": cpu, "memory": memory},
            ports=[],
            initialized=True,
        )
        for i, (cpu, memory) in enumerate(rooms)
    ]


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
    index = SlotBlocks(slots(ROOMS))
    seen = [i for i, _ in index.candidates(requests)]
    assert seen == [i for b in blocks for i in range(b * 32, b * 32 + 32)]


def test_a_block_is_remeasured_when_a_slot_takes_a_pod() -> None:
    built = slots(ROOMS)
    index = SlotBlocks(built)
    built[5].remaining = {"cpu": 500, "memory": GI // 2}
    index.update(5)
    assert [i for i, _ in index.candidates({"cpu": 1000})] == list(range(32, 64))
    assert (index.cpu, index.memory) == ([500, 4000], [GI // 2, 8 * GI])


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
    index = SlotBlocks(slots(ROOMS))
    assert [i for i, _ in index.candidates({"cpu": 100}, start)] == seen
