"""Label requirement algebra: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte, with minValues.

A ``Req`` is a set of allowed values for one label key, either finite (In / DoesNotExist) or the
complement of a finite set (NotIn / Exists), optionally bounded by integer limits (Gt/Lt/Gte/Lte).
``Requirements`` maps keys to ``Req``s and intersects key by key. The semantics follow upstream's
pkg/scheduling/requirement(s).go, including which undefined keys are tolerated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, TypeVar, overload

from karpenter_py.model.core import SelectorRequirement
from karpenter_py.model.labels import WELL_KNOWN_LABELS

_HUGE: Final = 1 << 62

_T = TypeVar("_T")


def _int_or_none(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


class Req:
    """The values one label key may take. Immutable and hashable."""

    __slots__ = ("_hash", "complement", "gt", "key", "lt", "min_values", "values")

    key: str
    complement: bool
    values: frozenset[str]
    gt: int | None  # value must be > gt
    lt: int | None  # value must be < lt
    min_values: int | None

    def __init__(
        self,
        key: str,
        *,
        complement: bool,
        values: frozenset[str] = frozenset(),
        gt: int | None = None,
        lt: int | None = None,
        min_values: int | None = None,
    ) -> None:
        if not complement and (gt is not None or lt is not None):
            values = frozenset(v for v in values if _within(v, gt, lt))
            gt = lt = None
        elif complement and gt is not None and lt is not None and lt - gt <= 1:
            # An empty integer range: nothing can satisfy it.
            complement, values, gt, lt = False, frozenset(), None, None
        self.key = key
        self.complement = complement
        self.values = values
        self.gt = gt
        self.lt = lt
        self.min_values = min_values
        self._hash = hash((key, complement, values, gt, lt, min_values))

    # --- constructors
    @staticmethod
    def in_(key: str, values: Iterable[str], min_values: int | None = None) -> Req:
        return Req(key, complement=False, values=frozenset(values), min_values=min_values)

    @staticmethod
    def exists(key: str) -> Req:
        return Req(key, complement=True)

    @staticmethod
    def does_not_exist(key: str) -> Req:
        return Req(key, complement=False)

    @staticmethod
    def from_selector(req: SelectorRequirement) -> Req:
        op, key, vals = req.operator, req.key, frozenset(req.values)
        if op == "In":
            return Req(key, complement=False, values=vals, min_values=req.min_values)
        if op == "NotIn":
            return Req(key, complement=True, values=vals, min_values=req.min_values)
        if op == "Exists":
            return Req(key, complement=True, min_values=req.min_values)
        if op == "DoesNotExist":
            return Req(key, complement=False)
        bound = _int_or_none(req.values[0]) if len(req.values) == 1 else None
        if bound is None:
            raise ValueError(f"{key} {op} needs exactly one integer value, got {list(req.values)}")
        if op == "Gt":
            return Req(key, complement=True, gt=bound)
        if op == "Gte":
            return Req(key, complement=True, gt=bound - 1)
        if op == "Lt":
            return Req(key, complement=True, lt=bound)
        if op == "Lte":
            return Req(key, complement=True, lt=bound + 1)
        raise ValueError(f"unknown operator {op!r} for {key}")

    # --- queries
    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Req)
            and self._hash == other._hash
            and self.key == other.key
            and self.complement == other.complement
            and self.values == other.values
            and self.gt == other.gt
            and self.lt == other.lt
            and self.min_values == other.min_values
        )

    def __repr__(self) -> str:
        return f"Req({self})"

    def __str__(self) -> str:
        op = self.operator()
        if op in ("In", "NotIn"):
            return f"{self.key} {op} [{', '.join(sorted(self.values))}]"
        if op in ("Gt", "Lt"):
            parts = []
            if self.gt is not None:
                parts.append(f"> {self.gt}")
            if self.lt is not None:
                parts.append(f"< {self.lt}")
            return f"{self.key} {' and '.join(parts)}"
        return f"{self.key} {op}"

    def operator(self) -> str:
        if self.complement:
            if self.values:
                return "NotIn"
            if self.gt is not None:
                return "Gt"
            if self.lt is not None:
                return "Lt"
            return "Exists"
        return "In" if self.values else "DoesNotExist"

    def has(self, value: str) -> bool:
        if self.complement:
            return value not in self.values and _within(value, self.gt, self.lt)
        return value in self.values

    def __len__(self) -> int:
        if self.complement:
            return _HUGE - len(self.values)
        return len(self.values)

    def is_empty(self) -> bool:
        return not self.complement and not self.values

    def single(self) -> str | None:
        """The one allowed value, when exactly one is allowed."""
        if not self.complement and len(self.values) == 1:
            return next(iter(self.values))
        return None

    def intersect(self, other: Req) -> Req:
        if self is other or self == other:
            return self
        gt = _tighter(max, self.gt, other.gt)
        lt = _tighter(min, self.lt, other.lt)
        mv = _tighter(max, self.min_values, other.min_values)
        if self.complement and other.complement:
            return Req(
                self.key,
                complement=True,
                values=self.values | other.values,
                gt=gt,
                lt=lt,
                min_values=mv,
            )
        if self.complement:
            vals = frozenset(v for v in other.values if v not in self.values)
        elif other.complement:
            vals = frozenset(v for v in self.values if v not in other.values)
        else:
            vals = self.values & other.values
        return Req(self.key, complement=False, values=vals, gt=gt, lt=lt, min_values=mv)

    def with_min_values(self, min_values: int | None) -> Req:
        """The same allowed values with a different minValues (BestEffort relaxes it)."""
        return Req(
            self.key,
            complement=self.complement,
            values=self.values,
            gt=self.gt,
            lt=self.lt,
            min_values=min_values,
        )

    def to_selectors(self) -> tuple[SelectorRequirement, ...]:
        """This requirement as node selector requirements (ANDed): one, or up to three when a
        complement also carries integer bounds (``NotIn`` + ``Gt`` + ``Lt``)."""
        op = self.operator()
        mv = self.min_values
        if op == "In":
            return (SelectorRequirement(self.key, op, tuple(sorted(self.values)), mv),)
        if not self.complement:
            return (SelectorRequirement(self.key, "DoesNotExist", (), mv),)
        out = []
        if self.values:
            out.append(SelectorRequirement(self.key, "NotIn", tuple(sorted(self.values)), mv))
        if self.gt is not None:
            out.append(SelectorRequirement(self.key, "Gt", (str(self.gt),), None if out else mv))
        if self.lt is not None:
            out.append(SelectorRequirement(self.key, "Lt", (str(self.lt),), None if out else mv))
        return tuple(out) or (SelectorRequirement(self.key, "Exists", (), mv),)


def _within(value: str, gt: int | None, lt: int | None) -> bool:
    if gt is None and lt is None:
        return True
    number = _int_or_none(value)
    if number is None:
        return False
    return (gt is None or number > gt) and (lt is None or number < lt)


def _tighter(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    """``pick`` (max or min) of two optional bounds; a missing bound yields to the other."""
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)


_NEGATIVE_OPS: Final = frozenset({"NotIn", "DoesNotExist"})


class Requirements(Mapping[str, Req]):
    """Requirements keyed by label; immutable. ``&`` intersects key by key."""

    __slots__ = ("_hash", "_reqs")

    def __init__(self, reqs: Mapping[str, Req] | None = None) -> None:
        self._reqs: dict[str, Req] = dict(reqs) if reqs else {}
        self._hash: int | None = None

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._reqs.values()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, Requirements):
            return self._reqs == other._reqs
        return NotImplemented

    @staticmethod
    def of(reqs: Iterable[Req]) -> Requirements:
        out: dict[str, Req] = {}
        for r in reqs:
            prev = out.get(r.key)
            out[r.key] = r if prev is None else prev.intersect(r)
        return Requirements(out)

    @staticmethod
    def from_selectors(selectors: Iterable[SelectorRequirement]) -> Requirements:
        return Requirements.of(Req.from_selector(s) for s in selectors)

    @staticmethod
    def from_labels(labels: Mapping[str, str]) -> Requirements:
        return Requirements({k: Req.in_(k, (v,)) for k, v in labels.items()})

    def __getitem__(self, key: str) -> Req:
        return self._reqs[key]

    @overload
    def get(self, key: str, /) -> Req | None: ...

    @overload
    def get(self, key: str, /, default: Req | _T) -> Req | _T: ...

    def get(self, key: str, /, default: object = None) -> object:
        # The dict's own get: Mapping's goes through __getitem__ and a KeyError, and a large
        # solve asks millions of times (the topology prefilter, once per pod per node).
        return self._reqs.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._reqs

    def __iter__(self) -> Iterator[str]:
        return iter(self._reqs)

    def __len__(self) -> int:
        return len(self._reqs)

    def __repr__(self) -> str:
        return f"Requirements({'; '.join(str(r) for r in self._reqs.values())})"

    def __and__(self, other: Mapping[str, Req]) -> Requirements:
        if not other:
            return self
        if not self._reqs:
            return other if isinstance(other, Requirements) else Requirements(other)
        out = dict(self._reqs)
        changed = False
        for key, req in other.items():
            prev = out.get(key)
            new = req if prev is None else prev.intersect(req)
            if new is not prev:
                out[key] = new
                changed = True
        return Requirements(out) if changed else self

    def with_req(self, req: Req) -> Requirements:
        prev = self._reqs.get(req.key)
        new = req if prev is None else prev.intersect(req)
        if new is prev:
            return self
        out = dict(self._reqs)
        out[req.key] = new
        return Requirements(out)

    def replaced(self, req: Req) -> Requirements:
        """``req`` in place of whatever this has for its key (no intersection)."""
        out = dict(self._reqs)
        out[req.key] = req
        return Requirements(out)

    def without(self, key: str) -> Requirements:
        if key not in self._reqs:
            return self
        out = dict(self._reqs)
        del out[key]
        return Requirements(out)

    def single_values(self) -> dict[str, str]:
        out = {}
        for key, req in self._reqs.items():
            value = req.single()
            if value is not None:
                out[key] = value
        return out

    def to_selectors(self) -> tuple[SelectorRequirement, ...]:
        out: list[SelectorRequirement] = []
        for key in sorted(self._reqs):
            out.extend(self._reqs[key].to_selectors())
        return tuple(out)


def intersects(existing: Mapping[str, Req], incoming: Mapping[str, Req]) -> str | None:
    """None when every shared key has a common value; else why not (upstream Intersects)."""
    small, large = (existing, incoming) if len(existing) <= len(incoming) else (incoming, existing)
    for key in small:
        if key not in large:
            continue
        a, b = existing[key], incoming[key]
        if a is b:
            continue
        if len(a.intersect(b)) == 0:
            # Two negative requirements never conflict (both allow "absent").
            if b.operator() in _NEGATIVE_OPS and a.operator() in _NEGATIVE_OPS:
                continue
            return f"{b} conflicts with {a}"
    return None


def compatible(
    existing: Mapping[str, Req],
    incoming: Mapping[str, Req],
    *,
    allow_undefined: frozenset[str] = frozenset(),
) -> str | None:
    """None when ``incoming`` (a pod's needs) can be met by ``existing`` (a node's requirements).

    A key the node does not define is only acceptable when the pod asks for its absence, or, for
    ``allow_undefined`` (well-known) keys, when some instance type may still define it.
    """
    for key, req in incoming.items():
        if key in existing or key in allow_undefined:
            continue
        if req.operator() in _NEGATIVE_OPS:
            continue
        return f'label "{key}" does not have known values'
    return intersects(existing, incoming)


WELL_KNOWN: Final = frozenset(WELL_KNOWN_LABELS)
