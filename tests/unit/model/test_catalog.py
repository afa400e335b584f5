"""The KWOK catalog format loader and upstream's built-in kwok catalog."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from karpenter_py.model.catalog import (
    KWOK_ZONES,
    go_quantity_string,
    instance_types_from_kwok_json,
    kwok_catalog,
    kwok_catalog_json,
)
from karpenter_py.model.fields import ParseError
from karpenter_py.model.labels import (
    KWOK_LABEL_INSTANCE_CPU,
    KWOK_LABEL_INSTANCE_FAMILY,
    KWOK_LABEL_INSTANCE_MEMORY,
    KWOK_LABEL_INSTANCE_SIZE,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_TOPOLOGY_ZONE,
)

GI = 2**30
MI = 2**20


def offering(
    price: Any = 0.1, zone: Any = "zone-a", ct: Any = "spot", **extra: Any
) -> dict[str, Any]:
    return {
        "Price": price,
        "Available": True,
        "Requirements": [
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [ct]},
            {"key": LABEL_TOPOLOGY_ZONE, "operator": "In", "values": [zone]},
        ],
        **extra,
    }


def record(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "c-4x-amd64-linux",
        "offerings": [offering(0.07, "zone-a", "spot"), offering(0.1, "zone-b", "on-demand")],
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "4", "memory": "16Gi", "pods": "64", "ephemeral-storage": "20Gi"},
    }
    base.update(overrides)
    return base


# --------------------------------------------------------------------------- happy paths


def test_record_becomes_instance_type_like_upstream():
    (it,) = instance_types_from_kwok_json([record()])
    assert it.name == "c-4x-amd64-linux"
    assert it.requirements == {
        LABEL_INSTANCE_TYPE: frozenset({"c-4x-amd64-linux"}),
        LABEL_ARCH: frozenset({"amd64"}),
        LABEL_OS: frozenset({"linux"}),
        LABEL_TOPOLOGY_ZONE: frozenset({"zone-a", "zone-b"}),
        LABEL_CAPACITY_TYPE: frozenset({"spot", "on-demand"}),
        # Upstream's parseSizeFromType falls back to the cpu quantity for non-AWS names.
        KWOK_LABEL_INSTANCE_SIZE: frozenset({"4"}),
        KWOK_LABEL_INSTANCE_FAMILY: frozenset({"c"}),
        KWOK_LABEL_INSTANCE_CPU: frozenset({"4"}),
        KWOK_LABEL_INSTANCE_MEMORY: frozenset({"16Gi"}),
    }
    assert it.capacity == {"cpu": 4000, "memory": 16 * GI, "pods": 64, "ephemeral-storage": 20 * GI}
    assert dict(it.overhead.kube_reserved) == {"cpu": 100, "memory": 10 * MI}
    assert it.allocatable == {
        "cpu": 3900,
        "memory": 16 * GI - 10 * MI,
        "pods": 64,
        "ephemeral-storage": 20 * GI,
    }
    assert [(o.zone, o.capacity_type, o.price, o.available) for o in it.offerings] == [
        ("zone-a", "spot", 0.07, True),
        ("zone-b", "on-demand", 0.1, True),
    ]
    assert it.cheapest_price() == 0.07


@pytest.mark.parametrize(
    ("name", "resources", "size", "family", "cpu", "memory"),
    [
        ("m5.large", {"cpu": "2", "memory": "8Gi"}, "large", "m5", "2", "8Gi"),
        ("m5.metal", {"cpu": "96", "memory": "384Gi"}, "metal", "m5", "96", "384Gi"),
        ("c6g.12xlarge", {"cpu": 48, "memory": "98304Mi"}, "12xlarge", "c6g", "48", "96Gi"),
        ("n2-standard-8", {"cpu": "8", "memory": "32Gi"}, "8", "n2", "8", "32Gi"),
        ("Standard_D2s_v3", {"cpu": "2", "memory": "8Gi"}, "2", "Standard_D2s_v3"[:1], "2", "8Gi"),
        ("tiny", {"cpu": "500m", "memory": "1.5Gi"}, "500m", "t", "500m", "1536Mi"),
        ("s-2x-arm64-linux", {"cpu": 2.0, "memory": "8G"}, "2", "s", "2", "8G"),
    ],
)
def test_derived_kwok_labels(name, resources, size, family, cpu, memory):
    (it,) = instance_types_from_kwok_json([record(name=name, resources=resources)])
    assert it.requirements[KWOK_LABEL_INSTANCE_SIZE] == {size}
    assert it.requirements[KWOK_LABEL_INSTANCE_FAMILY] == {family}
    assert it.requirements[KWOK_LABEL_INSTANCE_CPU] == {cpu}
    assert it.requirements[KWOK_LABEL_INSTANCE_MEMORY] == {memory}


def test_pods_default_to_110_and_extended_resources_pass_through():
    (it,) = instance_types_from_kwok_json(
        [record(resources={"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"})]
    )
    assert it.capacity == {"cpu": 8000, "memory": 32 * GI, "pods": 110, "nvidia.com/gpu": 2}
    assert it.allocatable["nvidia.com/gpu"] == 2


def test_multiple_operating_systems_and_labels():
    (it,) = instance_types_from_kwok_json(
        [
            record(
                operatingSystems=["linux", "windows"],
                labels={"example.com/team": "a", LABEL_ARCH: "ignored"},
            )
        ]
    )
    assert it.requirements[LABEL_OS] == {"linux", "windows"}
    assert it.requirements["example.com/team"] == {"a"}
    # Computed requirements win over a label of the same key.
    assert it.requirements[LABEL_ARCH] == {"amd64"}


def test_offering_requirements_expand_and_extra_keys_become_labels():
    multi = {
        "Price": 0.5,
        "Requirements": [
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]},
            {"key": LABEL_TOPOLOGY_ZONE, "operator": "In", "values": ["z1", "z2"]},
            {"key": "topology.k8s.aws/zone-id", "operator": "In", "values": ["use1-az1"]},
        ],
    }
    (it,) = instance_types_from_kwok_json([record(offerings=[multi])])
    assert [(o.zone, o.capacity_type) for o in it.offerings] == [
        ("z1", "spot"),
        ("z1", "on-demand"),
        ("z2", "spot"),
        ("z2", "on-demand"),
    ]
    assert all(o.available for o in it.offerings)  # Available defaults to true
    assert all(o.label_value("topology.k8s.aws/zone-id") == "use1-az1" for o in it.offerings)
    assert it.offerings[0].label_value(LABEL_TOPOLOGY_ZONE) == "z1"


def test_unavailable_offerings_are_respected_and_reservation_capacity_kept():
    offerings = [
        offering(0.01, "z1", "spot", Available=False),
        offering(0.2, "z1", "reserved", ReservationCapacity=3),
    ]
    (it,) = instance_types_from_kwok_json([record(offerings=offerings)])
    assert [o.available for o in it.offerings] == [False, True]
    assert it.offerings[1].reservation_capacity == 3
    assert it.cheapest_price() == 0.2
    assert len(it.available_offerings()) == 1


def test_round_trips_through_json_text():
    data = json.loads(json.dumps([record(), record(name="m-8x-arm64-linux", architecture="arm64")]))
    names = [it.name for it in instance_types_from_kwok_json(data)]
    assert names == ["c-4x-amd64-linux", "m-8x-arm64-linux"]


# --------------------------------------------------------------------------- error paths


def _mutate(path: tuple[Any, ...], value: Any, *, delete: bool = False) -> list[dict[str, Any]]:
    data = [record(), record(name="second")]
    target: Any = data
    for step in path[:-1]:
        target = target[step]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


ERROR_CASES = [
    # (mutation path, new value or DELETE, expected message prefix)
    (
        (1, "offerings", 0, "Price"),
        "0.1",
        "catalog[1].offerings[0].Price: expected a number, got the string '0.1'",
    ),
    (
        (1, "offerings", 0, "Price"),
        True,
        "catalog[1].offerings[0].Price: expected a number, got a boolean",
    ),
    ((0, "offerings", 1, "Price"), -1, "catalog[0].offerings[1].Price: must not be negative"),
    (
        (0, "offerings", 1, "Price"),
        "DELETE",
        "catalog[0].offerings[1].Price: required field is missing",
    ),
    (
        (0, "offerings", 0, "Available"),
        "yes",
        "catalog[0].offerings[0].Available: expected true or false",
    ),
    (
        (0, "offerings", 0, "ReservationCapacity"),
        -2,
        "catalog[0].offerings[0].ReservationCapacity: expected a whole number",
    ),
    (
        (0, "offerings", 0, "Requirements"),
        "DELETE",
        "catalog[0].offerings[0].Requirements: required field is missing",
    ),
    (
        (0, "offerings", 0, "Requirements"),
        {},
        "catalog[0].offerings[0].Requirements: expected a list, got an object",
    ),
    (
        (0, "offerings", 0, "Requirements", 1),
        "DELETE",
        "catalog[0].offerings[0].Requirements: missing a requirement on topology.kubernetes.io/zone",
    ),
    (
        (0, "offerings", 0, "Requirements", 0),
        "DELETE",
        "catalog[0].offerings[0].Requirements: missing a requirement on karpenter.sh/capacity-type",
    ),
    (
        (0, "offerings", 0, "Requirements", 0, "values", 0),
        "ondemand",
        "catalog[0].offerings[0].Requirements[0].values[0]: unknown capacity type 'ondemand'",
    ),
    (
        (0, "offerings", 0, "Requirements", 1, "operator"),
        "NotIn",
        "catalog[0].offerings[0].Requirements[1]: topology.kubernetes.io/zone must use operator In",
    ),
    (
        (0, "offerings", 0, "Requirements", 1, "operator"),
        "Sometimes",
        "catalog[0].offerings[0].Requirements[1].operator: unknown operator 'Sometimes'",
    ),
    (
        (0, "offerings", 0, "Requirements", 1, "values"),
        [],
        "catalog[0].offerings[0].Requirements[1]: topology.kubernetes.io/zone must use operator In with at least one value",
    ),
    (
        (0, "offerings", 0, "Requirements", 1, "values"),
        [3],
        "catalog[0].offerings[0].Requirements[1].values[0]: expected a string, got the number 3",
    ),
    (
        (0, "offerings", 0, "Requirements", 1, "key"),
        "",
        "catalog[0].offerings[0].Requirements[1].key: must not be empty",
    ),
    ((0, "offerings"), {}, "catalog[0].offerings: expected a list, got an object"),
    (
        (0, "offerings", 0),
        "spot",
        "catalog[0].offerings[0]: expected an object, got the string 'spot'",
    ),
    ((0, "name"), "DELETE", "catalog[0].name: required field is missing"),
    ((0, "name"), 7, "catalog[0].name: expected a string, got the number 7"),
    (
        (1, "name"),
        "c-4x-amd64-linux",
        "catalog[1].name: duplicate instance type 'c-4x-amd64-linux' (first at catalog[0])",
    ),
    ((0, "architecture"), None, "catalog[0].architecture: expected a string, got null"),
    (
        (0, "operatingSystems"),
        [],
        "catalog[0].operatingSystems: must name at least one operating system",
    ),
    (
        (0, "operatingSystems"),
        "linux",
        "catalog[0].operatingSystems: expected a list, got the string 'linux'",
    ),
    ((0, "resources"), "DELETE", "catalog[0].resources: required field is missing"),
    ((0, "resources", "memory"), "8Gb", "catalog[0].resources.memory: invalid quantity '8Gb'"),
    (
        (0, "resources", "memory"),
        "DELETE",
        "catalog[0].resources.memory: required resource is missing",
    ),
    ((0, "resources", "cpu"), "-2", "catalog[0].resources.cpu: must not be negative"),
    ((0, "resources", "pods"), [1], "catalog[0].resources.pods: expected a quantity"),
    ((0, "labels"), ["a"], "catalog[0].labels: expected an object, got a list"),
    ((0, "labels"), {"team": 1}, "catalog[0].labels.team: expected a string, got the number 1"),
]


@pytest.mark.parametrize(
    ("path", "value", "message"), ERROR_CASES, ids=[c[2].split(":")[0] for c in ERROR_CASES]
)
def test_malformed_input_names_the_path(path, value, message):
    data = _mutate(path, None, delete=True) if value == "DELETE" else _mutate(path, value)
    with pytest.raises(ParseError) as info:
        instance_types_from_kwok_json(data)
    assert str(info.value).startswith(message), str(info.value)
    assert isinstance(info.value, ValueError)


def test_extra_requirement_must_be_single_valued_in():
    bad = offering()
    bad["Requirements"].append({"key": "example.com/rack", "operator": "Exists"})
    with pytest.raises(ParseError) as info:
        instance_types_from_kwok_json([record(offerings=[bad])])
    assert info.value.path == "catalog[0].offerings[0].Requirements[2]"
    assert "only operator In with exactly one value" in info.value.problem


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "x"}, "types.json: expected a list, got an object"),
        ("[]", "types.json: expected a list, got the string '[]'"),
        ([1], "types.json[0]: expected an object, got the number 1"),
    ],
)
def test_top_level_errors_use_source(data, message):
    with pytest.raises(ParseError, match=f"^{re.escape(message)}"):
        instance_types_from_kwok_json(data, source="types.json")


def test_empty_catalog_is_empty():
    assert instance_types_from_kwok_json([]) == []


# --------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("4", "4"),
        (4, "4"),
        ("1.5", "1500m"),
        (1.5, "1500m"),
        ("100m", "100m"),
        ("2000", "2k"),
        ("1e3", "1e3"),
        ("0", "0"),
        ("2048Mi", "2Gi"),
        ("2048Gi", "2Ti"),
        ("1536Mi", "1536Mi"),
        ("0.5Gi", "512Mi"),
        ("1.5Ki", "1536"),
        ("20G", "20G"),
        ("1Ei", "1Ei"),
    ],
)
def test_go_quantity_string(value, expected):
    assert go_quantity_string(value) == expected


# --------------------------------------------------------------------------- built-in kwok catalog


def test_kwok_catalog_shape():
    its = kwok_catalog()
    assert len(its) == 144  # 12 sizes x 3 families x 2 OS x 2 arch
    names = [it.name for it in its]
    assert names[:4] == [
        "c-1x-amd64-linux",
        "c-1x-arm64-linux",
        "c-1x-amd64-windows",
        "c-1x-arm64-windows",
    ]
    assert names[-1] == "m-256x-arm64-windows"
    assert len(set(names)) == 144
    for it in its:
        assert len(it.offerings) == 8
        assert {o.zone for o in it.offerings} == set(KWOK_ZONES)
        assert it.requirements[LABEL_CAPACITY_TYPE] == {"spot", "on-demand"}
        assert it.capacity["ephemeral-storage"] == 20 * GI
        assert it.allocatable["cpu"] == it.capacity["cpu"] - 100
        assert it.allocatable["memory"] == it.capacity["memory"] - 10 * MI


@pytest.mark.parametrize(
    ("name", "cpu", "memory", "pods", "on_demand", "spot", "labels"),
    [
        # Prices as upstream's instance_types.json has them (same float arithmetic).
        (
            "c-1x-amd64-linux",
            1000,
            2 * GI,
            16,
            0.027147483648,
            0.019003238553599998,
            ("1", "c", "1", "2Gi"),
        ),
        ("s-4x-arm64-linux", 4000, 16 * GI, 64, 0.1171798691840, None, ("4", "s", "4", "16Gi")),
        ("m-128x-amd64-windows", 128000, 1024 * GI, 1024, None, None, ("128", "m", "128", "1Ti")),
        (
            "m-256x-arm64-windows",
            256000,
            2048 * GI,
            1024,
            8.599023255552,
            6.019316278886399,
            ("256", "m", "256", "2Ti"),
        ),
    ],
)
def test_kwok_catalog_entries(name, cpu, memory, pods, on_demand, spot, labels):
    it = next(it for it in kwok_catalog() if it.name == name)
    assert (it.capacity["cpu"], it.capacity["memory"], it.capacity["pods"]) == (cpu, memory, pods)
    od_prices = {o.price for o in it.offerings if o.capacity_type == "on-demand"}
    spot_prices = {o.price for o in it.offerings if o.capacity_type == "spot"}
    assert len(od_prices) == len(spot_prices) == 1
    (od,) = od_prices
    if on_demand is not None:
        assert od == pytest.approx(on_demand, rel=1e-15)
    if spot is not None:
        assert spot_prices == {spot}  # bit-for-bit the float upstream's generator wrote
    assert spot_prices == {od * 0.7}
    size, family, cpu_label, memory_label = labels
    assert it.requirements[KWOK_LABEL_INSTANCE_SIZE] == {size}
    assert it.requirements[KWOK_LABEL_INSTANCE_FAMILY] == {family}
    assert it.requirements[KWOK_LABEL_INSTANCE_CPU] == {cpu_label}
    assert it.requirements[KWOK_LABEL_INSTANCE_MEMORY] == {memory_label}
    arch = "arm64" if "arm64" in name else "amd64"
    assert it.requirements[LABEL_ARCH] == {arch}
    assert it.requirements[LABEL_OS] == {"windows" if name.endswith("windows") else "linux"}


def test_kwok_catalog_json_matches_upstream_file_layout():
    first = kwok_catalog_json()[0]
    assert first == {
        "name": "c-1x-amd64-linux",
        "offerings": first["offerings"],
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "1", "ephemeral-storage": "20Gi", "memory": "2Gi", "pods": "16"},
    }
    offerings = first["offerings"]
    assert isinstance(offerings, list)
    assert offerings[0] == {
        "Price": 0.019003238553599998,
        "Available": True,
        "Requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]},
        ],
    }
    # The generator's output is a valid catalog that loads to the same instance types.
    reloaded = instance_types_from_kwok_json(copy.deepcopy(kwok_catalog_json()))
    assert [it.name for it in reloaded] == [it.name for it in kwok_catalog()]
