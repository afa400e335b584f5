"""Where to find the apiserver and how to authenticate: a small typed :class:`KubeConfig`.

Sources, in controller-runtime's order: an explicit kubeconfig path, ``$KUBECONFIG`` (a
``os.pathsep`` list, merged first-wins like kubectl), the in-cluster service account, then
``~/.kube/config``. Loading is synchronous file I/O meant for start-up (or ``asyncio.to_thread``).
Supported credentials: bearer token (inline or ``tokenFile``), client certificate, basic auth,
and ``exec`` credential plugins that return a token (:mod:`karpenter_py.kube.execauth`). As in
client-go, an explicit token, basic auth or client certificate takes precedence over ``exec``.
``auth-provider`` (removed from client-go in 1.26) is refused with a clear error.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from karpenter_py.aio.clock import Clock
from karpenter_py.kube.execauth import ExecTokenSource

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(Exception):
    """The kubeconfig is missing, malformed, or asks for something we do not support."""


class TokenSource(Protocol):
    """A bearer token that changes over time (e.g. an ``exec`` plugin's). The client awaits it
    before every request, so it must cache; it raises a ``KubeError`` when no token is to be had.
    ``invalidate(token)`` tells it the apiserver answered 401 for that token."""

    async def __call__(self) -> str: ...

    def invalidate(self, token: str) -> None: ...


@dataclass(frozen=True, slots=True)
class KubeConfig:
    server: str
    ca_pem: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    token: str | None = None
    token_file: str | None = None  # re-read periodically: projected SA tokens rotate
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    username: str | None = None
    password: str | None = None
    token_source: TokenSource | None = None  # fresh bearer tokens (exec plugin); beats `token`
    namespace: str = "default"
    source: str = ""  # where this came from, for logs

    def __repr__(self) -> str:  # never print credentials
        return f"KubeConfig(server={self.server!r}, source={self.source!r})"

    def ssl_context(self) -> ssl.SSLContext | None:
        """TLS settings for ``https`` servers (blocking: loads certificates)."""
        if not self.server.startswith("https"):
            return None
        ctx = (
            ssl.create_default_context(cadata=self.ca_pem)
            if self.ca_pem
            else ssl.create_default_context()
        )
        if self.insecure_skip_tls_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert_pem is not None and self.client_key_pem is not None:
            _load_cert_chain(ctx, self.client_cert_pem, self.client_key_pem)
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl only loads client certificates from files: use a private temp dir, removed at once.
    with tempfile.TemporaryDirectory(prefix="karpy-tls-") as tmp:
        cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(str(cert_path), str(key_path))


# ----------------------------------------------------------------------------- kubeconfig files


def _named(entries: Any, name: str | None, what: str) -> dict[str, Any]:
    for entry in entries or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get(what)
            return dict(body) if isinstance(body, Mapping) else {}
    raise ConfigError(f"kubeconfig has no {what} named {name!r}")


def _read_bytes(data_b64: Any, file_ref: Any, base: Path, what: str) -> bytes | None:
    if data_b64:
        try:
            return base64.b64decode(str(data_b64), validate=True)
        except ValueError as e:
            raise ConfigError(f"{what}-data is not valid base64") from e
    if file_ref:
        path = Path(str(file_ref)).expanduser()
        if not path.is_absolute():  # kubectl resolves paths relative to the kubeconfig file
            path = base / path
        try:
            return path.read_bytes()
        except OSError as e:
            raise ConfigError(f"cannot read {what} {path}: {e}") from e
    return None


def _merge(docs: Sequence[tuple[Path, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Path]]:
    """kubectl's merge: the first file that defines a name (or current-context) wins.
    Returns the merged config and, per cluster/user name, the directory relative paths use."""
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    base_of: dict[str, Path] = {}
    for path, doc in docs:
        if not merged.get("current-context") and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for section in ("clusters", "users", "contexts"):
            seen = {e.get("name") for e in merged[section]}
            for entry in doc.get(section) or ():
                if isinstance(entry, Mapping) and entry.get("name") not in seen:
                    merged[section].append(dict(entry))
                    base_of.setdefault(f"{section}/{entry.get('name')}", path.parent)
    return merged, base_of


def load_kubeconfig(
    paths: Sequence[str | os.PathLike[str]],
    *,
    context: str | None = None,
    clock: Clock | None = None,
) -> KubeConfig:
    """Load one or more kubeconfig files (merged) and resolve ``context`` (default: current).

    ``clock`` is what an ``exec`` token source judges expiry by (default: the real clock)."""
    docs: list[tuple[Path, dict[str, Any]]] = []
    for p in paths:
        path = Path(p).expanduser()
        try:
            doc = yaml.safe_load(path.read_text())
        except OSError as e:
            raise ConfigError(f"cannot read kubeconfig {path}: {e}") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"kubeconfig {path} is not valid YAML: {e}") from e
        if isinstance(doc, dict):
            docs.append((path, doc))
    if not docs:
        raise ConfigError(f"no usable kubeconfig in {[str(p) for p in paths]}")
    cfg, base_of = _merge(docs)
    ctx_name = context or cfg.get("current-context")
    if not ctx_name:
        raise ConfigError("kubeconfig has no current-context and none was given")
    ctx = _named(cfg["contexts"], ctx_name, "context")
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    cluster = _named(cfg["clusters"], cluster_name, "cluster")
    user = _named(cfg["users"], user_name, "user") if user_name else {}
    cbase = base_of.get(f"clusters/{cluster_name}", docs[0][0].parent)
    ubase = base_of.get(f"users/{user_name}", docs[0][0].parent)
    return _from_entries(
        cluster, user, cbase, ubase, ctx, source=f"kubeconfig context {ctx_name}", clock=clock
    )


def _from_entries(
    cluster: Mapping[str, Any],
    user: Mapping[str, Any],
    cbase: Path,
    ubase: Path,
    ctx: Mapping[str, Any],
    *,
    source: str,
    clock: Clock | None = None,
) -> KubeConfig:
    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError("kubeconfig cluster has no server")
    user_name = ctx.get("user")
    if "auth-provider" in user:
        provider = user["auth-provider"]
        kind = provider.get("name") if isinstance(provider, Mapping) else None
        raise ConfigError(
            f"kubeconfig user {user_name!r} uses auth-provider {kind!r}, which client-go removed "
            "in 1.26; use an exec credential plugin instead (e.g. gke-gcloud-auth-plugin, kubelogin)"
        )
    ca = _read_bytes(
        cluster.get("certificate-authority-data"),
        cluster.get("certificate-authority"),
        cbase,
        "certificate-authority",
    )
    cert = _read_bytes(
        user.get("client-certificate-data"),
        user.get("client-certificate"),
        ubase,
        "client-certificate",
    )
    key = _read_bytes(user.get("client-key-data"), user.get("client-key"), ubase, "client-key")
    if (cert is None) != (key is None):
        raise ConfigError(
            "kubeconfig user has a client certificate without its key (or vice versa)"
        )
    token_file = user.get("tokenFile")
    if token_file and not Path(str(token_file)).is_absolute():
        token_file = str(ubase / str(token_file))
    token_source: TokenSource | None = None
    explicit = user.get("token") or token_file or user.get("username") or cert is not None
    if user.get("exec") is not None and not explicit:  # client-go: explicit credentials win
        token_source = _exec_source(user["exec"], ubase, user_name, clock)
    return KubeConfig(
        server=server.rstrip("/"),
        ca_pem=ca.decode() if ca else None,
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name") or None,
        token=user.get("token") or None,
        token_file=str(token_file) if token_file else None,
        client_cert_pem=cert,
        client_key_pem=key,
        username=user.get("username") or None,
        password=user.get("password") or None,
        token_source=token_source,
        namespace=str(ctx.get("namespace") or "default"),
        source=source,
    )


def _exec_source(
    exec_config: Any, ubase: Path, user_name: object, clock: Clock | None
) -> ExecTokenSource:
    if not isinstance(exec_config, Mapping):
        raise ConfigError(f"kubeconfig user {user_name!r}: exec must be a mapping")
    try:
        return ExecTokenSource(exec_config, base=ubase, clock=clock)
    except ValueError as e:
        raise ConfigError(f"kubeconfig user {user_name!r}: {e}") from e


# ----------------------------------------------------------------------------- in-cluster


def in_cluster_available(
    env: Mapping[str, str] | None = None, sa_dir: Path = SERVICE_ACCOUNT_DIR
) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("KUBERNETES_SERVICE_HOST")) and (sa_dir / "token").is_file()


def load_incluster(
    env: Mapping[str, str] | None = None, sa_dir: Path = SERVICE_ACCOUNT_DIR
) -> KubeConfig:
    """The pod's service account: token file (re-read as it rotates), CA and namespace."""
    env = os.environ if env is None else env
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ConfigError("not running in a cluster (KUBERNETES_SERVICE_HOST is unset)")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    token_path = sa_dir / "token"
    if not token_path.is_file():
        raise ConfigError(f"service account token {token_path} is missing")
    ca = sa_dir / "ca.crt"
    ns_file = sa_dir / "namespace"
    return KubeConfig(
        server=f"https://{host}:{port}",
        ca_pem=ca.read_text() if ca.is_file() else None,
        token_file=str(token_path),
        namespace=ns_file.read_text().strip() if ns_file.is_file() else "default",
        source="in-cluster service account",
    )


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    clock: Clock | None = None,
) -> KubeConfig:
    """Resolve the config the way controller-runtime does (see the module docstring)."""
    if path:
        return load_kubeconfig([path], context=context, clock=clock)
    env_paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if env_paths:
        existing = [p for p in env_paths if Path(p).expanduser().is_file()]
        if not existing:
            raise ConfigError(f"KUBECONFIG names no existing file: {env_paths}")
        return load_kubeconfig(existing, context=context, clock=clock)
    if in_cluster_available():
        return load_incluster()
    home = Path("~/.kube/config").expanduser()
    if home.is_file():
        return load_kubeconfig([home], context=context, clock=clock)
    raise ConfigError("no kubeconfig: pass a path, set KUBECONFIG, or run in a cluster")
