"""The v1beta1 models reject what upstream's last v1beta1 CRDs (v0.37) rejected: each rule once
with the exact errors a user sees, and its close-but-valid neighbour accepted.

The CRDs carry the same rules as CEL (tests/cluster/test_v1beta1.py sends some of these to an
API server); ``karpenter-py plan`` reports these messages for v1beta1 documents."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from karpenter_py.model.api import v1beta1
from karpenter_py.model.api.base import format_validation_error
from tests.unit.model._manifests import DELETE, edit

NP = "NodePool"
NC = "NodeClaim"
EC2 = "EC2NodeClass"

BASE: dict[str, dict[str, Any]] = {
    NP: {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                    ],
                    "nodeClassRef": {"name": "default"},
                }
            },
            "disruption": {"consolidationPolicy": "WhenUnderutilized"},
        },
    },
    NC: {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde"},
        "spec": {
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            "nodeClassRef": {"name": "default"},
        },
    },
    EC2: {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "amiFamily": "AL2",
            "role": "KarpenterNodeRole-demo",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    },
}
MODELS: dict[str, type[BaseModel]] = {
    NP: v1beta1.NodePool,
    NC: v1beta1.NodeClaim,
    EC2: v1beta1.EC2NodeClass,
}

TSPEC = "spec.template.spec"
KUBELET = f"{TSPEC}.kubelet"
DIS = "spec.disruption"
SIGNALS = (
    "['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', "
    "'imagefs.inodesFree', 'pid.available']"
)
RESERVED_KEYS = "['cpu', 'memory', 'ephemeral-storage', 'pid']"
RESTRICTED_TAGS = (
    "Karpenter sets ['eks:eks-cluster-name', 'karpenter.sh/nodepool', 'karpenter.sh/nodeclaim', "
    "'karpenter.k8s.aws/ec2nodeclass'] and kubernetes.io/cluster/* itself"
)


def errors_of(kind: str, edits: dict[str, object]) -> list[str]:
    manifest = BASE[kind]
    for path, value in edits.items():
        manifest = edit(manifest, path, value)
    try:
        MODELS[kind].model_validate(manifest)
    except ValidationError as err:
        return format_validation_error(err)
    return []


def test_the_base_manifests_are_valid() -> None:
    for kind in BASE:
        assert errors_of(kind, {}) == []


# (kind, {path: new value}, the exact errors)
INVALID: list[tuple[str, dict[str, object], list[str]]] = [
    # --- NodePool disruption
    (
        NP,
        {f"{DIS}.consolidateAfter": "30s"},
        [
            f"{DIS}: consolidateAfter cannot be combined with consolidationPolicy=WhenUnderutilized "
            "(got consolidateAfter '30s'; only 'Never' is allowed with it)"
        ],
    ),
    (
        NP,
        {f"{DIS}.consolidationPolicy": "WhenEmpty"},
        [f"{DIS}: consolidateAfter must be specified with consolidationPolicy=WhenEmpty"],
    ),
    (
        NP,
        {f"{DIS}.consolidationPolicy": "WhenEmptyOrUnderutilized"},
        [f"{DIS}.consolidationPolicy: Input should be 'WhenEmpty' or 'WhenUnderutilized'"],
    ),
    (
        NP,
        {f"{DIS}.expireAfter": "30d"},
        [f"{DIS}.expireAfter: '30d' is not a duration such as '30s', '10m', '720h' or 'Never'"],
    ),
    (
        NP,
        {f"{DIS}.budgets": [{"nodes": "1", "schedule": "@daily"}]},
        [f"{DIS}.budgets[0].duration: 'schedule' must be set with 'duration': set both or neither"],
    ),
    (
        NP,
        {f"{DIS}.budgets": [{"nodes": "101%"}]},
        [f"{DIS}.budgets[0].nodes: '101%' is not a node count or percentage such as '5' or '10%'"],
    ),
    # --- NodePool template
    (
        NP,
        {f"{TSPEC}.requirements[0]": {"key": "karpenter.sh/nodepool", "operator": "Exists"}},
        [
            f'{TSPEC}.requirements: requirements[0]: label "karpenter.sh/nodepool" is restricted: '
            "Karpenter sets it to the NodePool name"
        ],
    ),
    (
        NP,
        {f"{TSPEC}.resources": {"requests": {"cpu": "1"}}},
        [
            f"{TSPEC}.resources: a NodePool template takes no resources (the scheduler sets each "
            "NodeClaim's requests); remove it"
        ],
    ),
    (
        NP,
        {'spec.template.metadata.labels["karpenter.sh/nodepool"]': "x"},
        [
            'spec.template.metadata.labels: label "karpenter.sh/nodepool" is restricted: '
            "Karpenter sets it to the NodePool name"
        ],
    ),
    (
        NP,
        {f"{TSPEC}.taints": [{"key": "a", "effect": "NoSchedule"}] * 2},
        [
            f"{TSPEC}: duplicate taint a:NoSchedule in taints[0] and taints[1]; each key+effect "
            "pair may appear once across taints and startupTaints"
        ],
    ),
    (
        NP,
        {f"{TSPEC}.startupTaints": [{"key": "a", "effect": "Sometimes"}]},
        [
            f"{TSPEC}.startupTaints[0].effect: Input should be 'NoSchedule', 'PreferNoSchedule' "
            "or 'NoExecute'"
        ],
    ),
    (
        NP,
        {f"{TSPEC}.nodeClassRef": {"kind": "EC2NodeClass"}},
        [f"{TSPEC}.nodeClassRef.name: Field required"],
    ),
    # --- kubelet (NodePool template and NodeClaim alike)
    (
        NP,
        {KUBELET: {"evictionHard": {"memory.free": "5%"}}},
        [
            f"{KUBELET}.evictionHard: 'memory.free' is not a valid key for evictionHard; valid "
            f"keys are {SIGNALS}"
        ],
    ),
    (
        NP,
        {KUBELET: {"evictionHard": {"memory.available": "101%"}}},
        [
            f"{KUBELET}.evictionHard.memory.available: '101%' is not a percentage such as '10%' "
            "or a quantity such as '500Mi'"
        ],
    ),
    (
        NP,
        {KUBELET: {"evictionSoft": {"memory.available": "500Mi"}}},
        [f"{KUBELET}: evictionSoft ['memory.available'] has no matching evictionSoftGracePeriod"],
    ),
    (
        NP,
        {KUBELET: {"evictionSoftGracePeriod": {"memory.available": "1m"}}},
        [f"{KUBELET}: evictionSoftGracePeriod ['memory.available'] has no matching evictionSoft"],
    ),
    (
        NP,
        {KUBELET: {"evictionSoftGracePeriod": {"memory.free": "1m"}}},
        [
            f"{KUBELET}.evictionSoftGracePeriod: 'memory.free' is not a valid key for "
            f"evictionSoftGracePeriod; valid keys are {SIGNALS}"
        ],
    ),
    (
        NP,
        {KUBELET: {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 50}},
        [
            f"{KUBELET}: imageGCHighThresholdPercent must be greater than "
            "imageGCLowThresholdPercent (got 50 and 50)"
        ],
    ),
    (
        NP,
        {KUBELET: {"imageGCHighThresholdPercent": 101}},
        [f"{KUBELET}.imageGCHighThresholdPercent: Input should be less than or equal to 100"],
    ),
    (
        NP,
        {KUBELET: {"kubeReserved": {"gpu": "1"}}},
        [
            f"{KUBELET}.kubeReserved: 'gpu' is not a valid key for kubeReserved; valid keys are "
            f"{RESERVED_KEYS}"
        ],
    ),
    (
        NP,
        {KUBELET: {"systemReserved": {"memory": "-1Gi"}}},
        [f"{KUBELET}.systemReserved: systemReserved['memory'] cannot be a negative quantity"],
    ),
    (
        NP,
        {KUBELET: {"kubeReserved": {"cpu": -1}}},
        [f"{KUBELET}.kubeReserved: kubeReserved['cpu'] cannot be a negative quantity"],
    ),
    (
        NP,
        {KUBELET: {"systemReserved": {"memory": "lots"}}},
        [
            f"{KUBELET}.systemReserved.memory: 'lots' is not a Kubernetes quantity (for example "
            "16, '500m', '64Gi')"
        ],
    ),
    (
        NP,
        {KUBELET: {"maxPods": -1}},
        [f"{KUBELET}.maxPods: Input should be greater than or equal to 0"],
    ),
    (
        NC,
        {"spec.kubelet": {"evictionSoft": {"nodefs.available": "10%"}}},
        ["spec.kubelet: evictionSoft ['nodefs.available'] has no matching evictionSoftGracePeriod"],
    ),
    # --- NodeClaim requirements
    (
        NC,
        {"spec.requirements[0]": {"key": "karpenter.sh/team", "operator": "Exists"}},
        [
            'spec.requirements[0].key: label domain "karpenter.sh" is restricted '
            "('karpenter.sh/team'); allowed there: karpenter.sh/capacity-type, "
            "karpenter.sh/nodepool; otherwise use a label in your own domain"
        ],
    ),
    (
        NC,
        {"spec.requirements[0]": {"key": "kubernetes.io/arch", "operator": "Gt", "values": ["a"]}},
        [
            "spec.requirements[0].values: operator Gt needs exactly one value, a non-negative "
            "integer (got ['a'])"
        ],
    ),
    # --- EC2NodeClass selector terms
    (
        EC2,
        {"spec.subnetSelectorTerms": []},
        ["spec.subnetSelectorTerms: List should have at least 1 item after validation, not 0"],
    ),
    (
        EC2,
        {"spec.subnetSelectorTerms": [{}]},
        ["spec.subnetSelectorTerms[0]: a selector term needs at least one of ['tags', 'id']"],
    ),
    (
        EC2,
        {"spec.subnetSelectorTerms": [{"id": "subnet-0123", "tags": {"a": "b"}}]},
        [
            "spec.subnetSelectorTerms[0]: 'id' is mutually exclusive, cannot be combined with "
            "['tags']"
        ],
    ),
    (
        EC2,
        {"spec.securityGroupSelectorTerms": [{"name": "default", "tags": {"a": "b"}}]},
        [
            "spec.securityGroupSelectorTerms[0]: 'name' is mutually exclusive, cannot be "
            "combined with ['tags']"
        ],
    ),
    (
        EC2,
        {"spec.securityGroupSelectorTerms": [{"tags": {"a": ""}}]},
        ["spec.securityGroupSelectorTerms[0].tags: empty tag keys or values aren't supported"],
    ),
    (
        EC2,
        {"spec.amiSelectorTerms": [{"owner": "self"}]},
        ["spec.amiSelectorTerms[0]: a selector term needs at least one of ['tags', 'id', 'name']"],
    ),
    (
        EC2,
        {"spec.amiSelectorTerms": [{"id": "ami-0123", "owner": "self"}]},
        [
            "spec.amiSelectorTerms[0]: 'id' is mutually exclusive, cannot be combined with other "
            "fields"
        ],
    ),
    (
        EC2,
        {"spec.subnetSelectorTerms": [{"id": "sg-0123"}]},
        ["spec.subnetSelectorTerms[0].id: 'sg-0123' is not a subnet id such as 'subnet-0123abcd'"],
    ),
    # --- EC2NodeClass identity, family, tags, devices, IMDS
    (
        EC2,
        {"spec.instanceProfile": "KarpenterNodeInstanceProfile"},
        ["spec: must specify exactly one of ['role', 'instanceProfile']"],
    ),
    (EC2, {"spec.role": DELETE}, ["spec: must specify exactly one of ['role', 'instanceProfile']"]),
    (EC2, {"spec.role": ""}, ["spec: role / instanceProfile cannot be empty"]),
    (
        EC2,
        {"spec.amiFamily": "Custom"},
        ["spec: amiSelectorTerms is required when amiFamily == 'Custom'"],
    ),
    (
        EC2,
        {"spec.amiFamily": "Windows2025"},
        [
            "spec.amiFamily: Input should be 'AL2', 'AL2023', 'Bottlerocket', 'Ubuntu', 'Custom', "
            "'Windows2019' or 'Windows2022'"
        ],
    ),
    (
        EC2,
        {'spec.tags["kubernetes.io/cluster/demo"]': "owned"},
        [f"spec.tags: tag 'kubernetes.io/cluster/demo' is restricted: {RESTRICTED_TAGS}"],
    ),
    (
        EC2,
        {'spec.tags["karpenter.sh/nodepool"]': "x"},
        [f"spec.tags: tag 'karpenter.sh/nodepool' is restricted: {RESTRICTED_TAGS}"],
    ),
    (
        EC2,
        {'spec.tags["karpenter.sh/nodeclaim"]': "x"},
        [f"spec.tags: tag 'karpenter.sh/nodeclaim' is restricted: {RESTRICTED_TAGS}"],
    ),
    (
        EC2,
        {'spec.tags["karpenter.k8s.aws/ec2nodeclass"]': "x"},
        [f"spec.tags: tag 'karpenter.k8s.aws/ec2nodeclass' is restricted: {RESTRICTED_TAGS}"],
    ),
    (
        EC2,
        {
            "spec.blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
                {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
            ]
        },
        ["spec.blockDeviceMappings: must have only one blockDeviceMappings with rootVolume"],
    ),
    (
        EC2,
        {"spec.blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": True}}]},
        ["spec.blockDeviceMappings[0].ebs: snapshotID or volumeSize must be defined"],
    ),
    (
        EC2,
        {"spec.metadataOptions": {"httpTokens": "sometimes"}},
        ["spec.metadataOptions.httpTokens: Input should be 'required' or 'optional'"],
    ),
    (
        EC2,
        {"spec.metadataOptions": {"httpPutResponseHopLimit": 65}},
        ["spec.metadataOptions.httpPutResponseHopLimit: Input should be less than or equal to 64"],
    ),
    (
        EC2,
        {"spec.kubelet": {"maxPods": 110}},
        ["spec.kubelet: Extra inputs are not permitted"],
    ),
]


@pytest.mark.parametrize(
    ("kind", "edits", "expected"), INVALID, ids=[f"{c[0]}:{next(iter(c[1]))}" for c in INVALID]
)
def test_invalid_v1beta1_errors_exactly(
    kind: str, edits: dict[str, object], expected: list[str]
) -> None:
    assert errors_of(kind, edits) == expected


# Close neighbours of the invalid cases that upstream's v1beta1 accepted.
VALID: list[tuple[str, dict[str, object]]] = [
    (NP, {f"{DIS}.consolidateAfter": "Never"}),
    (NP, {f"{DIS}.consolidationPolicy": "WhenEmpty", f"{DIS}.consolidateAfter": "30s"}),
    (NP, {f"{DIS}.consolidationPolicy": "WhenEmpty", f"{DIS}.consolidateAfter": "Never"}),
    (NP, {f"{DIS}.expireAfter": "Never"}),
    (NP, {f"{DIS}.budgets": [{"nodes": "1", "schedule": "@daily", "duration": "10m"}]}),
    (NP, {f"{TSPEC}.resources": {}}),
    (NP, {f"{TSPEC}.requirements[0]": {"key": "kubernetes.io/team", "operator": "Exists"}}),
    (NP, {'spec.template.metadata.labels["kubernetes.io/team"]': "a"}),
    (
        NP,
        {
            f"{TSPEC}.taints": [
                {"key": "a", "effect": "NoSchedule"},
                {"key": "a", "effect": "NoExecute"},
            ]
        },
    ),
    (
        NP,
        {
            KUBELET: {
                "evictionHard": {"memory.available": "100%", "nodefs.available": "10.5%"},
                "evictionSoft": {"memory.available": "500Mi", "pid.available": "10%"},
                "evictionSoftGracePeriod": {"memory.available": "1m", "pid.available": "2m"},
                "imageGCHighThresholdPercent": 51,
                "imageGCLowThresholdPercent": 50,
                "kubeReserved": {"cpu": "100m", "pid": "100"},
                "systemReserved": {"memory": "0", "ephemeral-storage": "1Gi"},
                "maxPods": 0,
            }
        },
    ),
    (NP, {KUBELET: {"imageGCHighThresholdPercent": 0}}),
    # ResourceList values, as before: a bare number is a quantity too
    (NP, {KUBELET: {"kubeReserved": {"pid": 100, "cpu": 1}}}),
    (NC, {"spec.requirements[0]": {"key": "karpenter.sh/nodepool", "operator": "Exists"}}),
    (NC, {"spec.resources": {"requests": {"cpu": "1"}}}),
    (EC2, {"spec.subnetSelectorTerms": [{"id": "subnet-0123"}, {"tags": {"a": "*"}}]}),
    (EC2, {"spec.securityGroupSelectorTerms": [{"name": "default"}]}),
    (EC2, {"spec.amiSelectorTerms": [{"name": "my-ami-*", "owner": "self"}]}),
    (EC2, {"spec.amiFamily": "Custom", "spec.amiSelectorTerms": [{"id": "ami-0123"}]}),
    (EC2, {"spec.amiFamily": "Ubuntu"}),
    (EC2, {"spec.role": DELETE, "spec.instanceProfile": "KarpenterNodeInstanceProfile"}),
    (EC2, {"spec.tags": {"kubernetes.io/role": "x", "karpenter.sh/managed-by": "me"}}),
    (
        EC2,
        {
            "spec.blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
                {"deviceName": "/dev/xvdb", "ebs": {"snapshotID": "snap-0123"}},
            ]
        },
    ),
    (EC2, {"spec.metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 2}}),
]


@pytest.mark.parametrize(
    ("kind", "edits"), VALID, ids=[f"{c[0]}:{next(iter(c[1]))}" for c in VALID]
)
def test_valid_v1beta1_neighbours_are_accepted(kind: str, edits: dict[str, object]) -> None:
    assert errors_of(kind, edits) == []
