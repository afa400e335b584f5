"""Upstream's fake.InstanceTypes(n), the scheduling benchmark's 400-type catalog."""

from __future__ import annotations

import pytest

from karpenter_py.model.fakecatalog import (
    FAKE_LABEL_EXOTIC,
    FAKE_LABEL_INTEGER,
    FAKE_LABEL_SIZE,
    fake_instance_types,
    fake_price,
)
from karpenter_py.model.labels import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_TOPOLOGY_ZONE,
)

GI = 2**30
MI = 2**20


@pytest.fixture(scope="module")
def catalog():
    return fake_instance_types(400)


def test_shape(catalog):
    assert len(catalog) == 400
    assert [it.name for it in catalog[:3]] == ["fake-it-0", "fake-it-1", "fake-it-2"]
    assert catalog[-1].name == "fake-it-399"
    assert fake_instance_types(0) == []
    with pytest.raises(ValueError, match="n must be >= 0"):
        fake_instance_types(-1)


def test_type_zero_exactly(catalog):
    it = catalog[0]
    assert it.capacity == {"cpu": 1000, "memory": 2 * GI, "pods": 10}
    assert dict(it.overhead.kube_reserved) == {"cpu": 100, "memory": 10 * MI}
    assert it.allocatable == {"cpu": 900, "memory": 2 * GI - 10 * MI, "pods": 10}
    # 0.1 x 1 vCPU + 0.1 x 2147483648 bytes / 1e9
    assert it.offerings[0].price == pytest.approx(0.3147483648, rel=1e-15)
    assert [(o.capacity_type, o.zone) for o in it.offerings] == [
        ("spot", "test-zone-1"),
        ("spot", "test-zone-2"),
        ("on-demand", "test-zone-1"),
        ("on-demand", "test-zone-2"),
        ("on-demand", "test-zone-3"),
    ]
    assert all(o.available and not o.price_estimated for o in it.offerings)
    assert len({o.price for o in it.offerings}) == 1
    assert it.requirements == {
        LABEL_INSTANCE_TYPE: frozenset({"fake-it-0"}),
        LABEL_ARCH: frozenset({"amd64"}),
        LABEL_OS: frozenset({"darwin", "linux", "windows"}),
        LABEL_TOPOLOGY_ZONE: frozenset({"test-zone-1", "test-zone-2", "test-zone-3"}),
        LABEL_CAPACITY_TYPE: frozenset({"spot", "on-demand"}),
        FAKE_LABEL_INTEGER: frozenset({"1"}),
        FAKE_LABEL_SIZE: frozenset({"small"}),
    }


@pytest.mark.parametrize(
    ("index", "cpu", "memory_gib", "pods", "size", "exotic"),
    [
        (0, 1, 2, 10, "small", False),
        (3, 4, 8, 40, "small", False),  # cpu 4 is not > 4
        (4, 5, 10, 50, "large", True),
        (99, 100, 200, 1000, "large", True),
        (399, 400, 800, 4000, "large", True),
    ],
)
def test_type_i_scales_with_i(catalog, index, cpu, memory_gib, pods, size, exotic):
    it = catalog[index]
    assert it.capacity == {"cpu": cpu * 1000, "memory": memory_gib * GI, "pods": pods}
    assert it.allocatable == {
        "cpu": cpu * 1000 - 100,
        "memory": memory_gib * GI - 10 * MI,
        "pods": pods,
    }
    assert it.requirements[FAKE_LABEL_INTEGER] == {str(cpu)}
    assert it.requirements[FAKE_LABEL_SIZE] == {size}
    assert (FAKE_LABEL_EXOTIC in it.requirements) is exotic
    if exotic:
        assert it.requirements[FAKE_LABEL_EXOTIC] == {"optional"}
    assert it.cheapest_price() == fake_price(cpu, memory_gib * GI)
    assert it.cheapest_price() == pytest.approx(0.1 * cpu + 0.1 * memory_gib * GI / 1e9)


def test_prices_increase_with_size(catalog):
    prices = [it.cheapest_price() for it in catalog]
    assert prices == sorted(prices)
    assert len(set(prices)) == 400
