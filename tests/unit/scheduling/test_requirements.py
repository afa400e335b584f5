"""The requirement algebra on its own: operators, intersections, compatibility, round trips."""

from __future__ import annotations

import pytest

from karpenter_py.model.core import SelectorRequirement
from karpenter_py.scheduling.requirements import (
    WELL_KNOWN,
    Req,
    Requirements,
    compatible,
    intersects,
)
from tests.unit.scheduling._helpers import ZONE

K = "team"


def sel(op: str, *values: str, key: str = K, mv: int | None = None) -> SelectorRequirement:
    return SelectorRequirement(key, op, tuple(values), mv)


def req(op: str, *values: str, key: str = K, mv: int | None = None) -> Req:
    return Req.from_selector(sel(op, *values, key=key, mv=mv))


def reqs(*items: tuple[str, ...], key: str = K) -> Requirements:
    return Requirements.of(req(op, *vals, key=key) for op, *vals in items)


PROBES = ("a", "b", "c", "0", "1", "2", "3", "4", "5", "6", "10", "x")


def allowed(r: Req) -> set[str]:
    return {v for v in PROBES if r.has(v)}


# ----------------------------------------------------------------------------- single operators


@pytest.mark.parametrize(
    ("op", "values", "expected", "operator"),
    [
        ("In", ("a", "b"), {"a", "b"}, "In"),
        ("NotIn", ("a", "b"), set(PROBES) - {"a", "b"}, "NotIn"),
        ("Exists", (), set(PROBES), "Exists"),
        ("DoesNotExist", (), set(), "DoesNotExist"),
        ("Gt", ("3",), {"4", "5", "6", "10"}, "Gt"),
        ("Gte", ("3",), {"3", "4", "5", "6", "10"}, "Gt"),
        ("Lt", ("3",), {"0", "1", "2"}, "Lt"),
        ("Lte", ("3",), {"0", "1", "2", "3"}, "Lt"),
    ],
)
def test_operator_semantics(op, values, expected, operator):
    r = req(op, *values)
    assert allowed(r) == expected
    assert r.operator() == operator


@pytest.mark.parametrize("op", ["Gt", "Lt", "Gte", "Lte"])
@pytest.mark.parametrize("values", [(), ("a",), ("1", "2")])
def test_bound_operators_need_one_integer(op, values):
    with pytest.raises(ValueError, match="exactly one integer"):
        req(op, *values)


def test_unknown_operator_is_rejected():
    with pytest.raises(ValueError, match="unknown operator"):
        req("Near", "1")


# ----------------------------------------------------------------------------- intersections


@pytest.mark.parametrize(
    ("left", "right", "expected", "operator"),
    [
        (("In", "a", "b"), ("In", "b", "c"), {"b"}, "In"),
        (("In", "a", "b"), ("In", "c"), set(), "DoesNotExist"),
        (("In", "a", "b"), ("NotIn", "a"), {"b"}, "In"),
        (("NotIn", "a"), ("NotIn", "b"), set(PROBES) - {"a", "b"}, "NotIn"),
        (("Exists",), ("In", "a"), {"a"}, "In"),
        (("Exists",), ("NotIn", "a"), set(PROBES) - {"a"}, "NotIn"),
        (("Exists",), ("DoesNotExist",), set(), "DoesNotExist"),
        (("DoesNotExist",), ("In", "a"), set(), "DoesNotExist"),
        (("DoesNotExist",), ("NotIn", "a"), set(), "DoesNotExist"),
        (("Gt", "1"), ("Lt", "5"), {"2", "3", "4"}, "Gt"),
        (("Gte", "2"), ("Lte", "2"), {"2"}, "Gt"),
        (("Gt", "3"), ("Gt", "5"), {"6", "10"}, "Gt"),
        (("Lt", "5"), ("Lt", "2"), {"0", "1"}, "Lt"),
        (("Gt", "2"), ("In", "1", "3", "10", "a"), {"3", "10"}, "In"),
        (("Lt", "4"), ("NotIn", "1"), {"0", "2", "3"}, "NotIn"),
        # an integer range with no integer in it is empty
        (("Gt", "5"), ("Lt", "6"), set(), "DoesNotExist"),
        (("Gte", "6"), ("Lte", "5"), set(), "DoesNotExist"),
    ],
)
def test_intersection(left, right, expected, operator):
    a, b = req(*left), req(*right)
    for r in (a.intersect(b), b.intersect(a)):
        assert allowed(r) == expected
        assert r.operator() == operator
    if not expected and operator == "DoesNotExist":
        assert a.intersect(b).is_empty()


def test_intersection_is_identity_preserving_for_equal_requirements():
    a = req("In", "a")
    assert a.intersect(req("In", "a")) is a


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (("In", None), ("In", 2), 2),
        (("In", 3), ("In", 2), 3),
        (("Exists", 2), ("In", None), 2),
        (("NotIn", 4), ("NotIn", None), 4),
    ],
)
def test_min_values_carried_through_intersection(left, right, expected):
    def build(spec: tuple[str, int | None]) -> Req:
        op, mv = spec
        values = ("a", "b", "c") if op == "In" else ("x",) if op == "NotIn" else ()
        return req(op, *values, mv=mv)

    assert build(left).intersect(build(right)).min_values == expected
    assert build(right).intersect(build(left)).min_values == expected


def test_requirements_of_merges_repeated_keys_and_keeps_min_values():
    r = Requirements.from_selectors(
        [sel("In", "a", "b", "c", mv=2), sel("NotIn", "c"), sel("In", "z1", key=ZONE)]
    )
    assert sorted(r) == sorted([K, ZONE])
    assert r[K].values == frozenset({"a", "b"})
    assert r[K].min_values == 2
    assert r.single_values() == {ZONE: "z1"}


def test_requirements_and_is_keywise_and_returns_self_when_unchanged():
    base = reqs(("In", "a", "b"))
    assert (base & reqs(("In", "a", "b"))) is base
    merged = base & Requirements.of([req("In", "z", key=ZONE), req("In", "b")])
    assert merged[K].values == frozenset({"b"})
    assert merged[ZONE].values == frozenset({"z"})
    assert merged.without(ZONE) == reqs(("In", "b"))


# ----------------------------------------------------------------------------- intersects / compatible


@pytest.mark.parametrize(
    ("node", "pod", "ok"),
    [
        (("In", "a"), ("In", "a", "b"), True),
        (("In", "a"), ("In", "b"), False),
        (("In", "a"), ("NotIn", "a"), False),
        (("In", "a"), ("Exists",), True),
        (("In", "a"), ("DoesNotExist",), False),
        # negative-operator exemption: two "absent is fine" requirements never conflict
        (("DoesNotExist",), ("NotIn", "a"), True),
        (("DoesNotExist",), ("DoesNotExist",), True),
        (("NotIn", "a"), ("DoesNotExist",), True),
        (("DoesNotExist",), ("In", "a"), False),
        (("DoesNotExist",), ("Exists",), False),
        (("Gt", "4"), ("Lt", "3"), False),
        (("Gt", "4"), ("Lt", "7"), True),
    ],
)
def test_intersects(node, pod, ok):
    why = intersects(reqs(node), reqs(pod))
    assert (why is None) is ok, why
    if not ok:
        assert why is not None
        assert "conflicts with" in why


@pytest.mark.parametrize(
    ("pod", "ok"),
    [
        # a well-known label the node does not define is allowed (some type may define it)
        ((ZONE, "In", "zone-a"), True),
        ((ZONE, "Exists"), True),
        # a custom label the node does not define is only fine if the pod wants it absent
        ((K, "In", "a"), False),
        ((K, "Exists"), False),
        ((K, "NotIn", "a"), True),
        ((K, "DoesNotExist"), True),
    ],
)
def test_compatible_with_undefined_labels(pod, ok):
    key, op, *values = pod
    node = reqs(("In", "x"), key="other")
    pod_reqs = reqs((op, *values), key=key)
    why = compatible(node, pod_reqs, allow_undefined=WELL_KNOWN)
    assert (why is None) is ok, why
    if not ok:
        assert why == f'label "{key}" does not have known values'


def test_compatible_without_allow_undefined_rejects_well_known_too():
    node = reqs(("In", "x"), key="other")
    assert compatible(node, reqs(("In", "zone-a"), key=ZONE)) is not None
    assert compatible(node, reqs(("NotIn", "zone-a"), key=ZONE)) is None


def test_compatible_checks_defined_keys_by_intersection():
    node = reqs(("In", "a", "b"))
    assert compatible(node, reqs(("In", "b"))) is None
    assert "conflicts" in (compatible(node, reqs(("In", "c"))) or "")


# ----------------------------------------------------------------------------- round trips


ROUND_TRIP = [
    [sel("In", "a", "b")],
    [sel("In", "a", "b", mv=2)],
    [sel("NotIn", "a")],
    [sel("Exists")],
    [sel("Exists", mv=3)],
    [sel("DoesNotExist")],
    [sel("Gt", "3")],
    [sel("Lt", "3")],
    [sel("Gte", "3")],
    [sel("Lte", "3")],
    [sel("Gt", "1"), sel("Lt", "9")],
    [sel("NotIn", "4"), sel("Gt", "1")],
    [sel("NotIn", "4"), sel("Gt", "1"), sel("Lt", "9")],
    [sel("In", "a", key=ZONE), sel("NotIn", "b"), sel("Gt", "0", key="n")],
]


@pytest.mark.parametrize(
    "selectors", ROUND_TRIP, ids=lambda s: " & ".join(f"{r.operator}" for r in s)
)
def test_to_selectors_round_trip(selectors):
    original = Requirements.from_selectors(selectors)
    out = original.to_selectors()
    again = Requirements.from_selectors(out)
    assert again == original
    assert {(k, v): again[k].has(v) for k in again for v in PROBES} == {
        (k, v): original[k].has(v) for k in original for v in PROBES
    }
    # stable, sorted by key
    assert [r.key for r in out] == sorted(r.key for r in out)
    assert again.to_selectors() == out
