"""plan reserves room for DaemonSets on existing nodes that do not run their pod yet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpenter_py.cli.main import main
from tests.unit.cli.conftest import Writer, nodepool, pod

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


def _agent(resources: dict[str, object]) -> dict[str, object]:
    """A DaemonSet whose (never defaulted) template container has ``resources``."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "a", "image": "agent", "resources": resources}]},
            },
        },
    }


LIMITS_ONLY_TABLE = """\
2 pending pods: 1 on new nodes, 0 on existing nodes, 1 unschedulable

New nodes (1):
NODEPOOL  INSTANCE TYPE     ZONE    CAPACITY  PRICE/H  PODS  OPTIONS
default   c-8x-amd64-linux  zone-a  spot       0.1280     1        1

Unschedulable pods (1):
POD          REASON
default/big  incompatible with every nodepool: nodepool "default": no instance type has enough \
resources after daemonset overhead (cpu 1500m > largest 900m)

Total hourly cost: $0.1280
"""


def test_limits_only_daemonset_reserves_its_limits_table(
    write: Writer, catalog_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The agent's 7-cpu limit is its request: the 8-cpu type keeps 900m for pods (allocatable
    # after the kwok reservation, less 7), so "small" (500m) fits and "big" (1500m) fits nowhere.
    agent = _agent({"limits": {"cpu": "7", "memory": "1Gi"}})
    path = write(nodepool(), agent, pod("big", cpu="1500m"), pod("small", cpu="500m"))
    assert main(["plan", "-f", path, "--instance-types", catalog_file]) == 0
    assert capsys.readouterr().out == LIMITS_ONLY_TABLE


@pytest.mark.parametrize(
    ("resources", "node_pods", "unschedulable"),
    [
        (
            {"limits": {"cpu": "7", "memory": "1Gi"}},
            [("c-8x-amd64-linux", ["default/small"])],
            [
                {
                    "pod": "default/big",
                    "reason": 'incompatible with every nodepool: nodepool "default": no instance '
                    "type has enough resources after daemonset overhead (cpu 1500m > largest "
                    "900m)",
                }
            ],
        ),
        # A request below the limit is what is reserved: both pods share one node (2 cpu of pods
        # do not fit the 2-cpu type's 1900m allocatable, the 4-cpu one is next cheapest).
        (
            {"requests": {"cpu": "100m"}, "limits": {"cpu": "7"}},
            [("c-4x-arm64-linux", ["default/big", "default/small"])],
            [],
        ),
        ({}, [("c-4x-arm64-linux", ["default/big", "default/small"])], []),
    ],
)
def test_limits_only_daemonset_reserves_its_limits_json(
    write: Writer,
    catalog_file: str,
    capsys: pytest.CaptureFixture[str],
    resources: dict[str, object],
    node_pods: list[tuple[str, list[str]]],
    unschedulable: list[dict[str, str]],
) -> None:
    path = write(nodepool(), _agent(resources), pod("big", cpu="1500m"), pod("small", cpu="500m"))
    assert main(["plan", "-f", path, "--instance-types", catalog_file, "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(nc["instanceType"], sorted(nc["pods"])) for nc in out["nodeClaims"]] == node_pods
    assert out["unschedulable"] == unschedulable
