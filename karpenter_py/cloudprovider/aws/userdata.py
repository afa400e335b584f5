"""Bootstrap user data per AMI family (pure functions; no I/O).

* AL2023: a MIME multipart document (boundary ``//``) whose last part is a nodeadm
  ``node.eks.aws/v1alpha1`` NodeConfig; the user's own user data goes first (its MIME parts, a
  NodeConfig of its own, or a shell script).
* AL2: MIME with the user's script first, then a script calling ``/etc/eks/bootstrap.sh``.
* Bottlerocket: TOML; the user's TOML with Karpenter's ``[settings.kubernetes]`` keys laid over
  it (Karpenter owns cluster identity, labels, taints and max-pods).
* Custom: the user's user data verbatim.

The result is plain text; the launch template base64-encodes it.
"""

from __future__ import annotations

import base64
import email
import email.message
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

MIME_BOUNDARY: Final = "//"
NODECONFIG_API_VERSION: Final = "node.eks.aws/v1alpha1"
NODECONFIG_CONTENT_TYPE: Final = "application/node.eks.aws"
SHELL_CONTENT_TYPE: Final = 'text/x-shellscript; charset="us-ascii"'
AL2_BOOTSTRAP: Final = "/etc/eks/bootstrap.sh"

# Label domains the kubelet may not set on its own Node (NodeRestriction admission); labels there
# are applied by Karpenter after registration instead of through --node-labels.
_RESTRICTED_DOMAINS: Final = ("kubernetes.io", "k8s.io")
_KUBELET_ALLOWED_LABELS: Final = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    }
)
_KUBELET_ALLOWED_DOMAINS: Final = ("kubelet.kubernetes.io", "node.kubernetes.io")

# Kubelet fields Bottlerocket exposes under [settings.kubernetes] (kubelet key -> TOML key).
_BOTTLEROCKET_KUBELET: Final = {
    "podsPerCore": "pods-per-core",
    "cpuCFSQuota": "cpu-cfs-quota-enforced",
    "imageGCHighThresholdPercent": "image-gc-high-threshold-percent",
    "imageGCLowThresholdPercent": "image-gc-low-threshold-percent",
    "kubeReserved": "kube-reserved",
    "systemReserved": "system-reserved",
    "evictionHard": "eviction-hard",
    "evictionSoft": "eviction-soft",
    "evictionSoftGracePeriod": "eviction-soft-grace-period",
    "evictionMaxPodGracePeriod": "eviction-max-pod-grace-period",
}


class UserDataError(ValueError):
    """The user's userData cannot be merged (bad TOML for Bottlerocket, bad MIME)."""


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    """Everything a node needs to join the cluster, as the launch template resolves it."""

    cluster_name: str
    endpoint: str
    ca_bundle: str  # base64 PEM
    service_cidr: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)
    kubelet: Mapping[str, Any] = field(default_factory=dict)
    user_data: str | None = None

    @property
    def max_pods(self) -> int | None:
        value = self.kubelet.get("maxPods")
        return int(value) if isinstance(value, int | str) and str(value).isdigit() else None

    @property
    def cluster_dns(self) -> list[str]:
        value = self.kubelet.get("clusterDNS")
        return [str(v) for v in value] if isinstance(value, list) else []


def kubelet_settable(key: str) -> bool:
    """Whether the kubelet may set ``key`` on its own Node (NodeRestriction)."""
    if key in _KUBELET_ALLOWED_LABELS:
        return True
    domain = key.split("/", 1)[0] if "/" in key else ""
    if any(domain == d or domain.endswith("." + d) for d in _KUBELET_ALLOWED_DOMAINS):
        return True
    return not any(domain == d or domain.endswith("." + d) for d in _RESTRICTED_DOMAINS)


def node_labels_arg(labels: Mapping[str, str]) -> str:
    """``k=v,k2=v2`` sorted by key, only labels the kubelet may set."""
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels) if kubelet_settable(k))


def taints_arg(taints: Sequence[tuple[str, str, str]]) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), comma separated, in given order."""
    return ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in taints)


def render(family: str, opts: BootstrapOptions) -> str:
    """The user data text for ``family`` (an EC2NodeClass amiFamily value)."""
    if family == "AL2023":
        return al2023(opts)
    if family == "AL2":
        return al2(opts)
    if family == "Bottlerocket":
        return bottlerocket(opts)
    if family == "Custom":
        return opts.user_data or ""
    raise UserDataError(f"user data for AMI family {family!r} is not supported")


def encode(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# ---------------------------------------------------------------- MIME


@dataclass(frozen=True, slots=True)
class MimePart:
    content_type: str
    body: str


def mime_document(parts: Sequence[MimePart]) -> str:
    lines = [
        "MIME-Version: 1.0",
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"',
        "",
    ]
    for part in parts:
        lines += [f"--{MIME_BOUNDARY}", f"Content-Type: {part.content_type}", "", part.body]
    lines.append(f"--{MIME_BOUNDARY}--")
    return "\n".join(lines) + "\n"


def _is_mime(text: str) -> bool:
    return text.lstrip().lower().startswith(("mime-version:", "content-type: multipart"))


def parse_mime(text: str) -> list[MimePart]:
    """The parts of a multipart user data document, in order."""
    msg = email.message_from_string(text.lstrip())
    if not msg.is_multipart():
        raise UserDataError("userData looks like MIME but is not multipart")
    parts: list[MimePart] = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload()
        body = payload if isinstance(payload, str) else ""
        parts.append(MimePart(str(part.get("Content-Type", "text/plain")), body.rstrip("\n")))
    return parts


def _is_nodeconfig(text: str) -> bool:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(doc, dict) and doc.get("kind") == "NodeConfig"


def _user_parts(user_data: str | None) -> list[MimePart]:
    """The user's userData as MIME parts (kept ahead of Karpenter's own)."""
    if not user_data or not user_data.strip():
        return []
    if _is_mime(user_data):
        return parse_mime(user_data)
    if _is_nodeconfig(user_data):
        return [MimePart(NODECONFIG_CONTENT_TYPE, user_data.rstrip("\n"))]
    return [MimePart(SHELL_CONTENT_TYPE, user_data.rstrip("\n"))]


# ---------------------------------------------------------------- AL2023


def nodeconfig(opts: BootstrapOptions) -> dict[str, Any]:
    """Karpenter's nodeadm NodeConfig: cluster identity, kubelet config and flags."""
    config: dict[str, Any] = {}
    if opts.max_pods is not None:
        config["maxPods"] = opts.max_pods
    if opts.cluster_dns:
        config["clusterDNS"] = opts.cluster_dns
    # AL2023 passes every other KubeletConfiguration field through as-is.
    for key in sorted(opts.kubelet):
        if key not in ("maxPods", "clusterDNS"):
            config[key] = opts.kubelet[key]
    flags = [f"--node-labels={node_labels_arg(opts.labels)}"]
    if opts.taints:
        flags.append(f"--register-with-taints={taints_arg(opts.taints)}")
    kubelet: dict[str, Any] = {}
    if config:
        kubelet["config"] = config
    kubelet["flags"] = flags
    return {
        "apiVersion": NODECONFIG_API_VERSION,
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": opts.cluster_name,
                "apiServerEndpoint": opts.endpoint,
                "certificateAuthority": opts.ca_bundle,
                "cidr": opts.service_cidr,
            },
            "kubelet": kubelet,
        },
    }


def al2023(opts: BootstrapOptions) -> str:
    body = yaml.safe_dump(nodeconfig(opts), sort_keys=False, default_flow_style=False).rstrip("\n")
    return mime_document([*_user_parts(opts.user_data), MimePart(NODECONFIG_CONTENT_TYPE, body)])


# ---------------------------------------------------------------- AL2


def _sh_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def al2_script(opts: BootstrapOptions) -> str:
    extra = [f"--node-labels={node_labels_arg(opts.labels)}"]
    if opts.taints:
        extra.append(f"--register-with-taints={taints_arg(opts.taints)}")
    if opts.max_pods is not None:
        extra.append(f"--max-pods={opts.max_pods}")
    args = [
        AL2_BOOTSTRAP,
        _sh_quote(opts.cluster_name),
        "--apiserver-endpoint",
        _sh_quote(opts.endpoint),
        "--b64-cluster-ca",
        _sh_quote(opts.ca_bundle),
    ]
    if opts.cluster_dns:
        args += ["--dns-cluster-ip", _sh_quote(opts.cluster_dns[0])]
    if opts.max_pods is not None:
        # bootstrap.sh would otherwise compute its own max pods and override ours.
        args += ["--use-max-pods", "false"]
    args += ["--kubelet-extra-args", _sh_quote(" ".join(extra))]
    return "\n".join(
        [
            "#!/bin/bash -xe",
            "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
            " ".join(args),
        ]
    )


def al2(opts: BootstrapOptions) -> str:
    parts = _user_parts(opts.user_data)
    return mime_document([*parts, MimePart(SHELL_CONTENT_TYPE, al2_script(opts))])


# ---------------------------------------------------------------- Bottlerocket


def bottlerocket_settings(opts: BootstrapOptions) -> dict[str, Any]:
    """The [settings.kubernetes] keys Karpenter owns."""
    k8s: dict[str, Any] = {
        "cluster-name": opts.cluster_name,
        "api-server": opts.endpoint,
        "cluster-certificate": opts.ca_bundle,
    }
    if opts.cluster_dns:
        k8s["cluster-dns-ip"] = opts.cluster_dns[0]
    if opts.max_pods is not None:
        k8s["max-pods"] = opts.max_pods
    for kubelet_key, toml_key in _BOTTLEROCKET_KUBELET.items():
        if kubelet_key in opts.kubelet:
            k8s[toml_key] = opts.kubelet[kubelet_key]
    k8s["node-labels"] = {k: opts.labels[k] for k in sorted(opts.labels) if kubelet_settable(k)}
    taints: dict[str, list[str]] = {}
    for key, value, effect in opts.taints:
        taints.setdefault(key, []).append(f"{value}:{effect}")
    k8s["node-taints"] = taints
    return k8s


def bottlerocket(opts: BootstrapOptions) -> str:
    try:
        doc: dict[str, Any] = tomllib.loads(opts.user_data or "")
    except tomllib.TOMLDecodeError as exc:
        raise UserDataError(f"Bottlerocket userData is not valid TOML: {exc}") from exc
    settings = doc.setdefault("settings", {})
    if not isinstance(settings, dict):
        raise UserDataError("Bottlerocket userData: 'settings' must be a table")
    k8s = settings.setdefault("kubernetes", {})
    if not isinstance(k8s, dict):
        raise UserDataError("Bottlerocket userData: 'settings.kubernetes' must be a table")
    k8s.update(bottlerocket_settings(opts))  # Karpenter's keys win
    return dump_toml(doc)


# ---------------------------------------------------------------- a tiny TOML writer

_BARE_KEY: Final = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    raise UserDataError(f"cannot write {type(value).__name__} as TOML")


def _dump_table(path: list[str], table: Mapping[str, Any], out: list[str]) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    if path and (scalars or not tables):
        if out:
            out.append("")
        out.append("[" + ".".join(_toml_key(p) for p in path) + "]")
    for key, value in scalars:
        out.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in tables:
        _dump_table([*path, key], value, out)


def dump_toml(doc: Mapping[str, Any]) -> str:
    """TOML for nested tables of scalars and lists (what Bottlerocket settings use)."""
    out: list[str] = []
    _dump_table([], doc, out)
    return "\n".join(out) + "\n"
