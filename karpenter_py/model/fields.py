"""Path-aware readers of parsed JSON/YAML fields, and the one error they raise.

Every reader of a user's or the API's documents (pods and nodes in ``model.core``, storage
objects, ``karpenter-py plan`` manifests, KWOK catalogs, the bundled AWS instance facts) takes
a value and the path that leads to it, and either returns the value with its Python type or
raises :class:`ParseError` naming that path, e.g.
``catalog[0].offerings[1].Price: expected a number, got the string '0.1'``.

The rules, the same for every document:

- A wrong type says what was expected and what was found (:func:`describe`).
- ``null`` is an unset field where a field is optional (the reader returns its default), as Go
  decodes Kubernetes objects, and a wrong type where it is ``required`` (the catalogs' rule);
  a required key that is absent is ``required field is missing`` (:func:`required_key`).
- ``bool`` is never a number, although Python makes it an ``int``.
- A list of strings names the element that is not one (``values[2]: expected a string, ...``).
- A string map (labels, annotations, node selectors) rejects numbers and booleans, which YAML
  makes of unquoted ``1`` or ``true``, and says to quote them; a null value is ``""``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

JSON = dict[str, object]


class ParseError(ValueError):
    """A document that does not have the expected shape; ``path`` names the field, ``problem``
    says what is wrong with it, and the message is ``"<path>: <problem>"``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def describe(value: object) -> str:
    """What a value is, for "expected X, got <this>" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def required_key(record: Mapping[str, object], key: str, path: str) -> object:
    """``record[key]`` for a key the document must have; ``path`` is the record's."""
    if key not in record:
        raise ParseError(f"{path}.{key}", "required field is missing")
    return record[key]


def _unset(value: object, path: str, expected: str, required: bool) -> bool:
    """Whether ``value`` is an unset optional field (raises for an unset required one)."""
    if value is not None:
        return False
    if required:
        raise ParseError(path, f"expected {expected}, got null")
    return True


def json_object(value: object, path: str, *, required: bool = False) -> JSON:
    """A JSON object; an unset optional one reads as ``{}``."""
    if _unset(value, path, "an object", required):
        return {}
    if not isinstance(value, dict):
        raise ParseError(path, f"expected an object, got {describe(value)}")
    return cast(JSON, value)


def json_list(value: object, path: str, *, required: bool = False) -> list[object]:
    """A JSON list; an unset optional one reads as ``[]``."""
    if _unset(value, path, "a list", required):
        return []
    if not isinstance(value, list):
        raise ParseError(path, f"expected a list, got {describe(value)}")
    return value


def json_str(
    value: object,
    path: str,
    default: str = "",
    *,
    required: bool = False,
    nonempty: bool = False,
) -> str:
    """A string; ``nonempty`` rejects ``""``."""
    if _unset(value, path, "a string", required):
        return default
    if not isinstance(value, str):
        raise ParseError(path, f"expected a string, got {describe(value)}")
    if nonempty and not value:
        raise ParseError(path, "must not be empty")
    return value


def json_str_list(value: object, path: str, *, required: bool = False) -> list[str]:
    """A list of strings; the error names the first element that is not one. ``required``
    holds for the list and its elements: otherwise a null element reads as ``""``."""
    items = json_list(value, path, required=required)
    return [json_str(v, f"{path}[{i}]", required=required) for i, v in enumerate(items)]


def json_int(
    value: object,
    path: str,
    default: int = 0,
    *,
    required: bool = False,
    minimum: int | None = None,
) -> int:
    """A whole number (never a boolean); ``minimum`` bounds it from below."""
    if _unset(value, path, "an integer", required):
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(path, f"expected an integer, got {describe(value)}")
    if minimum is not None and value < minimum:
        raise ParseError(path, f"must be greater than or equal to {minimum}, got {value}")
    return value


def json_number(value: object, path: str, default: float = 0.0, *, required: bool = False) -> float:
    """An integer or a float (never a boolean), as a float."""
    if _unset(value, path, "a number", required):
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(path, f"expected a number, got {describe(value)}")
    return float(value)


def json_bool(value: object, path: str, default: bool = False) -> bool:
    """``true`` or ``false``; an unset field reads as ``default``."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ParseError(path, f"expected true or false, got {describe(value)}")
    return value


def string_map(value: object, path: str) -> dict[str, str]:
    """Labels, annotations, a node selector: an object of strings; unset reads as ``{}``."""
    out: dict[str, str] = {}
    for key, val in json_object(value, path).items():
        if isinstance(val, bool | int | float):
            # YAML turns `true`/`1` into non-strings; Kubernetes would reject them, so do we.
            raise ParseError(f"{path}.{key}", f"expected a string, got {describe(val)} (quote it)")
        out[key] = json_str(val, f"{path}.{key}")
    return out
