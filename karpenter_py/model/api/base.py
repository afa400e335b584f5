"""Shared machinery for the Kubernetes API models: the base class, timestamps, schema markers.

Two jobs live here. ``KubeModel`` makes pydantic speak Kubernetes JSON: camelCase aliases, and
Go's ``omitempty`` on output so a dumped object looks like what the API server stores (no
``labels: {}`` or ``value: ""`` noise a user never wrote). The schema markers let each model
declare, next to its Python validators, the OpenAPI/CEL rules its CustomResourceDefinition
carries; ``crds.py`` reads them back out of pydantic's JSON schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, ClassVar, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    GetJsonSchemaHandler,
    JsonValue,
    PlainSerializer,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticUndefined, core_schema

JSON = dict[str, object]

# Keys the CRD generator understands beyond plain JSON schema. ``x-crd-default`` becomes the
# OpenAPI ``default`` (pydantic's own ``default`` is dropped: most Python defaults are empty
# containers that must not become server-side defaults). ``x-crd-required`` adds fields the
# API server requires although Python gives them a default (Condition.message, ...).
CRD_DEFAULT: Final = "x-crd-default"
CRD_REQUIRED: Final = "x-crd-required"
CEL_RULES: Final = "x-kubernetes-validations"


class SchemaExtra:
    """Annotated marker: merge ``extra`` into the JSON schema of the annotated type.

    Works at any depth (list items, map values), unlike ``Field(json_schema_extra=...)``, and
    concatenates CEL rule lists instead of overwriting them.
    """

    def __init__(self, extra: Mapping[str, object]) -> None:
        self.extra = dict(extra)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        merge_schema_extra(out, self.extra)
        return out


def merge_schema_extra(target: dict[str, object], extra: Mapping[str, object]) -> None:
    for key, value in extra.items():
        existing = target.get(key)
        if key in (CEL_RULES, CRD_REQUIRED) and isinstance(existing, list):
            target[key] = [*existing, *_as_list(value)]
        else:
            target[key] = value


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else [value]


def cel(rule: str, message: str) -> dict[str, str]:
    """One ``x-kubernetes-validations`` entry."""
    return {"message": message, "rule": rule}


def model_schema(*rules: dict[str, str], required: Sequence[str] = ()) -> dict[str, JsonValue]:
    """A model's ``json_schema_extra``: CEL rules on the object and extra required fields."""
    out: dict[str, JsonValue] = {}
    if rules:
        out[CEL_RULES] = [dict(r) for r in rules]
    if required:
        out[CRD_REQUIRED] = list(required)
    return out


# ----------------------------------------------------------------------------- timestamps


def as_utc(value: datetime) -> datetime:
    # metav1.Time is always UTC on the wire; a naive value from YAML is read as UTC too.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 at second precision with a ``Z``, exactly as metav1.Time marshals."""
    return as_utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 timestamp (``2024-01-02T03:04:05Z``) as an aware UTC datetime; None when
    empty or malformed (a caller never acts on a time it cannot read)."""
    if not text:
        return None
    try:
        return as_utc(datetime.fromisoformat(text))
    except ValueError:
        return None


Time = Annotated[datetime, AfterValidator(as_utc), PlainSerializer(format_time, return_type=str)]
"""A metav1.Time: parsed to an aware UTC datetime, dumped as ``2024-01-02T03:04:05Z``."""


# ----------------------------------------------------------------------------- base model


class KubeModel(BaseModel):
    """Base of every API object and sub-object.

    Output follows Go's ``omitempty``: a field whose Python default is empty (None, "", False,
    [] or {}) and whose value still is that empty value is left out, so
    ``model_dump(by_alias=True)`` of a parsed manifest gives back the manifest plus its
    defaults and nothing else. Fields the API server requires even when empty are listed in
    ``_KEEP_EMPTY``.
    """

    model_config = ConfigDict(
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )
    _KEEP_EMPTY: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_empty(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> JSON:
        data: JSON = handler(self)
        for name, alias, empty in _omittable_fields(type(self)):
            key = alias if info.by_alias else name
            if key in data and _is_empty(data[key], empty):
                del data[key]
        return data


_EMPTY_MODEL: Final = object()  # marks "a sub-object whose dump is {}"


def _is_empty(value: object, empty: object) -> bool:
    if empty is None:
        return value is None
    if empty is _EMPTY_MODEL:
        return value == {}
    return type(value) is type(empty) and value == empty


def _is_empty_default(value: object) -> bool:
    # Spelled out: ``0 in (False,)`` is true in Python, and a default of 0 is not "empty" here.
    if value is None or value is False:
        return True
    if isinstance(value, str | list | dict):
        return len(value) == 0
    return False


@cache
def _omittable_fields(cls: type[KubeModel]) -> tuple[tuple[str, str, object], ...]:
    keep = cls._KEEP_EMPTY
    out: list[tuple[str, str, object]] = []
    for name, field in cls.model_fields.items():
        if name in keep:
            continue
        if field.default is not PydanticUndefined:
            default: object = field.default
        elif field.default_factory is not None:
            default = field.default_factory()  # type: ignore[call-arg]
        else:
            continue
        if isinstance(default, BaseModel):
            default = _EMPTY_MODEL
        elif not _is_empty_default(default):
            continue
        out.append((name, field.alias or name, default))
    return tuple(out)


# ----------------------------------------------------------------------------- error reporting


def format_validation_error(err: ValidationError) -> list[str]:
    """One ``path.to[0].field: message`` line per error, paths in the manifest's own spelling."""
    lines = []
    for item in err.errors(include_url=False):
        path = ""
        for part in item["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            else:
                path += f".{part}" if path else str(part)
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{path or '<root>'}: {message}")
    return lines


def check(predicate: Callable[[str], str | None]) -> AfterValidator:
    """An AfterValidator from ``predicate`` (returns an error message, or None when fine)."""

    def _validate(value: str) -> str:
        problem = predicate(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(_validate)
