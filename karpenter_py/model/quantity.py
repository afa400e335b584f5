"""Kubernetes resource quantities as integers.

Canonical units used everywhere in karpenter-py: ``cpu`` in millicores, every other resource in
its base unit (bytes, pods, devices). Fractions are rounded up, as the kube-scheduler does when it
compares requests with allocatable, so a pod never looks smaller than it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Final

from karpenter_py.model.labels import RESOURCE_CPU

Resources = dict[str, int]

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_QUANTITY: Final = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_decimal(value: str | int | float) -> Decimal:
    """Parse a quantity ("1.5Gi", "250m", "2", "1e3") into an exact Decimal of base units."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string or number, not {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"invalid quantity {value!r}")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as err:
        raise QuantityError(f"invalid quantity {value!r}") from err
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return base * (Decimal(10) ** int(suffix[1:]))
    return base * _DECIMAL[suffix]


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def parse_resource(name: str, value: str | int | float) -> int:
    """A quantity of resource ``name`` in canonical units (millicores for cpu)."""
    amount = parse_decimal(value)
    if name == RESOURCE_CPU:
        return _ceil(amount * 1000)
    return _ceil(amount)


def parse_resources(values: Mapping[str, str | int | float] | None) -> Resources:
    """A ResourceList (``{"cpu": "500m", "memory": "1Gi"}``) in canonical units."""
    if not values:
        return {}
    return {name: parse_resource(name, quantity) for name, quantity in values.items()}


def format_resource(name: str, amount: int) -> str:
    """Canonical units back to a Kubernetes quantity string (binary suffixes for bytes)."""
    if name == RESOURCE_CPU:
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if amount and amount % unit == 0:
                return f"{amount // unit}{suffix}"
    return str(amount)


def format_resources(values: Mapping[str, int]) -> dict[str, str]:
    return {name: format_resource(name, amount) for name, amount in sorted(values.items())}


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """Every requested resource is available (a resource missing from ``available`` is zero)."""
    return all(amount <= available.get(name, 0) for name, amount in requests.items() if amount > 0)


def maximum(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for name, amount in b.items():
        if amount > out.get(name, 0):
            out[name] = amount
    return out
