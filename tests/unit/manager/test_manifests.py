"""Static checks on manifests/ and the Containerfile: parse, least privilege, hardening."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.manager.settings import OPTIONS, load_settings

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "manifests"
OURS = [
    "namespace.yaml",
    "serviceaccount.yaml",
    "rbac.yaml",
    "deployment.yaml",
    "service.yaml",
    "pdb.yaml",
]


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def one(kind: str) -> dict[str, Any]:
    found = [d for name in OURS for d in docs(name) if d["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


@pytest.mark.parametrize("name", OURS)
def test_yaml_parses_into_named_objects(name):
    objects = docs(name)
    assert objects
    for obj in objects:
        assert obj["apiVersion"]
        assert obj["kind"]
        assert obj["metadata"]["name"]
        if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == "karpenter", obj["kind"]


def test_kustomization_lists_everything_including_every_crd():
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    resources = kustomization["resources"]
    crds = sorted(f"crds/{p.name}" for p in (MANIFESTS / "crds").glob("*.yaml"))
    assert crds, "manifests/crds/ is empty"
    assert sorted(r for r in resources if r.startswith("crds/")) == crds
    assert sorted(r for r in resources if not r.startswith("crds/")) == sorted(OURS)
    for r in resources:
        assert (MANIFESTS / r).is_file(), r
    # CRDs and the namespace come before anything that needs them
    assert resources.index("namespace.yaml") < resources.index("deployment.yaml")


def rules() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for obj in docs("rbac.yaml"):
        if obj["kind"] in ("ClusterRole", "Role"):
            out.extend((obj["kind"], rule) for rule in obj["rules"])
    return out


def test_rbac_has_no_wildcards():
    assert rules()
    for _, rule in rules():
        for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            for value in rule.get(key, []):
                assert "*" not in value, rule


def grants(kind: str = "ClusterRole") -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for k, rule in rules()
        if k == kind
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_rbac_grants_what_the_controllers_need():
    g = grants()
    crud = {"get", "list", "watch", "create", "update", "patch", "delete"}
    for resource in ("nodepools", "nodeclaims"):
        assert {("karpenter.sh", resource, v) for v in crud} <= g
        assert ("karpenter.sh", f"{resource}/status", "patch") in g
    assert {("karpenter.sh", "nodeoverlays", v) for v in ("get", "list", "watch")} <= g
    assert ("karpenter.sh", "nodeoverlays/status", "patch") in g
    assert {("", "nodes", v) for v in crud} <= g
    assert {("", "pods", v) for v in ("get", "list", "watch")} <= g
    assert ("", "pods/eviction", "create") in g
    # Nominations patch pods' status and nothing more of it.
    assert {(grp, res, v) for grp, res, v in g if res == "pods/status"} == {
        ("", "pods/status", "patch")
    }
    assert {("", "events", "create"), ("", "events", "patch")} <= g
    for group, resource in [
        ("apps", "daemonsets"),
        ("policy", "poddisruptionbudgets"),
        ("storage.k8s.io", "storageclasses"),
        ("storage.k8s.io", "csinodes"),
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("", "namespaces"),
    ]:
        assert {(group, resource, v) for v in ("get", "list", "watch")} <= g, resource
    for group, resource in [
        ("karpenter.k8s.aws", "ec2nodeclasses"),
        ("karpenter.kwok.sh", "kwoknodeclasses"),
    ]:
        for r in (resource, f"{resource}/status"):
            assert {(group, r, v) for v in ("get", "list", "watch", "patch", "update")} <= g


def test_rbac_stays_least_privilege():
    g = grants()
    # never cluster-wide lease, secret or RBAC access; pods are never created or patched
    assert not {x for x in g if x[1] in ("leases", "secrets", "configmaps")}
    # CRDs: only the webhook's CA bundle, on the three CRDs that serve v1beta1
    crd_rules = [
        r
        for k, r in rules()
        if k == "ClusterRole" and "customresourcedefinitions" in r["resources"]
    ]
    assert crd_rules == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": [
                "nodepools.karpenter.sh",
                "nodeclaims.karpenter.sh",
                "ec2nodeclasses.karpenter.k8s.aws",
            ],
            "verbs": ["get", "patch"],
        }
    ]
    assert not {x for x in g if x[0] == "rbac.authorization.k8s.io"}
    assert ("", "pods", "create") not in g
    assert ("", "pods", "patch") not in g
    assert ("", "events", "delete") not in g
    # leases and the webhook's Secret: only in the controller's namespace, get/update only on
    # the election lease and the certificate Secret
    role = grants("Role")
    assert role == {
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "secrets", "create"),
        ("", "secrets", "get"),
        ("", "secrets", "update"),
    }
    named = [r for k, r in rules() if k == "Role" and "resourceNames" in r]
    assert named[0]["resourceNames"] == ["karpenter-leader-election"]
    assert set(named[0]["verbs"]) == {"get", "update"}
    assert named[1]["resourceNames"] == ["karpenter-cert"]
    assert set(named[1]["verbs"]) == {"get", "update"}


def test_bindings_point_at_the_service_account():
    sa = one("ServiceAccount")
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = one(kind)
        assert binding["roleRef"]["kind"] == role_kind
        assert binding["roleRef"]["name"] == one(role_kind)["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "karpenter"}
        ]


def container() -> dict[str, Any]:
    (c,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert isinstance(c, dict)
    return c


def test_deployment_shape():
    dep = one("Deployment")
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 2
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert pod["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in pod["tolerations"]
    c = container()
    assert c["image"] == "karpenter-py:latest"
    assert c["command"] == ["karpenter-py", "controller"]
    assert c["resources"]["requests"]["cpu"]
    assert c["resources"]["requests"]["memory"]
    assert c["resources"]["limits"]["memory"]


def test_deployment_probes():
    c = container()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http-metrics": 8080, "http": 8081, "https-webhook": 8443}
    live, ready = c["livenessProbe"], c["readinessProbe"]
    assert live["httpGet"]["path"] == "/healthz"
    assert ready["httpGet"]["path"] == "/readyz"
    assert ports[live["httpGet"]["port"]] == 8081
    assert ports[ready["httpGet"]["port"]] == 8081
    assert live["initialDelaySeconds"] == 30
    assert ready["initialDelaySeconds"] == 5


def test_deployment_runs_non_root_and_locked_down():
    pod = one("Deployment")["spec"]["template"]["spec"]
    psc, csc = pod["securityContext"], container()["securityContext"]
    assert psc["runAsNonRoot"] is True
    assert psc["runAsUser"] == 65532
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert csc["runAsNonRoot"] is True
    assert csc["runAsUser"] == 65532
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["allowPrivilegeEscalation"] is False
    assert csc["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in csc
    assert not pod.get("hostNetwork")


def test_deployment_scheduling_constraints():
    pod = one("Deployment")["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"} in term["matchExpressions"]
    (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["maxSkew"] == 1
    assert spread["whenUnsatisfiable"] == "DoNotSchedule"


def test_deployment_env_uses_upstream_names_and_loads():
    env = container()["env"]
    known = {o.env for o in OPTIONS}
    names = [e["name"] for e in env]
    assert set(names) <= known, set(names) - known
    assert len(names) == len(set(names))
    literal = {e["name"]: e["value"] for e in env if "value" in e}
    settings = load_settings([], literal, namespace_file=Path("/nonexistent"))
    assert settings.metrics_port == 8080
    assert settings.health_probe_port == 8081
    assert settings.leader_election_name == "karpenter-leader-election"
    from_field = {e["name"]: e["valueFrom"] for e in env if "valueFrom" in e}
    assert from_field["LEADER_ELECTION_NAMESPACE"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}
    }


def test_lease_name_in_role_matches_the_setting():
    literal = {e["name"]: e.get("value") for e in container()["env"]}
    named = [r for k, r in rules() if k == "Role" and "resourceNames" in r]
    assert named[0]["resourceNames"] == [literal["LEADER_ELECTION_NAME"]]


def test_service_and_pdb_select_the_pods():
    labels = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    svc, pdb = one("Service"), one("PodDisruptionBudget")
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"},
        {"name": "https-webhook", "port": 8443, "targetPort": "https-webhook", "protocol": "TCP"},
    ]
    # The CRDs' conversion webhook goes through this Service, on the port the controller serves.
    literal = {e["name"]: e.get("value") for e in container()["env"]}
    assert literal["WEBHOOK_PORT"] == "8443"
    assert literal["WEBHOOK_SERVICE_NAME"] == svc["metadata"]["name"]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
