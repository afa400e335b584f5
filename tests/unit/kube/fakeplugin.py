"""A real (tiny) ExecCredential plugin for tests: a Python script written into tmp_path.

The script reads what to do from a JSON control file (so a test can change its behaviour between
runs), counts its invocations in a file, and answers with the apiVersion it was asked for in
``KUBERNETES_EXEC_INFO``, as real plugins do.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Expiries are judged by an injected FakeClock, which starts here (see karpenter_py.aio.clock).
T0 = "2026-01-01T00:00:00Z"

SCRIPT = """\
#!{python}
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
ctl = json.load(open(os.environ["FAKE_CTL"]))
count_file = os.path.join(here, "count")
n = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
open(count_file, "w").write(str(n))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
assert sys.stdin.read() == "" and info["spec"] == {{"interactive": False}}
if ctl.get("pidfile"):
    open(ctl["pidfile"] + ".tmp", "w").write(str(os.getpid()))
    os.rename(ctl["pidfile"] + ".tmp", ctl["pidfile"])
time.sleep(ctl.get("sleep", 0))
if ctl.get("stderr"):
    sys.stderr.write(ctl["stderr"])
if ctl.get("stdout") is not None:
    sys.stdout.write(ctl["stdout"])
else:
    status = {{"token": "%s-%d" % (sys.argv[1] if len(sys.argv) > 1 else "tok", n)}}
    if ctl.get("cert"):
        status = {{"clientCertificateData": "PEM", "clientKeyData": "KEY"}}
    if ctl.get("expiry"):
        status["expirationTimestamp"] = ctl["expiry"]
    json.dump({{"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}},
              sys.stdout)
sys.exit(ctl.get("exit", 0))
"""


@dataclass
class Plugin:
    """The script at ``path``; ``set(...)`` changes what its next run does."""

    path: Path
    ctl: Path

    def set(self, **ctl: Any) -> None:
        self.ctl.write_text(json.dumps(ctl))

    @property
    def runs(self) -> int:
        count = self.path.parent / "count"
        return int(count.read_text()) if count.exists() else 0


def make_plugin(directory: Path, **ctl: Any) -> Plugin:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "fake-credential-plugin"
    path.write_text(SCRIPT.format(python=sys.executable))
    path.chmod(0o755)
    plugin = Plugin(path=path, ctl=directory / "ctl.json")
    plugin.set(**ctl)
    return plugin


def exec_stanza(
    plugin: Plugin,
    *,
    api_version: str = "client.authentication.k8s.io/v1",
    command: str | None = None,
    args: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "command": command if command is not None else str(plugin.path),
        "args": args if args is not None else [],
        "env": [{"name": "FAKE_CTL", "value": str(plugin.ctl)}],
        "interactiveMode": "Never",
        **extra,
    }


def write_kubeconfig(
    path: Path, user: dict[str, Any], server: str = "https://127.0.0.1:6443"
) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "eks",
        "contexts": [{"name": "eks", "context": {"cluster": "c", "user": "eks-user"}}],
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "eks-user", "user": user}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path
