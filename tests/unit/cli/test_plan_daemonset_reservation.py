"""plan reserves room for DaemonSets on existing nodes that do not run their pod yet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpenter_py.cli.main import main

NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
                "requirements": [],
            }
        }
    },
}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "existing",
        "labels": {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
    },
    "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}},
}
DAEMONSET = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "agent", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {
                "containers": [
                    {"name": "a", "image": "agent", "resources": {"requests": {"cpu": "500m"}}}
                ]
            },
        },
    },
}
PENDING = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "app", "namespace": "default"},
    "spec": {
        "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "1800m"}}}]
    },
}
AGENT_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "agent-x",
        "namespace": "kube-system",
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": "agent",
                "uid": "u",
                "controller": True,
            }
        ],
    },
    "spec": {
        "nodeName": "existing",
        "containers": [{"name": "a", "image": "agent", "resources": {"requests": {"cpu": "100m"}}}],
    },
}


@pytest.mark.parametrize(
    ("docs", "lands_on_existing"),
    [
        ([NODEPOOL, NODE, PENDING], True),  # 1.8 of 2 cpu: fits
        ([NODEPOOL, NODE, DAEMONSET, PENDING], False),  # the agent's 500m is reserved first
        ([NODEPOOL, NODE, DAEMONSET, AGENT_POD, PENDING], True),  # agent already runs (100m)
    ],
)
def test_daemonset_room_is_reserved_until_its_pod_runs(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    docs: list[dict[str, object]],
    lands_on_existing: bool,
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["plan", "-f", str(path), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    on_existing = [p for n in out["existingNodes"] for p in n["pods"]]
    assert (on_existing == ["default/app"]) is lands_on_existing
    assert (len(out["nodeClaims"]) == 0) is lands_on_existing
