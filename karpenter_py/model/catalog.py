"""Instance-type catalogs in upstream's KWOK provider JSON format, and the built-in KWOK catalog.

The format is what upstream's kwok provider reads from ``INSTANCE_TYPES_FILE_PATH``
(kubernetes-sigs/karpenter ``kwok/cloudprovider/helpers.go``)::

    [{"name": "c-4x-amd64-linux",
      "offerings": [{"Price": 0.1, "Available": true,
                     "Requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                       "values": ["spot"]},
                                      {"key": "topology.kubernetes.io/zone", "operator": "In",
                                       "values": ["test-zone-a"]}]}],
      "architecture": "amd64", "operatingSystems": ["linux"],
      "resources": {"cpu": "4", "memory": "16Gi", "pods": "64", "ephemeral-storage": "20Gi"},
      "labels": {"example.com/team": "a"}}]

How a record becomes an ``InstanceType`` (as upstream's ``setDefaultOptions``/``newInstanceType``):

- requirements: instance type name, ``kubernetes.io/arch``, ``kubernetes.io/os`` (every entry of
  ``operatingSystems``), zone and capacity type (the union over the offerings), and the
  ``karpenter.kwok.sh/instance-{size,family,cpu,memory}`` labels. ``instance-size`` is the size part
  of an AWS-style name (``m5.large`` -> ``large``), otherwise the cpu quantity as Kubernetes prints
  it (``c-4x-amd64-linux`` with cpu ``4`` -> ``4``); ``instance-family`` is the name up to the first
  ``.`` or ``-`` (else its first character); ``instance-cpu``/``instance-memory`` are the cpu and
  memory quantities as Kubernetes prints them (``4``, ``16Gi``). ``labels`` (our extension, from
  issue #2) add single-valued requirements.
- capacity: ``resources``, with ``pods`` defaulting to 110.
- overhead: kube-reserved 100m cpu and 10Mi memory.
- offerings: one per (zone, capacity type) of each entry's requirements; any other single-valued
  ``In`` requirement becomes an offering label.

Deliberate differences from upstream, both for a file a person wrote: ``Available: false`` is
respected (upstream forces every offering available), and malformed input is rejected with the
path of the bad field instead of being zero-valued.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Final

from karpenter_py.model.fields import (
    ParseError,
    describe,
    json_list,
    json_number,
    json_object,
    json_str,
    json_str_list,
    required_key,
    string_map,
)
from karpenter_py.model.instancetype import InstanceType, Offering, Overhead, make_instance_type
from karpenter_py.model.labels import (
    ARCH_AMD64,
    ARCH_ARM64,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    CAPACITY_TYPES,
    KWOK_LABEL_INSTANCE_CPU,
    KWOK_LABEL_INSTANCE_FAMILY,
    KWOK_LABEL_INSTANCE_MEMORY,
    KWOK_LABEL_INSTANCE_SIZE,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_TOPOLOGY_ZONE,
    RESOURCE_CPU,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_MEMORY,
    RESOURCE_PODS,
)
from karpenter_py.model.quantity import QuantityError, parse_decimal, parse_resource

__all__ = [
    "KWOK_DEFAULT_PODS",
    "KWOK_KUBE_RESERVED",
    "KWOK_ZONES",
    "go_quantity_string",
    "instance_types_from_kwok_json",
    "kwok_catalog",
    "kwok_catalog_json",
]

# Every kwok instance type reserves this much for the kubelet (helpers.go newInstanceType).
KWOK_KUBE_RESERVED: Final[Mapping[str, int]] = {RESOURCE_CPU: 100, RESOURCE_MEMORY: 10 * 2**20}
# Kubernetes' default max pods, used when a record names no "pods" resource.
KWOK_DEFAULT_PODS: Final = 110
# Zones of upstream's generated catalog (kwok/tools/gen_instance_types.go).
KWOK_ZONES: Final = ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")

# AWS names are family.size; the kwok provider recognises these sizes (helpers.go awsRegexp).
_AWS_NAME: Final = re.compile(r"^\w+\.(nano|micro|small|medium|large|\d*xlarge|metal)$")
_FAMILY_DELIM: Final = re.compile(r"[.-]")
_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"})


# --------------------------------------------------------------------------- Go quantity strings

_BINARY_SUFFIXES: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES: Final = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}


def go_quantity_string(value: str | int | float) -> str:
    """The canonical string Kubernetes prints for a quantity (``resource.Quantity.String()``).

    ``"2048Mi"`` -> ``"2Gi"``, ``"1.5"`` -> ``"1500m"``, ``"2000"`` -> ``"2k"``, ``"1e3"`` -> ``"1e3"``.
    Binary suffixes stay binary when the value is a whole number of at least 1024; everything else
    is printed with decimal SI suffixes (or exponent form if it was written that way). Values are
    rounded up to nano units first, as Kubernetes does.
    """
    text = str(value).strip()
    amount = parse_decimal(value)
    # Kubernetes keeps at most nano precision, rounding up.
    amount = (amount * 10**9).to_integral_value(rounding=ROUND_CEILING) / Decimal(10**9)
    if amount == 0:
        return "0"
    binary = text.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))
    exponent_form = re.search(r"[0-9.][eE][+-]?[0-9]+$", text) is not None
    if binary and abs(amount) >= 1024 and amount == amount.to_integral_value():
        number = int(amount)
        power = 0
        while power < len(_BINARY_SUFFIXES) - 1 and number % 1024 == 0:
            number //= 1024
            power += 1
        return f"{number}{_BINARY_SUFFIXES[power]}"
    # Decimal: strip factors of ten from the mantissa, then make the exponent a multiple of three.
    sign, digits, exp = amount.normalize().as_tuple()
    assert isinstance(exp, int)
    mantissa = int("".join(map(str, digits)))
    exponent = exp
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    prefix = "-" if sign else ""
    if exponent_form:
        return f"{prefix}{mantissa}" + (f"e{exponent}" if exponent else "")
    suffix = _DECIMAL_SUFFIXES.get(exponent)
    if suffix is None:
        return f"{prefix}{mantissa}e{exponent}"
    return f"{prefix}{mantissa}{suffix}"


# --------------------------------------------------------------------------- parsing


def _parse_resources(value: object, path: str) -> tuple[dict[str, int], dict[str, str]]:
    """Canonical amounts plus the Kubernetes string form of each quantity (for labels)."""
    raw = json_object(value, path, required=True)
    amounts: dict[str, int] = {}
    strings: dict[str, str] = {}
    for name, quantity in raw.items():
        where = f"{path}.{name}"
        if isinstance(quantity, bool) or not isinstance(quantity, str | int | float):
            raise ParseError(
                where, f'expected a quantity such as "4" or "16Gi", got {describe(quantity)}'
            )
        try:
            amount = parse_resource(name, quantity)
            strings[name] = go_quantity_string(quantity)
        except QuantityError:
            raise ParseError(where, f"invalid quantity {quantity!r}") from None
        if amount < 0:
            raise ParseError(where, f"must not be negative, got {quantity!r}")
        amounts[name] = amount
    for required in (RESOURCE_CPU, RESOURCE_MEMORY):
        if required not in amounts:
            raise ParseError(f"{path}.{required}", "required resource is missing")
    amounts.setdefault(RESOURCE_PODS, KWOK_DEFAULT_PODS)
    return amounts, strings


def _parse_requirement(value: object, path: str) -> tuple[str, str, tuple[str, ...]]:
    req = json_object(value, path, required=True)
    key = json_str(required_key(req, "key", path), f"{path}.key", required=True, nonempty=True)
    operator = json_str(
        required_key(req, "operator", path), f"{path}.operator", required=True, nonempty=True
    )
    if operator not in _OPERATORS:
        raise ParseError(f"{path}.operator", f"unknown operator {operator!r}")
    values = tuple(json_str_list(req.get("values", []), f"{path}.values", required=True))
    return key, operator, values


def _offering_requirements(
    value: object, where: str
) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
    """Zones, capacity types and extra labels of one offering's ``Requirements``."""
    zones: tuple[str, ...] = ()
    capacity_types: tuple[str, ...] = ()
    labels: dict[str, str] = {}
    for r_index, raw_req in enumerate(json_list(value, where, required=True)):
        r_path = f"{where}[{r_index}]"
        key, operator, values = _parse_requirement(raw_req, r_path)
        if key in (LABEL_TOPOLOGY_ZONE, LABEL_CAPACITY_TYPE):
            if operator != "In" or not values:
                raise ParseError(r_path, f"{key} must use operator In with at least one value")
            if key == LABEL_TOPOLOGY_ZONE:
                zones = values
                continue
            for v_index, ct in enumerate(values):
                if ct not in CAPACITY_TYPES:
                    raise ParseError(
                        f"{r_path}.values[{v_index}]",
                        f"unknown capacity type {ct!r} (expected one of {', '.join(CAPACITY_TYPES)})",
                    )
            capacity_types = values
        elif operator == "In" and len(values) == 1:
            labels[key] = values[0]
        else:
            raise ParseError(
                r_path,
                f"only operator In with exactly one value is supported for {key!r}, "
                f"got {operator} {list(values)}",
            )
    if not zones:
        raise ParseError(where, f"missing a requirement on {LABEL_TOPOLOGY_ZONE}")
    if not capacity_types:
        raise ParseError(where, f"missing a requirement on {LABEL_CAPACITY_TYPE}")
    return zones, capacity_types, labels


def _parse_offerings(value: object, path: str) -> list[Offering]:
    offerings: list[Offering] = []
    for index, raw in enumerate(json_list(value, path, required=True)):
        where = f"{path}[{index}]"
        record = json_object(raw, where, required=True)
        price = json_number(required_key(record, "Price", where), f"{where}.Price", required=True)
        if price < 0:
            raise ParseError(f"{where}.Price", f"must not be negative, got {price!r}")
        available = record.get("Available", True)
        if not isinstance(available, bool):
            raise ParseError(
                f"{where}.Available", f"expected true or false, got {describe(available)}"
            )
        reservation = record.get("ReservationCapacity", 0)
        if isinstance(reservation, bool) or not isinstance(reservation, int) or reservation < 0:
            raise ParseError(
                f"{where}.ReservationCapacity",
                f"expected a whole number >= 0, got {describe(reservation)}",
            )
        zones, capacity_types, labels = _offering_requirements(
            required_key(record, "Requirements", where), f"{where}.Requirements"
        )
        # A requirement naming several zones or capacity types offers each combination.
        offerings.extend(
            Offering(
                zone=zone,
                capacity_type=ct,
                price=price,
                available=available,
                labels=dict(labels),
                reservation_capacity=reservation,
            )
            for zone in zones
            for ct in capacity_types
        )
    return offerings


def _size_label(name: str, cpu: str) -> str:
    match = _AWS_NAME.match(name)
    return match.group(1) if match else cpu


def _family_label(name: str) -> str:
    parts = _FAMILY_DELIM.split(name, maxsplit=1)
    return name[:1] if len(parts) < 2 else parts[0]


def _parse_instance_type(value: object, path: str) -> InstanceType:
    record = json_object(value, path, required=True)
    name = json_str(
        required_key(record, "name", path), f"{path}.name", required=True, nonempty=True
    )
    arch = json_str(
        required_key(record, "architecture", path),
        f"{path}.architecture",
        required=True,
        nonempty=True,
    )
    systems_path = f"{path}.operatingSystems"
    systems_raw = json_list(
        required_key(record, "operatingSystems", path), systems_path, required=True
    )
    if not systems_raw:
        raise ParseError(systems_path, "must name at least one operating system")
    systems = [
        json_str(s, f"{systems_path}[{i}]", required=True, nonempty=True)
        for i, s in enumerate(systems_raw)
    ]
    capacity, strings = _parse_resources(
        required_key(record, "resources", path), f"{path}.resources"
    )
    offerings = _parse_offerings(required_key(record, "offerings", path), f"{path}.offerings")
    cpu, memory = strings[RESOURCE_CPU], strings[RESOURCE_MEMORY]

    requirements: dict[str, frozenset[str]] = {
        key: frozenset([val])
        for key, val in string_map(record.get("labels"), f"{path}.labels").items()
    }
    # Computed requirements win over user labels of the same key, as upstream's would.
    requirements.update(
        {
            LABEL_INSTANCE_TYPE: frozenset([name]),
            LABEL_ARCH: frozenset([arch]),
            LABEL_OS: frozenset(systems),
            LABEL_TOPOLOGY_ZONE: frozenset(o.zone for o in offerings),
            LABEL_CAPACITY_TYPE: frozenset(o.capacity_type for o in offerings),
            KWOK_LABEL_INSTANCE_SIZE: frozenset([_size_label(name, cpu)]),
            KWOK_LABEL_INSTANCE_FAMILY: frozenset([_family_label(name)]),
            KWOK_LABEL_INSTANCE_CPU: frozenset([cpu]),
            KWOK_LABEL_INSTANCE_MEMORY: frozenset([memory]),
        }
    )
    return make_instance_type(
        name=name,
        requirements=requirements,
        capacity=capacity,
        offerings=offerings,
        overhead=Overhead(kube_reserved=dict(KWOK_KUBE_RESERVED)),
    )


def instance_types_from_kwok_json(data: object, *, source: str = "catalog") -> list[InstanceType]:
    """Instance types from a parsed KWOK catalog (a JSON list); ``source`` prefixes error paths.

    Raises ``ParseError`` naming the first malformed field, e.g.
    ``catalog[3].offerings[0].Price: expected a number, got the string '0.1'``.
    """
    records = json_list(data, source, required=True)
    out: list[InstanceType] = []
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        instance_type = _parse_instance_type(record, f"{source}[{index}]")
        if instance_type.name in seen:
            raise ParseError(
                f"{source}[{index}].name",
                f"duplicate instance type {instance_type.name!r} (first at {source}[{seen[instance_type.name]}])",
            )
        seen[instance_type.name] = index
        out.append(instance_type)
    return out


# --------------------------------------------------------------------------- built-in kwok catalog

_KWOK_CPUS: Final = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
_KWOK_MEMORY_FACTORS: Final = ((2, "c"), (4, "s"), (8, "m"))  # GiB per vCPU -> family
_KWOK_OS: Final = ("linux", "windows")
_KWOK_ARCHES: Final = (ARCH_AMD64, ARCH_ARM64)
_KWOK_SPOT_FACTOR: Final = 0.7
_KWOK_MAX_PODS: Final = 1024


def _kwok_price(cpu: int, memory_bytes: int) -> float:
    # gen_instance_types.go priceFromResources: 0.025 per vCPU + 0.001 per 1e9 bytes of memory.
    return 0.0 + 0.025 * float(cpu) + 0.001 * float(memory_bytes) / 1e9


def kwok_catalog_json() -> list[dict[str, object]]:
    """Upstream's built-in kwok catalog (``instance_types.json``) as the JSON records it ships.

    144 types: sizes 1..256 vCPU x families c/s/m (2/4/8 GiB per vCPU) x linux/windows x
    amd64/arm64, pods = min(16 x vCPU, 1024), 20Gi ephemeral storage, offered spot and on-demand in
    test-zone-a..d, on-demand priced 0.025/vCPU + 0.001/GB, spot at 70 % of that.
    """
    records: list[dict[str, object]] = []
    for cpu in _KWOK_CPUS:
        for factor, family in _KWOK_MEMORY_FACTORS:
            for os_name in _KWOK_OS:
                for arch in _KWOK_ARCHES:
                    memory_gi = cpu * factor
                    price = _kwok_price(cpu, memory_gi * 2**30)
                    offerings: list[dict[str, object]] = [
                        {
                            "Price": price * _KWOK_SPOT_FACTOR
                            if ct == CAPACITY_TYPE_SPOT
                            else price,
                            "Available": True,
                            "Requirements": [
                                {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [ct]},
                                {"key": LABEL_TOPOLOGY_ZONE, "operator": "In", "values": [zone]},
                            ],
                        }
                        for zone in KWOK_ZONES
                        for ct in (CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND)
                    ]
                    records.append(
                        {
                            "name": f"{family}-{cpu}x-{arch}-{os_name}",
                            "offerings": offerings,
                            "architecture": arch,
                            "operatingSystems": [os_name],
                            "resources": {
                                RESOURCE_CPU: str(cpu),
                                RESOURCE_EPHEMERAL_STORAGE: "20Gi",
                                RESOURCE_MEMORY: go_quantity_string(f"{memory_gi}Gi"),
                                RESOURCE_PODS: str(min(cpu * 16, _KWOK_MAX_PODS)),
                            },
                        }
                    )
    return records


def kwok_catalog() -> list[InstanceType]:
    """Upstream's built-in kwok catalog, loaded the way the kwok provider loads it."""
    return instance_types_from_kwok_json(kwok_catalog_json(), source="kwok-catalog")
