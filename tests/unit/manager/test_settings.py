"""Settings: upstream names and defaults, env parsing, flag precedence, one clear error each."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_py.manager.settings import (
    DEFAULT_FEATURE_GATES,
    OPTIONS,
    FeatureGates,
    HelpRequested,
    Settings,
    SettingsError,
    load_settings,
    parse_duration_seconds,
    parse_feature_gates,
)


def load(argv: list[str] | None = None, env: dict[str, str] | None = None, **kw) -> Settings:
    kw.setdefault("namespace_file", Path("/nonexistent/namespace"))
    return load_settings(argv or [], env or {}, **kw)


def test_defaults_are_upstreams():
    s = load()
    assert s.batch_max_duration == 10.0
    assert s.batch_idle_duration == 1.0
    assert (s.kube_client_qps, s.kube_client_burst) == (200, 300)
    assert s.log_level == "info"
    assert (s.metrics_port, s.health_probe_port) == (8080, 8081)
    assert s.feature_gates == FeatureGates(
        node_repair=False,
        reserved_capacity=True,
        spot_to_spot_consolidation=False,
        node_overlay=False,
        static_capacity=False,
        capacity_buffer=False,
    )
    assert s.feature_gates.to_flag() == (
        "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,"
        "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
    )
    assert (s.preference_policy, s.min_values_policy) == ("Respect", "Strict")
    assert s.disable_leader_election is False
    assert s.leader_election_name == "karpenter-leader-election"
    assert s.leader_election_namespace == "default"  # no service-account file here
    assert s.cpu_requests == 1000
    assert s.ignore_dra_requests is True
    assert s.vm_memory_overhead_percent == 0.075
    assert (s.instance_types_file_path, s.interruption_queue) == ("", "")
    assert s.cloud_provider == "kwok"
    assert s.kubeconfig == ""
    # Ours: a burst's first batch closes 1 s after its first pod (the idle window's length).
    assert s.batch_first_max_duration == 1.0
    # Upstream's fixed consolidation limits: multi-node 1 min, single-node 3 min.
    assert (s.multi_node_consolidation_timeout, s.single_node_consolidation_timeout) == (
        60.0,
        180.0,
    )


def test_settings_are_frozen():
    s = load()
    with pytest.raises(ValueError):
        s.log_level = "debug"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("env", "field", "expected"),
    [
        ({"BATCH_MAX_DURATION": "1m30s"}, "batch_max_duration", 90.0),
        ({"BATCH_IDLE_DURATION": "500ms"}, "batch_idle_duration", 0.5),
        ({"BATCH_FIRST_MAX_DURATION": "250ms"}, "batch_first_max_duration", 0.25),
        ({"BATCH_FIRST_MAX_DURATION": "1m"}, "batch_first_max_duration", 60.0),
        ({"KUBE_CLIENT_QPS": "50"}, "kube_client_qps", 50),
        ({"KUBE_CLIENT_BURST": "1000"}, "kube_client_burst", 1000),
        ({"LOG_LEVEL": "debug"}, "log_level", "debug"),
        ({"LOG_LEVEL": "ERROR"}, "log_level", "error"),
        ({"METRICS_PORT": "9090"}, "metrics_port", 9090),
        ({"HEALTH_PROBE_PORT": "9091"}, "health_probe_port", 9091),
        ({"PREFERENCE_POLICY": "Ignore"}, "preference_policy", "Ignore"),
        ({"MIN_VALUES_POLICY": "BestEffort"}, "min_values_policy", "BestEffort"),
        ({"DISABLE_LEADER_ELECTION": "true"}, "disable_leader_election", True),
        ({"DISABLE_LEADER_ELECTION": "1"}, "disable_leader_election", True),
        ({"IGNORE_DRA_REQUESTS": "False"}, "ignore_dra_requests", False),
        ({"LEADER_ELECTION_NAME": "my-lease"}, "leader_election_name", "my-lease"),
        ({"LEADER_ELECTION_NAMESPACE": "kube-system"}, "leader_election_namespace", "kube-system"),
        ({"CPU_REQUESTS": "250"}, "cpu_requests", 250),
        ({"INSTANCE_TYPES_FILE_PATH": "/etc/it.json"}, "instance_types_file_path", "/etc/it.json"),
        ({"KWOK_BARE_NODES": "true"}, "kwok_bare_nodes", True),
        ({"INTERRUPTION_QUEUE": "q"}, "interruption_queue", "q"),
        ({"VM_MEMORY_OVERHEAD_PERCENT": "0.1"}, "vm_memory_overhead_percent", 0.1),
        ({"CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "c1"}, "cloud_provider", "aws"),
        ({"CLUSTER_NAME": "prod"}, "cluster_name", "prod"),
        ({"CLUSTER_CA_BUNDLE": "LS0tLS1CRUdJTg=="}, "cluster_ca_bundle", "LS0tLS1CRUdJTg=="),
        ({"ISOLATED_VPC": "true"}, "isolated_vpc", True),
        ({"RESERVED_ENIS": "1"}, "reserved_enis", 1),
        (
            {"INTERRUPTION_REPLACE_ON_REBALANCE": "true"},
            "interruption_replace_on_rebalance",
            True,
        ),
        ({"KUBECONFIG": "/k/config"}, "kubeconfig", "/k/config"),
        (
            {"MULTI_NODE_CONSOLIDATION_TIMEOUT": "5m"},
            "multi_node_consolidation_timeout",
            300.0,
        ),
        (
            {"SINGLE_NODE_CONSOLIDATION_TIMEOUT": "1m30s"},
            "single_node_consolidation_timeout",
            90.0,
        ),
        ({"MULTI_NODE_CONSOLIDATION_TIMEOUT": ""}, "multi_node_consolidation_timeout", 60.0),
        ({"LOG_LEVEL": ""}, "log_level", "info"),  # empty counts as unset
        ({"METRICS_PORT": ""}, "metrics_port", 8080),
    ],
)
def test_environment_values(env, field, expected):
    assert getattr(load(env=env), field) == expected


def test_feature_gates_from_env_keep_unmentioned_defaults():
    s = load(env={"FEATURE_GATES": "NodeRepair=true, SpotToSpotConsolidation=true"})
    assert s.feature_gates.node_repair is True
    assert s.feature_gates.spot_to_spot_consolidation is True
    assert s.feature_gates.reserved_capacity is True  # default kept
    assert parse_feature_gates(DEFAULT_FEATURE_GATES) == FeatureGates()


def test_consolidation_timeout_flags_override_env():
    env = {"MULTI_NODE_CONSOLIDATION_TIMEOUT": "2m", "SINGLE_NODE_CONSOLIDATION_TIMEOUT": "10m"}
    s = load(["--multi-node-consolidation-timeout=45s"], env)
    assert (s.multi_node_consolidation_timeout, s.single_node_consolidation_timeout) == (
        45.0,
        600.0,
    )


def test_flags_override_env():
    env = {"BATCH_MAX_DURATION": "5s", "LOG_LEVEL": "error", "METRICS_PORT": "9000"}
    s = load(["--batch-max-duration=20s", "--log-level", "debug"], env)
    assert s.batch_max_duration == 20.0
    assert s.log_level == "debug"
    assert s.metrics_port == 9000  # env still applies where no flag was given


def test_bool_flags_bare_or_with_value_and_last_wins():
    assert load(["--disable-leader-election"]).disable_leader_election is True
    s = load(["--disable-leader-election", "--disable-leader-election=false"])
    assert s.disable_leader_election is False
    assert load(["--ignore-dra-requests=f"]).ignore_dra_requests is False


def test_every_option_has_a_kebab_case_flag():
    for option in OPTIONS:
        assert option.flag == "--" + option.env.lower().replace("_", "-")
        assert option.field in Settings.model_fields


def test_namespace_from_service_account_file(tmp_path: Path):
    ns_file = tmp_path / "namespace"
    ns_file.write_text("karpenter\n")
    assert load(namespace_file=ns_file).leader_election_namespace == "karpenter"
    explicit = load(env={"LEADER_ELECTION_NAMESPACE": "other"}, namespace_file=ns_file)
    assert explicit.leader_election_namespace == "other"
    assert (
        load(
            env={"LEADER_ELECTION_NAMESPACE": ""}, namespace_file=ns_file
        ).leader_election_namespace
        == "karpenter"
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        ("2h45m", 9900.0),
        ("100us", 1e-4),
        ("0", 0.0),
        ("-1s", -1.0),
    ],
)
def test_go_durations(text, seconds):
    assert parse_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["abc", "10", "1x", "", "s", "1 s", "1s2", "\u0661s"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration_seconds(text)


def test_duration_settings_trim_whitespace_like_every_number():
    # Settings trim around every numeric value (integers, floats, durations); the model's parser
    # itself is Go's time.ParseDuration and does not.
    assert load(env={"BATCH_IDLE_DURATION": " 2s "}).batch_idle_duration == 2.0
    assert load(env={"KUBE_CLIENT_QPS": " 7 "}).kube_client_qps == 7


def test_duration_settings_keep_microseconds():
    # One parser for every duration: it resolves to the microsecond (timedelta's resolution), so
    # a sub-microsecond batch window is zero and rejected like "0s".
    assert load(env={"BATCH_IDLE_DURATION": "1500us"}).batch_idle_duration == 0.0015
    with pytest.raises(SettingsError) as info:
        load(env={"BATCH_IDLE_DURATION": "500ns"})
    assert str(info.value) == 'BATCH_IDLE_DURATION="500ns": must be greater than 0'


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            [],
            {"BATCH_IDLE_DURATION": "abc"},
            'BATCH_IDLE_DURATION="abc": not a duration like 1s or 500ms',
        ),
        (
            [],
            {"BATCH_MAX_DURATION": "10"},
            'BATCH_MAX_DURATION="10": not a duration like 1s or 500ms',
        ),
        ([], {"BATCH_MAX_DURATION": "0s"}, 'BATCH_MAX_DURATION="0s": must be greater than 0'),
        (
            [],
            {"BATCH_FIRST_MAX_DURATION": "0s"},
            'BATCH_FIRST_MAX_DURATION="0s": must be greater than 0',
        ),
        (
            ["--batch-first-max-duration=1"],
            {},
            '--batch-first-max-duration="1": not a duration like 1s or 500ms',
        ),
        (
            ["--batch-idle-duration=x"],
            {},
            '--batch-idle-duration="x": not a duration like 1s or 500ms',
        ),
        (
            [],
            {"MULTI_NODE_CONSOLIDATION_TIMEOUT": "60"},
            'MULTI_NODE_CONSOLIDATION_TIMEOUT="60": not a duration like 1s or 500ms',
        ),
        (
            [],
            {"SINGLE_NODE_CONSOLIDATION_TIMEOUT": "0s"},
            'SINGLE_NODE_CONSOLIDATION_TIMEOUT="0s": must be greater than 0',
        ),
        (
            ["--single-node-consolidation-timeout=-3m"],
            {},
            '--single-node-consolidation-timeout="-3m": must be greater than 0',
        ),
        ([], {"KUBE_CLIENT_QPS": "fast"}, 'KUBE_CLIENT_QPS="fast": not an integer'),
        ([], {"KUBE_CLIENT_QPS": "0"}, 'KUBE_CLIENT_QPS="0": must be greater than 0'),
        ([], {"KUBE_CLIENT_BURST": "1.5"}, 'KUBE_CLIENT_BURST="1.5": not an integer'),
        ([], {"LOG_LEVEL": "verbose"}, 'LOG_LEVEL="verbose": not one of debug|info|error'),
        ([], {"METRICS_PORT": "0"}, 'METRICS_PORT="0": must be a port between 1 and 65535'),
        (
            [],
            {"HEALTH_PROBE_PORT": "65536"},
            'HEALTH_PROBE_PORT="65536": must be a port between 1 and 65535',
        ),
        ([], {"HEALTH_PROBE_PORT": "http"}, 'HEALTH_PROBE_PORT="http": not an integer'),
        (
            [],
            {"FEATURE_GATES": "Bogus=true"},
            'FEATURE_GATES="Bogus=true": unknown feature gate "Bogus"',
        ),
        (
            [],
            {"FEATURE_GATES": "NodeRepair=yes"},
            'FEATURE_GATES="NodeRepair=yes": NodeRepair=yes is not true or false',
        ),
        (
            [],
            {"FEATURE_GATES": "NodeRepair"},
            'FEATURE_GATES="NodeRepair": "NodeRepair" needs a value',
        ),
        (
            [],
            {"PREFERENCE_POLICY": "respect"},
            'PREFERENCE_POLICY="respect": not one of Respect|Ignore',
        ),
        (
            [],
            {"MIN_VALUES_POLICY": "Loose"},
            'MIN_VALUES_POLICY="Loose": not one of Strict|BestEffort',
        ),
        (
            [],
            {"DISABLE_LEADER_ELECTION": "yes"},
            'DISABLE_LEADER_ELECTION="yes": not true or false',
        ),
        ([], {"IGNORE_DRA_REQUESTS": "nope"}, 'IGNORE_DRA_REQUESTS="nope": not true or false'),
        ([], {"CPU_REQUESTS": "1.5"}, 'CPU_REQUESTS="1.5": not an integer (millicores)'),
        (
            [],
            {"VM_MEMORY_OVERHEAD_PERCENT": "-0.1"},
            'VM_MEMORY_OVERHEAD_PERCENT="-0.1": must not be negative',
        ),
        (
            [],
            {"VM_MEMORY_OVERHEAD_PERCENT": "lots"},
            'VM_MEMORY_OVERHEAD_PERCENT="lots": not a number',
        ),
        ([], {"CLOUD_PROVIDER": "gcp"}, 'CLOUD_PROVIDER="gcp": not one of kwok|aws'),
        (
            [],
            {"CLUSTER_ENDPOINT": "cluster.local"},
            'CLUSTER_ENDPOINT="cluster.local": must be an absolute URL',
        ),
        ([], {"LEADER_ELECTION_NAME": ""}, 'LEADER_ELECTION_NAME="": must not be empty'),
        (
            [],
            {"BATCH_IDLE_DURATION": "20s"},
            'BATCH_IDLE_DURATION="20s" must not exceed BATCH_MAX_DURATION (default 10s)',
        ),
        (
            ["--batch-max-duration=2s"],
            {"BATCH_IDLE_DURATION": "3s"},
            'BATCH_IDLE_DURATION="3s" must not exceed --batch-max-duration="2s"',
        ),
        (
            [],
            {"KUBE_CLIENT_QPS": "500"},
            'KUBE_CLIENT_BURST (default 300) must be >= KUBE_CLIENT_QPS="500"',
        ),
        ([], {"CLOUD_PROVIDER": "aws"}, 'CLUSTER_NAME is required when CLOUD_PROVIDER="aws"'),
        (["--no-such-flag=1"], {}, "unknown flag --no-such-flag"),
        (["--log-level"], {}, "flag --log-level needs a value"),
        (["controller"], {}, "unexpected argument 'controller'"),
    ],
)
def test_errors_name_the_setting_and_value(argv, env, message):
    with pytest.raises(SettingsError) as info:
        load(argv, env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)  # one line, one problem


def test_each_option_rejects_garbage_with_its_own_name():
    """Every typed option names itself in the error for a nonsense value."""
    for option in OPTIONS:
        if option.empty_is_value and option.check is None:
            continue  # free-form strings accept anything
        with pytest.raises(SettingsError) as info:
            load(env={option.env: "!!garbage!!"})
        assert str(info.value).startswith(f'{option.env}="!!garbage!!"'), option.env
        with pytest.raises(SettingsError) as info:
            load([f"{option.flag}=!!garbage!!"])
        assert str(info.value).startswith(f'{option.flag}="!!garbage!!"'), option.flag


def test_help_lists_every_flag_and_variable():
    with pytest.raises(HelpRequested) as info:
        load(["--help"])
    for option in OPTIONS:
        assert option.flag in info.value.text
        assert option.env in info.value.text
    assert "'10s'" in info.value.text
    assert (
        "--multi-node-consolidation-timeout / MULTI_NODE_CONSOLIDATION_TIMEOUT (default '1m')"
        in (info.value.text)
    )
    assert "SINGLE_NODE_CONSOLIDATION_TIMEOUT (default '3m')" in info.value.text


def test_model_guards_direct_construction():
    with pytest.raises(ValueError):
        Settings(kube_client_qps=10, kube_client_burst=5)
    with pytest.raises(ValueError):
        Settings(batch_idle_duration=5, batch_max_duration=1)
    with pytest.raises(ValueError):
        Settings(metrics_port=0)
