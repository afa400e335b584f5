"""A stand-in for the kubelet and the cloud node controller, for instances moto launches.

moto runs no machines, so nothing would ever register. :class:`FakeKubelet` polls EC2 (over
HTTP, like everything else) for the cluster's instances and:

* for each new pending/running instance, creates the Node its kubelet would register: named by
  the instance's private DNS name, providerID ``aws:///<zone>/<instance-id>``, the well-known
  labels a kubelet and the cloud provider set (arch, os, instance type, zone, region, hostname),
  the capacity and allocatable of its instance type, the ``karpenter.sh/unregistered`` taint the
  user data registers with, and kwok's annotation so the test control plane's kwok marks it Ready
  and runs its pods;
* deletes the Node of an instance that is gone or shutting down (the cloud node controller's
  job), which is how a termination outside Karpenter shows up in the cluster.

``launched`` records each instance's type in launch order, for the tests' assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.kube import NODES, KubeClient, KubeError, NotFoundError
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    KWOK_NODE_ANNOTATION,
    LABEL_ARCH,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    TAINT_UNREGISTERED_KEY,
)
from karpenter_py.model.quantity import format_resources

log = logging.getLogger("tests.awskubelet")

LIVE_STATES = ("pending", "running")
KWOK_NODE_LABEL = "kwok.x-k8s.io/node"
MANAGED_LABEL = "tests.karpenter-py/fake-kubelet"


@dataclass
class FakeKubelet:
    client: KubeClient
    aws: AwsClients
    cluster_name: str
    instance_type: Callable[[str], InstanceType | None]
    poll: float = 0.5
    launched: list[tuple[str, str]] = field(default_factory=list)  # (instance id, type)
    nodes: dict[str, str] = field(default_factory=dict)  # instance id -> node name

    async def sync_once(self) -> None:
        resp = await self.aws.ec2.describe_instances(
            Filters=[{"Name": "tag:eks:eks-cluster-name", "Values": [self.cluster_name]}]
        )
        live: set[str] = set()
        for reservation in resp.get("Reservations") or []:
            for inst in reservation.get("Instances") or []:
                iid = inst["InstanceId"]
                if inst["State"]["Name"] not in LIVE_STATES:
                    continue
                live.add(iid)
                if iid not in self.nodes:
                    await self._register_or_wait(inst)
        for iid in [i for i in self.nodes if i not in live]:
            name = self.nodes.pop(iid)
            with contextlib.suppress(NotFoundError):
                await self.client.delete(NODES, name)

    async def _register_or_wait(self, inst: dict[str, object]) -> None:
        """Register one instance; a failure waits for the next pass and spares the others."""
        try:
            await self._register(inst)
        except KubeError as e:
            # E.g. 409 "object is being deleted": moto reuses a terminated instance's private IP,
            # so the Node name can still belong to the old Node; a real kubelet keeps retrying.
            log.warning("fake kubelet: registering %s failed: %s", inst["InstanceId"], e)

    async def _register(self, inst: dict[str, object]) -> None:
        iid = str(inst["InstanceId"])
        type_name = str(inst["InstanceType"])
        placement = inst.get("Placement")
        zone = str(placement.get("AvailabilityZone")) if isinstance(placement, dict) else ""
        name = str(inst.get("PrivateDnsName") or iid)
        it = self.instance_type(type_name)
        arch = "arm64" if inst.get("Architecture") == "arm64" else "amd64"
        if it is not None:
            arch = next(iter(it.requirements.get(LABEL_ARCH, {arch})))
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    LABEL_INSTANCE_TYPE: type_name,
                    LABEL_TOPOLOGY_ZONE: zone,
                    LABEL_TOPOLOGY_REGION: zone[:-1],
                    LABEL_ARCH: arch,
                    LABEL_OS: "linux",
                    LABEL_HOSTNAME: name,
                    KWOK_NODE_LABEL: "fake",
                    MANAGED_LABEL: "true",
                },
                "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            },
            "spec": {
                "providerID": f"aws:///{zone}/{iid}",
                "taints": [{"key": TAINT_UNREGISTERED_KEY, "effect": "NoExecute"}],
            },
            "status": {
                "capacity": format_resources(it.capacity) if it else {},
                "allocatable": format_resources(it.allocatable) if it else {},
                "phase": "Running",
            },
        }
        await self.client.create(NODES, body)
        self.nodes[iid] = name
        self.launched.append((iid, type_name))

    async def run(self) -> None:
        while True:
            try:
                await self.sync_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # a test helper that stops would look like a product bug
                log.exception("fake kubelet sync failed")
            await asyncio.sleep(self.poll)

    async def cleanup(self) -> None:
        for name in list(self.nodes.values()):
            with contextlib.suppress(NotFoundError):
                await self.client.delete(NODES, name)
        self.nodes.clear()


@contextlib.asynccontextmanager
async def running_kubelet(kubelet: FakeKubelet) -> AsyncIterator[FakeKubelet]:
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(kubelet.run())
        try:
            yield kubelet
        finally:
            task.cancel()
            await kubelet.cleanup()
