"""Build the controller image from Debian bookworm's packages, with no Docker daemon and no registry.

    python hack/image/build.py oci --out DIR          # OCI layout, every platform in spec.json
    python hack/image/build.py rootfs --arch A --out DIR   # one platform's merged root filesystem
                                                            # (the Containerfile's builder stage)

Run by hack/image/build.sh (``make image``), which caches the whole result by a hash of its
inputs. Per platform the image has three layers, each cached on its own under
``$KARPY_CACHE/image/layers`` so that a change to karpenter_py rebuilds only the last one:

1. debian: the dependency closure of spec.json's ``debian.packages`` for the target
   architecture, resolved and downloaded by apt (a private state dir with the machine's own
   sources and keys, so nothing of the host's apt changes), extracted with dpkg-deb into a
   merged-/usr tree with no maintainer script run (no arm64 binary runs at build time). What
   maintainer scripts would have made is made here: the CA bundle, /etc/localtime, passwd and
   group with the non-root user. Package managers, docs and tools are then removed (spec.json
   ``debian.exclude``/``remove``), the stdlib is byte-compiled.
2. python: the wheels of hack/image/requirements.lock for that platform, installed by the host's
   pip (``--platform ... --only-binary=:all: --require-hashes --target``), byte-compiled.
3. karpenter-py: the wheel built from this tree, the ``karpenter-py`` entry script and the
   bundled examples.

Byte-compiling with the host's Python needs it to be the image's minor version (3.11: one pyc
magic number for every 3.11.x). pycs are ``unchecked-hash``: they do not depend on file mtimes,
which the layers set to 0, and Python never re-stats the sources of an immutable image.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import lock  # noqa: E402
import oci  # noqa: E402

SPEC: dict[str, Any] = json.loads((HERE / "spec.json").read_text())
LOCK = HERE / "requirements.lock"
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")


def log(msg: str) -> None:
    print(f"[image/build] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(cmd, check=True, **kw)


def version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def uid_gid() -> tuple[int, int]:
    u, g = SPEC["user"].split(":")
    return int(u), int(g)


def check_host_python() -> None:
    want = SPEC["python"]
    have = f"{sys.version_info.major}.{sys.version_info.minor}"
    if have != want:
        raise SystemExit(
            f"byte-compiling for the image's Python {want} needs a host Python {want} (this is {have})"
        )


def file_digest(paths: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def source_files() -> list[Path]:
    files = [ROOT / "pyproject.toml", ROOT / "README.md"]
    files += sorted(
        p
        for p in (ROOT / "karpenter_py").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    files += sorted((ROOT / "examples").glob("*.yaml"))
    return files


def builder_files() -> list[Path]:
    return [HERE / n for n in ("build.py", "oci.py", "lock.py", "spec.json")]


# ----------------------------------------------------------------------------- debian


class Apt:
    """apt with its own state, cache and architecture; the machine's sources and keys."""

    def __init__(self, work: Path, arch: str) -> None:
        self.work = work
        etc = work / "etc"
        for d in (
            "state/lists/partial",
            "cache/archives/partial",
            "etc/sources.list.d",
            "etc/apt.conf.d",
            "etc/preferences.d",
        ):
            (work / d).mkdir(parents=True, exist_ok=True)
        (work / "status").touch()
        shutil.copy(SOURCES, etc / "sources.list.d" / SOURCES.name)
        conf = {
            "Dir::State": work / "state",
            "Dir::State::status": work / "status",
            "Dir::Cache": work / "cache",
            "Dir::Etc": etc,
            "Dir::Etc::Parts": etc / "apt.conf.d",
            "Dir::Etc::TrustedParts": "/etc/apt/trusted.gpg.d",
            "Dir::Log": work / "log",
            "APT::Architecture": arch,
            "APT::Install-Recommends": "false",
            "Acquire::Languages": "none",
            # The sources are a dated snapshot (see their comment): its Release is past Valid-Until.
            "Acquire::Check-Valid-Until": "false",
        }
        lines = [f'{k} "{v}";' for k, v in conf.items()] + [f'APT::Architectures {{ "{arch}"; }};']
        self.config = work / "apt.conf"
        self.config.write_text("\n".join(lines) + "\n")

    def __call__(self, *args: str) -> None:
        env = {**os.environ, "APT_CONFIG": str(self.config), "DEBIAN_FRONTEND": "noninteractive"}
        out = subprocess.run(
            ["apt-get", "-q", *args], env=env, capture_output=True, text=True, check=False
        )
        if out.returncode != 0:
            raise SystemExit(
                f"apt-get {' '.join(args)} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
            )

    def debs(self) -> list[Path]:
        return sorted((self.work / "cache" / "archives").glob("*.deb"))


def control(deb: Path) -> dict[str, str]:
    out = run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True).stdout
    fields: dict[str, str] = {}
    key = ""
    for line in out.splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += "\n" + line
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def _names(relation: str) -> list[list[str]]:
    """``a (>= 1) | b, c:any`` -> [[a, b], [c]] (versions are apt's business: it resolved them)."""
    clauses = []
    for clause in relation.split(","):
        alts = [alt.strip().split(" ")[0].split("(")[0].split(":")[0] for alt in clause.split("|")]
        clauses.append([a for a in alts if a])
    return [c for c in clauses if c]


def closure(
    debs: list[Path], roots: list[str], exclude: set[str]
) -> tuple[list[Path], list[dict[str, str]]]:
    """The packages ``roots`` need, among what apt downloaded, leaving out ``exclude`` (and what
    only they need). A dependency all of whose present alternatives are excluded is dropped:
    those are the maintainer-script tools (debconf, dpkg, awk) this build never runs."""
    by_name: dict[str, tuple[Path, dict[str, str]]] = {}
    provides: dict[str, str] = {}
    for deb in debs:
        c = control(deb)
        by_name[c["Package"]] = (deb, c)
        for clause in _names(c.get("Provides", "")):
            provides.setdefault(clause[0], c["Package"])
    chosen: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop(0)
        if name in chosen:
            continue
        if name not in by_name:
            raise SystemExit(f"package {name} was not downloaded by apt")
        chosen.append(name)
        c = by_name[name][1]
        for clause in _names(c.get("Pre-Depends", "")) + _names(c.get("Depends", "")):
            real = [provides.get(a, a) for a in clause]
            present = [a for a in real if a in by_name]
            if not present:
                raise SystemExit(f"{name}: none of {clause} was downloaded")
            if any(a in chosen or a in todo for a in present):
                continue
            wanted = [a for a in present if a not in exclude]
            if wanted:
                todo.append(wanted[0])
    chosen.sort()
    return [by_name[n][0] for n in chosen], [by_name[n][1] for n in chosen]


def debian_tree(platform: dict[str, Any], work: Path, dest: Path) -> list[dict[str, str]]:
    """Make the Debian root filesystem for one platform in ``dest``; returns the packages used."""
    arch = platform["debian_arch"]
    deb = SPEC["debian"]
    apt = Apt(work / f"apt-{arch}", arch)
    t0 = time.monotonic()
    apt("update")
    apt("install", "-y", "--download-only", *deb["packages"])
    debs, controls = closure(apt.debs(), deb["packages"], set(deb["exclude"]))
    log(f"{arch}: {len(debs)} packages resolved and downloaded in {time.monotonic() - t0:.1f}s")
    dest.mkdir(parents=True)
    # Merged /usr, as debootstrap makes it for bookworm: the packages still ship /lib, /bin...
    (dest / "usr").mkdir()
    for d in platform["merged_usr"]:
        (dest / "usr" / d).mkdir()
        (dest / d).symlink_to(f"usr/{d}")
    for path in debs:
        data = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(path)], stdout=subprocess.PIPE)
        run(
            ["tar", "-x", "--keep-directory-symlink", "--no-same-owner", "-C", str(dest)],
            stdin=data.stdout,
        )
        if data.wait() != 0:
            raise SystemExit(f"dpkg-deb --fsys-tarfile {path} failed")
    for pattern in deb["remove"]:
        for p in sorted(dest.glob(pattern)):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
    configure(dest, platform)
    compile_tree(dest, dest / "usr" / "lib" / f"python{SPEC['python']}")
    return controls


def configure(root: Path, platform: dict[str, Any]) -> None:
    """What the packages' maintainer scripts (and a base image) would have set up."""
    uid, gid = uid_gid()
    name, home = SPEC["user_name"], SPEC["home"]
    etc = root / "etc"
    (etc / "passwd").write_text(
        f"root:x:0:0:root:/root:/sbin/nologin\n{name}:x:{uid}:{gid}:{name}:{home}:/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\n{name}:x:{gid}:\n")
    (etc / "nsswitch.conf").write_text(
        "passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"
    )
    (etc / "timezone").write_text("Etc/UTC\n")
    (etc / "localtime").symlink_to("/usr/share/zoneinfo/Etc/UTC")
    # ca-certificates' postinst (update-ca-certificates) concatenates the Mozilla roots.
    certs = sorted((root / "usr/share/ca-certificates").rglob("*.crt"))
    if not certs:
        raise SystemExit("ca-certificates shipped no certificates")
    bundle = b"".join(c.read_bytes().rstrip(b"\n") + b"\n" for c in certs)
    (etc / "ssl/certs/ca-certificates.crt").write_bytes(bundle)
    for d in ("tmp", "var/tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
        (root / d).chmod(0o1777)
    (root / home.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / home.lstrip("/")).chmod(0o700)
    py = f"python{SPEC['python']}"
    (root / "usr/bin/python3").symlink_to(py)
    for d in ("run", "var/cache", "var/lib", "var/log"):
        (root / d).mkdir(parents=True, exist_ok=True)
    # ld.so must find every library without an ld.so.cache (no ldconfig runs here): glibc's
    # built-in search path has the multiarch dirs, where Debian puts them all.
    for cache in (etc / "ld.so.cache",):
        cache.unlink(missing_ok=True)


def compile_tree(root: Path, tree: Path) -> None:
    run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            "-s",
            str(root),
            "-p",
            "/",
            str(tree),
        ],
        stdout=subprocess.DEVNULL,
    )


# ----------------------------------------------------------------------------- python


def site_dir(root: Path) -> Path:
    return root / SPEC["site_packages"].lstrip("/")


def pip(*args: str) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_WARN_SCRIPT_LOCATION": "1"}
    # Output only on failure: the wheel build's setuptools warnings are not this build's news.
    out = subprocess.run(
        [sys.executable, "-m", "pip", *args], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(
            f"pip {' '.join(args)} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
        )


def python_tree(platform: dict[str, Any], dest: Path) -> None:
    """The locked runtime dependencies, for the image's Python on ``platform``."""
    site = site_dir(dest)
    site.mkdir(parents=True)
    pip(
        "install",
        "--no-deps",
        "--require-hashes",
        "--no-compile",
        "--target",
        str(site),
        *lock.pip_target_args(platform["pip_platform"]),
        "-r",
        str(LOCK),
    )
    _tidy_target(site)
    compile_tree(dest, site)


def _tidy_target(site: Path) -> None:
    # pip --target puts console scripts (with the host's interpreter in their shebang) in bin/.
    shutil.rmtree(site / "bin", ignore_errors=True)
    # RECORD lists what pip wrote (nothing reads it without pip); direct_url.json names the
    # build's temporary wheel path, which would make the layer differ from build to build.
    for p in [*site.glob("*.dist-info/RECORD"), *site.glob("*.dist-info/direct_url.json")]:
        p.unlink()


def build_wheel(work: Path) -> Path:
    """karpenter-py's wheel, built from a copy of the source tree (so no build/ or egg-info is
    written into the work tree others edit)."""
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "karpenter_py",
        src / "karpenter_py",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    pip("wheel", "--no-deps", "--wheel-dir", str(work / "wheel"), str(src))
    (wheel,) = (work / "wheel").glob("*.whl")
    return wheel


def app_tree(platform: dict[str, Any], wheel: Path, dest: Path) -> None:
    site = site_dir(dest)
    site.mkdir(parents=True)
    pip(
        "install",
        "--no-deps",
        "--no-compile",
        "--target",
        str(site),
        *lock.pip_target_args(platform["pip_platform"]),
        str(wheel),
    )
    _tidy_target(site)
    compile_tree(dest, site)
    script = dest / SPEC["entry_script"].lstrip("/")
    script.parent.mkdir(parents=True)
    script.write_text(
        f"#!/usr/bin/python{SPEC['python']}\nimport sys\n\nfrom karpenter_py.__main__ import main\n\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    examples = dest / SPEC["examples_dir"].lstrip("/")
    examples.mkdir(parents=True)
    for p in sorted((ROOT / "examples").glob("*.yaml")):
        shutil.copy(p, examples / p.name)
        (examples / p.name).chmod(0o644)


# ----------------------------------------------------------------------------- layers and cache


def tree_size(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


class LayerCache:
    """Finished layers by key: ``<kind>-<arch>-<key>.tar.gz`` plus a ``.json`` descriptor."""

    KEEP = 3  # per kind and architecture

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def get(self, kind: str, arch: str, key: str, blobs: Path) -> tuple[oci.Layer, int] | None:
        meta = self.root / f"{kind}-{arch}-{key}.json"
        if not meta.exists():
            return None
        d = json.loads(meta.read_text())
        layer = oci.Layer.from_json(d["layer"])
        src = self.root / f"{kind}-{arch}-{key}.tar.gz"
        blobs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, blobs / layer.digest.split(":", 1)[1])
        os.utime(meta)
        return layer, int(d["rootfs_bytes"])

    def put(
        self, kind: str, arch: str, key: str, layer: oci.Layer, rootfs_bytes: int, blobs: Path
    ) -> None:
        base = self.root / f"{kind}-{arch}-{key}"
        tmp = Path(f"{base}.tar.gz.tmp.{os.getpid()}")
        shutil.copyfile(blobs / layer.digest.split(":", 1)[1], tmp)
        os.replace(tmp, f"{base}.tar.gz")
        Path(f"{base}.json").write_text(
            json.dumps({"layer": layer.to_json(), "rootfs_bytes": rootfs_bytes})
        )
        metas = sorted(
            self.root.glob(f"{kind}-{arch}-*.json"), key=lambda p: p.stat().st_mtime, reverse=True
        )
        for old in metas[self.KEEP :]:
            old.unlink()
            Path(str(old)[: -len(".json")] + ".tar.gz").unlink(missing_ok=True)


def build_oci(out: Path, cache: LayerCache | None) -> dict[str, Any]:
    check_host_python()
    ver = version()
    uid, gid = uid_gid()
    builder = file_digest(builder_files()) + sys.version.split()[0]
    keys = {
        "debian": hashlib.sha256(f"{builder}".encode()).hexdigest()[:16],
        "python": hashlib.sha256(f"{builder}{file_digest([LOCK])}".encode()).hexdigest()[:16],
        "app": hashlib.sha256(
            f"{builder}{file_digest([LOCK])}{file_digest(source_files())}".encode()
        ).hexdigest()[:16],
    }
    blobs = out / "blobs" / "sha256"
    timings: dict[str, float] = {}
    report: dict[str, Any] = {"version": ver, "platforms": {}}
    images = []
    with tempfile.TemporaryDirectory(prefix="karpy-image-") as tmp:
        work = Path(tmp)
        wheel: Path | None = None
        for platform in SPEC["platforms"]:
            arch = platform["architecture"]
            layers: list[oci.Layer] = []
            sizes: dict[str, int] = {}
            for kind in ("debian", "python", "app"):
                t0 = time.monotonic()
                hit = cache.get(kind, arch, keys[kind], blobs) if cache else None
                if hit:
                    layer, size = hit
                else:
                    tree = work / f"{kind}-{arch}"
                    owners: dict[str, tuple[int, int]] = {}
                    if kind == "debian":
                        controls = debian_tree(platform, work, tree)
                        owners[SPEC["home"].lstrip("/")] = (uid, gid)
                        comment = "debian bookworm: " + " ".join(
                            f"{c['Package']}={c['Version']}" for c in controls
                        )
                    elif kind == "python":
                        python_tree(platform, tree)
                        comment = f"python packages of {LOCK.name} (sha256 {file_digest([LOCK])})"
                    else:
                        if wheel is None:
                            wheel = build_wheel(work)
                        app_tree(platform, wheel, tree)
                        comment = (
                            f"karpenter-py {ver} ({wheel.name}), {SPEC['entry_script']}, examples"
                        )
                    size = tree_size(tree)
                    layer = oci.write_layer(tree, blobs, comment=comment, owners=owners)
                    shutil.rmtree(tree)
                    if cache:
                        cache.put(kind, arch, keys[kind], layer, size, blobs)
                timings[f"{kind}-{arch}"] = round(time.monotonic() - t0, 1)
                log(
                    f"{arch} {kind} layer: {layer.size / 1e6:.1f} MB gzip, {size / 1e6:.1f} MB files "
                    f"({'cached' if hit else 'built'}, {timings[f'{kind}-{arch}']}s)"
                )
                layers.append(layer)
                sizes[kind] = size
            images.append(
                oci.PlatformImage(
                    platform={
                        k: platform[k] for k in ("os", "architecture", "variant") if k in platform
                    },
                    layers=layers,
                    config=image_config(ver),
                )
            )
            report["platforms"][arch] = {
                "compressed_bytes": sum(layer.size for layer in layers),
                "layer_tar_bytes": sum(layer.tar_size for layer in layers),
                "rootfs_file_bytes": sum(sizes.values()),
                "layers": {
                    k: {"compressed_bytes": la.size, "file_bytes": sizes[k]}
                    for k, la in zip(("debian", "python", "app"), layers, strict=True)
                },
            }
    oci.write_layout(out, images, [t.format(version=ver) for t in SPEC["tags"]], annotations(ver))
    report["timings_s"] = timings
    return report


def image_config(ver: str) -> dict[str, Any]:
    return {
        "User": SPEC["user"],
        "Env": [f"{k}={v}" for k, v in SPEC["env"].items()],
        "Entrypoint": list(SPEC["entrypoint"]),
        "WorkingDir": "/",
        "ExposedPorts": {f"{p}/tcp": {} for p in SPEC["ports"]},
        "Labels": {**SPEC["labels"], "org.opencontainers.image.version": ver},
    }


def annotations(ver: str) -> dict[str, str]:
    return {"org.opencontainers.image.version": ver, "org.opencontainers.image.title": SPEC["name"]}


def build_rootfs(arch: str, out: Path) -> None:
    """All three layers merged into ``out`` for one platform (no tar, no cache)."""
    check_host_python()
    (platform,) = [p for p in SPEC["platforms"] if p["architecture"] == arch]
    with tempfile.TemporaryDirectory(prefix="karpy-rootfs-") as tmp:
        work = Path(tmp)
        debian_tree(platform, work, out)
        uid, gid = uid_gid()
        os.chown(out / SPEC["home"].lstrip("/"), uid, gid)
        for kind in ("python", "app"):
            tree = work / kind
            if kind == "python":
                python_tree(platform, tree)
            else:
                app_tree(platform, build_wheel(work), tree)
            shutil.copytree(tree, out, symlinks=True, dirs_exist_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("oci")
    o.add_argument("--out", type=Path, required=True)
    o.add_argument("--layer-cache", type=Path, help="reuse and keep finished layers here")
    o.add_argument("--report", type=Path, help="write sizes and per-layer timings as JSON here")
    r = sub.add_parser("rootfs")
    r.add_argument("--arch", required=True, choices=[p["architecture"] for p in SPEC["platforms"]])
    r.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "rootfs":
        build_rootfs(args.arch, args.out)
        return 0
    if args.out.exists():
        raise SystemExit(f"{args.out} exists")
    rep = build_oci(args.out, LayerCache(args.layer_cache) if args.layer_cache else None)
    if args.report:
        args.report.write_text(json.dumps(rep, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
