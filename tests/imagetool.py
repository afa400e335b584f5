"""The controller image the tests look at: built by hack/image/build.sh, run without Docker.

``KARPY_IMAGE`` names an OCI layout to use instead (e.g. ``dist/image`` after ``make image``).
Otherwise the build script is run once per process; it only builds when its cache
(``~/.cache/karpenter-py/image/<hash>/layout``) lacks the layout for this tree, and prints its
path. A failed build raises :class:`ImageError`, so the tests that need the image fail instead of
skipping.

:class:`Runner` runs a program from an unpacked root filesystem as the image's user, in an OCI
runtime from Debian: crun first, then runc (on this machine's cgroup v1/v2 hybrid crun 1.8
refuses to start with "cgroups in hybrid mode not supported"; runc 1.1 runs). The container has
its own pid, ipc, uts and mount namespaces, a read-only root, tmpfs /dev and /tmp. Where no
runtime can run, it falls back to chroot in a private mount namespace with /dev and /proc
mounted, as a runtime provides them. Either way the host network is shared, the environment is
the image's, the user is 65532.
arm64 programs run under qemu-user-static: the static qemu binary is copied into the (test's
copy of the) root filesystem and runs the arm64 python inside the chroot, so no binfmt_misc
registration is needed.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGE_DIR = REPO_ROOT / "hack" / "image"
BUILD_SH = IMAGE_DIR / "build.sh"
SPEC: dict[str, Any] = json.loads((IMAGE_DIR / "spec.json").read_text())
QEMU = {"arm64": "qemu-aarch64-static"}


class ImageError(RuntimeError):
    pass


@functools.cache
def oci() -> ModuleType:
    """hack/image/oci.py (not a package), imported as ``karpy_hack_oci``."""
    name = "karpy_hack_oci"
    spec = importlib.util.spec_from_file_location(name, IMAGE_DIR / "oci.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_FOUND: list[Path | ImageError] = []


def image_layout() -> Path:
    """The OCI layout (``KARPY_IMAGE``, else built or reused by hack/image/build.sh)."""
    if not _FOUND:
        try:
            _FOUND.append(_build_or_reuse())
        except ImageError as e:
            _FOUND.append(e)
    found = _FOUND[0]
    if isinstance(found, ImageError):
        raise found
    return found


def _build_or_reuse() -> Path:
    env_dir = os.environ.get("KARPY_IMAGE")
    if env_dir:
        path = Path(env_dir)
        if not (path / "index.json").is_file():
            raise ImageError(f"KARPY_IMAGE={env_dir} is not an OCI layout (no index.json)")
        return path
    proc = subprocess.run(
        ["bash", str(BUILD_SH)],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        raise ImageError(f"{BUILD_SH} failed (exit {proc.returncode}):\n{proc.stderr[-6000:]}")
    return Path(lines[-1])


def version() -> str:
    import tomllib

    return str(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"])


def image_env() -> dict[str, str]:
    return dict(SPEC["env"])


def unpack(layout: Path, arch: str, dest: Path) -> Path:
    """The platform's layers applied in order to ``dest`` (plus qemu for a foreign arch)."""
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(0o755)  # it is the container's /: a temp dir's 0700 would lock the user out
    oci().unpack(layout, arch, dest)
    if arch in QEMU:
        qemu = shutil.which(QEMU[arch])
        if qemu is None:
            raise ImageError(f"{QEMU[arch]} not found: hack/image/tools.sh installs it")
        shutil.copy(qemu, dest / QEMU[arch])
    return dest


_CHROOT_SH = (
    'mount --rbind /dev "$0/dev" && mount -t proc proc "$0/proc" '
    '&& u="$1" && shift && exec /usr/sbin/chroot --userspec="$u" "$0" "$@"'
)


# The OCI runtimes from Debian tried in turn; the first that can start a container is used.
RUNTIMES = ("crun", "runc")


@functools.cache
def runtime_unusable(runtime: str) -> str | None:
    """Why ``runtime`` cannot run a container here (None: it can), probed once per process."""
    if shutil.which(runtime) is None:
        return f"{runtime} is not installed"
    with tempfile.TemporaryDirectory(prefix="karpy-oci-probe-") as tmp:
        bundle = Path(tmp)
        (bundle / "rootfs").mkdir()
        _oci_config(bundle, bundle / "rootfs", ["/nonexistent"], {})
        proc = subprocess.run(
            [runtime, "run", "--bundle", str(bundle), f"karpy-probe-{os.getpid()}"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        err = (proc.stderr or proc.stdout).strip()
        # A runtime that works fails this probe only at exec time (the program does not exist).
        if "nonexistent" in err or "No such file" in err:
            return None
        return err or f"{runtime} exited {proc.returncode}"


def _oci_config(bundle: Path, rootfs: Path, argv: Sequence[str], env: Mapping[str, str]) -> None:
    uid, gid = (int(x) for x in SPEC["user"].split(":"))
    config = {
        "ociVersion": "1.0.2",
        "root": {"path": str(rootfs), "readonly": True},
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": gid},
            "args": list(argv),
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": "/",
            "noNewPrivileges": True,
        },
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {
                "destination": "/dev",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "mode=755"],
            },
            {
                "destination": "/tmp",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "mode=1777"],
            },
        ],
        "linux": {"namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")]},
    }
    (bundle / "config.json").write_text(json.dumps(config))


class Runner:
    """Start programs from an unpacked image root filesystem as the image's user."""

    def __init__(self, rootfs: Path, arch: str) -> None:
        self.rootfs = rootfs
        self.arch = arch
        # runtime -> why it cannot run here, for each tried before the one used.
        self.why_not: dict[str, str] = {}
        self.how = "chroot"
        for runtime in RUNTIMES:
            why = runtime_unusable(runtime)
            if why is None:
                self.how = runtime
                break
            self.why_not[runtime] = why

    def command(
        self, argv: Sequence[str], env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        argv = list(argv)
        if self.arch in QEMU:
            argv = [f"/{QEMU[self.arch]}", *argv]
        full_env = {**image_env(), **env}
        if self.how != "chroot":
            bundle = Path(tempfile.mkdtemp(prefix="karpy-oci-"))
            _oci_config(bundle, self.rootfs, argv, full_env)
            return [self.how, "run", "--bundle", str(bundle), f"karpy-{bundle.name}"], {
                "PATH": os.environ["PATH"]
            }
        # The image's PATH also finds the host's mount (merged /usr) for the shell before chroot.
        cmd = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", _CHROOT_SH]
        return [*cmd, str(self.rootfs), SPEC["user"], *argv], full_env

    def run(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        cmd, full_env = self.command(argv, env or {})
        return subprocess.run(
            cmd, env=full_env, capture_output=True, text=True, check=False, timeout=timeout
        )

    def popen(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, log: Path
    ) -> subprocess.Popen[bytes]:
        cmd, full_env = self.command(argv, env or {})
        with log.open("wb") as out:
            return subprocess.Popen(cmd, env=full_env, stdout=out, stderr=subprocess.STDOUT)
