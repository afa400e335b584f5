#!/usr/bin/env python3
"""A real Kubernetes control plane on 127.0.0.1, for tests and benchmarks.

    python hack/cluster.py up       # build-or-reuse binaries, start, write .cluster/kubeconfig
    python hack/cluster.py status   # which components are alive; /readyz
    python hack/cluster.py down     # stop every process by pid, remove the temp data

Components (all built by hack/controlplane/build.sh from Go modules, no Docker):
etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok (the fake kubelet that
manages Nodes annotated ``kwok.x-k8s.io/node=fake``). Everything binds to 127.0.0.1 on free ports.

Layout:
  <state_dir>/kubeconfig      admin kubeconfig (static token, group system:masters; CA embedded)
  <state_dir>/ca.crt          CA that signed the apiserver's serving cert
  <state_dir>/pids.json       pids, ports and paths of the running cluster
  <state_dir>/logs/<c>.log    stdout+stderr of each component (kept after ``down``)
  <data_dir>                  etcd data, PKI, tokens (under /dev/shm when possible; removed on stop)
The default state_dir is ``<repo>/.cluster``.

Python API (stdlib only)::

    from cluster import LocalCluster           # with hack/ on sys.path
    c = LocalCluster()                          # or LocalCluster(bin_dir=..., state_dir=...)
    c.start()                                   # raises ClusterError with log tails on failure
    c.server, c.token, c.ca_file, c.kubeconfig_path, c.logs_dir, c.etcd_url
    c.compact_etcd()                            # compact etcd at its current revision
    c.stop()

Watch-cache note: the apiserver runs with ``--watch-cache-sizes=configmaps#0``, i.e. ConfigMaps are
served straight from etcd. A ConfigMap watch resumed from a resourceVersion older than an etcd
compaction (``compact_etcd()``) therefore gets 410 Gone deterministically; every other resource
keeps the (default) watch cache.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HACK_DIR = Path(__file__).resolve().parent
REPO_ROOT = HACK_DIR.parent
BUILD_SH = HACK_DIR / "controlplane" / "build.sh"
KWOK_CONFIG = HACK_DIR / "controlplane" / "kwok" / "kwok.yaml"
DEFAULT_STATE_DIR = REPO_ROOT / ".cluster"

BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
# Stop order: clients first, then the apiserver, then etcd.
STOP_ORDER = (("kwok", "kube-scheduler", "kube-controller-manager"), ("kube-apiserver",), ("etcd",))
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"


class ClusterError(RuntimeError):
    """The control plane could not be built, started or reached."""


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # noqa: TID251 -- synchronous CLI / fixture code


def _log(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- binaries


def ensure_binaries(*, quiet: bool = False) -> Path:
    """Build (or reuse) the control-plane binaries; returns the bin dir.

    ``KARPY_CONTROLPLANE_BIN`` short-circuits the build (a dir holding all five binaries)."""
    env_bin = os.environ.get("KARPY_CONTROLPLANE_BIN")
    if env_bin:
        bin_dir = Path(env_bin)
        missing = [b for b in BINARIES if not (bin_dir / b).is_file()]
        if missing:
            raise ClusterError(f"KARPY_CONTROLPLANE_BIN={bin_dir} lacks {', '.join(missing)}")
        return bin_dir
    if not quiet:
        _log(f"building or reusing control-plane binaries ({BUILD_SH})")
    proc = subprocess.run(
        ["bash", str(BUILD_SH)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if quiet else None,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        detail = (proc.stderr or "")[-6000:] if quiet else "(see the build output above)"
        raise ClusterError(f"{BUILD_SH} failed with exit code {proc.returncode}:\n{detail}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines:
        raise ClusterError(f"{BUILD_SH} printed no bin dir")
    return Path(lines[-1].strip())


# --------------------------------------------------------------------------- helpers


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tail(path: Path, lines: int = 40) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return "\n".join(data.splitlines()[-lines:])


def pid_alive(pid: int, exe: str | None = None) -> bool:
    """True if pid runs (not a zombie) and, when exe is given, is that executable."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        if exe is not None:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
            return argv0 == exe
    except (OSError, IndexError):
        return exe is None
    return True


def _run(cmd: Sequence[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(f"command failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")


def generate_pki(pki: Path) -> None:
    """CA, apiserver serving cert (127.0.0.1/localhost/kubernetes.default...), SA key pair.

    All keys are ECDSA P-256 (fast to generate; accepted by every component)."""
    pki.mkdir(parents=True, exist_ok=True)
    if shutil.which("openssl"):
        _generate_pki_openssl(pki)
    else:
        _generate_pki_cryptography(pki)
    for key in pki.glob("*.key"):
        key.chmod(0o600)


_SANS_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
_SANS_IP = ("127.0.0.1", SERVICE_IP)


def _generate_pki_openssl(pki: Path) -> None:
    ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256"
    _run(
        f"openssl req -x509 {ec} -days 3650 -keyout ca.key -out ca.crt -subj /CN=karpy-local-ca"
        " -addext basicConstraints=critical,CA:TRUE"
        " -addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature".split(),
        cwd=pki,
    )
    _run(
        f"openssl req -new {ec} -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver".split(),
        cwd=pki,
    )
    sans = ",".join([f"DNS:{d}" for d in _SANS_DNS] + [f"IP:{i}" for i in _SANS_IP])
    (pki / "apiserver.ext").write_text(
        f"subjectAltName={sans}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    serial = "0x" + os.urandom(12).hex()
    _run(
        "openssl x509 -req -sha256 -days 3650 -in apiserver.csr -CA ca.crt -CAkey ca.key"
        f" -set_serial {serial} -extfile apiserver.ext -out apiserver.crt".split(),
        cwd=pki,
    )
    _run(
        ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key"],
        cwd=pki,
    )
    _run(["openssl", "ec", "-in", "sa.key", "-pubout", "-out", "sa.pub"], cwd=pki)


def _generate_pki_cryptography(pki: Path) -> None:  # pragma: no cover - used without openssl only
    try:
        import datetime as dt
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as e:
        raise ClusterError("need either the openssl CLI or the 'cryptography' package") from e

    def key() -> Any:
        return ec.generate_private_key(ec.SECP256R1())

    def write_key(k: Any, name: str) -> None:
        (pki / name).write_bytes(
            k.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,  # "EC PRIVATE KEY"
                serialization.NoEncryption(),
            )
        )

    now = dt.datetime.now(dt.UTC)
    later = now + dt.timedelta(days=3650)
    ca_key = key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "karpy-local-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    srv_key = key()
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in _SANS_DNS]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in _SANS_IP]
    srv = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(srv_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    write_key(ca_key, "ca.key")
    (pki / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    write_key(srv_key, "apiserver.key")
    (pki / "apiserver.crt").write_bytes(srv.public_bytes(serialization.Encoding.PEM))
    sa = key()
    write_key(sa, "sa.key")
    (pki / "sa.pub").write_bytes(
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def write_kubeconfig(path: Path, server: str, ca_pem: bytes, token: str, user: str) -> None:
    q = json.dumps  # JSON strings are valid YAML scalars
    ca_b64 = base64.b64encode(ca_pem).decode()
    path.write_text(
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: karpy-local\n  cluster:\n    server: {q(server)}\n"
        f"    certificate-authority-data: {q(ca_b64)}\n"
        "users:\n"
        f"- name: {q(user)}\n  user:\n    token: {q(token)}\n"
        "contexts:\n"
        f"- name: karpy-local\n  context:\n    cluster: karpy-local\n    user: {q(user)}\n"
        "current-context: karpy-local\n"
    )
    path.chmod(0o600)


def _pick_data_root() -> str | None:
    shm = Path("/dev/shm")
    try:
        if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 << 30:
            return str(shm)
    except OSError:
        pass
    return None


def etcd_request(etcd_url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST JSON to etcd's gRPC gateway, e.g. ``/v3/kv/range`` (no etcdctl needed)."""
    req = urllib.request.Request(
        etcd_url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        result: dict[str, Any] = json.loads(resp.read())
        return result


def etcd_revision(etcd_url: str) -> int:
    """Current etcd store revision (any range answer carries it in its header)."""
    out = etcd_request(etcd_url, "/v3/kv/range", {"key": base64.b64encode(b"/karpy-none").decode()})
    return int(out["header"]["revision"])


def compact_etcd(etcd_url: str, revision: int | None = None) -> int:
    """Physically compact etcd at ``revision`` (default: current); returns the revision.

    Watches (on resources served without the watch cache) resumed from an older
    resourceVersion then get 410 Gone."""
    rev = revision if revision is not None else etcd_revision(etcd_url)
    etcd_request(etcd_url, "/v3/kv/compaction", {"revision": str(rev), "physical": True})
    return rev


# --------------------------------------------------------------------------- the cluster


@dataclass
class Component:
    name: str
    argv: list[str]
    pid: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)


class LocalCluster:
    """etcd + kube-apiserver + kube-scheduler + kube-controller-manager + kwok on 127.0.0.1."""

    def __init__(
        self,
        bin_dir: str | Path | None = None,
        state_dir: str | Path | None = None,
        *,
        data_root: str | None = None,
        apiserver_args: Sequence[str] = (),
        controller_manager_args: Sequence[str] = (),
        scheduler_args: Sequence[str] = (),
        scheduler_config: dict[str, Any] | None = None,
        kwok_args: Sequence[str] = (),
        service_account_admission: bool = False,
    ) -> None:
        self.bin_dir = Path(bin_dir) if bin_dir else None
        self.state_dir = Path(state_dir) if state_dir else DEFAULT_STATE_DIR
        self.data_root = data_root
        self.extra = {
            "kube-apiserver": list(apiserver_args),
            "kube-controller-manager": list(controller_manager_args),
            "kube-scheduler": list(scheduler_args),
            "kwok": list(kwok_args),
        }
        # KubeSchedulerConfiguration fields (e.g. percentageOfNodesToScore, clientConnection.qps):
        # with a config file the scheduler ignores --kubeconfig, --leader-elect and the QPS flags,
        # so the file carries them (scheduler_args must not).
        self.scheduler_config = scheduler_config
        self.service_account_admission = service_account_admission
        self.components: dict[str, Component] = {}
        self.data_dir: Path | None = None
        self.ports: dict[str, int] = {}
        self.token = ""
        self.started = False

    # ---- public attributes
    @property
    def kubeconfig_path(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.state_dir / "ca.crt"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def pids_file(self) -> Path:
        return self.state_dir / "pids.json"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['etcd']}"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    # ---- lifecycle
    def start(self, timeout: float = 180.0) -> LocalCluster:
        """Start every component and wait until the cluster is usable."""
        if self.started:
            return self
        stop_stale(self.state_dir)
        if self.bin_dir is None:
            self.bin_dir = ensure_binaries()
        missing = [b for b in BINARIES if not (self.bin_dir / b).is_file()]
        if missing:
            raise ClusterError(f"{self.bin_dir} lacks binaries: {', '.join(missing)}")
        t0 = time.monotonic()
        for attempt in (1, 2):
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            for old in self.logs_dir.glob("*.log"):
                old.unlink()
            self.data_dir = Path(
                tempfile.mkdtemp(prefix="karpy-cluster-", dir=self.data_root or _pick_data_root())
            )
            try:
                self._prepare()
                self._start_all(t0 + timeout)
                break
            except ClusterError as e:
                self.stop(keep_logs=True)
                # A free port can be taken by someone else between probing and binding.
                if attempt == 1 and "address already in use" in str(e):
                    _log("a port was taken meanwhile; retrying with new ports")
                    continue
                raise
            except BaseException:
                self.stop(keep_logs=True)
                raise
        self.started = True
        _log(
            f"cluster up in {time.monotonic() - t0:.1f}s: {self.server} (kubeconfig {self.kubeconfig_path})"
        )
        return self

    def stop(self, *, keep_logs: bool = True) -> None:
        """SIGTERM every component (clients, apiserver, etcd), SIGKILL stragglers, remove data."""
        for group in STOP_ORDER:
            comps = [self.components[n] for n in group if n in self.components]
            _terminate(comps)
        self.components.clear()
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None
        _remove_state_files(self.state_dir)
        if not keep_logs:
            shutil.rmtree(self.logs_dir, ignore_errors=True)
        self.started = False

    def restart_apiserver(self, timeout: float = 120.0) -> float:
        """Stop kube-apiserver (SIGTERM, as a rolling upgrade would) and start it again on the
        same port over the same etcd; returns the seconds until it is ready again. Its watch
        cache starts empty at etcd's current revision, so a client resuming a watch from an
        older resourceVersion gets 410 Gone."""
        c = self.components["kube-apiserver"]
        t0 = time.monotonic()
        _terminate([c])
        self._spawn(c)
        api = _Api(self.server, self.token, self.ssl_context())
        self._wait(
            "kube-apiserver /readyz after a restart",
            t0 + timeout,
            lambda: api.get_status("/readyz") == 200,
            ["kube-apiserver"],
        )
        return time.monotonic() - t0

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- diagnostics
    @contextlib.contextmanager
    def extra_apiserver(self, *args: str, timeout: float = 90.0) -> Iterator[str]:
        """A second kube-apiserver on the same etcd, PKI and tokens (as an HA control plane runs
        them), with ``args`` added, e.g. ``--emulated-version=1.34`` for a server that behaves as
        an older release; yields its URL and stops it on exit."""
        base = self.components["kube-apiserver"]
        port = free_ports(1)[0]
        argv = [f"--secure-port={port}" if a.startswith("--secure-port=") else a for a in base.argv]
        c = Component(f"kube-apiserver-{port}", [*argv, *args])
        self.components[c.name] = c
        try:
            self._spawn(c)
            url = f"https://127.0.0.1:{port}"
            api = _Api(url, self.token, self.ssl_context())
            self._wait(
                f"{c.name} /readyz",
                time.monotonic() + timeout,
                lambda: api.get_status("/readyz") == 200,
                [c.name],
            )
            yield url
        finally:
            _terminate([c])
            del self.components[c.name]
            self._write_pids()

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        return {p.stem: tail(p, lines) for p in sorted(self.logs_dir.glob("*.log"))}

    def dead_components(self) -> list[str]:
        return [
            c.name
            for c in self.components.values()
            if c.proc is not None and c.proc.poll() is not None
        ]

    # ---- etcd
    def etcd_revision(self) -> int:
        return etcd_revision(self.etcd_url)

    def compact_etcd(self, revision: int | None = None) -> int:
        """Physically compact etcd at ``revision`` (default: current); returns the revision."""
        return compact_etcd(self.etcd_url, revision)

    # ---- internals
    def _bin(self, name: str) -> str:
        assert self.bin_dir is not None
        return str(self.bin_dir / name)

    def _prepare(self) -> None:
        assert self.data_dir is not None
        d = self.data_dir
        pki = d / "pki"
        generate_pki(pki)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pki / "ca.crt", self.ca_file)
        ports = free_ports(5)
        self.ports = dict(
            zip(
                ("etcd", "etcd-peer", "apiserver", "scheduler", "controller-manager"),
                ports,
                strict=True,
            )
        )
        ca_pem = (pki / "ca.crt").read_bytes()

        # Static tokens. Every identity is in system:masters (cluster-admin) but named after the
        # component so that audit/events show who did what.
        users = {
            "admin": ("admin", "system:masters"),
            "kube-scheduler": ("system:kube-scheduler", "system:masters"),
            "kube-controller-manager": ("system:kube-controller-manager", "system:masters"),
            "kwok": ("system:kwok-controller", "system:masters"),
        }
        tokens = {k: base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=") for k in users}
        self.token = tokens["admin"]
        lines = [f'{tokens[k]},{user},{user},"{group}"' for k, (user, group) in users.items()]
        (pki / "tokens.csv").write_text("\n".join(lines) + "\n")
        (pki / "tokens.csv").chmod(0o600)
        server = self.server
        write_kubeconfig(self.kubeconfig_path, server, ca_pem, tokens["admin"], "admin")
        for k in ("kube-scheduler", "kube-controller-manager", "kwok"):
            write_kubeconfig(d / f"{k}.kubeconfig", server, ca_pem, tokens[k], users[k][0])
        (d / "kwok-home").mkdir()
        (d / "etcd").mkdir(mode=0o700)

        etcd_url, peer = self.etcd_url, f"http://127.0.0.1:{self.ports['etcd-peer']}"
        admission = (
            [] if self.service_account_admission else ["--disable-admission-plugins=ServiceAccount"]
        )
        self.components = {
            "etcd": Component(
                "etcd",
                [
                    self._bin("etcd"),
                    "--name=karpy",
                    f"--data-dir={d / 'etcd'}",
                    "--unsafe-no-fsync=true",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=karpy={peer}",
                    "--initial-cluster-state=new",
                    "--enable-grpc-gateway=true",  # /v3/kv/compaction for compact_etcd()
                    "--quota-backend-bytes=8589934592",
                    "--log-level=warn",
                ],
            ),
            "kube-apiserver": Component(
                "kube-apiserver",
                [
                    self._bin("kube-apiserver"),
                    f"--etcd-servers={etcd_url}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={self.ports['apiserver']}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}",
                    f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--client-ca-file={pki / 'ca.crt'}",
                    f"--token-auth-file={pki / 'tokens.csv'}",
                    "--authorization-mode=Node,RBAC",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--allow-privileged=true",
                    "--endpoint-reconciler-type=none",
                    "--watch-cache-sizes=configmaps#0",
                    "--profiling=false",
                    *admission,
                    *self.extra["kube-apiserver"],
                ],
            ),
            "kube-scheduler": Component(
                "kube-scheduler",
                [
                    self._bin("kube-scheduler"),
                    f"--kubeconfig={d / 'kube-scheduler.kubeconfig'}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.ports['scheduler']}",
                    f"--cert-dir={d / 'scheduler-certs'}",
                    *self._scheduler_config_args(d),
                    *self.extra["kube-scheduler"],
                ],
            ),
            "kube-controller-manager": Component(
                "kube-controller-manager",
                [
                    self._bin("kube-controller-manager"),
                    f"--kubeconfig={d / 'kube-controller-manager.kubeconfig'}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.ports['controller-manager']}",
                    f"--cert-dir={d / 'controller-manager-certs'}",
                    "--controllers=*",
                    f"--service-account-private-key-file={pki / 'sa.key'}",
                    f"--root-ca-file={pki / 'ca.crt'}",
                    f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                    f"--cluster-signing-key-file={pki / 'ca.key'}",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    "--use-service-account-credentials=false",
                    "--kube-api-qps=200",
                    "--kube-api-burst=400",
                    "--node-monitor-period=5s",
                    *self.extra["kube-controller-manager"],
                ],
            ),
            "kwok": Component(
                "kwok",
                [
                    self._bin("kwok"),
                    f"--kubeconfig={d / 'kwok.kubeconfig'}",
                    f"--config={KWOK_CONFIG}",
                    "--manage-all-nodes=false",
                    "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                    *self.extra["kwok"],
                ],
            ),
        }

    def _scheduler_config_args(self, d: Path) -> list[str]:
        if self.scheduler_config is None:
            return []
        config: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            **self.scheduler_config,
        }
        config["clientConnection"] = {
            **config.get("clientConnection", {}),
            "kubeconfig": str(d / "kube-scheduler.kubeconfig"),
        }
        path = d / "kube-scheduler-config.json"  # JSON is YAML: the scheduler reads either
        path.write_text(json.dumps(config, indent=2) + "\n")
        return [f"--config={path}"]

    def _spawn(self, c: Component) -> None:
        assert self.data_dir is not None
        env = dict(os.environ)
        env.pop("KUBECONFIG", None)
        if c.name == "kwok":
            env["HOME"] = str(self.data_dir / "kwok-home")  # keep ~/.kwok/kwok.yaml out of it
        log_path = self.logs_dir / f"{c.name}.log"
        with log_path.open("ab") as logf:
            logf.write(f"# {' '.join(c.argv)}\n".encode())
            logf.flush()
            c.proc = subprocess.Popen(
                c.argv,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                env=env,
                start_new_session=True,
            )
        c.pid = c.proc.pid
        self._write_pids()

    def _write_pids(self) -> None:
        info = {
            "server": self.server,
            "etcd": self.etcd_url,
            "ports": self.ports,
            "bin_dir": str(self.bin_dir),
            "data_dir": str(self.data_dir),
            "kubeconfig": str(self.kubeconfig_path),
            "ca_file": str(self.ca_file),
            "token": self.token,
            "components": {
                c.name: {"pid": c.pid, "exe": c.argv[0]} for c in self.components.values() if c.pid
            },
        }
        tmp = self.pids_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=2) + "\n")
        tmp.replace(self.pids_file)

    def _check_alive(self, names: Sequence[str]) -> None:
        for n in names:
            c = self.components[n]
            if c.proc is not None and c.proc.poll() is not None:
                log = self.logs_dir / f"{n}.log"
                raise ClusterError(
                    f"{n} exited with code {c.proc.returncode} during startup; last lines of {log}:\n"
                    + tail(log, 60)
                )

    def _wait(
        self, what: str, deadline: float, probe: Any, watch: Sequence[str], interval: float = 0.25
    ) -> None:
        last_err = ""
        while True:
            self._check_alive(watch)
            try:
                if probe():
                    return
            except Exception as e:  # any failure means 'not yet'
                last_err = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {n}.log\n{tail(self.logs_dir / f'{n}.log', 30)}" for n in watch
                )
                raise ClusterError(
                    f"timed out waiting for {what} (last error: {last_err})\n{tails}"
                )
            _sleep(interval)

    def _start_all(self, deadline: float) -> None:
        started: list[str] = []

        def start(name: str) -> None:
            self._spawn(self.components[name])
            started.append(name)

        start("etcd")
        self._wait("etcd /health", deadline, lambda: _etcd_healthy(self.etcd_url), started)
        start("kube-apiserver")
        api = _Api(self.server, self.token, self.ssl_context())
        self._wait(
            "kube-apiserver /readyz", deadline, lambda: api.get_status("/readyz") == 200, started
        )
        self._wait(
            "namespace default",
            deadline,
            lambda: api.get_status("/api/v1/namespaces/default") == 200,
            started,
        )
        start("kube-controller-manager")
        start("kube-scheduler")
        start("kwok")
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        for name, port in (
            ("kube-scheduler", self.ports["scheduler"]),
            ("kube-controller-manager", self.ports["controller-manager"]),
        ):
            url = f"https://127.0.0.1:{port}/healthz"
            self._wait(
                f"{name} /healthz",
                deadline,
                lambda u=url: _http_status(u, insecure) == 200,
                started,
            )
        # The serviceaccount controller (KCM) creating the default SA proves KCM's controllers run.
        self._wait(
            "ServiceAccount default/default (kube-controller-manager)",
            deadline,
            lambda: api.get_status("/api/v1/namespaces/default/serviceaccounts/default") == 200,
            started,
        )
        self._check_alive(started)


class _Api:
    def __init__(self, server: str, token: str, ctx: ssl.SSLContext) -> None:
        self.server, self.token, self.ctx = server, token, ctx

    def get_status(self, path: str) -> int:
        req = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self.token}"}
        )
        try:
            with urllib.request.urlopen(req, timeout=5, context=self.ctx) as resp:
                resp.read()
                return int(resp.status)
        except urllib.error.HTTPError as e:
            e.read()
            e.close()
            return int(e.code)


def _http_status(url: str, ctx: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=3, context=ctx) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as e:
        e.close()
        return int(e.code)


def _etcd_healthy(url: str) -> bool:
    with urllib.request.urlopen(url + "/health", timeout=3) as resp:
        return bool(json.loads(resp.read()).get("health") == "true")


def _terminate(comps: Sequence[Component], grace: float = 15.0) -> None:
    """SIGTERM the components' process groups, wait, SIGKILL what is left."""
    live = [c for c in comps if c.pid and _comp_alive(c)]
    for c in live:
        _signal(c, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        live = [c for c in live if _comp_alive(c)]
        if live:
            _sleep(0.1)
    for c in live:
        _log(f"{c.name} (pid {c.pid}) ignored SIGTERM for {grace:.0f}s; sending SIGKILL")
        _signal(c, signal.SIGKILL)
    for c in comps:
        if c.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.proc.wait(timeout=5)


def _comp_alive(c: Component) -> bool:
    if c.proc is not None:
        return c.proc.poll() is None
    return pid_alive(c.pid, c.argv[0] if c.argv else None)


def _signal(c: Component, sig: signal.Signals) -> None:
    # Each component leads its own session (start_new_session), so its pgid is its pid.
    # Only signal the group if the pid still runs the recorded executable.
    if not _comp_alive(c):
        return
    try:
        os.killpg(c.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(c.pid, sig)


# --------------------------------------------------------------------------- state dir ops


def read_state(state_dir: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((state_dir / "pids.json").read_text())
        return data
    except (OSError, ValueError):
        return None


def _components_from_state(state: dict[str, Any]) -> list[Component]:
    return [
        Component(name, [v.get("exe", "")], pid=int(v["pid"]))
        for name, v in state.get("components", {}).items()
    ]


def stop_stale(state_dir: Path) -> bool:
    """Stop a cluster recorded in state_dir/pids.json (e.g. left by a killed run). True if any."""
    state = read_state(state_dir)
    if state is None:
        return False
    comps = {c.name: c for c in _components_from_state(state)}
    found = any(_comp_alive(c) for c in comps.values())
    if found:
        _log(f"stopping cluster recorded in {state_dir / 'pids.json'}")
    for group in STOP_ORDER:
        _terminate([comps[n] for n in group if n in comps])
    data_dir = state.get("data_dir")
    if data_dir and Path(data_dir).name.startswith("karpy-cluster-"):
        shutil.rmtree(data_dir, ignore_errors=True)
    _remove_state_files(state_dir)
    return found


def _remove_state_files(state_dir: Path) -> None:
    """Forget a stopped cluster: pids, kubeconfig and CA go; logs stay for post-mortems."""
    for name in ("pids.json", "kubeconfig", "ca.crt"):
        with contextlib.suppress(FileNotFoundError):
            (state_dir / name).unlink()


def status(state_dir: Path) -> tuple[bool, str]:
    state = read_state(state_dir)
    if state is None:
        return False, f"no cluster recorded in {state_dir / 'pids.json'}"
    ok = True
    out = [
        f"server:     {state['server']}",
        f"kubeconfig: {state['kubeconfig']}",
        f"data:       {state['data_dir']}",
    ]
    for c in _components_from_state(state):
        alive = _comp_alive(c)
        ok &= alive
        out.append(f"  {c.name:<25} pid {c.pid:<8} {'running' if alive else 'NOT RUNNING'}")
    missing = [b for b in BINARIES if b not in state.get("components", {})]
    if missing:
        ok = False
        out.append(f"  not started: {', '.join(missing)}")
    try:
        ctx = ssl.create_default_context(cafile=state["ca_file"])
        code = _Api(state["server"], state["token"], ctx).get_status("/readyz")
        out.append(f"  /readyz -> {code}")
        ok &= code == 200
    except Exception as e:
        out.append(f"  /readyz -> {type(e).__name__}: {e}")
        ok = False
    return ok, "\n".join(out)


# --------------------------------------------------------------------------- CLI


def _iter_logs(state_dir: Path, lines: int) -> Iterator[str]:
    for p in sorted((state_dir / "logs").glob("*.log")):
        yield f"----- {p} (last {lines} lines)\n{tail(p, lines)}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--state-dir", default=os.environ.get("KARPY_CLUSTER_DIR", str(DEFAULT_STATE_DIR))
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="build-or-reuse binaries and start the cluster")
    up.add_argument("--bin-dir", help="dir with the five binaries (default: run build.sh)")
    up.add_argument("--timeout", type=float, default=180.0)
    up.add_argument("--restart", action="store_true", help="stop a running cluster first")
    sub.add_parser("down", help="stop the cluster and remove its data")
    sub.add_parser("status", help="show component pids and /readyz")
    lg = sub.add_parser("logs", help="print the tail of every component log")
    lg.add_argument("-n", type=int, default=40)
    args = ap.parse_args(argv)
    state_dir = Path(args.state_dir).resolve()

    if args.cmd == "up":
        ok, text = status(state_dir)
        if ok and not args.restart:
            print(f"cluster already running\n{text}\nexport KUBECONFIG={state_dir / 'kubeconfig'}")
            return 0
        cluster = LocalCluster(bin_dir=args.bin_dir, state_dir=state_dir)
        try:
            cluster.start(timeout=args.timeout)
        except ClusterError as e:
            print(f"cluster up FAILED: {e}", file=sys.stderr)
            return 1
        # Children outlive this process: drop the Popen handles without waiting on them.
        for c in cluster.components.values():
            if c.proc is not None:
                c.proc.returncode = 0  # silences Popen.__del__'s "still running" ResourceWarning
        print(
            f"server:     {cluster.server}\nkubeconfig: {cluster.kubeconfig_path}\n"
            f"logs:       {cluster.logs_dir}\nexport KUBECONFIG={cluster.kubeconfig_path}"
        )
        return 0
    if args.cmd == "down":
        if stop_stale(state_dir):
            print("cluster stopped")
        else:
            print("no running cluster recorded")
        return 0
    if args.cmd == "status":
        ok, text = status(state_dir)
        print(text)
        return 0 if ok else 1
    if args.cmd == "logs":
        for chunk in _iter_logs(state_dir, args.n):
            print(chunk)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
