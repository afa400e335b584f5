"""Against the local control plane: a terminating node waits for the VolumeAttachments of its
drained pods' volumes (not those of pods that stay), binding a pod stamps its NodeClaim's
``lastPodEventTime``, and the consistency check finds a kwok node as launched."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from karpenter_py.aio.clock import RealClock
from karpenter_py.controllers.nodeclaim import NodeClaimConsistency, NodeClaimPodEvents
from karpenter_py.kube import NODECLAIMS, NODES, PODS, KubeClient, NotFoundError, PatchType
from karpenter_py.kube.resources import VOLUMEATTACHMENTS, Resource
from karpenter_py.model.labels import TAINT_DISRUPTED_KEY
from tests.cluster.harness import (
    Harness,
    Stack,
    condition,
    events_for,
    eventually,
    get_or_none,
    is_true,
    lifecycle_stack,
    namespace,
    nodeclaim,
    pod,
    prepared_client,
    unique,
)
from tests.clusterfixture import ClusterHandle
from tests.unit.fakes import deps

pytestmark = pytest.mark.cluster

PVS = Resource("", "v1", "persistentvolumes", False, "PersistentVolume")
PVCS = Resource("", "v1", "persistentvolumeclaims", True, "PersistentVolumeClaim")
ATTACHER = "csi.example.com"


@dataclass
class Env:
    client: KubeClient
    harness: Harness
    stack: Stack
    ns: str
    cleanup: list[tuple[Resource, str]]


@pytest.fixture
async def env(cluster: ClusterHandle) -> AsyncIterator[Env]:
    async with prepared_client(cluster) as client, namespace(client, "karpy-vol") as ns:
        h = Harness(client)
        stack = lifecycle_stack(h)
        clock = RealClock()
        podevents = NodeClaimPodEvents(deps(client=client, cluster=h.cluster, clock=clock))
        consistency = NodeClaimConsistency(
            deps(client=client, cluster=h.cluster, recorder=stack.recorder, clock=clock)
        )
        h.on(PODS, upsert=podevents.on_pod, delete=podevents.on_pod_deleted)
        h.on(NODECLAIMS, upsert=consistency.on_nodeclaim, delete=consistency.on_nodeclaim_deleted)
        e = Env(client, h, stack, ns, [])
        try:
            async with h.running():
                stack.start()
                h.spawn(podevents.run())
                h.spawn(consistency.run())
                yield e
        finally:
            for resource, name in e.cleanup:  # cluster-scoped leftovers
                await force_delete(client, resource, name)


async def force_delete(client: KubeClient, resource: Resource, name: str) -> None:
    """Delete, clearing finalizers first (nothing runs an attacher or PV protection here that
    would ever release them)."""
    with contextlib.suppress(NotFoundError):
        await client.patch(
            resource, name, {"metadata": {"finalizers": None}}, patch_type=PatchType.MERGE
        )
        await client.delete(resource, name)


async def ready_node(env: Env) -> str:
    name = unique("nc")
    await env.client.create(NODECLAIMS, nodeclaim(name, "vol", labels=env.harness.labels()))

    async def ready() -> bool:
        return is_true(await get_or_none(env.client, NODECLAIMS, name), "Ready")

    await eventually(ready, within=30, what=f"nodeclaim {name} to become Ready")
    return name


async def running(env: Env, name: str) -> None:
    async def is_running() -> bool:
        p = await get_or_none(env.client, PODS, name, env.ns)
        return p is not None and (p.get("status") or {}).get("phase") == "Running"

    await eventually(is_running, within=30, what=f"pod {name} to run")


async def attached_volume(env: Env, node: str) -> tuple[str, str, str]:
    """A CSI PV, its (pre-bound) PVC and a VolumeAttachment of the PV to ``node``, as the
    attach-detach controller and a CSI attacher would have left them. Returns their names."""
    pv, pvc, va = unique("pv"), unique("pvc"), unique("va")
    await env.client.create(
        PVS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "csi": {"driver": ATTACHER, "volumeHandle": pv},
                "claimRef": {"namespace": env.ns, "name": pvc},
            },
        },
    )
    env.cleanup.append((PVS, pv))
    await env.client.create(
        PVCS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        namespace=env.ns,
    )
    await env.client.create(
        VOLUMEATTACHMENTS,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": va},
            "spec": {
                "attacher": ATTACHER,
                "nodeName": node,
                "source": {"persistentVolumeName": pv},
            },
        },
    )
    env.cleanup.insert(0, (VOLUMEATTACHMENTS, va))
    return pv, pvc, va


def with_claim(body: dict[str, Any], claim: str) -> dict[str, Any]:
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return body


async def gone(env: Env, *objs: tuple[Resource, str, str | None], within: float = 60) -> None:
    async def all_gone() -> bool:
        for resource, name, ns in objs:
            if await get_or_none(env.client, resource, name, ns) is not None:
                return False
        return True

    await eventually(all_gone, within=within, what=f"{[o[1] for o in objs]} to be deleted")


async def test_the_node_stays_until_its_drained_pods_volume_detaches(env: Env) -> None:
    node = await ready_node(env)
    _, pvc, va = await attached_volume(env, node)
    workload = unique("db")
    await env.client.create(PODS, with_claim(pod(workload, node), pvc), namespace=env.ns)
    await running(env, workload)

    await env.client.delete(NODECLAIMS, node)
    await gone(env, (PODS, workload, env.ns))  # drained as usual

    async def awaiting() -> bool:
        nc = await get_or_none(env.client, NODECLAIMS, node)
        c = condition(nc, "VolumesDetached")
        return c is not None and (c["status"], c["reason"]) == (
            "Unknown",
            "AwaitingVolumeDetachment",
        )

    await eventually(awaiting, within=30, what="VolumesDetached=Unknown on the nodeclaim")
    assert is_true(await env.client.get(NODECLAIMS, node), "Drained")
    assert await eventually(
        lambda: events_for(env.client, node, "AwaitingVolumeDetachment"),
        within=10,
        what="an AwaitingVolumeDetachment event on the node",
    )
    for _ in range(3):  # still there a few requeues later
        assert await get_or_none(env.client, NODES, node) is not None
        assert await get_or_none(env.client, NODECLAIMS, node) is not None
        await asyncio.sleep(1)

    await force_delete(env.client, VOLUMEATTACHMENTS, va)
    await gone(env, (NODES, node, None), (NODECLAIMS, node, None), within=30)


async def test_volumes_of_pods_that_stay_do_not_hold_the_node(env: Env) -> None:
    node = await ready_node(env)
    _, pvc, va = await attached_volume(env, node)
    agent = unique("agent")
    body = with_claim(pod(agent, node), pvc)
    body["spec"]["tolerations"] = [{"key": TAINT_DISRUPTED_KEY, "operator": "Exists"}]
    await env.client.create(PODS, body, namespace=env.ns)
    await running(env, agent)

    await env.client.delete(NODECLAIMS, node)
    await gone(env, (NODES, node, None), (NODECLAIMS, node, None), within=30)
    assert await get_or_none(env.client, VOLUMEATTACHMENTS, va) is not None  # never waited on


async def test_binding_a_pod_stamps_last_pod_event_time(env: Env) -> None:
    node = await ready_node(env)
    before = await env.client.get(NODECLAIMS, node)
    assert "lastPodEventTime" not in (before.get("status") or {})

    name = unique("p")
    body = pod(name, node)
    del body["spec"]["nodeName"]  # let kube-scheduler bind it
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    await env.client.create(PODS, body, namespace=env.ns)

    async def stamped() -> str | None:
        nc = await get_or_none(env.client, NODECLAIMS, node)
        return ((nc or {}).get("status") or {}).get("lastPodEventTime")

    assert await eventually(stamped, within=30, what="lastPodEventTime on the nodeclaim")
    bound = await env.client.get(PODS, name, namespace=env.ns)
    assert bound["spec"]["nodeName"] == node


async def test_a_launched_node_is_found_consistent(env: Env) -> None:
    node = await ready_node(env)

    async def consistent() -> bool:
        return is_true(await get_or_none(env.client, NODECLAIMS, node), "ConsistentStateFound")

    await eventually(consistent, within=30, what="ConsistentStateFound=True")
