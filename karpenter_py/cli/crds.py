"""``karpenter-py crds``: write the CustomResourceDefinitions generated from the API models.

The YAML is deterministic (fixed key order, no line folding, multi-line descriptions as literal
blocks) so the checked-in copies in manifests/crds/ can be compared byte for byte with a fresh
run; tests/unit/model/test_crds.py fails when they drift.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import yaml

from karpenter_py.model.api.crds import build_crds

DEFAULT_OUT_DIR: Final = Path("manifests/crds")


class _Dumper(yaml.SafeDumper):
    """SafeDumper that writes multi-line strings as ``|`` blocks and indents lists."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def render_crds() -> dict[str, str]:
    """File name -> YAML text for every CRD."""
    return {
        name: "---\n"
        + yaml.dump(crd, Dumper=_Dumper, sort_keys=False, width=10_000, allow_unicode=True)
        for name, crd in build_crds().items()
    }


def run_crds(out_dir: Path = DEFAULT_OUT_DIR) -> int:
    """Write one YAML file per CRD into ``out_dir``; returns the process exit status."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in render_crds().items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
    return 0
