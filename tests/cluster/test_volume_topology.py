"""Volume topology end to end: a pod whose claim is bound to a zonal volume gets a node in that
zone, through the whole controller (``manager.App``) against the local control plane."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.kube import NODECLAIMS, NODEPOOLS, NODES, PODS, KubeClient, NotFoundError
from karpenter_py.kube.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES
from karpenter_py.manager.app import App
from tests.cluster.harness import eventually, namespace, prepared_client, running, unique
from tests.cluster.test_controller import clean_pool, plan_json, pool_body, settings
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

ZONE = "topology.kubernetes.io/zone"
WANTED = "test-zone-b"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def local_volume(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "local": {"path": "/mnt/disks/karpy"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [WANTED]}]}
                    ]
                }
            },
        },
    }


def claim(name: str, ns: str, volume: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": volume,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def mounting_pod(name: str, ns: str, pool: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": pool},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "app",
                    "image": "pause",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
        },
    }


async def test_pod_with_a_zonal_volume_gets_a_node_in_that_zone(
    client: KubeClient, tmp_path: Path
) -> None:
    pool = unique("pool")
    np_body = pool_body(pool)
    pv_name = unique("pv")
    await client.create(NODEPOOLS, np_body)
    await client.create(PERSISTENTVOLUMES, local_volume(pv_name))
    try:
        async with namespace(client) as ns:
            pvc = claim("data", ns, pv_name)
            await client.create(PERSISTENTVOLUMECLAIMS, pvc, namespace=ns)

            async def claim_bound() -> bool:
                obj = await client.get(PERSISTENTVOLUMECLAIMS, "data", namespace=ns)
                return (obj.get("status") or {}).get("phase") == "Bound"

            # The PV controller binds the pre-bound pair and marks it bind-completed.
            await eventually(claim_bound, within=30, what="the claim to bind")
            app = App(settings(), client)
            try:
                async with running(app):
                    body = mounting_pod("db", ns, pool, "data")
                    await client.create(PODS, body, namespace=ns)

                    async def running_on() -> str:
                        obj = await client.get(PODS, "db", namespace=ns)
                        status = obj.get("status") or {}
                        node = (obj.get("spec") or {}).get("nodeName") or ""
                        return node if status.get("phase") == "Running" else ""

                    node_name = await eventually(running_on, within=90, what="the pod to run")
                    node = await client.get(NODES, node_name)
                    assert node["metadata"]["labels"][ZONE] == WANTED
                    claims = [
                        nc
                        for nc in (await client.list(NODECLAIMS)).items
                        if nc["metadata"]["labels"].get("karpenter.sh/nodepool") == pool
                    ]
                    assert len(claims) == 1
                    zone_reqs = [r for r in claims[0]["spec"]["requirements"] if r["key"] == ZONE]
                    assert zone_reqs == [{"key": ZONE, "operator": "In", "values": [WANTED]}]
                    assert not any(r.errors for r in app.provisioner.rounds)
                plan = plan_json(tmp_path, [np_body, local_volume(pv_name), pvc, body])
                assert plan["unschedulable"] == []
                assert [c["zone"] for c in plan["nodeClaims"]] == [WANTED]
            finally:
                await clean_pool(client, lambda: App(settings(), client), pool)
    finally:
        with contextlib.suppress(NotFoundError):
            await client.delete(PERSISTENTVOLUMES, pv_name)
