"""The helm binary the tests run: built from Go modules by hack/helm/build.sh.

``KARPY_HELM`` names a helm binary to use instead (``make test`` sets it to the one ``make helm``
built). Otherwise the build script is run once per process; it only builds when its cache
(``~/.cache/karpenter-py/helm/<hash>/helm``) lacks the binary, and prints the binary's path.
A failed build raises :class:`HelmError`, so the tests that need helm fail instead of skipping.

Every helm command runs with its config, cache and data homes in a private temporary directory,
so no user's helm repositories or plugins take part.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SH = REPO_ROOT / "hack" / "helm" / "build.sh"
CHART = REPO_ROOT / "charts" / "karpenter-py"


class HelmError(RuntimeError):
    pass


_FOUND: list[Path | HelmError] = []  # the first answer, kept: one failed build is not retried


def helm_binary(*, progress: bool = False) -> Path:
    """Path of the helm binary (``KARPY_HELM``, else built or reused by hack/helm/build.sh).

    ``progress`` shows the build's progress on stderr (else it is kept for the error message)."""
    if not _FOUND:
        try:
            _FOUND.append(_build_or_reuse(progress))
        except HelmError as e:
            _FOUND.append(e)
    found = _FOUND[0]
    if isinstance(found, HelmError):
        raise found
    return found


def _build_or_reuse(progress: bool) -> Path:
    env_bin = os.environ.get("KARPY_HELM")
    if env_bin:
        path = Path(env_bin)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise HelmError(f"KARPY_HELM={env_bin} is not an executable file")
        return path
    proc = subprocess.run(
        ["bash", str(BUILD_SH)],
        stdout=subprocess.PIPE,
        stderr=None if progress else subprocess.PIPE,
        text=True,
        check=False,
        timeout=3600,
    )
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        detail = proc.stderr[-6000:] if proc.stderr else "(see the build output above)"
        raise HelmError(f"{BUILD_SH} failed (exit {proc.returncode}):\n{detail}")
    return Path(lines[-1])


@functools.cache
def _helm_home() -> Path:
    return Path(tempfile.mkdtemp(prefix="karpy-helm-home-"))


def run_helm(
    args: Sequence[str],
    *,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``helm <args>``; with ``check`` a non-zero exit raises HelmError with its output."""
    home = _helm_home()
    full_env = {
        **os.environ,
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
        **(env or {}),
    }
    proc = subprocess.run(
        [str(helm_binary()), *args],
        capture_output=True,
        text=True,
        env=full_env,
        check=False,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise HelmError(
            f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc
