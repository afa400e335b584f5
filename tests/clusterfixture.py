"""pytest plugin: a real Kubernetes control plane for the test session.

Wire it once, at the top level (tests/conftest.py)::

    pytest_plugins = ["tests.clusterfixture"]

Until then tests/cluster/conftest.py registers it itself (and skips that if it is already
registered, so both can coexist).

Fixture ``cluster`` (session scope) -> :class:`ClusterHandle`:
  * ``KARPY_KUBECONFIG`` set: use that cluster (kind, ``make cluster-up``...) and never stop it.
  * otherwise: build-or-reuse the binaries (hack/controlplane/build.sh, run once at collection
    time, outside any per-test timeout, with its progress shown live) and start a
    ``LocalCluster`` (hack/cluster.py) with state in ``.cluster/pytest-<pid>`` (logs kept);
    stop it at session end.
A build or start failure makes every test that uses the fixture error loudly; nothing is skipped.
Tests that use the fixture get the ``cluster`` marker automatically; on failure the tail of each
component log is attached to the report.

``ClusterHandle.api`` is a tiny stdlib HTTPS client (:class:`KubeAPI`), enough for tests that
want to talk to the apiserver without the project's own client.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import os
import shutil
import ssl
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CLUSTER_PY = REPO_ROOT / "hack" / "cluster.py"
T = TypeVar("T")


def load_cluster_module() -> ModuleType:
    """Import hack/cluster.py (not a package) as module ``karpy_hack_cluster``."""
    name = "karpy_hack_cluster"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, CLUSTER_PY)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------- API client


class KubeAPIError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        self.message = body.get("message", "") if isinstance(body, dict) else str(body)
        super().__init__(f"{method} {path} -> {status}: {self.message or body}")


class KubeAPI:
    """Minimal synchronous Kubernetes REST client over http.client (JSON only)."""

    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        u = urllib.parse.urlsplit(server)
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 443
        self.token = token
        self.ctx = ssl_context or ssl.create_default_context()

    def _conn(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def _headers(self, content_type: str | None) -> dict[str, str]:
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if content_type:
            h["Content-Type"] = content_type
        return h

    @staticmethod
    def _url(path: str, query: dict[str, Any] | None) -> str:
        if not query:
            return path
        q = {
            k: (str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in query.items()
            if v is not None
        }
        return f"{path}?{urllib.parse.urlencode(q)}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        """Returns (status, decoded JSON or text). Never raises for HTTP errors."""
        data = (
            None
            if body is None
            else (body if isinstance(body, bytes) else json.dumps(body).encode())
        )
        with contextlib.closing(self._conn(timeout)) as conn:
            conn.request(
                method,
                self._url(path, query),
                body=data,
                headers=self._headers(content_type if data is not None else None),
            )
            resp = conn.getresponse()
            raw = resp.read()
            status = resp.status
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        status, out = self.request(method, path, body, **kw)
        if status >= 400:
            raise KubeAPIError(method, path, status, out)
        return out

    def get(self, path: str, **query: Any) -> Any:
        return self.call("GET", path, query=query or None)

    def create(self, path: str, obj: dict[str, Any]) -> Any:
        return self.call("POST", path, obj)

    def delete(self, path: str, **query: Any) -> Any:
        return self.call("DELETE", path, query=query or None)

    def merge_patch(self, path: str, patch: dict[str, Any]) -> Any:
        return self.call("PATCH", path, patch, content_type="application/merge-patch+json")

    def apply(self, path: str, obj: dict[str, Any], field_manager: str = "karpy-tests") -> Any:
        """Server-side apply (idempotent create-or-update); path names the object."""
        return self.call(
            "PATCH",
            path,
            obj,
            content_type="application/apply-patch+yaml",
            query={"fieldManager": field_manager, "force": True},
        )

    def watch(
        self,
        path: str,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 30,
        **query: Any,
    ) -> Generator[dict[str, Any], None, None]:
        """Stream watch events ({"type", "object"}). Raises KubeAPIError on a non-200 answer;
        an in-stream error arrives as an event of type ERROR with a Status object."""
        q = {
            "watch": True,
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": False,
            **query,
        }
        with contextlib.closing(self._conn(timeout_seconds + 10)) as conn:
            conn.request("GET", self._url(path, q), headers=self._headers(None))
            resp = conn.getresponse()
            if resp.status != 200:
                raw = resp.read()
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                raise KubeAPIError("WATCH", path, resp.status, body)
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)


def wait_for(
    fn: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    interval: float = 0.5,
    what: str = "condition",
) -> T:
    """Poll fn until it returns something truthy; returns it. AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = fn()
        except KubeAPIError as e:
            last = e
        else:
            if result:
                return result
            last = result
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}; last value: {last!r}"
            )
        time.sleep(interval)  # noqa: TID251 -- synchronous test helper


# --------------------------------------------------------------------------- handle


@dataclass
class ClusterHandle:
    server: str
    token: str | None
    ca_file: Path | None
    kubeconfig_path: Path
    api: KubeAPI
    local: Any = None  # LocalCluster when this session started it
    etcd_url: str | None = None  # set when etcd is reachable (local clusters)
    _tmp: list[Path] = field(default_factory=list, repr=False)

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision; needs etcd on loopback (a hack/cluster.py cluster)."""
        if self.etcd_url is None:
            raise RuntimeError(
                "etcd is not reachable for this cluster (KARPY_KUBECONFIG without pids.json)"
            )
        return int(load_cluster_module().compact_etcd(self.etcd_url))

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        if self.local is None:
            return {}
        tails: dict[str, str] = self.local.log_tails(lines)
        return tails


def _handle_from_kubeconfig(path: Path) -> ClusterHandle:
    """Build a handle from a kubeconfig (current context): token or client cert, CA data or file."""
    import yaml  # only needed for external clusters

    cfg = yaml.safe_load(path.read_text())
    ctx_name = cfg.get("current-context")
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cl = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user: dict[str, Any] = next(
        (u["user"] for u in cfg.get("users", []) if u["name"] == ctx.get("user")), {}
    )
    tmp: list[Path] = []

    def materialise(data_key: str, file_key: str, src: dict[str, Any]) -> str | None:
        if src.get(file_key):
            return str(Path(src[file_key]).expanduser())
        if src.get(data_key):
            import base64

            fd, name = tempfile.mkstemp(prefix="karpy-kc-")
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64decode(src[data_key]))
            tmp.append(Path(name))
            return name
        return None

    ca = materialise("certificate-authority-data", "certificate-authority", cl)
    sslctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    if cl.get("insecure-skip-tls-verify"):
        sslctx.check_hostname = False
        sslctx.verify_mode = ssl.CERT_NONE
    cert = materialise("client-certificate-data", "client-certificate", user)
    key = materialise("client-key-data", "client-key", user)
    if cert:
        sslctx.load_cert_chain(cert, key)
    token = user.get("token")
    etcd_url = None
    state = path.parent / "pids.json"  # a cluster started by hack/cluster.py
    if state.is_file():
        etcd_url = json.loads(state.read_text()).get("etcd")
    return ClusterHandle(
        server=cl["server"],
        token=token,
        ca_file=Path(ca) if ca else None,
        kubeconfig_path=path,
        api=KubeAPI(cl["server"], token=token, ssl_context=sslctx),
        etcd_url=etcd_url,
        _tmp=tmp,
    )


# --------------------------------------------------------------------------- pytest plugin

_STATE: dict[str, Any] = {"bin_dir": None, "build_error": None, "handle": None}


def _uses_cluster(item: pytest.Item) -> bool:
    return "cluster" in getattr(item, "fixturenames", ())


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cluster: needs the local Kubernetes control plane (built from Go modules)"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tag every user of the fixture, so `-m "not cluster"` deselects it even if unmarked.
    for item in items:
        if _uses_cluster(item) and item.get_closest_marker("cluster") is None:
            item.add_marker(pytest.mark.cluster)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binaries once, before any test runs (a cold build takes 15-40 min)."""
    if os.environ.get("KARPY_KUBECONFIG") or not any(_uses_cluster(i) for i in session.items):
        return
    if _STATE["bin_dir"] is not None or _STATE["build_error"] is not None:
        return
    mod = load_cluster_module()
    capman = session.config.pluginmanager.getplugin("capturemanager")
    cm = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    with cm:
        try:
            _STATE["bin_dir"] = mod.ensure_binaries()
        except mod.ClusterError as e:
            _STATE["build_error"] = str(e)
            print(f"\n[cluster] control-plane build FAILED:\n{e}", file=sys.stderr)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    rep = yield
    handle: ClusterHandle | None = _STATE["handle"]
    if rep.failed and handle is not None and _uses_cluster(item):
        with contextlib.suppress(Exception):
            for name, text in handle.log_tails(40).items():
                rep.sections.append((f"cluster: {name}.log (last 40 lines)", text))
            dead = handle.local.dead_components() if handle.local is not None else []
            if dead:
                rep.sections.append(("cluster: DEAD components", ", ".join(dead)))
    return rep


def _state_dir(mod: ModuleType) -> Path:
    """``.cluster/pytest-<pid>``: concurrent pytest runs (xdist workers, two shells) in one
    checkout each get their own cluster. Dirs of runs whose pytest is gone are cleaned up here:
    a cluster left by a killed run is stopped, and old logs are dropped."""
    root = REPO_ROOT / ".cluster"
    for old in root.glob("pytest-*"):
        try:
            pid = int(old.name.removeprefix("pytest-"))
        except ValueError:
            continue
        if pid != os.getpid() and not mod.pid_alive(pid):
            mod.stop_stale(old)
            shutil.rmtree(old, ignore_errors=True)
    return root / f"pytest-{os.getpid()}"


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterHandle]:
    """A running Kubernetes control plane (see module docstring)."""
    external = os.environ.get("KARPY_KUBECONFIG")
    if external:
        handle = _handle_from_kubeconfig(Path(external).expanduser())
        _STATE["handle"] = handle
        try:
            yield handle
        finally:
            _STATE["handle"] = None
            for p in handle._tmp:
                p.unlink(missing_ok=True)
        return

    mod = load_cluster_module()
    if _STATE["build_error"]:
        pytest.fail(
            f"control-plane build failed (see hack/controlplane/build.sh):\n{_STATE['build_error']}",
            pytrace=False,
        )
    bin_dir = _STATE["bin_dir"]
    if bin_dir is None:  # fixture used without collection hook (e.g. plugin registered late)
        try:
            bin_dir = _STATE["bin_dir"] = mod.ensure_binaries(quiet=True)
        except mod.ClusterError as e:
            pytest.fail(f"control-plane build failed:\n{e}", pytrace=False)
    local = mod.LocalCluster(bin_dir=bin_dir, state_dir=_state_dir(mod))
    try:
        local.start()
    except mod.ClusterError as e:
        pytest.fail(f"local control plane failed to start:\n{e}", pytrace=False)
    handle = ClusterHandle(
        server=local.server,
        token=local.token,
        ca_file=local.ca_file,
        kubeconfig_path=local.kubeconfig_path,
        api=KubeAPI(local.server, token=local.token, ssl_context=local.ssl_context()),
        local=local,
        etcd_url=local.etcd_url,
    )
    _STATE["handle"] = handle
    try:
        yield handle
    finally:
        _STATE["handle"] = None
        local.stop()
