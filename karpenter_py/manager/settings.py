"""Controller settings from environment variables and command-line flags, with upstream's names.

Every setting has an environment variable (``BATCH_MAX_DURATION``) and a flag spelled as its
kebab-case (``--batch-max-duration``); a flag wins over the variable, and either wins over the
default. Defaults and accepted values are upstream Karpenter's (core ``pkg/operator/options``, the
AWS provider's options and the kwok provider's), plus ``CLOUD_PROVIDER`` and ``KUBECONFIG``, which
are ours, and ``MULTI_NODE_CONSOLIDATION_TIMEOUT`` / ``SINGLE_NODE_CONSOLIDATION_TIMEOUT``:
upstream's fixed 1 min / 3 min consolidation limits, which upstream does not expose (the names
are the ones its closed proposal kubernetes-sigs/karpenter#1754 used), and
``BATCH_FIRST_MAX_DURATION``: the first batch of a burst launches early (``aio.batcher``).

:func:`load_settings` is the only entry point. Any bad value stops start-up with one
:class:`SettingsError` whose message names the variable or flag and repeats the offending value,
e.g. ``BATCH_IDLE_DURATION="abc": not a duration like 1s or 500ms``.

Differences from upstream, on purpose:

* upstream silently falls back to the default when a number or boolean does not parse; we refuse
  to start instead;
* an unknown feature gate is an error (upstream ignores it), and gates missing from
  ``FEATURE_GATES`` keep their defaults (upstream resets them to false);
* an empty variable (``LOG_LEVEL=""``, as templating often renders) counts as unset, except for
  free-form strings where the empty string is itself the default.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from karpenter_py.controllers.disruption.multinode import MULTI_NODE_TIMEOUT
from karpenter_py.controllers.disruption.singlenode import SINGLE_NODE_TIMEOUT
from karpenter_py.model.api.common import parse_duration

SERVICE_ACCOUNT_NAMESPACE_FILE: Final = Path(
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)


class SettingsError(ValueError):
    """A setting is malformed or out of range; the message is meant for the operator as is."""


class HelpRequested(Exception):
    """``--help`` was passed: :attr:`text` is the usage to print."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


# ----------------------------------------------------------------------------- feature gates


class FeatureGates(BaseModel):
    """Upstream's ``FEATURE_GATES`` (``NodeRepair=false,ReservedCapacity=true,...``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_repair: bool = False
    reserved_capacity: bool = True
    spot_to_spot_consolidation: bool = False
    node_overlay: bool = False
    static_capacity: bool = False
    capacity_buffer: bool = False

    def to_flag(self) -> str:
        """Render back to upstream's ``Name=bool,...`` form (every gate, in upstream's order)."""
        return ",".join(
            f"{gate}={'true' if getattr(self, field) else 'false'}"
            for gate, field in GATE_FIELDS.items()
        )


GATE_FIELDS: Final[Mapping[str, str]] = {
    "NodeRepair": "node_repair",
    "ReservedCapacity": "reserved_capacity",
    "SpotToSpotConsolidation": "spot_to_spot_consolidation",
    "NodeOverlay": "node_overlay",
    "StaticCapacity": "static_capacity",
    "CapacityBuffer": "capacity_buffer",
}
DEFAULT_FEATURE_GATES: Final = FeatureGates().to_flag()


def parse_feature_gates(text: str) -> FeatureGates:
    """Parse ``Name=bool`` pairs separated by commas; raises ``ValueError`` with the reason."""
    values: dict[str, bool] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        gate, sep, value = item.partition("=")
        gate = gate.strip()
        if not sep:
            raise ValueError(f'"{gate}" needs a value, like {gate}=true')
        field = GATE_FIELDS.get(gate)
        if field is None:
            raise ValueError(f'unknown feature gate "{gate}" (known: {", ".join(GATE_FIELDS)})')
        try:
            values[field] = parse_bool(value.strip())
        except ValueError:
            raise ValueError(f"{gate}={value.strip()} is not true or false") from None
    return FeatureGates(**values)


# ----------------------------------------------------------------------------- scalar parsers


def parse_duration_seconds(text: str) -> float:
    """A Go duration (``"10s"``, ``"1m30s"``, ``"500ms"``) in seconds, by the model's one parser.

    Surrounding whitespace is trimmed, as for every numeric setting; the duration itself follows
    Go's ``time.ParseDuration`` (see :func:`karpenter_py.model.api.common.parse_duration`).
    Raises ``ValueError``.
    """
    return parse_duration(text.strip()).total_seconds()


def format_duration(seconds: float) -> str:
    """Seconds back to a short Go-style duration for messages (``10s``, ``1m30s``, ``500ms``)."""
    if seconds == 0:
        return "0s"
    if abs(seconds) < 1:
        return f"{seconds * 1000:g}ms"
    minutes, secs = divmod(seconds, 60.0)
    hours, minutes = divmod(minutes, 60.0)
    out = ""
    if hours:
        out += f"{int(hours)}h"
    if minutes:
        out += f"{int(minutes)}m"
    if secs or not out:
        out += f"{secs:g}s"
    return out


_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``: 1/t/T/TRUE/true/True and 0/f/F/FALSE/false/False."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"not a boolean: {text!r}")


_INT: Final = re.compile(r"[+-]?\d+")


def parse_int(text: str) -> int:
    s = text.strip()
    if not _INT.fullmatch(s):
        raise ValueError(f"not an integer: {text!r}")
    return int(s)


def parse_float(text: str) -> float:
    value = float(text.strip())  # ValueError on junk
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


# ----------------------------------------------------------------------------- the model

LogLevel = Literal["debug", "info", "error"]
PreferencePolicy = Literal["Respect", "Ignore"]
MinValuesPolicy = Literal["Strict", "BestEffort"]
CloudProviderName = Literal["kwok", "aws"]


class Settings(BaseModel):
    """Validated, immutable controller settings. Build with :func:`load_settings`.

    Durations are float seconds; ``leader_election_namespace`` is already resolved (never empty).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cloud_provider: CloudProviderName = "kwok"
    cluster_name: str = ""
    cluster_endpoint: str = ""
    cluster_ca_bundle: str = ""
    kubeconfig: str = ""

    batch_max_duration: float = Field(default=10.0, gt=0)
    batch_idle_duration: float = Field(default=1.0, gt=0)
    # Ours: the first batch of a burst of pods closes this long after the burst began, however
    # long the idle window keeps extending; BATCH_MAX_DURATION or more gives upstream's batching.
    batch_first_max_duration: float = Field(default=1.0, gt=0)
    kube_client_qps: int = Field(default=200, gt=0)
    kube_client_burst: int = Field(default=300, gt=0)
    # Upstream's fixed consolidation limits (1 min, 3 min), as settings.
    multi_node_consolidation_timeout: float = Field(default=MULTI_NODE_TIMEOUT, gt=0)
    single_node_consolidation_timeout: float = Field(default=SINGLE_NODE_TIMEOUT, gt=0)

    log_level: LogLevel = "info"
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    health_probe_port: int = Field(default=8081, ge=1, le=65535)
    webhook_port: int = Field(default=0, ge=0, le=65535)
    webhook_service_name: str = Field(default="karpenter", min_length=1)

    feature_gates: FeatureGates = FeatureGates()
    preference_policy: PreferencePolicy = "Respect"
    min_values_policy: MinValuesPolicy = "Strict"
    ignore_dra_requests: bool = True
    # Beyond upstream: write each planned pod's status.nominatedNodeName (KEP-5278) so the
    # kube-scheduler binds it where the plan put it; only where the API server has the feature.
    nominate_pods: bool = True
    cpu_requests: int = Field(default=1000, gt=0)
    memory_limit: int = -1
    disable_cluster_state_observability: bool = False
    disable_controller_warmup: bool = True

    disable_leader_election: bool = False
    leader_election_name: str = Field(default="karpenter-leader-election", min_length=1)
    leader_election_namespace: str = Field(default="default", min_length=1)

    # kwok provider
    instance_types_file_path: str = ""
    # A fault for the chaos suite, never a default: Nodes register without the NodeClaim's labels.
    kwok_bare_nodes: bool = False
    # AWS provider
    interruption_queue: str = ""
    vm_memory_overhead_percent: float = Field(default=0.075, ge=0)
    reserved_enis: int = Field(default=0, ge=0)
    isolated_vpc: bool = False
    # Beyond upstream (aws#2813): act on rebalance recommendations as on interruptions.
    interruption_replace_on_rebalance: bool = False

    @model_validator(mode="after")
    def _cross_field(self) -> Settings:
        # load_settings reports these with the variable names; this guards direct construction.
        if self.kube_client_burst < self.kube_client_qps:
            raise ValueError("kube_client_burst must be >= kube_client_qps")
        if self.batch_idle_duration > self.batch_max_duration:
            raise ValueError("batch_idle_duration must not exceed batch_max_duration")
        if self.cloud_provider == "aws" and not self.cluster_name:
            raise ValueError("cluster_name is required for the aws cloud provider")
        return self


# ----------------------------------------------------------------------------- option table


@dataclass(frozen=True, slots=True)
class _Option:
    env: str
    field: str
    parse: Callable[[str], Any]
    expect: str  # "not <expect>" in error messages
    help: str
    is_bool: bool = False
    empty_is_value: bool = False  # free-form strings: "" is a real value, not "unset"
    check: Callable[[Any], str | None] | None = None  # range check -> reason or None

    @property
    def flag(self) -> str:
        return "--" + self.env.lower().replace("_", "-")


def _enum(*choices: str, fold: bool = False) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        if fold:
            value = value.lower()
        if value not in choices:
            raise ValueError(value)
        return value

    return parse


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be greater than 0"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "must not be negative"


def _service_name(v: str) -> str | None:
    if re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", v) is None:
        return "must be a Service name (lower-case letters, digits and '-')"
    return None


def _webhook_port(v: int) -> str | None:
    return None if 0 <= v <= 65535 else "must be 0 (off) or a port between 1 and 65535"


def _port(v: int) -> str | None:
    return None if 1 <= v <= 65535 else "must be a port between 1 and 65535"


def _absolute_url(v: str) -> str | None:
    if not v:
        return None
    parts = urlsplit(v)
    return None if parts.scheme and parts.netloc else "must be an absolute URL like https://host"


_DURATION_EXPECT: Final = "a duration like 1s or 500ms"

OPTIONS: Final[tuple[_Option, ...]] = (
    _Option("CLOUD_PROVIDER", "cloud_provider", _enum("kwok", "aws", fold=True), "one of kwok|aws",
            "cloud provider implementation (ours; kwok = fake nodes)"),
    _Option("CLUSTER_NAME", "cluster_name", str, "", "cluster name; required for aws",
            empty_is_value=True),
    _Option("CLUSTER_ENDPOINT", "cluster_endpoint", str, "", "API endpoint nodes join (aws)",
            empty_is_value=True, check=_absolute_url),
    _Option("CLUSTER_CA_BUNDLE", "cluster_ca_bundle", str, "",
            "aws: base64 CA bundle nodes trust (default: from EKS DescribeCluster)",
            empty_is_value=True),
    _Option("KUBECONFIG", "kubeconfig", str, "", "kubeconfig path (default: in-cluster, then ~/.kube/config)",
            empty_is_value=True),
    _Option("BATCH_MAX_DURATION", "batch_max_duration", parse_duration_seconds, _DURATION_EXPECT,
            "longest provisioning batch window", check=_positive),
    _Option("BATCH_IDLE_DURATION", "batch_idle_duration", parse_duration_seconds, _DURATION_EXPECT,
            "close the batch after this long without new pods", check=_positive),
    _Option("BATCH_FIRST_MAX_DURATION", "batch_first_max_duration", parse_duration_seconds,
            _DURATION_EXPECT,
            "close a burst's first batch this long after its first pod; the rest batch as usual "
            "(ours; >= BATCH_MAX_DURATION: upstream's batching)", check=_positive),
    _Option("MULTI_NODE_CONSOLIDATION_TIMEOUT", "multi_node_consolidation_timeout",
            parse_duration_seconds, _DURATION_EXPECT,
            "multi-node consolidation stops here with the best command found so far (ours)",
            check=_positive),
    _Option("SINGLE_NODE_CONSOLIDATION_TIMEOUT", "single_node_consolidation_timeout",
            parse_duration_seconds, _DURATION_EXPECT,
            "single-node consolidation stops here; the rest waits for the next pass (ours)",
            check=_positive),
    _Option("KUBE_CLIENT_QPS", "kube_client_qps", parse_int, "an integer",
            "client-side request rate limit", check=_positive),
    _Option("KUBE_CLIENT_BURST", "kube_client_burst", parse_int, "an integer",
            "client-side request burst", check=_positive),
    _Option("LOG_LEVEL", "log_level", _enum("debug", "info", "error", fold=True),
            "one of debug|info|error", "log verbosity"),
    _Option("METRICS_PORT", "metrics_port", parse_int, "an integer", "port serving /metrics",
            check=_port),
    _Option("HEALTH_PROBE_PORT", "health_probe_port", parse_int, "an integer",
            "port serving /healthz and /readyz", check=_port),
    _Option("WEBHOOK_PORT", "webhook_port", parse_int, "an integer",
            "HTTPS port of the v1beta1 conversion webhook (0: not served)", check=_webhook_port),
    _Option("WEBHOOK_SERVICE_NAME", "webhook_service_name", str, "",
            "Service (in the pod's namespace) the API server calls the webhook through",
            check=_service_name),
    _Option("FEATURE_GATES", "feature_gates", parse_feature_gates,
            "a list like NodeRepair=false,ReservedCapacity=true", "feature gates"),
    _Option("PREFERENCE_POLICY", "preference_policy", _enum("Respect", "Ignore"),
            "one of Respect|Ignore", "honour or ignore preferred affinities and spreads"),
    _Option("MIN_VALUES_POLICY", "min_values_policy", _enum("Strict", "BestEffort"),
            "one of Strict|BestEffort", "minValues: fail or relax when unsatisfiable"),
    _Option("IGNORE_DRA_REQUESTS", "ignore_dra_requests", parse_bool, "true or false",
            "ignore dynamic resource allocation requests", is_bool=True),
    _Option("NOMINATE_PODS", "nominate_pods", parse_bool, "true or false",
            "set planned pods' nominatedNodeName for the kube-scheduler (1.35+; not upstream)",
            is_bool=True),
    _Option("CPU_REQUESTS", "cpu_requests", parse_int, "an integer (millicores)",
            "the controller's CPU request in millicores (sizes solver parallelism)",
            check=_positive),
    _Option("MEMORY_LIMIT", "memory_limit", parse_int, "an integer (bytes)",
            "the controller's memory limit in bytes, -1 for none"),
    _Option("DISABLE_CLUSTER_STATE_OBSERVABILITY", "disable_cluster_state_observability",
            parse_bool, "true or false", "turn off metric and status controllers", is_bool=True),
    _Option("DISABLE_CONTROLLER_WARMUP", "disable_controller_warmup", parse_bool,
            "true or false", "start informers only after winning leadership", is_bool=True),
    _Option("DISABLE_LEADER_ELECTION", "disable_leader_election", parse_bool, "true or false",
            "run without a Lease (single replica only)", is_bool=True),
    _Option("LEADER_ELECTION_NAME", "leader_election_name", str, "", "name of the Lease",
            empty_is_value=True),
    _Option("LEADER_ELECTION_NAMESPACE", "leader_election_namespace", str, "",
            "namespace of the Lease (default: the pod's namespace)", empty_is_value=True),
    _Option("INSTANCE_TYPES_FILE_PATH", "instance_types_file_path", str, "",
            "kwok: instance type catalog JSON (default: built-in)", empty_is_value=True),
    _Option("KWOK_BARE_NODES", "kwok_bare_nodes", parse_bool, "true or false",
            "kwok: register Nodes without Karpenter's labels (a fault for tests)", is_bool=True),
    _Option("INTERRUPTION_QUEUE", "interruption_queue", str, "",
            "aws: SQS queue name for interruption events (empty: off)", empty_is_value=True),
    _Option("VM_MEMORY_OVERHEAD_PERCENT", "vm_memory_overhead_percent", parse_float, "a number",
            "aws: fraction of memory lost to the hypervisor", check=_non_negative),
    _Option("RESERVED_ENIS", "reserved_enis", parse_int, "an integer",
            "aws: ENIs kept out of max-pods", check=_non_negative),
    _Option("ISOLATED_VPC", "isolated_vpc", parse_bool, "true or false",
            "aws: no internet access (no pricing API)", is_bool=True),
    _Option("INTERRUPTION_REPLACE_ON_REBALANCE", "interruption_replace_on_rebalance", parse_bool,
            "true or false", "aws: drain nodes on a rebalance recommendation (not upstream)",
            is_bool=True),
)  # fmt: skip

_BY_FLAG: Final[Mapping[str, _Option]] = {o.flag: o for o in OPTIONS}


def usage() -> str:
    """Flags, variables and defaults, for ``--help``."""
    defaults = Settings().model_dump()
    lines = ["Settings (flag / environment variable, default):"]
    for o in OPTIONS:
        default = defaults[o.field]
        if o.field == "feature_gates":
            shown = DEFAULT_FEATURE_GATES
        elif o.parse is parse_duration_seconds:
            shown = format_duration(default)
        elif o.field == "leader_election_namespace":
            shown = "<pod namespace>"
        else:
            shown = str(default).lower() if isinstance(default, bool) else str(default)
        lines.append(f"  {o.flag} / {o.env} (default {shown!r})\n      {o.help}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- loading


def _split_flags(argv: Sequence[str]) -> dict[str, tuple[_Option, str, str]]:
    """Flags to ``{field: (option, raw value, label)}``; later occurrences win."""
    out: dict[str, tuple[_Option, str, str]] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-h", "--help"):
            raise HelpRequested(usage())
        if not arg.startswith("--"):
            raise SettingsError(f"unexpected argument {arg!r}: settings are --flag=value")
        name, eq, value = arg.partition("=")
        option = _BY_FLAG.get(name)
        if option is None:
            raise SettingsError(f"unknown flag {name} (see --help)")
        if not eq:
            if option.is_bool:
                value = "true"  # a bare boolean flag turns it on, as Go's flag package does
            elif i < len(argv):
                value = argv[i]
                i += 1
            else:
                raise SettingsError(f"flag {name} needs a value")
        out[option.field] = (option, value, name)
    return out


def _pod_namespace(namespace_file: Path) -> str:
    try:
        ns = namespace_file.read_text(encoding="utf-8").strip()
    except OSError:
        return "default"
    return ns or "default"


def _fmt(value: Any) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    if isinstance(value, float):
        return str(int(value))
    return str(value)


def load_settings(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE,
) -> Settings:
    """Build :class:`Settings` from flags (``argv``, without the program name) over ``env``.

    Raises :class:`SettingsError` naming the variable or flag and its bad value, or
    :class:`HelpRequested` for ``--help``.
    """
    flags = _split_flags(argv)
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}  # field -> 'LABEL="raw"' for messages
    for option in OPTIONS:
        source = flags.get(option.field)
        if source is not None:
            _, raw, label = source
        elif option.env in env:
            raw, label = env[option.env], option.env
            if raw == "" and not option.empty_is_value:
                continue  # an empty variable is unset
        else:
            continue
        try:
            value = option.parse(raw)
        except ValueError as e:
            detail = str(e) if option.field == "feature_gates" else f"not {option.expect}"
            raise SettingsError(f'{label}="{raw}": {detail}') from None
        if option.check is not None and (reason := option.check(value)) is not None:
            raise SettingsError(f'{label}="{raw}": {reason}')
        values[option.field] = value
        origin[option.field] = f'{label}="{raw}"'
    _check_relations(values, origin)
    if not values.get("leader_election_namespace"):
        values["leader_election_namespace"] = _pod_namespace(namespace_file)
    try:
        return Settings(**values)
    except ValidationError as e:  # pragma: no cover - the checks above mirror the model's
        raise SettingsError(f"invalid settings: {e}") from None


def load_feature_gates(flag: str | None, env: Mapping[str, str]) -> FeatureGates:
    """The feature gates alone, read exactly as :func:`load_settings` reads them: ``flag`` (the
    ``--feature-gates`` value, None when not given) over ``FEATURE_GATES`` over the defaults.
    For commands that decide as the controller would (``karpenter-py plan``)."""
    argv = [] if flag is None else [f"--feature-gates={flag}"]
    gates_env = {k: v for k, v in env.items() if k == "FEATURE_GATES"}
    return load_settings(argv, gates_env, namespace_file=Path(os.devnull)).feature_gates


def _check_relations(values: Mapping[str, Any], origin: Mapping[str, str]) -> None:
    """Rules that involve two settings, reported with where each value came from."""
    defaults = Settings.model_fields

    def get(field: str) -> Any:
        return values[field] if field in values else defaults[field].default

    def describe(field: str, env: str) -> str:
        if field in origin:
            return origin[field]
        default = defaults[field].default
        shown = format_duration(default) if field.startswith("batch_") else _fmt(default)
        return f"{env} (default {shown})"

    if get("kube_client_burst") < get("kube_client_qps"):
        raise SettingsError(
            f"{describe('kube_client_burst', 'KUBE_CLIENT_BURST')} must be >= "
            f"{describe('kube_client_qps', 'KUBE_CLIENT_QPS')}"
        )
    if get("batch_idle_duration") > get("batch_max_duration"):
        raise SettingsError(
            f"{describe('batch_idle_duration', 'BATCH_IDLE_DURATION')} must not exceed "
            f"{describe('batch_max_duration', 'BATCH_MAX_DURATION')}"
        )
    if get("cloud_provider") == "aws" and not get("cluster_name"):
        raise SettingsError(
            f"CLUSTER_NAME is required when {describe('cloud_provider', 'CLOUD_PROVIDER')}"
        )
    if not get("leader_election_name"):
        raise SettingsError(
            f"{describe('leader_election_name', 'LEADER_ELECTION_NAME')}: must not be empty"
        )
