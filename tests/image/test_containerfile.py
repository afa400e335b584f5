"""The Containerfile describes the image ``make image`` builds: its final stage's user,
entrypoint, environment, ports and labels are hack/image/spec.json's, and its builder runs the
same build script over the same lock file and Debian packages."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import imagetool
from tests.imagetool import REPO_ROOT, SPEC

CONTAINERFILE = REPO_ROOT / "Containerfile"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]


def parse(text: str) -> list[Stage]:
    """Instructions per stage, continuation lines joined and comments dropped."""
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    stages: list[Stage] = []
    for line in logical:
        op, _, arg = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            words = [w for w in arg.split() if not w.startswith("--platform")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif stages:
            stages[-1].instructions.append((op, arg.strip()))
    return stages


def pairs(args: list[str]) -> dict[str, str]:
    """``K=V K2="v 2"`` of LABEL/ENV instructions."""
    out: dict[str, str] = {}
    for arg in args:
        for word in shlex.split(arg):
            k, _, v = word.partition("=")
            out[k] = v
    return out


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse(CONTAINERFILE.read_text())


def test_final_stage_is_the_specs_image(stages: list[Stage]) -> None:
    final = stages[-1]
    assert final.base == "scratch"
    assert final.all("COPY") == ["--from=builder /rootfs/ /"]
    assert final.all("USER") == [SPEC["user"]]
    assert [json.loads(e) for e in final.all("ENTRYPOINT")] == [SPEC["entrypoint"]]
    assert pairs(final.all("ENV")) == SPEC["env"]
    assert [int(p) for e in final.all("EXPOSE") for p in e.split()] == SPEC["ports"]
    assert pairs(final.all("LABEL")) == {
        **SPEC["labels"],
        "org.opencontainers.image.version": imagetool.version(),
    }


def test_builder_runs_the_same_build_on_debian_bookworm(stages: list[Stage]) -> None:
    (builder,) = [s for s in stages if s.name == "builder"]
    assert builder.base == "${DEBIAN_IMAGE}"
    text = CONTAINERFILE.read_text()
    assert "ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim" in text.splitlines()
    assert SPEC["debian"]["suite"] == "bookworm"
    assert (
        builder.all("RUN")[-1]
        == 'python3.11 hack/image/build.py rootfs --arch "${TARGETARCH}" --out /rootfs'
    )
    # The build script, spec.json and requirements.lock all come in with hack/image.
    assert "hack/image ./hack/image" in builder.all("COPY")
    assert f"python{SPEC['python']}" in builder.all("RUN")[0].split()
    build_py = (REPO_ROOT / "hack" / "image" / "build.py").read_text()
    assert '"--require-hashes"' in build_py


def _entries(root: Path) -> dict[str, tuple[str, int, int, int, str, int]]:
    """path -> (kind, mode, uid, gid, link target, size) of every entry under ``root``."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        kind = "l" if stat.S_ISLNK(st.st_mode) else "d" if stat.S_ISDIR(st.st_mode) else "f"
        link = os.readlink(p) if kind == "l" else ""
        rel = p.relative_to(root).as_posix()
        # Sizes of what the lock and this tree pin; Debian's files are compared by name and mode
        # (a cached Debian layer may predate the mirror's latest point release).
        size = (
            st.st_size if kind == "f" and rel.startswith(SPEC["site_packages"].lstrip("/")) else 0
        )
        out[rel] = (kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, link, size)
    return out


@pytest.mark.timeout(600)  # a whole uncached build of one platform (~40 s here)
def test_the_containerfiles_builder_makes_the_same_file_system(
    rootfs_amd64: Path, tmp_path: Path
) -> None:
    """``build.py rootfs`` (the builder stage's command) gives the file system the OCI image's
    amd64 layers unpack to: same paths, kinds, modes, owners, links, Python file sizes."""
    out = tmp_path / "rootfs"
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "hack" / "image" / "build.py"),
            "rootfs",
            "--arch",
            "amd64",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    out.chmod(0o755)
    ours, image = _entries(out), _entries(rootfs_amd64)
    # The test's own additions to its copy of the image (a kubeconfig, the unpack's root mode).
    image = {k: v for k, v in image.items() if not k.startswith("etc/karpenter-test")}
    assert sorted(set(ours) ^ set(image)) == []
    assert [k for k in ours if ours[k] != image[k]] == []
