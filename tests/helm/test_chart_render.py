"""charts/karpenter-py with the real helm binary (hack/helm/build.sh): lint, the schema's messages,
``helm template`` with several value sets, and one source of truth with manifests/.

manifests/ is the reference: rendered with default values as release ``karpenter`` in namespace
``karpenter``, the chart must produce exactly its objects, save for the labels Helm adds, the
Namespace (Helm's ``--create-namespace``) and the image tag (the chart pins its appVersion where
manifests/ has a ``latest`` placeholder). The chart's crds/ is a link to manifests/crds/.
"""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.manager.settings import OPTIONS, FeatureGates, load_settings
from karpenter_py.manager.webhook import WebhookConfig
from tests.helmtool import CHART, run_helm

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
MANIFEST_FILES = [
    "serviceaccount.yaml",
    "rbac.yaml",
    "service.yaml",
    "pdb.yaml",
    "deployment.yaml",
]
CHART_META = yaml.safe_load((CHART / "Chart.yaml").read_text())
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
HELM_LABELS = {
    "app.kubernetes.io/managed-by": "Helm",
    "app.kubernetes.io/version": CHART_META["appVersion"],
    "helm.sh/chart": f"karpenter-py-{CHART_META['version']}",
}
DIGEST = "sha256:" + "0123456789abcdef" * 4
ROLE_ARN = "arn:aws:iam::111122223333:role/KarpenterControllerRole-prod"
SETTING_ENVS = {o.env for o in OPTIONS}

Obj = dict[str, Any]


def sets(*assignments: str) -> list[str]:
    """``--set a=1 --set b=2`` for ``sets("a=1", "b=2")``."""
    return [arg for a in assignments for arg in ("--set", a)]


def render(
    *args: str, release: str = "karpenter", namespace: str = "karpenter", crds: bool = False
) -> list[Obj]:
    cmd = ["template", release, str(CHART), "--namespace", namespace, *args]
    if crds:
        cmd.append("--include-crds")
    out = run_helm(cmd).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(objects: list[Obj]) -> dict[str, Obj]:
    out: dict[str, Obj] = {}
    for obj in objects:
        assert obj["kind"] not in out, f"two {obj['kind']} objects"
        out[obj["kind"]] = obj
    return out


def container(objects: list[Obj]) -> Obj:
    (c,) = by_kind(objects)["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert isinstance(c, dict)
    return c


def plain_env(objects: list[Obj]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(objects)["env"] if "value" in e}


def manifest_objects() -> list[Obj]:
    return [
        d
        for name in MANIFEST_FILES
        for d in yaml.safe_load_all((MANIFESTS / name).read_text())
        if d
    ]


def without_helm_bookkeeping(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    for key, value in HELM_LABELS.items():
        assert meta["labels"].pop(key) == value, (obj["kind"], key)
    if not meta.get("annotations"):
        meta.pop("annotations", None)
    return obj


def name_of(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def kind_and_name(obj: Obj) -> tuple[str, str]:
    return str(obj["kind"]), name_of(obj)


# ----------------------------------------------------------------------------- one source of truth


def test_chart_crds_are_the_manifests_crds_byte_for_byte() -> None:
    chart_crds = sorted((CHART / "crds").glob("*.yaml"))
    manifest_crds = sorted((MANIFESTS / "crds").glob("*.yaml"))
    assert manifest_crds
    assert [p.name for p in chart_crds] == [p.name for p in manifest_crds]
    for ours, theirs in zip(chart_crds, manifest_crds, strict=True):
        assert ours.read_bytes() == theirs.read_bytes(), ours.name


def test_helm_installs_exactly_the_manifests_crds() -> None:
    rendered = [o for o in render(crds=True) if o["kind"] == "CustomResourceDefinition"]
    expected = [
        d
        for p in sorted((MANIFESTS / "crds").glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if d
    ]
    assert sorted(rendered, key=name_of) == sorted(expected, key=name_of)


def test_chart_installs_the_projects_version() -> None:
    assert CHART_META["appVersion"] == VERSION
    assert container(render())["image"] == f"karpenter-py:{VERSION}"


def test_default_render_is_manifests_plus_helm_labels() -> None:
    rendered = render()
    expected = manifest_objects()
    # The one deliberate difference: a pinned tag (the chart's appVersion) for the placeholder.
    (dep,) = [o for o in expected if o["kind"] == "Deployment"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "karpenter-py:latest"
    dep["spec"]["template"]["spec"]["containers"][0]["image"] = f"karpenter-py:{VERSION}"

    key = kind_and_name
    got = sorted((without_helm_bookkeeping(o) for o in rendered), key=key)
    want = sorted(
        ({**o, "metadata": {k: v for k, v in o["metadata"].items() if v != {}}} for o in expected),
        key=key,
    )
    assert [key(o) for o in got] == [key(o) for o in want]
    for g, w in zip(got, want, strict=True):
        assert g == w, f"{key(g)} differs from manifests/ (change both, or neither)"


def test_objects_of_another_release_are_named_after_it() -> None:
    objects = render(release="edge", namespace="ops")
    names = sorted(
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects
    )
    assert names == [
        ("ClusterRole", "edge-py", None),
        ("ClusterRoleBinding", "edge-py", None),
        ("Deployment", "edge", "ops"),
        ("PodDisruptionBudget", "edge", "ops"),
        ("Role", "edge-py", "ops"),
        ("RoleBinding", "edge-py", "ops"),
        ("Service", "edge", "ops"),
        ("ServiceAccount", "edge", "ops"),
    ]
    kinds = by_kind(objects)
    subject = {"kind": "ServiceAccount", "name": "edge", "namespace": "ops"}
    assert kinds["ClusterRoleBinding"]["subjects"] == [subject]
    assert kinds["RoleBinding"]["subjects"] == [subject]
    selector = {"app.kubernetes.io/name": "karpenter-py", "app.kubernetes.io/instance": "edge"}
    spec = kinds["Deployment"]["spec"]
    assert spec["selector"]["matchLabels"] == selector
    assert spec["template"]["metadata"]["labels"] == selector
    pod = spec["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector}}
    ]
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": selector},
        }
    ]
    assert kinds["Service"]["spec"]["selector"] == selector
    assert kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == selector


def test_webhook_of_another_release_is_called_through_its_service() -> None:
    # The CRDs in crds/ name Service karpenter/karpenter; a controller of release "edge" in
    # namespace "ops" rewrites their clientConfig (webhook._publish) to what its settings say,
    # which must be the Service this release renders, on the port the pod listens on.
    objects = render(release="edge", namespace="ops")
    kinds = by_kind(objects)
    env = {**plain_env(objects), "LEADER_ELECTION_NAMESPACE": "ops"}  # the fieldRef's value
    s = load_settings([], env)
    config = WebhookConfig(
        namespace=s.leader_election_namespace, service=s.webhook_service_name, port=s.webhook_port
    )
    service = kinds["Service"]
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert config.client_config(b"ca")["service"] == {
        "name": service["metadata"]["name"],
        "namespace": service["metadata"]["namespace"],
        "path": "/convert",
        "port": ports["https-webhook"]["port"],
    }
    assert (config.service, config.namespace) == ("edge", "ops")
    target = ports["https-webhook"]["targetPort"]
    pod_ports = {p["name"]: p["containerPort"] for p in container(objects)["ports"]}
    assert pod_ports[target] == s.webhook_port == 8443
    assert "edge.ops.svc" in config.hosts()  # the serving certificate names that Service


# ----------------------------------------------------------------------------- settings -> env

AWS_SETTINGS = sets(
    "cloudProvider=aws",
    "settings.clusterName=prod",
    "settings.clusterEndpoint=https://ABCD.gr7.eu-west-1.eks.amazonaws.com",
    "settings.clusterCABundle=LS0tLS1CRUdJTg==",
    "settings.interruptionQueue=prod-karpenter",
    "settings.isolatedVPC=true",
    "settings.vmMemoryOverheadPercent=0.1",
    "settings.reservedENIs=1",
    "settings.ignoreDRARequests=false",
    "settings.nominatePods=false",
    "settings.batchMaxDuration=20s",
    "settings.batchIdleDuration=2s",
    "settings.batchFirstMaxDuration=500ms",
    "settings.kubeClientQPS=50",
    "settings.kubeClientBurst=100",
    "settings.preferencePolicy=Ignore",
    "settings.minValuesPolicy=BestEffort",
    "settings.featureGates.spotToSpotConsolidation=true",
    "settings.featureGates.nodeRepair=true",
    "logLevel=debug",
)

DEFAULT_ENV = {
    "CLOUD_PROVIDER": "kwok",
    "CLUSTER_NAME": "",
    "LOG_LEVEL": "info",
    "METRICS_PORT": "8080",
    "HEALTH_PROBE_PORT": "8081",
    "WEBHOOK_PORT": "8443",
    "WEBHOOK_SERVICE_NAME": "karpenter",
    "BATCH_MAX_DURATION": "10s",
    "BATCH_IDLE_DURATION": "1s",
    "BATCH_FIRST_MAX_DURATION": "1s",
    "KUBE_CLIENT_QPS": "200",
    "KUBE_CLIENT_BURST": "300",
    "FEATURE_GATES": "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,"
    "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false",
    "PREFERENCE_POLICY": "Respect",
    "MIN_VALUES_POLICY": "Strict",
    "DISABLE_LEADER_ELECTION": "false",
    "LEADER_ELECTION_NAME": "karpenter-leader-election",
}

ENV_CASES = [
    pytest.param([], DEFAULT_ENV, id="defaults"),
    pytest.param(
        AWS_SETTINGS,
        {
            **DEFAULT_ENV,
            "CLOUD_PROVIDER": "aws",
            "CLUSTER_NAME": "prod",
            "CLUSTER_ENDPOINT": "https://ABCD.gr7.eu-west-1.eks.amazonaws.com",
            "CLUSTER_CA_BUNDLE": "LS0tLS1CRUdJTg==",
            "INTERRUPTION_QUEUE": "prod-karpenter",
            "ISOLATED_VPC": "true",
            "VM_MEMORY_OVERHEAD_PERCENT": "0.1",
            "RESERVED_ENIS": "1",
            "IGNORE_DRA_REQUESTS": "false",
            "NOMINATE_PODS": "false",
            "LOG_LEVEL": "debug",
            "BATCH_MAX_DURATION": "20s",
            "BATCH_IDLE_DURATION": "2s",
            "BATCH_FIRST_MAX_DURATION": "500ms",
            "KUBE_CLIENT_QPS": "50",
            "KUBE_CLIENT_BURST": "100",
            "FEATURE_GATES": "NodeRepair=true,ReservedCapacity=true,SpotToSpotConsolidation=true,"
            "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false",
            "PREFERENCE_POLICY": "Ignore",
            "MIN_VALUES_POLICY": "BestEffort",
        },
        id="aws-all-settings",
    ),
    pytest.param(
        sets("settings.interruptionQueueName=legacy-queue"),
        {**DEFAULT_ENV, "INTERRUPTION_QUEUE": "legacy-queue"},
        id="interruptionQueueName-alias",
    ),
    pytest.param(
        sets("settings.interruptionQueueName=q1", "settings.interruptionQueue=q1"),
        {**DEFAULT_ENV, "INTERRUPTION_QUEUE": "q1"},
        id="alias-and-name-agree",
    ),
    pytest.param(
        sets("settings.reservedENIs=2", "settings.isolatedVPC=false"),
        {**DEFAULT_ENV, "RESERVED_ENIS": "2", "ISOLATED_VPC": "false"},
        id="explicit-false-and-string-number",
    ),
    pytest.param(
        sets(
            "settings.multiNodeConsolidationTimeout=5m",
            "settings.singleNodeConsolidationTimeout=10m30s",
        ),
        {
            **DEFAULT_ENV,
            "MULTI_NODE_CONSOLIDATION_TIMEOUT": "5m",
            "SINGLE_NODE_CONSOLIDATION_TIMEOUT": "10m30s",
        },
        id="consolidation-timeouts",
    ),
    pytest.param(
        sets("controller.metrics.port=9090", "controller.healthProbe.port=9091"),
        {**DEFAULT_ENV, "METRICS_PORT": "9090", "HEALTH_PROBE_PORT": "9091"},
        id="ports",
    ),
    pytest.param(
        sets("webhook.enabled=false"), {**DEFAULT_ENV, "WEBHOOK_PORT": "0"}, id="webhook-off"
    ),
]


@pytest.mark.parametrize(("args", "env"), ENV_CASES)
def test_settings_become_the_controllers_environment(args: list[str], env: dict[str, str]) -> None:
    objects = render(*args)
    assert plain_env(objects) == env
    refs = {e["name"]: e["valueFrom"] for e in container(objects)["env"] if "valueFrom" in e}
    assert refs == {
        "LEADER_ELECTION_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "CPU_REQUESTS": {
            "resourceFieldRef": {
                "containerName": "controller",
                "resource": "requests.cpu",
                "divisor": "1m",
            }
        },
        "MEMORY_LIMIT": {
            "resourceFieldRef": {
                "containerName": "controller",
                "resource": "limits.memory",
                "divisor": "1",
            }
        },
    }
    # Every variable is one the controller reads, and it accepts every value.
    assert set(env) | set(refs) <= SETTING_ENVS
    downward = {"LEADER_ELECTION_NAMESPACE": "karpenter", "CPU_REQUESTS": "1000"}
    settings = load_settings([], {**env, **downward, "MEMORY_LIMIT": "1073741824"})
    assert settings.cloud_provider == env["CLOUD_PROVIDER"]
    assert settings.interruption_queue == env.get("INTERRUPTION_QUEUE", "")


def test_aws_settings_load_into_the_controllers_settings() -> None:
    env = plain_env(render(*AWS_SETTINGS))
    s = load_settings([], {**env, "LEADER_ELECTION_NAMESPACE": "karpenter"})
    assert (s.cluster_name, s.cluster_endpoint, s.cluster_ca_bundle) == (
        "prod",
        "https://ABCD.gr7.eu-west-1.eks.amazonaws.com",
        "LS0tLS1CRUdJTg==",
    )
    assert (s.isolated_vpc, s.vm_memory_overhead_percent, s.reserved_enis) == (True, 0.1, 1)
    assert (s.batch_max_duration, s.batch_idle_duration) == (20.0, 2.0)
    assert s.batch_first_max_duration == 0.5
    assert (s.kube_client_qps, s.kube_client_burst, s.ignore_dra_requests) == (50, 100, False)
    assert s.feature_gates == FeatureGates(node_repair=True, spot_to_spot_consolidation=True)
    assert (s.log_level, s.preference_policy, s.min_values_policy) == (
        "debug",
        "Ignore",
        "BestEffort",
    )


@pytest.mark.parametrize(
    ("args", "want"),
    [
        # Unset in the chart (null) is the controller's default: upstream's 1 min and 3 min.
        pytest.param([], (60.0, 180.0), id="defaults"),
        pytest.param(
            sets(
                "settings.multiNodeConsolidationTimeout=5m",
                "settings.singleNodeConsolidationTimeout=10m30s",
            ),
            (300.0, 630.0),
            id="set",
        ),
    ],
)
def test_consolidation_timeouts_load_into_the_controllers_settings(
    args: list[str], want: tuple[float, float]
) -> None:
    env = plain_env(render(*args))
    s = load_settings([], {**env, "LEADER_ELECTION_NAMESPACE": "karpenter"})
    assert (s.multi_node_consolidation_timeout, s.single_node_consolidation_timeout) == want


def test_extra_env_comes_after_the_settings() -> None:
    env = container(
        render(
            *sets("controller.env[0].name=AWS_REGION", "controller.env[0].value=eu-west-1"),
        )
    )["env"]
    assert env[-1] == {"name": "AWS_REGION", "value": "eu-west-1"}
    assert [e["name"] for e in env[-3:-1]] == ["CPU_REQUESTS", "MEMORY_LIMIT"]


# ----------------------------------------------------------------------------- pod and objects


def test_image_digest_wins_over_the_tag() -> None:
    args = sets("controller.image.repository=registry.example/karpenter-py")
    tagged = render(*args, *sets("controller.image.tag=0.2.0"))
    pinned = render(*args, *sets("controller.image.tag=0.2.0", f"controller.image.digest={DIGEST}"))
    assert container(tagged)["image"] == "registry.example/karpenter-py:0.2.0"
    assert container(pinned)["image"] == f"registry.example/karpenter-py@{DIGEST}"


def test_irsa_role_annotation_is_on_the_service_account() -> None:
    objects = render(*sets(f"serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn={ROLE_ARN}"))
    sa = by_kind(objects)["ServiceAccount"]
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": ROLE_ARN}
    assert sa["metadata"]["name"] == "karpenter"


def test_an_existing_service_account_is_bound_not_created() -> None:
    objects = render(*sets("serviceAccount.create=false", "serviceAccount.name=ctrl"))
    kinds = by_kind(objects)
    assert "ServiceAccount" not in kinds
    assert kinds["Deployment"]["spec"]["template"]["spec"]["serviceAccountName"] == "ctrl"
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert kinds[kind]["subjects"] == [
            {"kind": "ServiceAccount", "name": "ctrl", "namespace": "karpenter"}
        ]


def test_resources_pass_through_and_feed_the_downward_api() -> None:
    objects = render(
        *sets(
            "controller.resources.requests.cpu=250m",
            "controller.resources.requests.memory=512Mi",
            "controller.resources.limits.cpu=null",
            "controller.resources.limits.memory=768Mi",
        ),
    )
    c = container(objects)
    assert c["resources"] == {
        "requests": {"cpu": "250m", "memory": "512Mi"},
        "limits": {"memory": "768Mi"},
    }
    fields = {
        e["name"]: e["valueFrom"]["resourceFieldRef"]["resource"]
        for e in c["env"]
        if "resourceFieldRef" in e.get("valueFrom", {})
    }
    assert fields == {"CPU_REQUESTS": "requests.cpu", "MEMORY_LIMIT": "limits.memory"}


def test_scheduling_values_pass_through(tmp_path: Path) -> None:
    values: Obj = {
        "replicas": 3,
        "nodeSelector": {"kubernetes.io/os": "linux", "node-role": "system"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "node-role", "operator": "Exists"}]}
                    ]
                }
            },
            "podAntiAffinity": None,  # Helm merges maps with the defaults: null removes a key
        },
        "topologySpreadConstraints": [],
        "priorityClassName": "",
        "dnsPolicy": "Default",
        "podAnnotations": {"prometheus.io/scrape": "true"},
        "podLabels": {"team": "platform"},
    }
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    objects = render("--values", str(tmp_path / "values.yaml"))
    dep = by_kind(objects)["Deployment"]
    pod = dep["spec"]["template"]
    assert dep["spec"]["replicas"] == 3
    assert pod["spec"]["nodeSelector"] == values["nodeSelector"]
    assert pod["spec"]["tolerations"] == values["tolerations"]
    assert pod["spec"]["affinity"] == {"nodeAffinity": values["affinity"]["nodeAffinity"]}
    assert "topologySpreadConstraints" not in pod["spec"]
    assert "priorityClassName" not in pod["spec"]
    assert pod["spec"]["dnsPolicy"] == "Default"
    assert pod["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    assert pod["metadata"]["labels"] == {
        "app.kubernetes.io/name": "karpenter-py",
        "app.kubernetes.io/instance": "karpenter",
        "team": "platform",
    }


def test_additional_labels_and_annotations_reach_every_object() -> None:
    objects = render(
        *sets(
            "additionalLabels.team=platform",
            "additionalAnnotations.owner=sre",
            "serviceMonitor.enabled=true",
        ),
    )
    assert len(objects) == 9
    for obj in objects:
        assert obj["metadata"]["labels"]["team"] == "platform", obj["kind"]
        assert obj["metadata"]["annotations"]["owner"] == "sre", obj["kind"]


def test_service_monitor_scrapes_the_metrics_port_when_enabled() -> None:
    assert "ServiceMonitor" not in by_kind(render())
    monitor = by_kind(
        render(
            *sets(
                "serviceMonitor.enabled=true",
                "serviceMonitor.additionalLabels.release=prom",
                "serviceMonitor.endpointConfig.interval=15s",
            ),
        )
    )["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"] == {
        "namespaceSelector": {"matchNames": ["karpenter"]},
        "selector": {
            "matchLabels": {
                "app.kubernetes.io/name": "karpenter-py",
                "app.kubernetes.io/instance": "karpenter",
            }
        },
        "endpoints": [{"port": "http-metrics", "path": "/metrics", "interval": "15s"}],
    }


DASHBOARD_FILES = sorted((CHART / "dashboards").glob("*.json"))


def dashboard_maps(objects: list[Obj]) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}


def test_dashboards_are_off_by_default() -> None:
    assert dashboard_maps(render()) == {}


@pytest.mark.parametrize(
    ("args", "namespace", "label", "annotations"),
    [
        pytest.param(
            sets("dashboards.enabled=true"),
            "karpenter",
            ("grafana_dashboard", "1"),
            None,
            id="sidecar defaults",
        ),
        pytest.param(
            sets(
                "dashboards.enabled=true",
                "dashboards.label=my_dashboards",
                "dashboards.labelValue=yes",
                "dashboards.namespace=monitoring",
                "dashboards.annotations.grafana_folder=Karpenter",
            ),
            "monitoring",
            ("my_dashboards", "yes"),
            {"grafana_folder": "Karpenter"},
            id="configured",
        ),
    ],
)
def test_dashboards_ship_as_configmaps_the_grafana_sidecar_finds(
    args: list[str],
    namespace: str,
    label: tuple[str, str],
    annotations: dict[str, str] | None,
) -> None:
    maps = dashboard_maps(render(*args))
    assert sorted(maps) == [f"karpenter-dashboard-{p.stem}" for p in DASHBOARD_FILES]
    for path in DASHBOARD_FILES:
        cm = maps[f"karpenter-dashboard-{path.stem}"]
        assert cm["metadata"]["namespace"] == namespace
        assert cm["metadata"]["labels"][label[0]] == label[1]
        assert cm["metadata"]["labels"]["app.kubernetes.io/instance"] == "karpenter"
        assert cm["metadata"].get("annotations") == annotations
        assert list(cm["data"]) == [f"karpenter-py-{path.stem}.json"]
        # The dashboard JSON arrives unchanged.
        assert json.loads(cm["data"][f"karpenter-py-{path.stem}.json"]) == json.loads(
            path.read_text()
        )


def test_restricted_pod_security_is_always_met() -> None:
    pod = by_kind(render(*AWS_SETTINGS))["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (c,) = pod["containers"]
    assert c["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


# ----------------------------------------------------------------------------- lint and schema

LINT_CASES = [
    pytest.param([], id="defaults"),
    pytest.param(AWS_SETTINGS, id="aws"),
    pytest.param(
        [
            *sets(
                f"controller.image.digest={DIGEST}",
                f"serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn={ROLE_ARN}",
                "serviceMonitor.enabled=true",
                "replicas=1",
            ),
        ],
        id="digest-irsa-monitor",
    ),
    pytest.param(sets("settings.interruptionQueueName=legacy"), id="alias"),
    pytest.param(sets("dashboards.enabled=true"), id="dashboards"),
]


@pytest.mark.parametrize("args", LINT_CASES)
def test_helm_lint_passes(args: list[str]) -> None:
    proc = run_helm(["lint", "--strict", str(CHART), *args], check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout


SCHEMA_CASES = [
    pytest.param(
        sets("settings.clustername=prod"),
        "at '/settings': additional properties 'clustername' not allowed",
        id="misspelt-setting",
    ),
    pytest.param(sets("replicas=two"), "at '/replicas': got string, want integer", id="replicas"),
    pytest.param(
        sets("replica=2"), "additional properties 'replica' not allowed", id="misspelt-top"
    ),
    pytest.param(
        sets("settings.featureGates.nodeRepiar=true"),
        "at '/settings/featureGates': additional properties 'nodeRepiar' not allowed",
        id="misspelt-gate",
    ),
    pytest.param(
        ["--set-string", "settings.featureGates.nodeRepair=yes"],
        "at '/settings/featureGates/nodeRepair': got string, want boolean",
        id="gate-type",
    ),
    pytest.param(
        sets("logLevel=verbose"),
        "at '/logLevel': value must be one of 'debug', 'info', 'error'",
        id="log-level",
    ),
    pytest.param(
        sets("cloudProvider=gcp"),
        "at '/cloudProvider': value must be one of 'kwok', 'aws'",
        id="cloud-provider",
    ),
    pytest.param(
        sets("settings.batchMaxDuration=10"),
        "at '/settings/batchMaxDuration': got number, want string",
        id="duration-type",
    ),
    pytest.param(
        sets("settings.multiNodeConsolidationTimeout=1min"),
        "at '/settings/multiNodeConsolidationTimeout': '1min' does not match pattern",
        id="consolidation-timeout-pattern",
    ),
    pytest.param(
        sets("settings.batchIdleDuration=1sec"),
        "at '/settings/batchIdleDuration': '1sec' does not match pattern",
        id="duration-pattern",
    ),
    pytest.param(
        sets("controller.image.digest=sha256:abc"),
        "at '/controller/image/digest': 'sha256:abc' does not match pattern",
        id="digest",
    ),
    pytest.param(
        sets("controller.image.tags=1"),
        "at '/controller/image': additional properties 'tags' not allowed",
        id="misspelt-image",
    ),
    pytest.param(
        sets("serviceAccount.annotation.a=b"),
        "at '/serviceAccount': additional properties 'annotation' not allowed",
        id="misspelt-sa",
    ),
    pytest.param(
        sets("settings.clusterEndpoint=eks.example"),
        "at '/settings/clusterEndpoint': 'eks.example' does not match pattern",
        id="endpoint",
    ),
    pytest.param(
        sets("tolerations[0].keys=a"),
        "at '/tolerations/0': additional properties 'keys' not allowed",
        id="toleration",
    ),
]


@pytest.mark.parametrize(("args", "message"), SCHEMA_CASES)
def test_schema_rejects_with_a_message(args: list[str], message: str) -> None:
    for cmd in (["template", "karpenter", str(CHART)], ["lint", str(CHART)]):
        proc = run_helm([*cmd, *args], check=False)
        assert proc.returncode == 1, (cmd, proc.stdout, proc.stderr)
        assert message in proc.stdout + proc.stderr, (cmd, proc.stdout, proc.stderr)


TEMPLATE_FAILURES = [
    pytest.param(
        sets("cloudProvider=aws"),
        "settings.clusterName is required when cloudProvider is aws",
        id="aws-without-cluster-name",
    ),
    pytest.param(
        sets("settings.interruptionQueue=a", "settings.interruptionQueueName=b"),
        'settings.interruptionQueue ("a") and settings.interruptionQueueName ("b", its older '
        "name) name different queues: set one",
        id="alias-conflict",
    ),
    pytest.param(
        sets("serviceAccount.create=false"),
        "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is "
        "false",
        id="no-service-account",
    ),
]


@pytest.mark.parametrize(("args", "message"), TEMPLATE_FAILURES)
def test_inconsistent_values_fail_with_a_message(args: list[str], message: str) -> None:
    proc = run_helm(["template", "karpenter", str(CHART), *args], check=False)
    assert proc.returncode == 1, proc.stdout
    assert message in proc.stderr
