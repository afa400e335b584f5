"""The synthetic catalog of upstream's scheduling benchmark (``fake.InstanceTypes(n)``).

Reproduces kubernetes-sigs/karpenter ``pkg/cloudprovider/fake/instancetype.go``: type ``i`` is
``fake-it-<i>`` with (i+1) vCPU, 2(i+1) GiB memory and 10(i+1) pods (no ephemeral storage), amd64,
operating systems darwin/linux/windows, five offerings (spot in test-zone-1 and test-zone-2,
on-demand in test-zone-1..3) all priced 0.1 per vCPU + 0.1 per 1e9 bytes of memory, and
kube-reserved 100m cpu / 10Mi memory.

Upstream also gives every fake type three test labels, reproduced here: ``integer`` = the vCPU
count, ``size`` = ``large`` when cpu > 4 and memory > 8Gi else ``small``, and ``special`` =
``optional`` on large types. Upstream's small types carry ``special`` as a DoesNotExist
requirement; ``InstanceType.requirements`` has no way to say that, so the key is simply absent.
"""

from __future__ import annotations

from typing import Final

from karpenter_py.model.instancetype import InstanceType, Offering, Overhead, make_instance_type
from karpenter_py.model.labels import (
    ARCH_AMD64,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_OS,
    LABEL_TOPOLOGY_ZONE,
    RESOURCE_CPU,
    RESOURCE_MEMORY,
    RESOURCE_PODS,
)

__all__ = [
    "FAKE_LABEL_EXOTIC",
    "FAKE_LABEL_INTEGER",
    "FAKE_LABEL_SIZE",
    "FAKE_OFFERING_SLOTS",
    "fake_instance_type",
    "fake_instance_types",
    "fake_price",
]

FAKE_LABEL_SIZE: Final = "size"
FAKE_LABEL_EXOTIC: Final = "special"
FAKE_LABEL_INTEGER: Final = "integer"

# (capacity type, zone) of the default offerings, in upstream's order.
FAKE_OFFERING_SLOTS: Final = (
    (CAPACITY_TYPE_SPOT, "test-zone-1"),
    (CAPACITY_TYPE_SPOT, "test-zone-2"),
    (CAPACITY_TYPE_ON_DEMAND, "test-zone-1"),
    (CAPACITY_TYPE_ON_DEMAND, "test-zone-2"),
    (CAPACITY_TYPE_ON_DEMAND, "test-zone-3"),
)
_KUBE_RESERVED: Final = {RESOURCE_CPU: 100, RESOURCE_MEMORY: 10 * 2**20}
_OPERATING_SYSTEMS: Final = frozenset({"darwin", "linux", "windows"})
_GI: Final = 2**30


def fake_price(cpu_cores: int, memory_bytes: int) -> float:
    """Upstream ``fake.PriceFromResources``: 0.1 per vCPU plus 0.1 per 1e9 bytes of memory."""
    return 0.0 + 0.1 * float(cpu_cores) + 0.1 * float(memory_bytes) / 1e9


def fake_instance_type(name: str, *, cpu_cores: int, memory_gib: int, pods: int) -> InstanceType:
    """One fake type shaped as upstream's ``fake.NewInstanceType`` with default offerings."""
    memory = memory_gib * _GI
    price = fake_price(cpu_cores, memory)
    offerings = tuple(
        Offering(zone=zone, capacity_type=ct, price=price) for ct, zone in FAKE_OFFERING_SLOTS
    )
    large = cpu_cores > 4 and memory > 8 * _GI
    requirements: dict[str, frozenset[str]] = {
        LABEL_ARCH: frozenset([ARCH_AMD64]),
        LABEL_OS: _OPERATING_SYSTEMS,
        LABEL_TOPOLOGY_ZONE: frozenset(zone for _, zone in FAKE_OFFERING_SLOTS),
        LABEL_CAPACITY_TYPE: frozenset(ct for ct, _ in FAKE_OFFERING_SLOTS),
        FAKE_LABEL_INTEGER: frozenset([str(cpu_cores)]),
        FAKE_LABEL_SIZE: frozenset(["large" if large else "small"]),
    }
    if large:
        requirements[FAKE_LABEL_EXOTIC] = frozenset(["optional"])
    return make_instance_type(
        name=name,
        requirements=requirements,
        capacity={RESOURCE_CPU: cpu_cores * 1000, RESOURCE_MEMORY: memory, RESOURCE_PODS: pods},
        offerings=offerings,
        overhead=Overhead(kube_reserved=dict(_KUBE_RESERVED)),
    )


def fake_instance_types(n: int) -> list[InstanceType]:
    """``fake.InstanceTypes(n)``: type i has (i+1) vCPU, 2(i+1) GiB and 10(i+1) pods."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [
        fake_instance_type(
            f"fake-it-{i}", cpu_cores=i + 1, memory_gib=2 * (i + 1), pods=10 * (i + 1)
        )
        for i in range(n)
    ]
