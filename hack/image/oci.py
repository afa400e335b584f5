"""Write and read OCI image layouts with the standard library only (no Docker, no registry).

Layers are written deterministically: entries sorted by path, mtime 0, owner 0:0 unless a path is
given another owner (the non-root user's home), permission bits kept from the file system, gzip
with mtime 0 and no file name. The same directory therefore always gives the same digest.

The layout holds one image manifest per platform and one image index naming both; ``index.json``
lists the per-platform manifests (with their ``platform``) and that index once per tag
(``org.opencontainers.image.ref.name``), so ``oci:<dir>:<tag>`` names the multi-platform image.

hack/image/build.py writes layouts with it; tests/image reads them with it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"
EPOCH = "1970-01-01T00:00:00Z"
GZIP_LEVEL = 6  # level 9 saves ~2% here for twice the time


@dataclass(frozen=True)
class Layer:
    """A layer blob: ``digest`` of the gzip stream, ``diff_id`` of the tar inside."""

    digest: str
    size: int
    diff_id: str
    tar_size: int
    comment: str

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "size": self.size,
            "diff_id": self.diff_id,
            "tar_size": self.tar_size,
            "comment": self.comment,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Layer:
        return cls(d["digest"], d["size"], d["diff_id"], d["tar_size"], d["comment"])


class _HashingWriter(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sha = hashlib.sha256()
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        mv = memoryview(b)
        self.sha.update(mv)
        self.count += len(mv)
        if self.inner is not None:
            self.inner.write(mv)
        return len(mv)


def _walk_sorted(root: Path) -> Iterator[Path]:
    """Every path under ``root`` (not root itself), parents before children, names sorted."""
    entries = sorted(os.scandir(root), key=lambda e: e.name)
    for e in entries:
        p = Path(e.path)
        yield p
        if e.is_dir(follow_symlinks=False):
            yield from _walk_sorted(p)


def write_layer(
    src: Path, blobs: Path, *, comment: str, owners: Mapping[str, tuple[int, int]] | None = None
) -> Layer:
    """Tar + gzip the tree at ``src`` into ``blobs/sha256/<digest>``."""
    owners = owners or {}
    blobs.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=blobs, prefix=".layer-")
    with os.fdopen(fd, "wb") as raw:
        gz_hash = _HashingWriter(raw)
        with gzip.GzipFile(
            filename="", mode="wb", fileobj=gz_hash, mtime=0, compresslevel=GZIP_LEVEL
        ) as gz:  # type: ignore[arg-type]
            tar_hash = _HashingWriter(gz)
            with tarfile.open(fileobj=tar_hash, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for path in _walk_sorted(src):
                    _add(tar, path, path.relative_to(src).as_posix(), owners)
    digest = "sha256:" + gz_hash.sha.hexdigest()
    dest = blobs / digest.split(":", 1)[1]
    os.chmod(tmp_name, 0o644)  # mkstemp's 0600 would hide the blob from other users
    os.replace(tmp_name, dest)
    return Layer(
        digest, gz_hash.count, "sha256:" + tar_hash.sha.hexdigest(), tar_hash.count, comment
    )


def _add(
    tar: tarfile.TarFile, path: Path, name: str, owners: Mapping[str, tuple[int, int]]
) -> None:
    st = path.lstat()
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.mode = stat.S_IMODE(st.st_mode)
    info.uid, info.gid = owners.get(name, (0, 0))
    info.uname = info.gname = ""
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    elif stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
        tar.addfile(info)
    elif stat.S_ISREG(st.st_mode):
        info.size = st.st_size
        with path.open("rb") as f:
            tar.addfile(info, f)
    else:
        raise ValueError(f"{path}: only directories, files and symlinks go into a layer")


def _write_blob(blobs: Path, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (blobs / digest.split(":", 1)[1]).write_bytes(data)
    return {"digest": digest, "size": len(data)}


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class PlatformImage:
    platform: dict[str, str]  # os, architecture[, variant]
    layers: list[Layer]
    config: dict[str, Any]  # the image config's "config" object (User, Env, Entrypoint, ...)


def write_layout(
    out: Path, images: list[PlatformImage], tags: list[str], annotations: Mapping[str, str]
) -> None:
    """Write configs, manifests, the multi-platform index and ``index.json``; layers must
    already be in ``out/blobs/sha256``."""
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    platform_entries = []
    for img in images:
        config = {
            "created": EPOCH,
            "architecture": img.platform["architecture"],
            "os": img.platform["os"],
            **({"variant": img.platform["variant"]} if "variant" in img.platform else {}),
            "config": img.config,
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in img.layers]},
            "history": [{"created": EPOCH, "created_by": layer.comment} for layer in img.layers],
        }
        config_desc = {"mediaType": MT_CONFIG, **_write_blob(blobs, _canonical(config))}
        manifest = {
            "schemaVersion": 2,
            "mediaType": MT_MANIFEST,
            "config": config_desc,
            "layers": [
                {"mediaType": MT_LAYER_GZIP, "digest": layer.digest, "size": layer.size}
                for layer in img.layers
            ],
            "annotations": dict(annotations),
        }
        manifest_desc = {"mediaType": MT_MANIFEST, **_write_blob(blobs, _canonical(manifest))}
        platform_entries.append({**manifest_desc, "platform": dict(img.platform)})
    index = {
        "schemaVersion": 2,
        "mediaType": MT_INDEX,
        "manifests": platform_entries,
        "annotations": dict(annotations),
    }
    index_desc = {"mediaType": MT_INDEX, **_write_blob(blobs, _canonical(index))}
    top = {
        "schemaVersion": 2,
        "mediaType": MT_INDEX,
        "manifests": platform_entries
        + [{**index_desc, "annotations": {REF_NAME: tag}} for tag in tags],
    }
    (out / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    (out / "index.json").write_text(json.dumps(top, indent=2, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------- reading


def read_blob(layout: Path, digest: str) -> bytes:
    algo, hexd = digest.split(":", 1)
    data = (layout / "blobs" / algo / hexd).read_bytes()
    if hashlib.sha256(data).hexdigest() != hexd:
        raise ValueError(f"blob {digest} does not match its digest")
    return data


def read_json(layout: Path, digest: str) -> Any:
    return json.loads(read_blob(layout, digest))


def platform_manifests(layout: Path) -> dict[str, dict[str, Any]]:
    """architecture -> that platform's manifest, from the top-level ``index.json``."""
    top = json.loads((layout / "index.json").read_text())
    out: dict[str, dict[str, Any]] = {}
    for desc in top["manifests"]:
        if desc["mediaType"] == MT_MANIFEST:
            out[desc["platform"]["architecture"]] = read_json(layout, desc["digest"])
    return out


def layer_members(layout: Path, layer_digest: str) -> Iterator[tarfile.TarInfo]:
    with (
        gzip.open(layout / "blobs" / "sha256" / layer_digest.split(":", 1)[1], "rb") as gz,
        tarfile.open(fileobj=gz, mode="r|") as tar,
    ):
        yield from tar


def unpack(layout: Path, architecture: str, dest: Path) -> None:
    """Apply one platform's layers in order to ``dest`` (the layers this module writes have no
    whiteouts), keeping modes and owners, as a container runtime would."""
    manifest = platform_manifests(layout)[architecture]
    for layer in manifest["layers"]:
        path = layout / "blobs" / "sha256" / layer["digest"].split(":", 1)[1]
        with tarfile.open(path, mode="r:gz") as tar:
            tar.extractall(dest, numeric_owner=True, filter=_keep_all)


def _keep_all(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    # Absolute symlinks (/etc/ssl/certs, /usr/lib/ssl/cert.pem) are the image's own: the "data"
    # filter would refuse them, but they resolve inside the image root at run time.
    return member
