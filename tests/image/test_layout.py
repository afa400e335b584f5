"""The OCI layout ``make image`` writes: its index, configs and layers, read as a registry or a
runtime would (hack/image/oci.py's reader and skopeo from Debian), checked against
hack/image/spec.json, the one source of truth the build and the Containerfile share."""

from __future__ import annotations

import json
import posixpath
import struct
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import imagetool
from tests.imagetool import SPEC

ARCHES = [p["architecture"] for p in SPEC["platforms"]]
MULTIARCH = {p["architecture"]: p["multiarch"] for p in SPEC["platforms"]}
MAX_COMPRESSED = 150_000_000
# No package manager, installer, compiler or shell: by file name anywhere, and by directory.
FORBIDDEN_NAMES = {
    "pip", "pip3", "pip3.11", "easy_install", "apt", "apt-get", "apt-cache", "dpkg", "dpkg-deb",
    "dpkg-query", "gcc", "cc", "c++", "g++", "ld", "ld.bfd", "as", "make", "perl", "sh", "bash",
    "dash", "openssl", "update-ca-certificates",
}  # fmt: skip
FORBIDDEN_DIRS = {"pip", "ensurepip", "setuptools", "_distutils_hack", "apt", "dpkg"}
REMOVED = [
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "var/lib/dpkg",
    "var/cache/apt",
    "etc/apt",
]


def top_index(layout: Path) -> dict[str, Any]:
    return dict(json.loads((layout / "index.json").read_text()))


def test_index_names_one_manifest_per_platform_and_the_tags(layout: Path) -> None:
    oci = imagetool.oci()
    entries = top_index(layout)["manifests"]
    platform_entries = [e for e in entries if e["mediaType"] == oci.MT_MANIFEST]
    assert [e["platform"] for e in platform_entries] == [
        {"os": "linux", "architecture": "amd64"},
        {"os": "linux", "architecture": "arm64", "variant": "v8"},
    ]
    tagged = [e for e in entries if e["mediaType"] == oci.MT_INDEX]
    assert [e["annotations"][oci.REF_NAME] for e in tagged] == [imagetool.version(), "latest"]
    assert len(entries) == 4
    (index_digest,) = {e["digest"] for e in tagged}
    nested = oci.read_json(layout, index_digest)
    assert [(m["digest"], m["platform"]) for m in nested["manifests"]] == [
        (e["digest"], e["platform"]) for e in platform_entries
    ]


@pytest.mark.parametrize("arch", ARCHES)
def test_config_is_the_specs(layout: Path, arch: str) -> None:
    oci = imagetool.oci()
    manifest = oci.platform_manifests(layout)[arch]
    config = oci.read_json(layout, manifest["config"]["digest"])
    assert config["architecture"] == arch
    assert config["os"] == "linux"
    assert config["config"] == {
        "User": "65532:65532",
        "Entrypoint": ["karpenter-py", "controller"],
        "Env": [f"{k}={v}" for k, v in SPEC["env"].items()],
        "ExposedPorts": {"8080/tcp": {}, "8081/tcp": {}, "8443/tcp": {}},
        "Labels": {**SPEC["labels"], "org.opencontainers.image.version": imagetool.version()},
        "WorkingDir": "/",
    }
    assert SPEC["user"] == "65532:65532"
    assert SPEC["env"]["PYTHONDONTWRITEBYTECODE"] == "1"
    assert SPEC["env"]["PYTHONUNBUFFERED"] == "1"
    # Three layers: Debian, the locked wheels, karpenter-py; diff_ids match the layer blobs.
    assert len(manifest["layers"]) == 3
    assert len(config["rootfs"]["diff_ids"]) == 3
    assert {ly["mediaType"] for ly in manifest["layers"]} == {oci.MT_LAYER_GZIP}


# ----------------------------------------------------------------------------- file system


@dataclass
class Tree:
    """A platform's file system as the layers build it up (path -> member, file contents of
    ELF files only)."""

    members: dict[str, tarfile.TarInfo] = field(default_factory=dict)
    elf: dict[str, bytes] = field(default_factory=dict)
    compressed: int = 0

    def resolve(self, path: str, depth: int = 0) -> str | None:
        """``path`` with every symlink followed, inside the image; None if it does not exist."""
        parts = [p for p in path.strip("/").split("/") if p]
        done: list[str] = []
        while parts:
            part = parts.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            cur = "/".join([*done, part])
            m = self.members.get(cur)
            if m is None:
                return None
            if m.issym():
                if depth > 40:
                    return None
                target = m.linkname
                base = [] if target.startswith("/") else done
                parts = [*base, *[p for p in target.split("/") if p and p != "."], *parts]
                done = []
                depth += 1
                continue
            done.append(part)
        return "/".join(done)


@pytest.fixture(scope="module")
def trees(layout: Path) -> dict[str, Tree]:
    oci = imagetool.oci()
    out: dict[str, Tree] = {}
    for arch, manifest in oci.platform_manifests(layout).items():
        tree = Tree()
        for layer in manifest["layers"]:
            tree.compressed += layer["size"]
            path = layout / "blobs" / "sha256" / layer["digest"].split(":", 1)[1]
            with tarfile.open(path, mode="r:gz") as tar:
                for m in tar:
                    name = m.name.rstrip("/")
                    tree.members[name] = m
                    if m.isreg() and m.size > 64:
                        f = tar.extractfile(m)
                        assert f is not None
                        head = f.read(4)
                        if head == b"\x7fELF":
                            tree.elf[name] = head + f.read()
        out[arch] = tree
    return out


@pytest.mark.parametrize("arch", ARCHES)
def test_no_package_manager_compiler_or_shell(trees: dict[str, Tree], arch: str) -> None:
    tree = trees[arch]
    bad_files = sorted(
        name
        for name, m in tree.members.items()
        if not m.isdir() and posixpath.basename(name) in FORBIDDEN_NAMES
    )
    bad_dirs = sorted(
        name
        for name, m in tree.members.items()
        if m.isdir() and posixpath.basename(name) in FORBIDDEN_DIRS
    )
    assert (bad_files, bad_dirs) == ([], [])
    assert [d for d in REMOVED if d in tree.members] == []
    assert tree.resolve("bin/sh") is None


@pytest.mark.parametrize("arch", ARCHES)
def test_files_are_root_owned_except_the_users_home(trees: dict[str, Tree], arch: str) -> None:
    tree = trees[arch]
    owners = {(m.uid, m.gid) for n, m in tree.members.items() if n != "home/nonroot"}
    assert owners == {(0, 0)}
    home = tree.members["home/nonroot"]
    assert (home.uid, home.gid, home.mode) == (65532, 65532, 0o700)
    assert tree.members["tmp"].mode == 0o1777
    assert {m.mtime for m in tree.members.values()} == {0}


@pytest.mark.parametrize("arch", ARCHES)
def test_users_and_entry_point_files(layout: Path, arch: str, trees: dict[str, Tree]) -> None:
    tree = trees[arch]
    for name in (
        "etc/passwd",
        "etc/group",
        "etc/ssl/certs/ca-certificates.crt",
        "usr/bin/karpenter-py",
    ):
        assert tree.members[name].isreg(), name
    assert tree.resolve("usr/lib/ssl/cert.pem") == "etc/ssl/certs/ca-certificates.crt"
    assert tree.resolve("etc/localtime") == "usr/share/zoneinfo/Etc/UTC"
    assert tree.members["usr/bin/karpenter-py"].mode == 0o755
    assert tree.resolve(f"usr/bin/python{SPEC['python']}") == f"usr/bin/python{SPEC['python']}"
    assert "usr/share/karpenter-py/examples/demo.yaml" in tree.members


def _elf_dynamic(data: bytes) -> tuple[str | None, list[str], list[str]]:
    """(PT_INTERP, DT_NEEDED, DT_RUNPATH+DT_RPATH dirs) of a little-endian ELF64 file."""
    assert (data[4], data[5]) == (2, 1), "ELF64 little-endian expected"
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic, interp = [], None, None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize
        )
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dynamic = (p_offset, p_filesz)
        elif p_type == 3:
            interp = data[p_offset : p_offset + p_filesz].rstrip(b"\0").decode()
    if dynamic is None:
        return interp, [], []
    entries = []
    for off in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, val = struct.unpack_from("<qQ", data, off)
        if tag == 0:
            break
        entries.append((tag, val))
    strtab_vaddr = next(v for t, v in entries if t == 5)
    strtab = next(
        off + strtab_vaddr - va for va, off, size in loads if va <= strtab_vaddr < va + size
    )

    def string(at: int) -> str:
        end = data.index(b"\0", strtab + at)
        return data[strtab + at : end].decode()

    needed = [string(v) for t, v in entries if t == 1]
    paths = [d for t, v in entries if t in (15, 29) for d in string(v).split(":") if d]
    return interp, needed, paths


@pytest.mark.parametrize("arch", ARCHES)
def test_every_shared_library_resolves_without_ldconfig(trees: dict[str, Tree], arch: str) -> None:
    """What ld.so would load, found by glibc's built-in search path (Debian's multiarch dirs)
    or the file's own RUNPATH ($ORIGIN: manylinux wheels' vendored .libs): no ld.so.cache."""
    tree = trees[arch]
    assert "etc/ld.so.cache" not in tree.members
    system = [f"lib/{MULTIARCH[arch]}", f"usr/lib/{MULTIARCH[arch]}", "lib", "usr/lib"]
    missing = []
    checked = 0
    for name, data in tree.elf.items():
        interp, needed, paths = _elf_dynamic(data)
        if interp is not None:
            assert tree.resolve(interp) is not None, f"{name}: interpreter {interp} missing"
        origin = posixpath.dirname(name)
        dirs = [p.replace("$ORIGIN", "/" + origin) for p in paths] + system
        for lib in needed:
            checked += 1
            if not any(tree.resolve(posixpath.join(d, lib)) for d in dirs):
                missing.append(f"{name}: {lib}")
    assert missing == []
    # python, its stdlib extension modules and the wheels' extensions were all looked at.
    assert checked > 100


@pytest.mark.parametrize("arch", ARCHES)
def test_compressed_size_under_150_mb(trees: dict[str, Tree], arch: str) -> None:
    print(f"{arch}: {trees[arch].compressed / 1e6:.1f} MB compressed")
    assert trees[arch].compressed < MAX_COMPRESSED


# ----------------------------------------------------------------------------- skopeo


def skopeo(*args: str) -> str:
    return subprocess.run(
        ["skopeo", *args], capture_output=True, text=True, check=True, timeout=120
    ).stdout


def test_skopeo_reads_both_tags_and_platforms(layout: Path, tmp_path: Path) -> None:
    oci = imagetool.oci()
    raw = json.loads(skopeo("inspect", "--raw", f"oci:{layout}:latest"))
    assert raw["mediaType"] == oci.MT_INDEX
    assert [m["platform"]["architecture"] for m in raw["manifests"]] == ["amd64", "arm64"]
    for arch in ARCHES:
        info = json.loads(
            skopeo("inspect", "--override-arch", arch, f"oci:{layout}:{imagetool.version()}")
        )
        assert (info["Architecture"], info["Os"]) == (arch, "linux")
    dest = tmp_path / "copy"
    skopeo("copy", "--all", "--quiet", f"oci:{layout}:{imagetool.version()}", f"dir:{dest}")
    copied = json.loads((dest / "manifest.json").read_text())
    assert copied == raw
    per_platform = sorted(p.name for p in dest.glob("*.manifest.json"))
    want = sorted(m["digest"].split(":", 1)[1] + ".manifest.json" for m in raw["manifests"])
    assert per_platform == want


# ----------------------------------------------------------------------------- the writer


def test_layers_are_deterministic(tmp_path: Path) -> None:
    oci = imagetool.oci()
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "b.txt").write_text("b")
    (src / "a.txt").write_text("a")
    (src / "link").symlink_to("d/b.txt")
    first = oci.write_layer(src, tmp_path / "blobs1", comment="x")
    (src / "a.txt").touch()  # a new mtime changes nothing
    second = oci.write_layer(src, tmp_path / "blobs2", comment="x")
    assert first == second
    with tarfile.open(tmp_path / "blobs1" / first.digest.split(":", 1)[1]) as tar:
        assert [(m.name, m.type, m.uid, m.mtime) for m in tar] == [
            ("a.txt", tarfile.REGTYPE, 0, 0),
            ("d", tarfile.DIRTYPE, 0, 0),
            ("d/b.txt", tarfile.REGTYPE, 0, 0),
            ("link", tarfile.SYMTYPE, 0, 0),
        ]
