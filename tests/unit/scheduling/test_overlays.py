"""NodeOverlay resolution: upstream's arithmetic, precedence, merging and conflicts, table-driven."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.overlays import (
    OverlayMemo,
    adjusted_price,
    by_precedence,
    overlaid_types,
    resolve_overlays,
)
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.unit.scheduling._helpers import itype

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ZONE = "zone-a"
IT = "node.kubernetes.io/instance-type"
CT = "karpenter.sh/capacity-type"


def _types() -> list[InstanceType]:
    # One zone; on-demand 1.0 / spot 0.5 (small), 2.0 / 1.0 (medium).
    return [
        itype("small", 2, 4, price=1.0, spot_price=0.5, zones=(ZONE,)),
        itype("medium", 4, 8, price=2.0, spot_price=1.0, zones=(ZONE,)),
    ]


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _summary(types: Sequence[InstanceType]) -> dict[str, tuple[dict[str, float], dict[str, int]]]:
    """type -> ({capacity type: price}, extended capacity and allocatable beyond cpu/memory/pods)."""
    out = {}
    for it in types:
        prices = {o.capacity_type: o.price for o in it.offerings}
        extra = {k: v for k, v in it.capacity.items() if k not in ("cpu", "memory", "pods")}
        assert extra == {k: v for k, v in it.allocatable.items() if k in extra}
        out[it.name] = (prices, extra)
    return out


UNCHANGED: dict[str, tuple[dict[str, float], dict[str, int]]] = {
    "small": ({"on-demand": 1.0, "spot": 0.5}, {}),
    "medium": ({"on-demand": 2.0, "spot": 1.0}, {}),
}


@pytest.mark.parametrize(
    ("change", "price", "expected"),
    [
        ("3", 1.0, 3.0),  # price: replaces
        ("0.25", 1.0, 0.25),
        ("+0.5", 1.0, 1.5),  # signed amount
        ("-0.5", 2.0, 1.5),
        ("-5", 2.0, 0.0),  # floored at 0
        ("+25%", 4.0, 5.0),  # signed percentage of the provider's price
        ("-50%", 3.0, 1.5),
        ("-100%", 3.0, 0.0),
        ("", 3.0, 3.0),
    ],
)
def test_adjusted_price(change: str, price: float, expected: float) -> None:
    assert adjusted_price(price, change) == expected


def test_precedence_is_weight_then_later_name_first() -> None:
    overlays = [
        factories.nodeoverlay("a", weight=10),
        factories.nodeoverlay("z"),
        factories.nodeoverlay("b", weight=10),
        factories.nodeoverlay("c", weight=5),
    ]
    assert [o.metadata.name for o in by_precedence(overlays)] == ["b", "a", "c", "z"]


CASES: list[tuple[str, list[NodeOverlay], dict[str, Any], frozenset[str], dict[str, str]]] = [
    (
        "price replaces every offering of the selected type",
        [factories.nodeoverlay("p", requirements=[_in(IT, "small")], price="3")],
        {**UNCHANGED, "small": ({"on-demand": 3.0, "spot": 3.0}, {})},
        frozenset(),
        {},
    ),
    (
        "empty requirements select every type",
        [factories.nodeoverlay("all", price_adjustment="+50%")],
        {
            "small": ({"on-demand": 1.5, "spot": 0.75}, {}),
            "medium": ({"on-demand": 3.0, "spot": 1.5}, {}),
        },
        frozenset(),
        {},
    ),
    (
        "a capacity-type requirement reaches only those offerings",
        [factories.nodeoverlay("s", requirements=[_in(CT, "spot")], price_adjustment="-50%")],
        {
            "small": ({"on-demand": 1.0, "spot": 0.25}, {}),
            "medium": ({"on-demand": 2.0, "spot": 0.5}, {}),
        },
        frozenset(),
        {},
    ),
    (
        "the higher weight sets the price, the lower one is not added on top",
        [
            factories.nodeoverlay("low", weight=5, price_adjustment="+1"),
            factories.nodeoverlay("high", weight=10, price="4"),
        ],
        {
            "small": ({"on-demand": 4.0, "spot": 4.0}, {}),
            "medium": ({"on-demand": 4.0, "spot": 4.0}, {}),
        },
        frozenset(),
        {},
    ),
    (
        "equal weights on the same offering: the later name wins, the other conflicts",
        [
            factories.nodeoverlay("a", weight=10, price="4"),
            factories.nodeoverlay("b", weight=10, price="5"),
        ],
        {
            "small": ({"on-demand": 5.0, "spot": 5.0}, {}),
            "medium": ({"on-demand": 5.0, "spot": 5.0}, {}),
        },
        frozenset({"a"}),
        {},
    ),
    (
        "equal weights on different offerings do not conflict",
        [
            factories.nodeoverlay("od", weight=10, requirements=[_in(CT, "on-demand")], price="4"),
            factories.nodeoverlay("spot", weight=10, requirements=[_in(CT, "spot")], price="3"),
        ],
        {
            "small": ({"on-demand": 4.0, "spot": 3.0}, {}),
            "medium": ({"on-demand": 4.0, "spot": 3.0}, {}),
        },
        frozenset(),
        {},
    ),
    (
        "a conflicting overlay is applied nowhere, not even where it alone reaches",
        [
            factories.nodeoverlay("a", weight=10, price="9"),
            factories.nodeoverlay("b", weight=10, requirements=[_in(IT, "medium")], price="3"),
        ],
        {**UNCHANGED, "medium": ({"on-demand": 3.0, "spot": 3.0}, {})},
        frozenset({"a"}),
        {},
    ),
    (
        "capacity from overlays of different weights merges; a shared resource takes the higher",
        [
            factories.nodeoverlay(
                "low", weight=1, capacity={"example.com/fuse": 9, "hugepages-2Mi": "4Mi"}
            ),
            factories.nodeoverlay(
                "high", weight=2, requirements=[_in(IT, "small")], capacity={"example.com/fuse": 2}
            ),
        ],
        {
            "small": (
                {"on-demand": 1.0, "spot": 0.5},
                {"example.com/fuse": 2, "hugepages-2Mi": 4 * 2**20},
            ),
            "medium": (
                {"on-demand": 2.0, "spot": 1.0},
                {"example.com/fuse": 9, "hugepages-2Mi": 4 * 2**20},
            ),
        },
        frozenset(),
        {},
    ),
    (
        "capacity of equal weight conflicts on a shared resource (a, with b), not on another (c)",
        [
            factories.nodeoverlay("a", weight=3, capacity={"example.com/fuse": 1}),
            factories.nodeoverlay("b", weight=3, capacity={"example.com/fuse": 2}),
            factories.nodeoverlay("c", weight=3, capacity={"example.com/gpu-slice": 4}),
        ],
        {
            "small": (
                {"on-demand": 1.0, "spot": 0.5},
                {"example.com/fuse": 2, "example.com/gpu-slice": 4},
            ),
            "medium": (
                {"on-demand": 2.0, "spot": 1.0},
                {"example.com/fuse": 2, "example.com/gpu-slice": 4},
            ),
        },
        frozenset({"a"}),
        {},
    ),
    (
        "price and capacity overlays of equal weight do not conflict",
        [
            factories.nodeoverlay("cap", weight=3, capacity={"example.com/fuse": 1}),
            factories.nodeoverlay("price", weight=3, price="7"),
        ],
        {
            "small": ({"on-demand": 7.0, "spot": 7.0}, {"example.com/fuse": 1}),
            "medium": ({"on-demand": 7.0, "spot": 7.0}, {"example.com/fuse": 1}),
        },
        frozenset(),
        {},
    ),
    (
        "a label no type defines selects nothing",
        [
            factories.nodeoverlay(
                "x", requirements=[{"key": "example.com/team", "operator": "Exists"}], price="7"
            )
        ],
        UNCHANGED,
        frozenset(),
        {},
    ),
    (
        "a restricted requirement key fails run-time validation and is not applied",
        [
            factories.nodeoverlay(
                "bad", requirements=[_in("kubernetes.io/hostname", "n1")], price="7"
            )
        ],
        UNCHANGED,
        frozenset(),
        {
            "bad": 'requirements: label "kubernetes.io/hostname" is restricted: every node gets '
            "its own hostname"
        },
    ),
]


@pytest.mark.parametrize(
    ("overlays", "expected", "conflicts", "invalid"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_resolve(
    overlays: list[NodeOverlay],
    expected: dict[str, Any],
    conflicts: frozenset[str],
    invalid: dict[str, str],
) -> None:
    types = _types()
    out = resolve_overlays(overlays, {"default": factories.nodepool()}, {"default": types})
    assert _summary(out.instance_types["default"]) == expected
    assert out.conflicts == conflicts
    assert dict(out.invalid) == invalid
    assert _summary(types) == UNCHANGED  # the provider's types are never changed in place


@pytest.mark.parametrize(
    ("requirement", "changed"),
    [
        (_in("karpenter.sh/nodepool", "b"), {"b"}),
        (_in("team", "x"), {"a"}),  # pool a's template labels
        ({"key": "team", "operator": "DoesNotExist"}, {"b"}),
    ],
)
def test_pools_are_selected_by_name_and_template_labels(
    requirement: dict[str, Any], changed: set[str]
) -> None:
    pools = {"a": factories.nodepool("a", labels={"team": "x"}), "b": factories.nodepool("b")}
    types: Mapping[str, Sequence[InstanceType]] = {"a": _types(), "b": _types()}
    out = resolve_overlays(
        [factories.nodeoverlay("o", requirements=[requirement], price="9")], pools, types
    )
    assert {p for p in pools if out.instance_types[p] is not types[p]} == changed
    for pool in changed:
        assert _summary(out.instance_types[pool])["small"] == ({"on-demand": 9.0, "spot": 9.0}, {})


def test_no_overlay_hands_back_the_same_lists() -> None:
    cluster = Cluster()
    np = factories.nodepool()
    cluster.upsert_nodepool(np)
    types = {"default": _types()}
    snapshot = cluster.snapshot(NOW)
    assert overlaid_types(snapshot, types) is types
    cluster.upsert_overlay(factories.nodeoverlay("p", price="9"))
    memo = OverlayMemo()
    first = overlaid_types(cluster.snapshot(NOW), types, memo)
    again = overlaid_types(cluster.snapshot(NOW), types, memo)
    assert again["default"] is first["default"]
    assert _summary(first["default"])["small"] == ({"on-demand": 9.0, "spot": 9.0}, {})
    cluster.upsert_overlay(factories.nodeoverlay("p", price="8"))
    changed = overlaid_types(cluster.snapshot(NOW), types, memo)
    assert _summary(changed["default"])["small"] == ({"on-demand": 8.0, "spot": 8.0}, {})


def test_overlaid_types_say_what_changed() -> None:
    overlays = [
        factories.nodeoverlay("p", requirements=[_in(IT, "small")], price="3"),
        factories.nodeoverlay("c", requirements=[_in(IT, "medium")], capacity={"example.com/x": 1}),
        factories.nodeoverlay("s", requirements=[_in(IT, "medium"), _in(CT, "spot")], price="1"),
    ]
    out = resolve_overlays(overlays, {"default": factories.nodepool()}, {"default": _types()})
    marks = {it.name: sorted(it.overlaid) for it in out.instance_types["default"]}
    assert marks == {"small": ["price"], "medium": ["capacity", "price"]}
