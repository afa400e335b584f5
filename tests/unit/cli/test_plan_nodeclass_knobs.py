"""``karpenter-py plan`` sizes the built-in catalog under each NodePool's EC2NodeClass, as the
controller does: AMI family, kubelet (the class's, or a v1beta1 NodePool's), root volume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.cli.main import main
from karpenter_py.cloudprovider.aws.instancetype_math import builtin_aws_catalog
from karpenter_py.model.api.convert import KUBELET_ANNOTATION
from tests.unit.cli.conftest import TINY_CATALOG, Captured, Writer, nodepool, pod
from tests.unit.cli.test_plan_v1beta1 import GUIDE_V1, GUIDE_V1BETA1, INFLATE

REPO = Path(__file__).resolve().parents[3]
DISRUPTION_EXAMPLE = REPO / "examples" / "disruption.yaml"

CLASS_LINE = "  role: KarpenterNodeRole-demo\n"
POOL_REF = "      nodeClassRef:\n        name: default\n"
# The v1 EC2NodeClass of GUIDE_V1, for a v1beta1 NodePool to name.
V1_CLASS = GUIDE_V1.split("---\n")[1]
V1BETA1_POOL = GUIDE_V1BETA1.split("---\n")[0]


def class_kubelet(text: str, kubelet: str) -> str:
    """``text`` with ``kubelet`` (YAML lines under spec.kubelet) set on its EC2NodeClass."""
    return text.replace(CLASS_LINE, CLASS_LINE + "  kubelet:\n" + kubelet)


def pool_kubelet(text: str, kubelet: str) -> str:
    """``text`` with a v1beta1 ``spec.template.spec.kubelet`` on its NodePool."""
    return text.replace(POOL_REF, POOL_REF + "      kubelet:\n" + kubelet)


def inflate(**requests: str) -> dict[str, Any]:
    deployment: dict[str, Any] = json.loads(json.dumps(INFLATE))  # a deep, untyped copy
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {
        "cpu": "1",
        **requests,
    }
    return deployment


def run_plan(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    workload: dict[str, Any] | None = None,
    *args: str,
) -> dict[str, Any]:
    path = tmp_path / "input.yaml"
    path.write_text(text + "---\n" + yaml.safe_dump(workload or INFLATE), encoding="utf-8")
    code = main(["plan", "-f", str(path), "-o", "json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def claims(result: dict[str, Any]) -> list[tuple[str, int]]:
    return [(c["instanceType"], len(c["pods"])) for c in result["nodeClaims"]]


TWO_PER_NODE = [("c6a.xlarge", 2), ("c6a.xlarge", 2), ("c6a.large", 1)]
ROOT_100GI = (
    "  blockDeviceMappings:\n"
    "    - deviceName: /dev/xvda\n"
    "      rootVolume: true\n"
    "      ebs:\n"
    "        volumeSize: 100Gi\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the default class's 58 ENI-limited pods on a c6a.2xlarge: one node
        (GUIDE_V1, [("c6a.2xlarge", 5)]),
        (class_kubelet(GUIDE_V1, "    maxPods: 2\n"), TWO_PER_NODE),
        # a v1beta1 NodePool's kubelet (now the compatibility annotation) does the same
        (pool_kubelet(GUIDE_V1BETA1, "        maxPods: 2\n"), TWO_PER_NODE),
        # a v1beta1 NodePool without kubelet: its v1 class's maxPods 3
        (
            V1BETA1_POOL + "---\n" + class_kubelet(V1_CLASS, "    maxPods: 3\n"),
            [("c6a.xlarge", 3), ("c6a.xlarge", 2)],
        ),
        # ... a kubelet on the v1beta1 NodePool wins over the class's own, whole
        (
            pool_kubelet(V1BETA1_POOL, "        maxPods: 2\n")
            + "---\n"
            + class_kubelet(V1_CLASS, "    maxPods: 3\n"),
            TWO_PER_NODE,
        ),
    ],
)
def test_class_kubelet_sizes_the_plan(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    expected: list[tuple[str, int]],
) -> None:
    assert claims(run_plan(tmp_path, capsys, text)) == expected


def test_root_volume_sizes_ephemeral_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 30Gi per pod: more than the default 20Gi root volume holds; 100Gi leaves 89Gi allocatable
    workload = inflate(**{"ephemeral-storage": "30Gi"})
    default = run_plan(tmp_path, capsys, GUIDE_V1, workload)
    assert claims(default) == []
    assert len(default["unschedulable"]) == 5
    big = run_plan(
        tmp_path, capsys, GUIDE_V1.replace(CLASS_LINE, CLASS_LINE + ROOT_100GI), workload
    )
    assert claims(big) == [("c6a.xlarge", 2), ("c6a.xlarge", 2), ("c6a.large", 1)]
    assert big["unschedulable"] == []


def ec2nodeclass(name: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "R",
            "subnetSelectorTerms": [{"tags": {"a": "b"}}],
            "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
            **spec,
        },
    }


def ec2_pool(name: str, nodeclass: str, **meta: object) -> dict[str, object]:
    doc = nodepool(
        name,
        template_spec={
            "nodeClassRef": {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": nodeclass,
            }
        },
    )
    doc["metadata"] = {"name": name, **meta}
    return doc


def test_each_pool_gets_its_class_catalog(write: Writer, captured: Captured) -> None:
    docs = [
        ec2nodeclass("small", kubelet={"maxPods": 8}),
        ec2_pool("a", "small"),
        ec2_pool("b", "small"),
        ec2_pool("missing", "not-in-the-input"),
        # a KWOKNodeClass of the same name is not the EC2NodeClass
        nodepool(
            "kwok",
            template_spec={
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "small",
                }
            },
        ),
        pod("p"),
    ]
    assert main(["plan", "-f", write(*docs)]) == 0
    types = captured.input.instance_types
    default = builtin_aws_catalog()
    # one build per class, shared by its pools (the solver indexes by identity)
    assert types["a"] is types["b"]
    assert types["missing"] is default
    assert types["kwok"] is default
    pods = {
        name: {it.name: it.capacity["pods"] for it in types[name]}["m5.large"] for name in types
    }
    assert pods == {"a": 8, "b": 8, "missing": 29, "kwok": 29}


def test_instance_types_file_is_every_pools_catalog(
    write: Writer, captured: Captured, catalog_file: str
) -> None:
    docs = [ec2nodeclass("small", kubelet={"maxPods": 2}), ec2_pool("a", "small"), pod("p")]
    assert main(["plan", "-f", write(*docs), "--instance-types", catalog_file]) == 0
    types = captured.input.instance_types["a"]
    assert [(it.name, it.capacity["pods"]) for it in types] == [
        (str(r["name"]), 110) for r in TINY_CATALOG
    ]


def test_unreadable_kubelet_annotation_is_an_input_error(
    write: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [
        ec2nodeclass("default"),
        ec2_pool("a", "default", annotations={KUBELET_ANNOTATION: "[1]"}),
        pod("p"),
    ]
    assert main(["plan", "-f", write(*docs)]) == 2
    _, err = capsys.readouterr()
    assert err == f"error: NodePool a: annotation {KUBELET_ANNOTATION} is not a JSON object\n"


def test_duplicate_ec2nodeclass_is_an_error(
    write: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(ec2nodeclass("default"), ec2nodeclass("default"), ec2_pool("a", "default"))
    assert main(["plan", "-f", path]) == 2
    _, err = capsys.readouterr()
    assert "EC2NodeClass default is also defined by" in err


def test_disruption_replacements_use_the_class_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # examples/disruption.yaml with its EC2NodeClass: none, the default, or maxPods 2
    def decide(extra: list[dict[str, object]]) -> dict[str, Any]:
        path = tmp_path / "dump.yaml"
        path.write_text(
            DISRUPTION_EXAMPLE.read_text(encoding="utf-8")
            + "".join("---\n" + yaml.safe_dump(d) for d in extra),
            encoding="utf-8",
        )
        code = main(
            ["plan", "--disruption", "-f", str(path), "--now", "2025-01-02T00:00:00Z", "-o", "json"]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        result: dict[str, Any] = json.loads(out)
        return result

    def commands(result: dict[str, Any]) -> list[tuple[str, list[str], list[str]]]:
        return [
            (c["method"], c["candidates"], [r["instanceType"] for r in c["replacements"]])
            for c in result["commands"]
        ]

    consolidated = [
        ("emptiness", ["ip-10-0-1-10"], []),
        ("multi-node-consolidation", ["ip-10-0-2-20", "ip-10-0-3-30"], ["c6a.large"]),
    ]
    assert commands(decide([])) == consolidated
    assert commands(decide([ec2nodeclass("default")])) == consolidated
    # 2 pods a node: ip-10-0-3-30's pods would need 2 new nodes, so only ip-10-0-2-20 goes
    small = decide([ec2nodeclass("default", kubelet={"maxPods": 2})])
    assert commands(small) == [
        ("emptiness", ["ip-10-0-1-10"], []),
        ("single-node-consolidation", ["ip-10-0-2-20"], []),
    ]
    assert {u["node"]: u["reason"] for u in small["unchanged"]}["ip-10-0-3-30"] == (
        "its pods would need 2 new nodes"
    )
