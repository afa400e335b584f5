"""manifests/ against the real kube-apiserver with server-side dry-run (``?dryRun=All``).

Cluster-scoped objects are only dry-run; namespaced ones go into a fresh namespace that carries
the same Pod Security labels as manifests/namespace.yaml, and the Deployment's pod template is
dry-run as a Pod there so the ``restricted`` profile is actually enforced on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.kube import (
    DEPLOYMENTS,
    NAMESPACES,
    PODDISRUPTIONBUDGETS,
    PODS,
    ForbiddenError,
    KubeClient,
    KubeObject,
    NotFoundError,
    Resource,
    load_kubeconfig,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
RBAC = "rbac.authorization.k8s.io"
RESOURCES: dict[str, Resource] = {
    "Namespace": NAMESPACES,
    "ServiceAccount": Resource("", "v1", "serviceaccounts", True, "ServiceAccount"),
    "Service": Resource("", "v1", "services", True, "Service"),
    "ClusterRole": Resource(RBAC, "v1", "clusterroles", False, "ClusterRole"),
    "ClusterRoleBinding": Resource(RBAC, "v1", "clusterrolebindings", False, "ClusterRoleBinding"),
    "Role": Resource(RBAC, "v1", "roles", True, "Role"),
    "RoleBinding": Resource(RBAC, "v1", "rolebindings", True, "RoleBinding"),
    "Deployment": DEPLOYMENTS,
    "PodDisruptionBudget": PODDISRUPTIONBUDGETS,
}


def load(name: str) -> list[KubeObject]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    config = await asyncio.to_thread(load_kubeconfig, [cluster.kubeconfig_path])
    async with KubeClient(config) as c:
        yield c


@pytest.fixture
async def namespace(client: KubeClient) -> AsyncIterator[str]:
    (ns,) = load("namespace.yaml")
    name = f"karpy-ops-{uuid.uuid4().hex[:8]}"
    ns["metadata"]["name"] = name
    await client.create(NAMESPACES, ns)
    yield name
    with contextlib.suppress(NotFoundError):
        await client.delete(NAMESPACES, name)


def relocate(obj: KubeObject, namespace: str) -> KubeObject:
    obj = copy.deepcopy(obj)
    if RESOURCES[obj["kind"]].namespaced:
        obj["metadata"]["namespace"] = namespace
    for subject in obj.get("subjects", []):
        subject["namespace"] = namespace
    return obj


@pytest.mark.parametrize(
    "name", ["serviceaccount.yaml", "rbac.yaml", "service.yaml", "pdb.yaml", "deployment.yaml"]
)
async def test_server_side_dry_run_accepts_the_manifests(client, namespace, name):
    for obj in load(name):
        obj = relocate(obj, namespace)
        resource = RESOURCES[obj["kind"]]
        created: dict[str, Any] = await client.create(
            resource, obj, namespace=obj["metadata"].get("namespace"), dry_run=True
        )
        assert created["kind"] == obj["kind"]
        assert created["metadata"]["name"] == obj["metadata"]["name"]
        if obj["kind"] == "Deployment":
            pod = created["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsUser"] == 65532
            assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
        if resource.namespaced:  # dry run: nothing was persisted in our fresh namespace
            with pytest.raises(NotFoundError):
                await client.get(resource, obj["metadata"]["name"], namespace=namespace)


async def test_namespace_manifest_dry_runs(client):
    (ns,) = load("namespace.yaml")
    ns["metadata"]["name"] = f"karpy-ops-{uuid.uuid4().hex[:8]}"
    created = await client.create(NAMESPACES, ns, dry_run=True)
    assert created["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


async def test_controller_pod_passes_restricted_pod_security(client, namespace):
    (deployment,) = load("deployment.yaml")
    template = deployment["spec"]["template"]
    pod: KubeObject = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "karpenter-dry-run", "namespace": namespace, **template["metadata"]},
        "spec": {**template["spec"], "serviceAccountName": "default"},
    }
    created = await client.create(PODS, pod, namespace=namespace, dry_run=True)
    assert created["spec"]["containers"][0]["image"] == "karpenter-py:latest"

    # control: the same namespace does refuse a pod that breaks the profile
    bad = copy.deepcopy(pod)
    bad["spec"]["containers"][0]["securityContext"] = {"privileged": True, "runAsUser": 0}
    bad["spec"]["securityContext"] = {}
    with pytest.raises(ForbiddenError):
        await client.create(PODS, bad, namespace=namespace, dry_run=True)
