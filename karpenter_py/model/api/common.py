"""Pieces shared by NodePool, NodeClaim and the NodeClasses: taints, requirements, references,
label-key rules, quantities and upstream's duration strings.

Every rule is written twice on purpose, once as a Python check (so ``karpenter-py plan`` and the
controllers reject bad input with a clear message) and once as the OpenAPI pattern or CEL rule
the CRD carries (so the API server rejects it too). Both are generated from the same constants
below, which keeps them from drifting apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from karpenter_py.model import core
from karpenter_py.model.api.base import CRD_DEFAULT, KubeModel, SchemaExtra, Time, cel, check
from karpenter_py.model.labels import (
    AWS_GROUP,
    AWS_LABEL_EC2NODECLASS,
    LABEL_HOSTNAME,
    LABEL_NODEPOOL,
    NORMALIZED_LABELS,
    RESTRICTED_LABEL_DOMAINS,
    WELL_KNOWN_LABELS,
)
from karpenter_py.model.quantity import QuantityError, parse_decimal

# ----------------------------------------------------------------------------- patterns (as upstream)

# A label key: optional DNS-subdomain prefix and "/", then a name (the CRDs' key pattern).
QUALIFIED_NAME_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
LABEL_VALUE_PATTERN: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# Durations, exactly as the upstream CRDs spell them (section 1.1 of upstream-features.md).
DURATION_PATTERN: Final = r"^([0-9]+(s|m|h))+$"
NILLABLE_DURATION_PATTERN: Final = r"^(([0-9]+(s|m|h))+|Never)$"
BUDGET_DURATION_PATTERN: Final = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"
BUDGET_SCHEDULE_PATTERN: Final = (
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
)
BUDGET_NODES_PATTERN: Final = r"^((100|[0-9]{1,2})%|[0-9]+)$"
NEVER: Final = "Never"

MAX_LABEL_KEY_LENGTH: Final = 316  # 253 prefix + "/" + 63 name: the CRDs' key maxLength
MAX_LABEL_VALUE_LENGTH: Final = 63
MAX_REQUIREMENTS: Final = 100
MAX_LABELS: Final = 100


class Pattern:
    """Annotated marker: a string must match ``pattern`` (search semantics, as OpenAPI's).

    Validates in Python with a message saying what is expected, and puts the same pattern in
    the JSON schema so the CRD enforces it too.
    """

    def __init__(self, pattern: str, expected: str) -> None:
        self.pattern = pattern
        self.expected = expected
        self._regex = re.compile(pattern)

    def _validate(self, value: str) -> str:
        # "\n" excluded explicitly: Python's "$" also matches before a trailing newline.
        if "\n" in value or self._regex.search(value) is None:
            raise ValueError(f"{value!r} is not {self.expected}")
        return value

    def __get_pydantic_core_schema__(
        self, source: type[object], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._validate, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["pattern"] = self.pattern
        return out


class DurationPattern(Pattern):
    """A :class:`Pattern` for Go durations that also holds the value to what Go can read.

    The CRD patterns admit any number of digits; Go's ``time.ParseDuration`` (and so upstream's
    decoding of the object) refuses a duration longer than ``time.Duration`` holds, about 292
    years. Such a value is invalid here too, with a message saying so, rather than an overflow
    wherever it is first used. ``Never`` (where the pattern admits it) is not a duration.
    """

    def _validate(self, value: str) -> str:
        value = super()._validate(value)
        if value != NEVER:
            parse_duration(value)  # ValueError when out of range
        return value


Duration = Annotated[
    str, DurationPattern(DURATION_PATTERN, "a duration such as '30s', '10m' or '1h30m'")
]
NillableDuration = Annotated[
    str,
    DurationPattern(
        NILLABLE_DURATION_PATTERN, "a duration such as '30s', '10m', '720h' or 'Never'"
    ),
]


# ----------------------------------------------------------------------------- durations


_GO_DURATION_PART: Final = re.compile(r"([0-9]*\.?[0-9]*)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS: Final = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "μs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}


# Go's time.Duration: an int64 of nanoseconds.
_MAX_NANOSECONDS: Final = 2**63 - 1
_MIN_NANOSECONDS: Final = -(2**63)
MAX_DURATION: Final = "2562047h47m16.854775807s"  # _MAX_NANOSECONDS as Go prints it


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string ("720h", "1h30m", "1.5s", "-2m", "0") like time.ParseDuration.

    Raises ValueError for what Go refuses, including a duration past ``time.Duration``'s range
    (``MAX_DURATION`` either way).
    """
    body = text
    sign = 1
    if body[:1] in ("+", "-"):
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return timedelta(0)
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total = Decimal(0)
    pos = 0
    while pos < len(body):
        match = _GO_DURATION_PART.match(body, pos)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r}")
        try:
            total += Decimal(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        except ArithmeticError:  # decimal.Overflow: digits past any context's exponent
            raise ValueError(
                f"invalid duration {text!r}: out of range (at most {MAX_DURATION})"
            ) from None
        pos = match.end()
    nanoseconds = total * sign * 1_000_000_000
    if not _MIN_NANOSECONDS <= nanoseconds <= _MAX_NANOSECONDS:
        raise ValueError(f"invalid duration {text!r}: out of range (at most {MAX_DURATION})")
    return timedelta(seconds=float(total)) * sign


def parse_nillable_duration(text: str) -> timedelta | None:
    """Parse expireAfter/consolidateAfter: ``Never`` means no duration (None)."""
    return None if text == NEVER else parse_duration(text)


# ----------------------------------------------------------------------------- label keys & values


_LABEL_NAME: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN: Final = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


def qualified_name_problem(key: str) -> str | None:
    """Kubernetes' IsQualifiedName: why ``key`` is not a valid label key, or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return f"{key!r} is not a qualified name: at most one '/' (prefix/name) is allowed"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return f"{key!r} is not a qualified name: the prefix before '/' must not be empty"
        if len(prefix) > 253 or _DNS1123_SUBDOMAIN.match(prefix) is None:
            return (
                f"{key!r} is not a qualified name: the prefix must be a DNS subdomain "
                "(lowercase alphanumerics, '-' and '.', at most 253 characters)"
            )
    if not name:
        return f"{key!r} is not a qualified name: the name part must not be empty"
    if len(name) > 63:
        return f"{key!r} is not a qualified name: the name part must be at most 63 characters"
    if _LABEL_NAME.match(name) is None:
        return (
            f"{key!r} is not a qualified name: the name part must be alphanumerics, '-', '_' "
            "or '.', starting and ending with an alphanumeric"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Kubernetes' IsValidLabelValue: why ``value`` is not a valid label value, or None."""
    if len(value) > MAX_LABEL_VALUE_LENGTH:
        return f"label value {value!r} is longer than {MAX_LABEL_VALUE_LENGTH} characters"
    if value and _LABEL_NAME.match(value) is None:
        return (
            f"label value {value!r} must be empty or alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


# Upstream's AWS CRDs also restrict karpenter.k8s.aws/* (labels.py's list is the core one).
AWS_RESTRICTED_LABEL_DOMAIN: Final = AWS_GROUP
LABEL_RESTRICTED_DOMAINS: Final = (*RESTRICTED_LABEL_DOMAINS, AWS_RESTRICTED_LABEL_DOMAIN)

# Keys inside restricted domains that users may still set: the well-known labels, the beta
# spellings upstream normalises, and the AWS nodeclass label.
_ALLOWED_RESTRICTED_KEYS: Final = frozenset(
    {*WELL_KNOWN_LABELS, *NORMALIZED_LABELS, AWS_LABEL_EC2NODECLASS}
)


def label_domain(key: str) -> str:
    """The part before the first '/', or the whole key (what CEL's find("^([^/]+)") returns)."""
    return key.split("/", 1)[0]


def _allowed_in(domain: str) -> list[str]:
    return sorted(k for k in _ALLOWED_RESTRICTED_KEYS if label_domain(k).endswith(domain))


def restricted_label_problem(key: str, *, allow_nodepool: bool) -> str | None:
    """Why ``key`` may not be used in NodePool labels or requirements, or None.

    ``allow_nodepool`` is False for NodePools (Karpenter sets karpenter.sh/nodepool itself) and
    True for NodeClaims, which carry it.
    """
    if key == LABEL_NODEPOOL and not allow_nodepool:
        return f'label "{LABEL_NODEPOOL}" is restricted: Karpenter sets it to the NodePool name'
    if key == LABEL_HOSTNAME:
        return f'label "{LABEL_HOSTNAME}" is restricted: every node gets its own hostname'
    if key in _ALLOWED_RESTRICTED_KEYS:
        return None
    domain = label_domain(key)
    for restricted in LABEL_RESTRICTED_DOMAINS:
        if not domain.endswith(restricted):
            continue
        allowed = ", ".join(
            k for k in _allowed_in(restricted) if allow_nodepool or k != LABEL_NODEPOOL
        )
        return (
            f'label domain "{restricted}" is restricted ({key!r}); allowed there: {allowed}; '
            "otherwise use a label in your own domain"
        )
    return None


def _cel_list(items: Iterable[str]) -> str:
    return json.dumps(list(items))


def label_key_cel_rules(var: str, *, allow_nodepool: bool) -> list[tuple[str, str]]:
    """The CEL expressions (over string ``var``) mirroring ``restricted_label_problem``.

    Returned as (expression, message) pairs so callers can wrap them, e.g. in
    ``self.all(x, ...)`` for a map of labels.
    """
    dom = f'{var}.find("^([^/]+)")'
    rules: list[tuple[str, str]] = []
    for restricted in LABEL_RESTRICTED_DOMAINS:
        rule = f'{var} in {_cel_list(_allowed_in(restricted))} || !{dom}.endsWith("{restricted}")'
        rules.append((rule, f'label domain "{restricted}" is restricted'))
    if not allow_nodepool:
        rules.append((f'{var} != "{LABEL_NODEPOOL}"', f'label "{LABEL_NODEPOOL}" is restricted'))
    rules.append((f'{var} != "{LABEL_HOSTNAME}"', f'label "{LABEL_HOSTNAME}" is restricted'))
    return rules


def label_key_cel(*, allow_nodepool: bool) -> list[dict[str, str]]:
    """CEL rules for a schema node that is itself a label key string."""
    return [
        cel(rule, msg) for rule, msg in label_key_cel_rules("self", allow_nodepool=allow_nodepool)
    ]


def label_map_cel(*, allow_nodepool: bool) -> list[dict[str, str]]:
    """CEL rules for a map whose keys are label keys."""
    return [
        cel(f"self.all(x, {rule})", msg)
        for rule, msg in label_key_cel_rules("x", allow_nodepool=allow_nodepool)
    ]


def _key_problem(key: str) -> str | None:
    return qualified_name_problem(key) or restricted_label_problem(key, allow_nodepool=True)


LabelValue = Annotated[
    str,
    check(label_value_problem),
    SchemaExtra({"maxLength": MAX_LABEL_VALUE_LENGTH, "pattern": LABEL_VALUE_PATTERN}),
]


# ----------------------------------------------------------------------------- quantities


QUANTITY_SCHEMA: Final = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
    "x-kubernetes-int-or-string": True,
}


def check_quantity(value: int | str) -> int | str:
    """Reject strings that are not Kubernetes quantities (ints are always fine)."""
    if isinstance(value, str):
        try:
            parse_decimal(value)
        except QuantityError:
            raise ValueError(
                f"{value!r} is not a Kubernetes quantity (for example 16, '500m', '64Gi')"
            ) from None
    return value


def _quantity_to_str(value: object) -> object:
    # Status ResourceLists are strings on the wire; accept a bare YAML number as the same thing.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _check_quantity_str(value: str) -> str:
    check_quantity(value)
    return value


Quantity = Annotated[int | str, AfterValidator(check_quantity), WithJsonSchema(QUANTITY_SCHEMA)]
"""A resource quantity as users write it: 16, "500m", "64Gi" (kept as written)."""
QuantityString = Annotated[
    str,
    BeforeValidator(_quantity_to_str),
    AfterValidator(_check_quantity_str),
    WithJsonSchema(QUANTITY_SCHEMA),
]
"""A resource quantity normalised to its string form (status fields)."""
ResourceList = dict[str, Quantity]


# ----------------------------------------------------------------------------- reserved resources

# The resources a kubelet (and the kwok fake) can reserve; upstream's CRDs allow only these keys.
RESERVED_RESOURCE_KEYS: Final = ("cpu", "memory", "ephemeral-storage", "pid")


def _check_quantity_text(value: str) -> str:
    # Reserved maps are map[string]string upstream (so CEL's startsWith applies); the values
    # must still be quantities for the kubelet or the provider to use them.
    check_quantity(value)
    return value


ReservedQuantity = Annotated[
    str, AfterValidator(_check_quantity_text), SchemaExtra({"pattern": QUANTITY_PATTERN})
]
"""A reserved-resource value: a quantity string (upstream's schema types these as strings)."""


def reserved_resources_check(field: str) -> AfterValidator:
    """Python side of ``reserved_resources_cel``: known keys, no negative quantities (values
    are quantity strings, or ints where the map is a ResourceList)."""

    def _validate(resources: dict[str, object]) -> dict[str, object]:
        for key, value in resources.items():
            if key not in RESERVED_RESOURCE_KEYS:
                raise ValueError(
                    f"{key!r} is not a valid key for {field}; valid keys are "
                    f"{list(RESERVED_RESOURCE_KEYS)}"
                )
            if str(value).startswith("-"):
                raise ValueError(f"{field}[{key!r}] cannot be a negative quantity")
        return resources

    return AfterValidator(_validate)


def reserved_resources_cel(field: str, *, int_or_string: bool = False) -> list[dict[str, str]]:
    """CEL rules for a reserved-resources map; ``field`` names it in the messages.

    ``int_or_string``: the values are int-or-string quantities (a ResourceList), which CEL sees
    as dyn: a string must not start with '-', an int must not be negative. (Converting the
    value with string() instead is priced by the API server as an unbounded copy, over budget.)
    """
    keys = ",".join(f"'{k}'" for k in RESERVED_RESOURCE_KEYS)
    non_negative = (
        "(type(self[x]) == string ? !self[x].startsWith('-') : self[x] >= 0)"
        if int_or_string
        else "!self[x].startsWith('-')"
    )
    return [
        cel(
            "self.all(x, " + " || ".join(f"x=='{k}'" for k in RESERVED_RESOURCE_KEYS) + ")",
            f"valid keys for {field} are [{keys}]",
        ),
        cel(
            f"self.all(x, {non_negative})",
            f"{field} value cannot be a negative resource quantity",
        ),
    ]


# ----------------------------------------------------------------------------- taints


TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _taint_value_problem(value: str) -> str | None:
    # Karpenter validates taint values as qualified names (nodeclaim_validation.go).
    return qualified_name_problem(value) if value else None


class Taint(KubeModel):
    """A node taint: pods that do not tolerate it are kept off (or evicted from) the node."""

    key: Annotated[
        str,
        check(qualified_name_problem),
        SchemaExtra({"minLength": 1, "pattern": QUALIFIED_NAME_PATTERN}),
    ]
    """The taint key to be applied to a node."""
    value: Annotated[
        str, check(_taint_value_problem), SchemaExtra({"pattern": QUALIFIED_NAME_PATTERN})
    ] = ""
    """The taint value corresponding to the taint key."""
    effect: TaintEffect
    """The effect on pods that do not tolerate the taint: NoSchedule, PreferNoSchedule or NoExecute."""
    time_added: Time | None = Field(default=None, alias="timeAdded")
    """When the taint was added; only written for NoExecute taints."""


def slim_taints(taints: Iterable[Taint]) -> tuple[core.Taint, ...]:
    """API taints as the scheduler and the cluster model compare them (``model.core.Taint``:
    key, effect, value; ``timeAdded`` does not change what a taint keeps off)."""
    return tuple(core.Taint(key=t.key, effect=t.effect, value=t.value) for t in taints)


def duplicate_taint_problem(taints: Sequence[Taint], startup_taints: Sequence[Taint]) -> str | None:
    """Karpenter rejects the same key+effect twice across taints and startupTaints."""
    seen: dict[tuple[str, str], str] = {}
    for field_name, group in (("taints", taints), ("startupTaints", startup_taints)):
        for i, taint in enumerate(group):
            where = f"{field_name}[{i}]"
            first = seen.setdefault((taint.key, taint.effect), where)
            if first != where:
                return (
                    f"duplicate taint {taint.key}:{taint.effect} in {first} and {where}; "
                    "each key+effect pair may appear once across taints and startupTaints"
                )
    return None


# ----------------------------------------------------------------------------- requirements


Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
NUMERIC_OPERATORS: Final = ("Gt", "Lt", "Gte", "Lte")
_NON_NEGATIVE_INT: Final = re.compile(r"^[0-9]+$")

# CEL rules upstream puts on every requirements list (NodePool template and NodeClaim).
REQUIREMENTS_CEL: Final = (
    cel(
        "self.all(x, x.operator == 'In' ? (has(x.values) && x.values.size() != 0) : true)",
        "requirements with operator 'In' must have a value defined",
    ),
    cel(
        "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || "
        "x.operator == 'Lte') ? (has(x.values) && x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
    ),
    cel(
        "self.all(x, (x.operator == 'In' && has(x.minValues)) ? (has(x.values) && x.values.size() >= x.minValues) : true)",
        "requirements with 'minValues' must have at least that many values specified in the 'values' field",
    ),
)


def operator_values_problem(
    operator: object, values: Sequence[str], *, need_values: tuple[str, ...] = ("In",)
) -> str | None:
    """Why ``values`` do not fit ``operator`` (the Python side of the requirement CEL rules):
    the ``need_values`` operators need at least one value, Gt/Lt/Gte/Lte exactly one
    non-negative integer."""
    if operator in need_values and not values:
        return f"operator {operator} needs at least one value"
    if operator in NUMERIC_OPERATORS and (
        len(values) != 1 or _NON_NEGATIVE_INT.match(values[0]) is None
    ):
        return f"operator {operator} needs exactly one value, a non-negative integer (got {values})"
    return None


class NodeSelectorRequirement(KubeModel):
    """A plain node selector requirement (as resolved into EC2NodeClass status)."""

    model_config = ConfigDict(extra="ignore")

    key: str
    operator: str
    values: list[str] = Field(default_factory=list)


class NodeSelectorRequirementWithMinValues(KubeModel):
    """A label key, an operator relating it to values, and optionally how many distinct values
    the chosen instance types must span (``minValues``)."""

    key: Annotated[
        str,
        check(_key_problem),
        SchemaExtra(
            {
                "maxLength": MAX_LABEL_KEY_LENGTH,
                "pattern": QUALIFIED_NAME_PATTERN,
                "x-kubernetes-validations": label_key_cel(allow_nodepool=True),
            }
        ),
    ]
    """The label key that the selector applies to."""
    operator: Operator
    """The key's relationship to the values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte."""
    values: list[LabelValue] = Field(
        default_factory=list,
        validate_default=True,
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    """Values for In/NotIn; one non-negative integer for Gt/Lt/Gte/Lte; none for Exists/DoesNotExist."""
    min_values: Annotated[int, Field(ge=1, le=50)] | None = Field(default=None, alias="minValues")
    """Minimum number of distinct values the launched instance types must cover (1-50)."""

    @field_validator("values")
    @classmethod
    def _values_fit_operator(cls, values: list[str], info: ValidationInfo) -> list[str]:
        problem = operator_values_problem(info.data.get("operator"), values)
        if problem is not None:
            raise ValueError(problem)
        return values

    @field_validator("min_values")
    @classmethod
    def _min_values_fit(cls, min_values: int | None, info: ValidationInfo) -> int | None:
        values = info.data.get("values")
        if (
            min_values is not None
            and info.data.get("operator") == "In"
            and values is not None
            and len(values) < min_values
        ):
            raise ValueError(
                f"minValues is {min_values} but only {len(values)} values are listed; "
                "operator In needs at least minValues values"
            )
        return min_values


def nodepool_key_problem(
    requirements: Sequence[NodeSelectorRequirementWithMinValues],
) -> str | None:
    for i, req in enumerate(requirements):
        if req.key == LABEL_NODEPOOL:
            return (
                f'requirements[{i}]: label "{LABEL_NODEPOOL}" is restricted: '
                "Karpenter sets it to the NodePool name"
            )
    return None


# ----------------------------------------------------------------------------- node class reference


def _not_empty(what: str) -> AfterValidator:
    return check(lambda v: None if v else f"{what} may not be empty")


def _group_problem(value: str) -> str | None:
    if not value:
        return "group may not be empty"
    if "/" in value:
        return f"group {value!r} must be an API group without a version (no '/')"
    return None


class NodeClassReference(KubeModel):
    """Which provider NodeClass (EC2NodeClass, KWOKNodeClass, ...) nodes are built from."""

    group: Annotated[
        str,
        check(_group_problem),
        SchemaExtra(
            {
                "pattern": r"^[^/]*$",
                "x-kubernetes-validations": [cel("self != ''", "group may not be empty")],
            }
        ),
    ]
    """API group of the referent, e.g. karpenter.k8s.aws."""
    kind: Annotated[
        str,
        _not_empty("kind"),
        SchemaExtra({"x-kubernetes-validations": [cel("self != ''", "kind may not be empty")]}),
    ]
    """Kind of the referent, e.g. EC2NodeClass."""
    name: Annotated[
        str,
        _not_empty("name"),
        SchemaExtra({"x-kubernetes-validations": [cel("self != ''", "name may not be empty")]}),
    ]
    """Name of the referent."""


# ----------------------------------------------------------------------------- NodeClaim spec core

DEFAULT_EXPIRE_AFTER: Final = "720h"


class NodeClaimSpecBase(KubeModel):
    """Fields a NodeClaim template and a NodeClaim share."""

    taints: list[Taint] = Field(default_factory=list)
    """Taints applied to the node; pods must tolerate them to be scheduled there."""
    startup_taints: list[Taint] = Field(default_factory=list, alias="startupTaints")
    """Taints present at boot and expected to be removed by something else (typically a
    DaemonSet); pods need not tolerate them to get a node provisioned."""
    node_class_ref: NodeClassReference = Field(alias="nodeClassRef")
    """Reference to the provider NodeClass the node is built from."""
    termination_grace_period: Duration | None = Field(default=None, alias="terminationGracePeriod")
    """Upper bound on draining a node once its deletion starts. After it passes, PDBs and the
    karpenter.sh/do-not-disrupt annotation are no longer respected. Unset: wait forever."""
    expire_after: Annotated[NillableDuration, SchemaExtra({CRD_DEFAULT: DEFAULT_EXPIRE_AFTER})] = (
        Field(default=DEFAULT_EXPIRE_AFTER, alias="expireAfter")
    )
    """How long a node may live, from creation, before Karpenter replaces it ('Never' to keep
    it forever)."""

    @field_validator("startup_taints")
    @classmethod
    def _no_duplicate_taints(cls, startup_taints: list[Taint], info: ValidationInfo) -> list[Taint]:
        taints = info.data.get("taints")
        problem = duplicate_taint_problem(taints or [], startup_taints)
        if problem is not None:
            raise ValueError(problem)
        return startup_taints

    @field_validator("taints")
    @classmethod
    def _no_duplicate_taints_within(cls, taints: list[Taint]) -> list[Taint]:
        problem = duplicate_taint_problem(taints, [])
        if problem is not None:
            raise ValueError(problem)
        return taints
