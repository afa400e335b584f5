"""v1beta1 <-> v1 conversion (karpenter_py.model.api.convert): each rule, exact dicts, round trips."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from karpenter_py.model.api import EC2NodeClass, NodeClaim, NodePool, convert, v1beta1
from karpenter_py.model.api.base import format_validation_error
from karpenter_py.model.api.convert import (
    KUBELET_ANNOTATION,
    UBUNTU_ANNOTATION,
    V1_FIELDS_ANNOTATION,
    ConversionError,
    to_v1,
    to_v1beta1,
)

REQS: list[dict[str, Any]] = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]


def beta_pool(disruption: dict[str, Any], **tspec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {"requirements": REQS, **tspec}},
            "disruption": disruption,
        },
    }


def v1_pool(
    disruption: dict[str, Any], annotations: dict[str, str] | None = None, **tspec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "default"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": meta,
        "spec": {
            "template": {"spec": {"requirements": REQS, **tspec}},
            "disruption": disruption,
        },
    }


EC2_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
BETA_REF = {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "default"}

NODEPOOL_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    (
        "old guide: nodeClassRef by name, WhenUnderutilized, expireAfter in disruption",
        beta_pool(
            {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "720h"},
            nodeClassRef={"name": "default"},
        ),
        v1_pool(
            {"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized"},
            nodeClassRef=EC2_REF,
            expireAfter="720h",
        ),
        [
            "apiVersion: karpenter.sh/v1beta1 is now karpenter.sh/v1",
            "spec.disruption.consolidationPolicy: WhenUnderutilized is now WhenEmptyOrUnderutilized",
            "spec.disruption.consolidateAfter: unset, now 0s (required in v1)",
            "spec.template.spec.nodeClassRef: no apiVersion, now group karpenter.k8s.aws, kind EC2NodeClass",
            "spec.disruption.expireAfter: moved to spec.template.spec.expireAfter (720h)",
        ],
    ),
    (
        "WhenEmpty keeps its consolidateAfter; a full reference keeps its group",
        beta_pool(
            {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "30s",
                "budgets": [{"nodes": "5"}],
            },
            nodeClassRef={
                "apiVersion": "karpenter.kwok.sh/v1alpha1",
                "kind": "KWOKNodeClass",
                "name": "k",
            },
        ),
        v1_pool(
            {
                "budgets": [{"nodes": "5"}],
                "consolidateAfter": "30s",
                "consolidationPolicy": "WhenEmpty",
            },
            nodeClassRef={"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "k"},
        ),
        ["apiVersion: karpenter.sh/v1beta1 is now karpenter.sh/v1"],
    ),
    (
        "kubelet goes to the compatibility annotation; WhenUnderutilized may say Never",
        beta_pool(
            {"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": "Never"},
            nodeClassRef=BETA_REF,
            kubelet={"maxPods": 110, "kubeReserved": {"cpu": "100m"}},
        ),
        v1_pool(
            {"consolidateAfter": "Never", "consolidationPolicy": "WhenEmptyOrUnderutilized"},
            {KUBELET_ANNOTATION: '{"kubeReserved":{"cpu":"100m"},"maxPods":110}'},
            nodeClassRef=EC2_REF,
        ),
        [
            "apiVersion: karpenter.sh/v1beta1 is now karpenter.sh/v1",
            "spec.disruption.consolidationPolicy: WhenUnderutilized is now WhenEmptyOrUnderutilized",
            f"spec.template.spec.kubelet: kept in the {KUBELET_ANNOTATION} annotation (v1 sets "
            "kubelet on the EC2NodeClass: move it to its spec.kubelet)",
        ],
    ),
]


def test_what_v1beta1_refuses_still_converts() -> None:
    """Template resources and consolidateAfter with WhenUnderutilized: the v1beta1 schema and
    model refuse them (as upstream's), yet an object a looser CRD once stored still converts."""
    beta = beta_pool(
        {"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": "10m"},
        nodeClassRef=BETA_REF,
        resources={"requests": {"cpu": "1"}},
    )
    out = to_v1(beta)
    assert out.object == v1_pool(
        {"consolidateAfter": "10m", "consolidationPolicy": "WhenEmptyOrUnderutilized"},
        nodeClassRef=EC2_REF,
    )
    assert out.changes[-1] == "spec.template.spec.resources: dropped (v1 templates have none)"
    with pytest.raises(ValidationError) as err:
        v1beta1.NodePool.model_validate(beta)
    assert format_validation_error(err.value) == [
        "spec.template.spec.resources: a NodePool template takes no resources (the scheduler "
        "sets each NodeClaim's requests); remove it",
        "spec.disruption: consolidateAfter cannot be combined with "
        "consolidationPolicy=WhenUnderutilized (got consolidateAfter '10m'; only 'Never' is "
        "allowed with it)",
    ]


@pytest.mark.parametrize(
    ("beta", "v1", "changes"), [c[1:] for c in NODEPOOL_CASES], ids=[c[0] for c in NODEPOOL_CASES]
)
def test_nodepool_to_v1(beta: dict[str, Any], v1: dict[str, Any], changes: list[str]) -> None:
    before = copy.deepcopy(beta)
    out = to_v1(beta)
    assert out.object == v1
    assert list(out.changes) == changes
    assert beta == before  # the argument is not changed
    NodePool.model_validate(out.object)
    v1beta1.NodePool.model_validate(beta)


BACK_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "WhenEmptyOrUnderutilized with 0s reads as WhenUnderutilized without consolidateAfter",
        v1_pool(
            {"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized"},
            nodeClassRef=EC2_REF,
            expireAfter="720h",
        ),
        beta_pool(
            {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "720h"},
            nodeClassRef=BETA_REF,
        ),
    ),
    (
        "the kubelet annotation comes back as kubelet",
        v1_pool(
            {"consolidateAfter": "1m", "consolidationPolicy": "WhenEmpty"},
            {KUBELET_ANNOTATION: '{"maxPods":20}', "team": "a"},
            nodeClassRef=EC2_REF,
        ),
        {
            **beta_pool(
                {"consolidateAfter": "1m", "consolidationPolicy": "WhenEmpty"},
                nodeClassRef=BETA_REF,
                kubelet={"maxPods": 20},
            ),
            "metadata": {"name": "default", "annotations": {"team": "a"}},
        },
    ),
    (
        "Balanced and replicas are v1-only: kept in the v1-fields annotation",
        {
            **v1_pool(
                {"consolidateAfter": "5m", "consolidationPolicy": "Balanced"}, nodeClassRef=EC2_REF
            ),
        },
        {
            # v1beta1 takes no consolidateAfter with WhenUnderutilized: 5m is v1-only too
            **beta_pool({"consolidationPolicy": "WhenUnderutilized"}, nodeClassRef=BETA_REF),
            "metadata": {
                "name": "default",
                "annotations": {
                    V1_FIELDS_ANNOTATION: '[{"path":["spec","disruption","consolidateAfter"],'
                    '"value":"5m"},{"path":["spec","disruption","consolidationPolicy"],'
                    '"value":"Balanced"}]'
                },
            },
        },
    ),
]


@pytest.mark.parametrize(
    ("v1", "beta"), [c[1:] for c in BACK_CASES], ids=[c[0] for c in BACK_CASES]
)
def test_nodepool_to_v1beta1_and_back(v1: dict[str, Any], beta: dict[str, Any]) -> None:
    assert to_v1beta1(v1) == beta
    assert to_v1(beta).object == v1  # v1 -> v1beta1 -> v1 is lossless
    v1beta1.NodePool.model_validate(beta)


def test_v1beta1_round_trip_fills_only_defaults() -> None:
    beta = beta_pool(
        {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "Never"},
        nodeClassRef={"name": "default"},
        kubelet={"maxPods": 42},
    )
    again = to_v1beta1(to_v1(beta).object)
    expected = copy.deepcopy(beta)
    expected["spec"]["template"]["spec"]["nodeClassRef"] = BETA_REF
    assert again == expected


def test_static_pool_replicas_survive_v1beta1() -> None:
    v1 = v1_pool(
        {"consolidateAfter": "0s", "consolidationPolicy": "WhenEmpty"}, nodeClassRef=EC2_REF
    )
    v1["spec"]["replicas"] = 3
    beta: Any = to_v1beta1(v1)
    assert "replicas" not in beta["spec"]
    assert json.loads(beta["metadata"]["annotations"][V1_FIELDS_ANNOTATION]) == [
        {"path": ["spec", "replicas"], "value": 3}
    ]
    assert to_v1(beta).object == v1


def claim(
    api_version: str, spec: dict[str, Any], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": api_version,
        "kind": "NodeClaim",
        "metadata": meta,
        "spec": {"requirements": REQS, **spec},
        "status": {"nodeName": "n1", "providerID": "kwok://n1"},
    }


def test_nodeclaim_conversion() -> None:
    beta = claim(
        "karpenter.sh/v1beta1", {"nodeClassRef": {"name": "default"}, "kubelet": {"maxPods": 8}}
    )
    v1 = claim(
        "karpenter.sh/v1",
        {"nodeClassRef": EC2_REF},
        {KUBELET_ANNOTATION: '{"maxPods":8}'},
    )
    out = to_v1(beta)
    assert out.object == v1
    NodeClaim.model_validate(out.object)
    v1_with_expiry = copy.deepcopy(v1)
    v1_with_expiry["spec"]["expireAfter"] = "24h"
    back = to_v1beta1(v1_with_expiry)
    assert back == {
        **claim(
            "karpenter.sh/v1beta1",
            {"nodeClassRef": BETA_REF, "kubelet": {"maxPods": 8}},
            {V1_FIELDS_ANNOTATION: '[{"path":["spec","expireAfter"],"value":"24h"}]'},
        )
    }
    v1beta1.NodeClaim.model_validate(back)
    assert to_v1(back).object == v1_with_expiry


def nodeclass(
    api_version: str, annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "default"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": api_version,
        "kind": "EC2NodeClass",
        "metadata": meta,
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            **spec,
        },
    }


B = "karpenter.k8s.aws/v1beta1"
V = "karpenter.k8s.aws/v1"
EC2_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    (
        "no amiSelectorTerms: the family's latest alias",
        nodeclass(B, amiFamily="AL2023"),
        nodeclass(V, amiSelectorTerms=[{"alias": "al2023@latest"}]),
        [
            "apiVersion: karpenter.k8s.aws/v1beta1 is now karpenter.k8s.aws/v1",
            "spec.amiSelectorTerms: none, now [{alias: al2023@latest}] (amiFamily AL2023 is "
            "implied by the alias)",
        ],
    ),
    (
        "terms and family are kept",
        nodeclass(B, amiFamily="Bottlerocket", amiSelectorTerms=[{"id": "ami-123"}]),
        nodeclass(V, amiFamily="Bottlerocket", amiSelectorTerms=[{"id": "ami-123"}]),
        ["apiVersion: karpenter.k8s.aws/v1beta1 is now karpenter.k8s.aws/v1"],
    ),
    (
        "Ubuntu becomes AL2 with Ubuntu's root device",
        nodeclass(B, amiFamily="Ubuntu", amiSelectorTerms=[{"name": "ubuntu-eks/*"}]),
        nodeclass(
            V,
            {UBUNTU_ANNOTATION: "amiFamily,blockDeviceMappings"},
            amiFamily="AL2",
            amiSelectorTerms=[{"name": "ubuntu-eks/*"}],
            blockDeviceMappings=[
                {
                    "deviceName": "/dev/sda1",
                    "rootVolume": True,
                    "ebs": {"encrypted": True, "volumeSize": "20Gi", "volumeType": "gp3"},
                }
            ],
        ),
        [
            "apiVersion: karpenter.k8s.aws/v1beta1 is now karpenter.k8s.aws/v1",
            "spec.amiFamily: Ubuntu is not a v1 family, now AL2 with Ubuntu's root device "
            f"(noted in the {UBUNTU_ANNOTATION} annotation)",
        ],
    ),
    (
        "Ubuntu without AMI terms: a placeholder term, marked incompatible",
        nodeclass(B, amiFamily="Ubuntu", blockDeviceMappings=[{"deviceName": "/dev/xvda"}]),
        nodeclass(
            V,
            {UBUNTU_ANNOTATION: "amiFamily,incompatible"},
            amiFamily="AL2",
            blockDeviceMappings=[{"deviceName": "/dev/xvda"}],
            amiSelectorTerms=[{"id": "ami-placeholder"}],
        ),
        [
            "apiVersion: karpenter.k8s.aws/v1beta1 is now karpenter.k8s.aws/v1",
            "spec.amiFamily: Ubuntu is not a v1 family, now AL2 with Ubuntu's root device "
            f"(noted in the {UBUNTU_ANNOTATION} annotation)",
            "spec.amiSelectorTerms: none, and v1 has no Ubuntu alias: now "
            "[{id: ami-placeholder}]; the class launches nothing until its amiSelectorTerms "
            "select Ubuntu AMIs",
        ],
    ),
]


@pytest.mark.parametrize(
    ("beta", "v1", "changes"), [c[1:] for c in EC2_CASES], ids=[c[0] for c in EC2_CASES]
)
def test_ec2nodeclass_round_trip(
    beta: dict[str, Any], v1: dict[str, Any], changes: list[str]
) -> None:
    out = to_v1(beta)
    assert out.object == v1
    assert list(out.changes) == changes
    EC2NodeClass.model_validate(out.object)
    v1beta1.EC2NodeClass.model_validate(beta)
    assert to_v1beta1(out.object) == beta
    assert to_v1(to_v1beta1(v1)).object == v1


def test_ec2nodeclass_v1_only_fields_survive_v1beta1() -> None:
    v1 = nodeclass(
        V,
        amiSelectorTerms=[{"alias": "al2023@v20240807"}],
        kubelet={"maxPods": 5},
        ipPrefixCount=1,
    )
    beta = to_v1beta1(v1)
    assert beta == nodeclass(
        B,
        {
            V1_FIELDS_ANNOTATION: '[{"path":["spec","amiSelectorTerms"],"value":[{"alias":"al2023@v20240807"}]},'
            '{"path":["spec","ipPrefixCount"],"value":1},'
            '{"path":["spec","kubelet"],"value":{"maxPods":5}}]'
        },
        amiFamily="AL2023",
    )
    v1beta1.EC2NodeClass.model_validate(beta)
    assert to_v1(beta).object == v1


@pytest.mark.parametrize(
    ("obj", "target", "message"),
    [
        ({"apiVersion": "v1", "kind": "Pod"}, V, "no conversion for Pod v1"),
        (
            nodeclass("karpenter.k8s.aws/v2"),
            V,
            "EC2NodeClass has no version 'karpenter.k8s.aws/v2'",
        ),
        (
            nodeclass(V),
            "karpenter.k8s.aws/v9",
            "cannot convert EC2NodeClass to 'karpenter.k8s.aws/v9'",
        ),
        (
            v1_pool({}, {KUBELET_ANNOTATION: "{oops"}, nodeClassRef=EC2_REF),
            "karpenter.sh/v1beta1",
            f"annotation {KUBELET_ANNOTATION} is not valid JSON",
        ),
    ],
)
def test_conversion_errors(obj: dict[str, Any], target: str, message: str) -> None:
    with pytest.raises(ConversionError, match=message.replace("[", r"\[").replace("(", r"\(")):
        convert.convert(obj, target)


def test_convert_same_version_is_a_copy() -> None:
    v1 = nodeclass(V, amiSelectorTerms=[{"alias": "al2@latest"}])
    out = convert.convert(v1, V)
    assert out == v1
    assert out is not v1
