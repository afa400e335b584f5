"""Garbage collection both ways: NodeClaims whose instance vanished, instances nobody claims."""

from __future__ import annotations

import builtins
from typing import Any, cast

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.controllers.nodeclaim.garbagecollection import NodeClaimGarbageCollector
from karpenter_py.kube.events import EventRecorder
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import node_from_dict
from karpenter_py.state.cluster import Cluster


def claim(name: str, *, pid: str = "", registered: bool = True) -> NodeClaim:
    nc = NodeClaim.model_validate(
        {
            "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "d"}, "requirements": []},
            "status": {"providerID": pid},
        }
    )
    if registered:
        nc.status.set_condition("Registered", "True", now=FakeClock().now())
    return nc


def node(name: str, *, ready: bool) -> Any:
    return node_from_dict(
        {
            "metadata": {"name": name},
            "spec": {"providerID": f"fake://{name}"},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
        }
    )


class FakeCloud:
    name = "fake"

    def __init__(self, *instances: str) -> None:
        self.instances = {f"fake://{n}": n for n in instances}
        self.deleted: list[str] = []

    async def list(self) -> builtins.list[NodeClaim]:
        return [claim(n, pid=p, registered=False) for p, n in self.instances.items()]

    async def delete(self, nodeclaim: NodeClaim) -> None:
        if self.instances.pop(nodeclaim.status.provider_id, None) is None:
            raise NodeClaimNotFoundError(nodeclaim.status.provider_id)
        self.deleted.append(nodeclaim.status.provider_id)


class FakeClient:
    def __init__(self) -> None:
        self.deleted: list[tuple[str, str | None]] = []

    async def delete(self, resource: Any, name: str, *, uid: str | None = None, **_: Any) -> None:
        self.deleted.append((name, uid))

    async def create_event(self, event: Any, *, namespace: str | None = None) -> Any:
        return event


def collector(
    cluster: Cluster, cloud: FakeCloud, client: FakeClient, clock: FakeClock
) -> NodeClaimGarbageCollector:
    recorder = EventRecorder(client, clock=clock)
    return NodeClaimGarbageCollector(
        cast(Any, client), cluster, cast(Any, cloud), recorder, clock=clock, orphan_grace=30
    )


async def test_nodeclaims_whose_instance_vanished_are_deleted() -> None:
    cluster, cloud, client, clock = Cluster(), FakeCloud("alive"), FakeClient(), FakeClock()
    for nc in (
        claim("alive", pid="fake://alive"),
        claim("vanished", pid="fake://vanished"),
        claim("vanished-but-ready", pid="fake://vanished-but-ready"),
        claim("launching", pid="fake://launching", registered=False),  # liveness owns it
        claim("no-pid"),
    ):
        cluster.upsert_nodeclaim(nc)
    cluster.upsert_node(node("vanished", ready=False))
    cluster.upsert_node(node("vanished-but-ready", ready=True))
    result = await collector(cluster, cloud, client, clock).collect()
    assert result.nodeclaims_deleted == ["vanished"]
    assert client.deleted == [("vanished", "uid-vanished")]


async def test_unclaimed_instances_are_terminated_after_the_grace() -> None:
    cluster, client, clock = Cluster(), FakeClient(), FakeClock()
    cloud = FakeCloud("claimed", "orphan", "mid-launch")
    cluster.upsert_nodeclaim(claim("claimed", pid="fake://claimed"))
    cluster.upsert_nodeclaim(claim("mid-launch", registered=False))  # status not written yet
    gc = collector(cluster, cloud, client, clock)
    assert (await gc.collect()).instances_deleted == []  # first sighting starts the clock
    clock.step(29)
    assert (await gc.collect()).instances_deleted == []
    clock.step(2)
    assert (await gc.collect()).instances_deleted == ["fake://orphan"]
    assert cloud.deleted == ["fake://orphan"]
    assert set(cloud.instances) == {"fake://claimed", "fake://mid-launch"}
