"""Shared helpers for the plan CLI tests: manifest builders, a tiny KWOK catalog, a capturing solver."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.cli import plan as plan_cli
from karpenter_py.scheduling.inputs import SolveInput
from karpenter_py.scheduling.plan import Plan
from tests import factories

ZONES = ("zone-a", "zone-b")


def kwok_record(
    name: str, cpu: int, memory_gi: int, on_demand: float, *, arch: str = "amd64", pods: int = 110
) -> dict[str, object]:
    offerings = [
        {
            "Price": price,
            "Available": True,
            "Requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [ct]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
            ],
        }
        for zone in ZONES
        for ct, price in (("on-demand", on_demand), ("spot", round(on_demand * 0.4, 6)))
    ]
    return {
        "name": name,
        "offerings": offerings,
        "architecture": arch,
        "operatingSystems": ["linux"],
        "resources": {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": str(pods)},
    }


TINY_CATALOG = [
    kwok_record("c-2x-amd64-linux", 2, 4, 0.08),
    kwok_record("c-8x-amd64-linux", 8, 16, 0.32),
    kwok_record("c-4x-arm64-linux", 4, 8, 0.12, arch="arm64"),
]


def nodepool(
    name: str = "default", *, template_spec: dict[str, object] | None = None, **spec: Any
) -> dict[str, object]:
    """A linux NodePool of the default KWOKNodeClass as a user writes it (no uid)."""
    return factories.nodepool_dict(
        name,
        uid="",
        requirements=[{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
        template_spec=dict(template_spec or {}),
        **spec,
    )


def container(cpu: str = "500m", memory: str = "256Mi") -> dict[str, object]:
    return {
        "name": "app",
        "image": "pause",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }


def pod(
    name: str, namespace: str | None = None, *, cpu: str = "500m", **spec: object
) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container(cpu)], **spec},
    }


def workload(
    kind: str,
    name: str,
    *,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    **spec: object,
) -> dict[str, object]:
    api = "batch/v1" if kind == "Job" else "v1" if kind == "ReplicationController" else "apps/v1"
    labels = labels or {"app": name}
    meta: dict[str, object] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    body: dict[str, object] = {
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [container()]}},
        **spec,
    }
    if kind != "Job":
        body.setdefault("selector", {"matchLabels": labels})
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": body}


def node(
    name: str, *, cpu: str = "4", memory: str = "16Gi", pool: str = "default", zone: str = "zone-a"
) -> dict[str, object]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": zone,
        "node.kubernetes.io/instance-type": "c-4x-amd64-linux",
        "karpenter.sh/capacity-type": "on-demand",
    }
    if pool:
        labels["karpenter.sh/nodepool"] = pool
        labels["karpenter.sh/initialized"] = "true"
        labels["karpenter.sh/registered"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


Writer = Callable[..., str]


@pytest.fixture
def write(tmp_path: Path) -> Writer:
    """write(*docs, name=...) -> path of a multi-document YAML file (docs may be dicts or raw text)."""

    def _write(*docs: object, name: str = "input.yaml") -> str:
        parts = [d if isinstance(d, str) else yaml.safe_dump(d, sort_keys=False) for d in docs]
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("---\n".join(parts), encoding="utf-8")
        return str(path)

    return _write


@pytest.fixture
def catalog_file(tmp_path: Path) -> str:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(TINY_CATALOG), encoding="utf-8")
    return str(path)


class Captured:
    def __init__(self) -> None:
        self.inputs: list[SolveInput] = []
        self.namespace_labels: list[Mapping[str, Mapping[str, str]] | None] = []

    @property
    def input(self) -> SolveInput:
        assert len(self.inputs) == 1, "the solver ran once"
        return self.inputs[0]


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Captured:
    """Replace the solver with one that records its input and plans nothing."""
    box = Captured()

    def solve(
        inp: SolveInput, *, namespace_labels: Mapping[str, Mapping[str, str]] | None = None
    ) -> Plan:
        box.inputs.append(inp)
        box.namespace_labels.append(namespace_labels)
        return Plan(new_node_claims=(), existing=(), errors=())

    monkeypatch.setattr(plan_cli, "load_solver", lambda: solve)
    return box


def nodeclaim(
    name: str, *, node_name: str = "", launched: bool = True, pool: str = "default"
) -> dict[str, object]:
    status: dict[str, object] = {}
    if launched:
        status["capacity"] = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        status["allocatable"] = {"cpu": "3900m", "memory": "7Gi", "pods": "110"}
    if node_name:
        status["nodeName"] = node_name
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.kwok.sh",
                "kind": "KWOKNodeClass",
                "name": "default",
            },
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["c-4x-amd64-linux"],
                },
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux", "windows"]},
            ],
            "taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "booting", "effect": "NoSchedule"}],
        },
        "status": status,
    }
