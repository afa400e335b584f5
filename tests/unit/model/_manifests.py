"""Test helpers: load the example manifests and edit copies of them by path."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from karpenter_py.model.api.base import format_validation_error
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool

TESTDATA = Path(__file__).parent / "testdata"

KINDS: dict[str, type[BaseModel]] = {
    "NodePool": NodePool,
    "NodeClaim": NodeClaim,
    "EC2NodeClass": EC2NodeClass,
    "KWOKNodeClass": KWOKNodeClass,
}

DELETE = object()  # a value for ``edit`` meaning "remove this key"

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((TESTDATA / name).read_text())
    assert isinstance(data, dict)
    return data


def edit(manifest: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A deep copy of ``manifest`` with ``path`` ("spec.a[0].b", keys may be quoted as
    ``labels["x.io/y"]``) set to ``value`` (or removed when value is DELETE)."""
    out = copy.deepcopy(manifest)
    steps = _parse(path)
    node: Any = out
    for step in steps[:-1]:
        if isinstance(step, str) and step not in node:
            node[step] = {}
        node = node[step]
    last = steps[-1]
    if value is DELETE:
        del node[last]
    else:
        node[last] = copy.deepcopy(value)
    return out


def _parse(path: str) -> list[str | int]:
    steps: list[str | int] = []
    for part in re.split(r'(\["[^"]+"\])', path):
        if part.startswith('["'):
            steps.append(part[2:-2])
            continue
        for match in _STEP.finditer(part):
            steps.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
    return steps


def errors_of(manifest: dict[str, Any]) -> list[str]:
    """Formatted validation errors ("path: message"), empty when the manifest is valid."""
    try:
        KINDS[manifest["kind"]].model_validate(manifest)
    except ValidationError as err:
        return format_validation_error(err)
    return []
