"""Measure the image build and write benchmarks/results/image.json.

    .venv/bin/python hack/image/bench.py

The build runs on a snapshot of the tree's inputs (others may edit the tree meanwhile) with a
cache root of its own (the user's cache is left alone; the tools are already installed):
a cold build, a warm one (same inputs: the cached layout is reused), and one after a change to
karpenter_py (only the karpenter-py layers are rebuilt). Sizes come from the cold build's
report (hack/image/build.py --report).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "benchmarks" / "results" / "image.json"


def build(src: Path, cache: Path) -> tuple[float, Path]:
    t0 = time.monotonic()
    out = subprocess.run(
        ["bash", str(src / "hack" / "image" / "build.sh")],
        env={
            **os.environ,
            "KARPY_CACHE": str(cache),
            "PYTHON": str(ROOT / ".venv" / "bin" / "python"),
        },
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        cwd=src,
    ).stdout
    return time.monotonic() - t0, Path(out.split()[-1])


def snapshot(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in ("karpenter_py", "examples", "hack/image"):
        shutil.copytree(ROOT / d, dest / d, ignore=ignore)
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / f, dest / f)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="karpy-image-bench-") as tmp:
        src, cache = Path(tmp) / "src", Path(tmp) / "cache"
        snapshot(src)
        cold, layout = build(src, cache)
        warm, again = build(src, cache)
        assert again == layout, "the warm build did not reuse the cold one"
        report = json.loads((layout.parent / "report.json").read_text())
        with (src / "karpenter_py" / "__init__.py").open("a") as f:
            f.write("# bench: a source change\n")
        changed, other = build(src, cache)
        assert other != layout
    result = {
        "what": "make image (hack/image/build.sh): linux/amd64 + linux/arm64 OCI layout from Debian bookworm packages and the locked wheels",
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, other builds running alongside",
        "cold_build_s": round(cold, 1),
        "warm_build_s": round(warm, 2),
        "after_source_change_build_s": round(changed, 1),
        "layer_build_s": report["timings_s"],
        "version": report["version"],
        "platforms": {
            arch: {
                "compressed_bytes": p["compressed_bytes"],
                "compressed_mb": round(p["compressed_bytes"] / 1e6, 1),
                "rootfs_file_bytes": p["rootfs_file_bytes"],
                "rootfs_mb": round(p["rootfs_file_bytes"] / 1e6, 1),
                "layers": p["layers"],
            }
            for arch, p in report["platforms"].items()
        },
    }
    OUT.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
