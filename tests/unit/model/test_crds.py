"""The generated CustomResourceDefinitions: up to date on disk, structural, and carrying
upstream's names, defaults, subresources, columns and CEL rules."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.cli.crds import render_crds, run_crds
from karpenter_py.model.api.crds import KINDS, build_crds
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from tests.unit.model._manifests import load

REPO = Path(__file__).resolve().parents[3]
CRD_DIR = REPO / "manifests" / "crds"
FILES = {
    "karpenter.sh_nodepools.yaml",
    "karpenter.sh_nodeclaims.yaml",
    "karpenter.k8s.aws_ec2nodeclasses.yaml",
    "karpenter.kwok.sh_kwoknodeclasses.yaml",
    "karpenter.sh_nodeoverlays.yaml",
}


def test_crds_up_to_date():
    """Regenerate with `karpenter-py crds` when this fails."""
    rendered = render_crds()
    assert set(rendered) == FILES
    on_disk = {p.name for p in CRD_DIR.glob("*.yaml")}
    assert on_disk == FILES, f"stale or missing files in {CRD_DIR}"
    for name, text in rendered.items():
        assert (CRD_DIR / name).read_text(encoding="utf-8") == text, (
            f"{name} differs from the models; run `karpenter-py crds`"
        )


def test_rendering_is_deterministic_and_parses_back(tmp_path):
    first = render_crds()
    assert render_crds() == first
    assert run_crds(tmp_path) == 0
    for name, text in first.items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text
        assert yaml.safe_load(text) == build_crds()[name]


@functools.cache
def _built() -> dict[str, dict[str, Any]]:
    return build_crds()


def _crd(filename: str) -> dict[str, Any]:
    return _built()[filename]


def _root(filename: str) -> dict[str, Any]:
    root: dict[str, Any] = _crd(filename)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return root


def _roots(filename: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(version name, schema) of every version the CRD serves."""
    for version in _crd(filename)["spec"]["versions"]:
        yield version["name"], version["schema"]["openAPIV3Schema"]


def _walk_all(filename: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for version, root in _roots(filename):
        for path, node in _walk(root):
            yield f"{version}:{path or '<root>'}", node


def _walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}.*")


def _at(filename: str, path: str) -> dict[str, Any]:
    node = _root(filename)
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


ALL = sorted(FILES)
_FORBIDDEN_KEYS = {"$ref", "$defs", "definitions", "title", "oneOf", "allOf", "not", "const"}


@pytest.mark.parametrize("filename", ALL)
def test_schema_is_structural(filename):
    for path, node in _walk_all(filename):
        where = f"{filename}:{path}"
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        assert "type" in node or int_or_string, f"{where} has no type"
        assert not (_FORBIDDEN_KEYS & node.keys()), f"{where} has {_FORBIDDEN_KEYS & node.keys()}"
        if "anyOf" in node:
            assert int_or_string, f"{where}: anyOf outside int-or-string"
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}]
            assert "type" not in node
        assert node.get("type") != "null"
        assert not ("properties" in node and "additionalProperties" in node), where
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), f"{where}: array without items"
        if "additionalProperties" in node:
            assert node["type"] == "object"
            assert isinstance(node["additionalProperties"], dict)
        for required in node.get("required", []):
            assert required in node.get("properties", {}), f"{where}: required {required} unknown"
        if "pattern" in node:
            re.compile(node["pattern"])  # also a cheap check the RE2 subset is used
        if "enum" in node:
            assert len(set(map(str, node["enum"]))) == len(node["enum"])


@pytest.mark.parametrize("filename", ALL)
def test_metadata_is_left_to_the_server(filename):
    root = _root(filename)
    assert root["properties"]["metadata"] == {"type": "object"}
    assert root["properties"]["apiVersion"]["type"] == "string"
    assert root["properties"]["kind"]["type"] == "string"
    assert root["type"] == "object"


@pytest.mark.parametrize("filename", ALL)
def test_cel_rules_are_well_formed_and_bounded(filename):
    """Every rule has a message; rules that iterate a list or map sit on a bounded node (the
    API server estimates CEL cost from maxItems/maxProperties/maxLength)."""
    count = 0
    for path, node in _walk_all(filename):
        for rule in node.get("x-kubernetes-validations", []):
            count += 1
            assert set(rule) == {"rule", "message"}, f"{path}: {rule}"
            assert rule["rule"].strip()
            assert rule["message"].strip()
            assert rule["rule"].count("(") == rule["rule"].count(")"), rule["rule"]
            iterates = re.search(r"self\.(all|exists|exists_one|filter|map)\(", rule["rule"])
            if iterates and node["type"] == "array":
                assert "maxItems" in node, f"{path} iterates an unbounded list: {rule['rule']}"
    assert count > 0


def _rules(filename: str, path: str) -> list[str]:
    return [r["rule"] for r in _at(filename, path).get("x-kubernetes-validations", [])]


NP = "karpenter.sh_nodepools.yaml"
NC = "karpenter.sh_nodeclaims.yaml"
EC2 = "karpenter.k8s.aws_ec2nodeclasses.yaml"
KWOK = "karpenter.kwok.sh_kwoknodeclasses.yaml"
NO = "karpenter.sh_nodeoverlays.yaml"


@pytest.mark.parametrize(
    ("filename", "path", "rule_fragment"),
    [
        (NC, "spec", "self == oldSelf"),
        (NP, "spec.template.spec.requirements", "x.values.size() != 0"),
        (NP, "spec.template.spec.requirements", "int(x.values[0]) >= 0"),
        (NP, "spec.template.spec.requirements", "x.operator == 'Gte'"),
        (NP, "spec.template.spec.requirements", "x.values.size() >= x.minValues"),
        (NP, "spec.template.spec.requirements", "x.key != 'karpenter.sh/nodepool'"),
        (NC, "spec.requirements", "int(x.values[0]) >= 0"),
        (NP, "spec.template.spec.requirements.[].key", 'self != "kubernetes.io/hostname"'),
        (NP, "spec.template.spec.requirements.[].key", '"karpenter.sh/capacity-type"'),
        (
            NP,
            "spec.template.spec.requirements.[].key",
            '!self.find("^([^/]+)").endsWith("karpenter.sh")',
        ),
        (NC, "spec.requirements.[].key", '!self.find("^([^/]+)").endsWith("karpenter.k8s.aws")'),
        (NP, "spec.template.metadata.labels", '!x.find("^([^/]+)").endsWith("karpenter.sh")'),
        (NP, "spec.template.spec.requirements.[].key", '"karpenter.k8s.aws/instance-family"'),
        (NP, "spec.template.metadata.labels", 'self.all(x, x != "karpenter.sh/nodepool")'),
        (NP, "spec.template.metadata.labels", 'self.all(x, x != "kubernetes.io/hostname")'),
        (NP, "spec.template.spec.nodeClassRef", "self.group == oldSelf.group"),
        (NP, "spec.template.spec.nodeClassRef", "self.kind == oldSelf.kind"),
        (NP, "spec.disruption.budgets", "has(x.schedule) == has(x.duration)"),
        (NP, "spec", "has(self.replicas) == has(oldSelf.replicas)"),
        (NP, "spec", "!has(self.replicas) || !has(self.weight)"),
        (EC2, "spec", "(has(self.role) && !has(self.instanceProfile))"),
        (EC2, "spec", "has(oldSelf.role)"),
        (EC2, "spec", "has(self.amiFamily)"),
        (EC2, "spec.amiSelectorTerms", "self.size() != 1"),
        (EC2, "spec.amiSelectorTerms.[].alias", "self.matches('^[a-zA-Z0-9]+@.+$')"),
        (EC2, "spec.subnetSelectorTerms", "has(x.tags) || has(x.id)"),
        (EC2, "spec.blockDeviceMappings", "x.rootVolume == true"),
        (EC2, "spec.blockDeviceMappings.[].ebs", "has(self.snapshotID) || has(self.volumeSize)"),
        (EC2, "spec.tags", "!k.startsWith('kubernetes.io/cluster/')"),
        (EC2, "spec.placementGroupSelector", "has(self.name) != has(self.id)"),
        (KWOK, "spec.reservedResources", "!self[x].startsWith('-')"),
    ],
)
def test_upstream_cel_rules_present(filename, path, rule_fragment):
    rules = _rules(filename, path)
    assert any(rule_fragment in r for r in rules), rules


# Upstream dropped its kubernetes.io / k8s.io domain rules; no CRD may still carry one.
@pytest.mark.parametrize("filename", [NP, NC])
def test_no_rule_restricts_the_kubernetes_domains(filename):
    messages = [
        rule["message"]
        for _, node in _walk(_root(filename))
        for rule in node.get("x-kubernetes-validations", [])
        if "restricted" in rule["message"]
    ]
    assert sorted(set(messages)) == sorted(
        {
            'label domain "karpenter.sh" is restricted',
            'label domain "karpenter.k8s.aws" is restricted',
            'label "kubernetes.io/hostname" is restricted',
            *(['label "karpenter.sh/nodepool" is restricted'] if filename == NP else []),
        }
    )


# NodeClaim keys may be karpenter.sh/nodepool (NodeClaims carry it); NodePool ones may not.
def test_nodeclaim_requirements_allow_the_nodepool_key():
    rules = _rules(NC, "spec.requirements") + _rules(NC, "spec.requirements.[].key")
    assert not any(
        "!= 'karpenter.sh/nodepool'" in r or '!= "karpenter.sh/nodepool"' in r for r in rules
    )


@pytest.mark.parametrize(
    ("filename", "path", "expected"),
    [
        (NP, "spec.template.spec.expireAfter", "720h"),
        (NC, "spec.expireAfter", "720h"),
        (NP, "spec.disruption", {"consolidateAfter": "0s"}),
        (NP, "spec.disruption.consolidationPolicy", "WhenEmptyOrUnderutilized"),
        (NP, "spec.disruption.budgets", [{"nodes": "10%"}]),
        (NP, "spec.disruption.budgets.[].nodes", "10%"),
        (
            EC2,
            "spec.metadataOptions",
            {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
        ),
    ],
)
def test_crd_defaults(filename, path, expected):
    assert _at(filename, path)["default"] == expected


def test_crd_defaults_match_the_python_defaults():
    """The API server and the models must fill in the same values."""
    np = NodePool.model_validate(
        {
            "spec": {
                "template": {
                    "spec": {
                        "requirements": [],
                        "nodeClassRef": {"group": "g", "kind": "K", "name": "n"},
                    }
                }
            }
        }
    ).model_dump(by_alias=True)
    assert (
        np["spec"]["template"]["spec"]["expireAfter"]
        == _at(NP, "spec.template.spec.expireAfter")["default"]
    )
    disruption = np["spec"]["disruption"]
    for key in ("consolidateAfter",):
        assert disruption[key] == _at(NP, "spec.disruption")["default"][key]
    assert (
        disruption["consolidationPolicy"]
        == _at(NP, "spec.disruption.consolidationPolicy")["default"]
    )
    assert disruption["budgets"] == _at(NP, "spec.disruption.budgets")["default"]
    ec2 = EC2NodeClass.model_validate(load("ec2nodeclass_default.yaml")).model_dump(by_alias=True)
    assert ec2["spec"]["metadataOptions"] == _at(EC2, "spec.metadataOptions")["default"]
    kwok = KWOKNodeClass.model_validate({"metadata": {"name": "x"}}).model_dump(by_alias=True)
    assert kwok["status"] == _root(KWOK)["properties"]["status"]["default"]
    claim = NodeClaim.model_validate(
        {"spec": {"requirements": [], "nodeClassRef": {"group": "g", "kind": "K", "name": "n"}}}
    ).model_dump(by_alias=True)
    assert claim["spec"]["expireAfter"] == _at(NC, "spec.expireAfter")["default"]


@pytest.mark.parametrize(
    ("filename", "path", "required"),
    [
        (NP, "", ["spec"]),
        (NP, "spec", ["template"]),
        (NP, "spec.template", ["spec"]),
        (NP, "spec.template.spec", ["nodeClassRef", "requirements"]),
        (NP, "spec.template.spec.nodeClassRef", ["group", "kind", "name"]),
        (NP, "spec.disruption", ["consolidateAfter"]),
        (NP, "spec.disruption.budgets.[]", ["nodes"]),
        (NP, "spec.template.spec.requirements.[]", ["key", "operator"]),
        (NP, "spec.template.spec.taints.[]", ["effect", "key"]),
        (NP, "status.conditions.[]", ["lastTransitionTime", "message", "reason", "status", "type"]),
        (NC, "", ["spec"]),
        (NC, "spec", ["nodeClassRef", "requirements"]),
        (EC2, "spec", ["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"]),
        (EC2, "status.subnets.[]", ["id", "zone"]),
        (EC2, "status.amis.[]", ["id", "requirements"]),
    ],
)
def test_required_fields(filename, path, required):
    node = _at(filename, path) if path else _root(filename)
    assert node["required"] == required


@pytest.mark.parametrize(
    ("filename", "path", "key", "value"),
    [
        (NP, "spec.template.spec.requirements", "maxItems", 100),
        (NP, "spec.template.spec.requirements.[].key", "maxLength", 316),
        (NP, "spec.template.spec.requirements.[].minValues", "maximum", 50),
        (NP, "spec.template.spec.requirements.[].minValues", "minimum", 1),
        (NP, "spec.template.metadata.labels", "maxProperties", 100),
        (NP, "spec.disruption.budgets", "maxItems", 50),
        (NP, "spec.weight", "maximum", 100),
        (NP, "spec.weight", "minimum", 1),
        (NP, "spec.replicas", "minimum", 0),
        (NP, "spec.template.spec.expireAfter", "pattern", r"^(([0-9]+(s|m|h))+|Never)$"),
        (NP, "spec.template.spec.terminationGracePeriod", "pattern", r"^([0-9]+(s|m|h))+$"),
        (NP, "spec.disruption.consolidateAfter", "pattern", r"^(([0-9]+(s|m|h))+|Never)$"),
        (NP, "spec.disruption.budgets.[].nodes", "pattern", r"^((100|[0-9]{1,2})%|[0-9]+)$"),
        (
            NP,
            "spec.disruption.budgets.[].duration",
            "pattern",
            r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$",
        ),
        (
            NP,
            "spec.disruption.consolidationPolicy",
            "enum",
            ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"],
        ),
        (
            NP,
            "spec.disruption.budgets.[].reasons.[]",
            "enum",
            ["Underutilized", "Empty", "Drifted"],
        ),
        (
            NP,
            "spec.template.spec.taints.[].effect",
            "enum",
            ["NoSchedule", "PreferNoSchedule", "NoExecute"],
        ),
        (
            NP,
            "spec.template.spec.requirements.[].operator",
            "enum",
            ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"],
        ),
        (NP, "spec.template.spec.requirements.[].values", "x-kubernetes-list-type", "atomic"),
        (EC2, "spec.kubelet", "x-kubernetes-preserve-unknown-fields", True),
        (EC2, "spec.subnetSelectorTerms", "maxItems", 30),
        (EC2, "spec.subnetSelectorTerms", "minItems", 1),
        (EC2, "spec.amiSelectorTerms.[].alias", "maxLength", 30),
        (
            EC2,
            "spec.amiFamily",
            "enum",
            [
                "AL2",
                "AL2023",
                "Bottlerocket",
                "Custom",
                "Windows2019",
                "Windows2022",
                "Windows2025",
            ],
        ),
        (EC2, "spec.blockDeviceMappings", "maxItems", 50),
        (EC2, "spec.networkInterfaces", "maxItems", 150),
        (EC2, "spec.instanceStorePolicy", "enum", ["RAID0"]),
        (KWOK, "spec.nodeRegistrationDelay", "pattern", r"^([0-9]+(s|m|h))+$"),
    ],
)
def test_schema_constraints(filename, path, key, value):
    assert _at(filename, path)[key] == value


def test_quantities_are_int_or_string():
    for filename, path in [
        (NP, "spec.limits"),
        (NP, "status.resources"),
        (NC, "spec.resources.requests"),
        (NC, "status.capacity"),
        (NC, "status.allocatable"),
    ]:
        value = _at(filename, path)["additionalProperties"]
        assert value["x-kubernetes-int-or-string"] is True
        assert "pattern" in value


@pytest.mark.parametrize(
    ("filename", "kind", "plural", "short_names", "group", "version"),
    [
        (NP, "NodePool", "nodepools", None, "karpenter.sh", "v1"),
        (NC, "NodeClaim", "nodeclaims", None, "karpenter.sh", "v1"),
        (EC2, "EC2NodeClass", "ec2nodeclasses", ["ec2nc", "ec2ncs"], "karpenter.k8s.aws", "v1"),
        (
            KWOK,
            "KWOKNodeClass",
            "kwoknodeclasses",
            ["kwoknc", "kwokncs"],
            "karpenter.kwok.sh",
            "v1alpha1",
        ),
        (NO, "NodeOverlay", "nodeoverlays", ["overlays"], "karpenter.sh", "v1alpha1"),
    ],
)
def test_names_scope_and_version(filename, kind, plural, short_names, group, version):
    crd = _crd(filename)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    spec = crd["spec"]
    assert spec["group"] == group
    assert spec["scope"] == "Cluster"
    names = spec["names"]
    assert names["kind"] == kind
    assert names["listKind"] == f"{kind}List"
    assert names["plural"] == plural
    assert names["singular"] == kind.lower()
    assert names.get("shortNames") == short_names
    assert names["categories"] == ["karpenter"]
    v, *older = spec["versions"]
    assert (v["name"], v["served"], v["storage"]) == (version, True, True)
    assert v["subresources"]["status"] == {}
    if kind in ("KWOKNodeClass", "NodeOverlay"):  # no older version to convert from
        assert older == []
        assert "conversion" not in spec
    else:  # v1beta1 is served too, converted by the controller's webhook
        assert [(o["name"], o["served"], o["storage"]) for o in older] == [("v1beta1", True, False)]
        assert spec["conversion"] == {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {
                    "service": {
                        "name": "karpenter",
                        "namespace": "karpenter",
                        "path": "/convert",
                        "port": 8443,
                    }
                },
                "conversionReviewVersions": ["v1"],
            },
        }


def test_nodepool_scale_subresource():
    subresources = _crd(NP)["spec"]["versions"][0]["subresources"]
    assert subresources["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.nodes",
    }
    assert "scale" not in _crd(NC)["spec"]["versions"][0]["subresources"]


def _columns(filename: str) -> list[tuple[str, str, int]]:
    version = _crd(filename)["spec"]["versions"][0]
    return [
        (c["name"], c["jsonPath"], c.get("priority", 0))
        for c in version.get("additionalPrinterColumns", [])
    ]


def test_printer_columns():
    assert [(n, p) for n, _, p in _columns(NP)] == [
        ("NodeClass", 0),
        ("Nodes", 0),
        ("Ready", 0),
        ("Age", 0),
        ("Weight", 1),
        ("CPU", 1),
        ("Memory", 1),
    ]
    assert [(n, p) for n, _, p in _columns(NC)] == [
        ("Type", 0),
        ("Capacity", 0),
        ("Zone", 0),
        ("Node", 0),
        ("Ready", 0),
        ("Age", 0),
        ("ImageID", 1),
        ("ID", 1),
        ("NodePool", 1),
        ("NodeClass", 1),
        ("Drifted", 1),
    ]
    assert ("Type", ".metadata.labels.node\\.kubernetes\\.io/instance-type", 0) in _columns(NC)
    assert ("Ready", '.status.conditions[?(@.type=="Ready")].status', 0) in _columns(EC2)
    assert ("Role", ".spec.role", 1) in _columns(EC2)


def test_every_kind_is_generated():
    assert {k.filename for k in KINDS} == FILES


def _v1beta1_rules(filename: str, path: str) -> list[str]:
    node = dict(_roots(filename))["v1beta1"]
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return [r["rule"] for r in node.get("x-kubernetes-validations", [])]


# The API server checks a v1beta1 request against the v1beta1 schema only: it must carry
# upstream's v1beta1 rules itself.
@pytest.mark.parametrize(
    ("filename", "path", "rule_fragment"),
    [
        (NP, "spec.disruption", "self.consolidationPolicy != 'WhenUnderutilized'"),
        (NP, "spec.disruption", "self.consolidationPolicy != 'WhenEmpty'"),
        (NP, "spec.disruption.budgets", "has(x.schedule) == has(x.duration)"),
        (NP, "spec.template.spec.requirements", "x.key != 'karpenter.sh/nodepool'"),
        (NP, "spec.template.spec.kubelet", "self.imageGCHighThresholdPercent >"),
        (NP, "spec.template.spec.kubelet", "x in self.evictionSoftGracePeriod"),
        (NP, "spec.template.spec.kubelet", "x in self.evictionSoft)"),
        (NP, "spec.template.spec.kubelet.evictionHard", "'memory.available'"),
        (
            NP,
            "spec.template.spec.kubelet.kubeReserved",
            "type(self[x]) == string ? !self[x].startsWith('-') : self[x] >= 0",
        ),
        (NC, "spec.kubelet.systemReserved", "x=='ephemeral-storage'"),
        (NC, "spec.requirements", "int(x.values[0]) >= 0"),
        (EC2, "spec", "(has(self.role) && !has(self.instanceProfile))"),
        (EC2, "spec", "has(oldSelf.role)"),
        (EC2, "spec", "self.amiFamily != 'Custom'"),
        (EC2, "spec.role", "self == oldSelf"),
        (EC2, "spec.instanceProfile", "self != ''"),
        (EC2, "spec.subnetSelectorTerms", "has(x.tags) || has(x.id)"),
        (EC2, "spec.securityGroupSelectorTerms", "has(x.name) && (has(x.tags) || has(x.id))"),
        (EC2, "spec.amiSelectorTerms", "has(x.id) && (has(x.tags) || has(x.name) || has(x.owner))"),
        (EC2, "spec.tags", "!k.startsWith('kubernetes.io/cluster/')"),
        (EC2, "spec.tags", "k != 'karpenter.sh/nodeclaim'"),
        (EC2, "spec.blockDeviceMappings", "x.rootVolume == true"),
    ],
)
def test_v1beta1_carries_upstreams_v1beta1_rules(filename, path, rule_fragment):
    rules = _v1beta1_rules(filename, path)
    assert any(rule_fragment in r for r in rules), rules


def test_v1beta1_template_takes_no_resources_and_class_no_kubelet():
    np_beta = dict(_roots(NP))["v1beta1"]
    tspec = np_beta["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
    assert tspec["properties"]["resources"]["maxProperties"] == 0
    ec2_beta = dict(_roots(EC2))["v1beta1"]
    assert "kubelet" not in ec2_beta["properties"]["spec"]["properties"]
    assert ec2_beta["properties"]["spec"]["required"] == [
        "amiFamily",
        "securityGroupSelectorTerms",
        "subnetSelectorTerms",
    ]
