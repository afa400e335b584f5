"""``karpenter-py plan`` on v1beta1 documents: converted as the webhook converts, with warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpenter_py.cli.main import main
from karpenter_py.cli.manifests import load_manifests

# The NodePool and EC2NodeClass of Karpenter's v0.3x getting-started guide.
GUIDE_V1BETA1 = """\
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: kubernetes.io/os
          operator: In
          values: ["linux"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["2"]
      nodeClassRef:
        name: default
  limits:
    cpu: 1000
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 720h
---
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiFamily: AL2
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
"""

GUIDE_V1 = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: kubernetes.io/os
          operator: In
          values: ["linux"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["2"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: 720h
  limits:
    cpu: 1000
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2@latest
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
"""

INFLATE = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "inflate"},
    "spec": {
        "replicas": 5,
        "selector": {"matchLabels": {"app": "inflate"}},
        "template": {
            "metadata": {"labels": {"app": "inflate"}},
            "spec": {
                "containers": [
                    {"name": "inflate", "image": "pause", "resources": {"requests": {"cpu": "1"}}}
                ]
            },
        },
    },
}


def plan(
    tmp_path: Path, name: str, text: str, capsys: pytest.CaptureFixture[str]
) -> tuple[str, str]:
    path = tmp_path / name
    path.write_text(text + "---\n" + yaml.safe_dump(INFLATE), encoding="utf-8")
    code = main(["plan", "-f", str(path), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def test_old_guide_plans_like_its_v1_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    beta_out, beta_err = plan(tmp_path, "v1beta1.yaml", GUIDE_V1BETA1, capsys)
    v1_out, v1_err = plan(tmp_path, "v1.yaml", GUIDE_V1, capsys)
    assert beta_out == v1_out
    assert v1_err == ""
    file = tmp_path / "v1beta1.yaml"
    assert beta_err.splitlines() == [
        f"warning: {file}: document 1 (NodePool default): NodePool karpenter.sh/v1beta1 converted "
        "to v1: spec.disruption.consolidationPolicy: WhenUnderutilized is now "
        "WhenEmptyOrUnderutilized; spec.disruption.consolidateAfter: unset, now 0s (required in "
        "v1); spec.template.spec.nodeClassRef: no apiVersion, now group karpenter.k8s.aws, kind "
        "EC2NodeClass; spec.disruption.expireAfter: moved to spec.template.spec.expireAfter (720h)",
        f"warning: {file}: document 2 (EC2NodeClass default): EC2NodeClass "
        "karpenter.k8s.aws/v1beta1 converted to v1: spec.amiSelectorTerms: none, now "
        "[{alias: al2@latest}] (amiFamily AL2 is implied by the alias)",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GUIDE_V1BETA1.replace("WhenUnderutilized", "WhenIdle"),
            "document 1 (NodePool default): spec.disruption.consolidationPolicy: Input should be "
            "'WhenEmpty' or 'WhenUnderutilized' (got 'WhenIdle')",
        ),
    ],
)
def test_invalid_v1beta1_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    code = main(["plan", "-f", str(path)])
    _, err = capsys.readouterr()
    assert code == 2
    assert message in err


def _beta_claim(name: str, pool: str) -> dict[str, object]:
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {"requirements": [], "nodeClassRef": {"name": "default"}},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    }


def test_v1beta1_nodeclaims_take_their_nodepool_expiry(tmp_path: Path) -> None:
    # The claims come before their NodePool: they are converted once every NodePool is read.
    pool = GUIDE_V1BETA1.split("---\n")[0].replace("expireAfter: 720h", "expireAfter: 48h")
    path = tmp_path / "dump.yaml"
    docs = [_beta_claim("default-a", "default"), _beta_claim("gone-b", "gone")]
    path.write_text(yaml.safe_dump_all(docs) + "---\n" + pool, encoding="utf-8")
    manifests = load_manifests([str(path)])
    claims = {c.metadata.name: c.spec.expire_after for c, _ in manifests.cluster.nodeclaims}
    assert claims == {"default-a": "48h", "gone-b": "720h"}
    # The NodePool's own conversion warning comes first (it is read in place); the claims' last.
    assert manifests.warnings[0].startswith(f"{path}: document 3 (NodePool default): ")
    assert manifests.warnings[1:] == [
        f"{path}: document 1 (NodeClaim default-a): NodeClaim karpenter.sh/v1beta1 converted to "
        "v1: spec.nodeClassRef: no apiVersion, now group karpenter.k8s.aws, kind EC2NodeClass; "
        "spec.expireAfter: 48h, from NodePool default",
        f"{path}: document 2 (NodeClaim gone-b): NodeClaim karpenter.sh/v1beta1 converted to v1: "
        "spec.nodeClassRef: no apiVersion, now group karpenter.k8s.aws, kind EC2NodeClass",
    ]


def test_unpinned_ubuntu_class_launches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As upstream's controller: the class converts, but is not Ready, so its NodePool is idle.
    out, err = plan(
        tmp_path,
        "ubuntu.yaml",
        GUIDE_V1BETA1.replace("amiFamily: AL2", "amiFamily: Ubuntu"),
        capsys,
    )
    result = json.loads(out)
    assert result["nodeClaims"] == []
    assert {u["reason"] for u in result["unschedulable"]} == {
        "no NodePools can launch nodes (none are defined, or none has a ready NodeClass)"
    }
    assert len(result["unschedulable"]) == 5
    file = tmp_path / "ubuntu.yaml"
    assert err.splitlines()[-1] == (
        f"warning: {file}: document 1 (NodePool default): NodePool default launches nothing: its "
        "EC2NodeClass default is not ready (a v1beta1 Ubuntu class without amiSelectorTerms "
        "selects no AMI)"
    )
