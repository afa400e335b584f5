"""After the drain: minimum drain time, which VolumeAttachments block, the grace-period cut-off,
and the node termination controller walking through them with a fake API and clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.controllers.termination.eviction import EvictionQueue
from karpenter_py.controllers.termination.node import NodeTermination
from karpenter_py.controllers.termination.volumes import (
    attachment_pv,
    attachments_on,
    blocking_attachments,
    grace_period_elapsed,
    min_drain_remaining,
    pending_volume_attachments,
    staying_claims,
)
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.events import EventRecorder, EventType
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import (
    NODECLAIMS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    VOLUMEATTACHMENTS,
)
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Pod, node_from_dict, pod_from_dict
from karpenter_py.state.cluster import Cluster
from tests.unit.fakes import FakeCloudProvider, FakeKube, deps, into_cluster

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def va(name: str, node: str, pv: str | None) -> KubeObject:
    source: dict[str, Any] = {"persistentVolumeName": pv} if pv else {"inlineVolumeSpec": {}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": "csi.example.com", "nodeName": node, "source": source},
    }


def mk_pod(
    name: str,
    *,
    claims: tuple[str, ...] = (),
    tolerate: bool = False,
    mirror: bool = False,
    ds: bool = False,
    phase: str = "Running",
    deleted: datetime | None = None,
    namespace: str = "ns",
) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "x"}
    if ds:
        meta["ownerReferences"] = [{"kind": "DaemonSet", "name": "d", "controller": True}]
    if deleted is not None:
        meta["deletionTimestamp"] = ts(deleted)
    spec: dict[str, Any] = {
        "nodeName": "n1",
        "containers": [],
        "volumes": [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ],
    }
    if tolerate:
        spec["tolerations"] = [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]
    return pod_from_dict({"metadata": meta, "spec": spec, "status": {"phase": phase}})


# ----------------------------------------------------------------------------- pure pieces


@pytest.mark.parametrize(
    ("tainted", "remaining"),
    [
        (None, 5.0),  # not tainted yet: the whole minimum is ahead
        (NOW, 5.0),
        (NOW - timedelta(seconds=3), 2.0),
        (NOW - timedelta(seconds=5), 0.0),
        (NOW - timedelta(minutes=1), 0.0),
    ],
)
def test_min_drain_time(tainted: datetime | None, remaining: float) -> None:
    assert min_drain_remaining(tainted, NOW) == remaining


@pytest.mark.parametrize(
    ("deadline", "elapsed"),
    [
        (None, False),  # no terminationGracePeriod: wait as long as it takes
        (NOW + timedelta(seconds=1), False),
        (NOW, True),
        (NOW - timedelta(seconds=1), True),
    ],
)
def test_grace_period_cut_off(deadline: datetime | None, elapsed: bool) -> None:
    assert grace_period_elapsed(deadline, NOW) is elapsed


def test_only_the_nodes_attachments_with_a_pv_of_no_staying_pod_block() -> None:
    attachments = [
        va("a", "n1", "pv-drained"),
        va("b", "n1", "pv-staying"),
        va("c", "n1", None),  # inline volume: upstream never waits for these
        va("d", "n2", "pv-other-node"),
    ]
    on_node = attachments_on(attachments, "n1")
    assert [v["metadata"]["name"] for v in on_node] == ["a", "b", "c"]
    assert attachment_pv(attachments[2]) == ""
    blocking = blocking_attachments(on_node, {"pv-staying"})
    assert [v["metadata"]["name"] for v in blocking] == ["a"]


def test_staying_claims_are_those_of_pods_the_drain_leaves() -> None:
    pods = [
        mk_pod("web", claims=("web-data",)),  # drainable: its volume must detach
        mk_pod("ds", claims=("ds-data",), ds=True),  # DaemonSets are drained too
        mk_pod("done", claims=("done-data",), phase="Succeeded"),  # terminal, still drainable
        mk_pod("agent", claims=("agent-data", "shared"), tolerate=True),
        mk_pod("static", claims=("static-data",), mirror=True),
        mk_pod("stuck", claims=("stuck-data",), deleted=NOW - timedelta(minutes=2)),
        mk_pod("leaving", claims=("leaving-data",), deleted=NOW - timedelta(seconds=10)),
        mk_pod("other", claims=("shared",), tolerate=True, namespace="other"),
    ]
    assert staying_claims(pods, NOW) == [
        ("ns", "agent-data"),
        ("ns", "shared"),
        ("ns", "static-data"),
        ("ns", "stuck-data"),
        ("other", "shared"),
    ]


# ----------------------------------------------------------------------------- fakes


def guarded_status_patches(client: FakeKube) -> None:
    """NodeClaim writes are status merge patches, Node writes merge patches of the finalizers,
    each guarded by resourceVersion."""
    for c in client.calls_of("patch"):
        if c.plural == "nodeclaims":
            assert (c.subresource, c.patch_type) == ("status", PatchType.MERGE)
        else:
            assert (c.plural, c.subresource, c.patch_type) == ("nodes", None, PatchType.MERGE)
            assert list(c.body["metadata"]) == ["resourceVersion", "finalizers"]
        assert "resourceVersion" in c.body["metadata"]


def requests(client: FakeKube) -> list[tuple[str, str, str]]:
    """(verb, resource, name) of the API requests, events aside."""
    return [(c.verb, c.plural, c.name) for c in client.calls if c.plural != "events"]


class CapturingRecorder(EventRecorder):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.reasons: list[tuple[str, str]] = []

    def record(
        self,
        involved: KubeObject,
        reason: str,
        message: str,
        *,
        event_type: EventType = "Normal",
        dedupe: bool = True,
        dedupe_values: tuple[str, ...] | None = None,
        dedupe_window: float | None = None,
    ) -> None:
        self.reasons.append((reason, message))
        super().record(
            involved,
            reason,
            message,
            event_type=event_type,
            dedupe=dedupe,
            dedupe_values=dedupe_values,
            dedupe_window=dedupe_window,
        )


class NoEvictions:
    async def evict(self, name: str, **_: Any) -> None:
        raise AssertionError("not in these tests")


def setup(
    clock: FakeClock, *, deadline: datetime | None = None
) -> tuple[NodeTermination, FakeKube, FakeCloudProvider, CapturingRecorder, Cluster]:
    cluster = Cluster()
    client = FakeKube(on_write=into_cluster(cluster))
    cloud = FakeCloudProvider()
    cloud.launched("n1")
    recorder = CapturingRecorder(client, clock=clock)
    node_raw: KubeObject = {
        "metadata": {
            "name": "n1",
            "uid": "uid-n1",
            "deletionTimestamp": ts(clock.now()),
            "finalizers": ["karpenter.sh/termination"],
            "resourceVersion": "7",
            "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "karpenter"},
        },
        "spec": {
            "providerID": "fake://n1",
            "taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    client.put(NODES, node_raw)
    cluster.upsert_node(node_from_dict(node_raw))
    annotations = {}
    if deadline is not None:
        annotations["karpenter.sh/nodeclaim-termination-timestamp"] = ts(deadline)
    nc_raw: KubeObject = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "n1",
            "uid": "uid-nc",
            "resourceVersion": "1",
            "deletionTimestamp": ts(clock.now()),
            "finalizers": ["karpenter.sh/termination"],
            "annotations": annotations,
        },
        "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "d"}, "requirements": []},
        "status": {"providerID": "fake://n1", "nodeName": "n1"},
    }
    client.put(NODECLAIMS, nc_raw)
    cluster.upsert_nodeclaim(NodeClaim.model_validate(nc_raw))
    evictions = EvictionQueue(NoEvictions(), recorder)
    controller = NodeTermination(
        deps(client=client, cluster=cluster, cloud=cloud, recorder=recorder, clock=clock), evictions
    )
    return controller, client, cloud, recorder, cluster


def cond(cluster: Cluster, type_: str) -> tuple[str, str] | None:
    c = cluster.nodeclaims["n1"].status.get_condition(type_)
    return None if c is None else (c.status, c.reason)


# ----------------------------------------------------------------------------- the controller


async def test_min_drain_time_then_volumes_then_instance() -> None:
    clock = FakeClock(NOW)
    controller, client, cloud, recorder, cluster = setup(clock)
    client.replace_all(VOLUMEATTACHMENTS, va("a", "n1", "pv-a"), va("other", "n2", "pv-x"))

    # Nothing to drain, but the taint is brand new: wait out the minimum drain time.
    result = await controller.reconcile("n1")
    assert result is not None
    assert result.requeue_after == 5.0
    assert cond(cluster, "Drained") is None
    assert cloud.deleted == []

    clock.step(3)
    result = await controller.reconcile("n1")
    assert result is not None
    assert result.requeue_after == pytest.approx(2.0)

    # Drained; one attachment of a drained volume remains: wait for it, every second.
    clock.step(2)
    result = await controller.reconcile("n1")
    assert result is not None
    assert result.requeue_after == 1.0
    assert cond(cluster, "Drained") == ("True", "Drained")
    assert cond(cluster, "VolumesDetached") == ("Unknown", "AwaitingVolumeDetachment")
    assert (
        "AwaitingVolumeDetachment",
        "Awaiting deletion of 1 VolumeAttachments bound to node",
    ) in recorder.reasons
    assert cloud.deleted == []

    result = await controller.reconcile("n1")  # still there
    assert result is not None
    assert result.requeue_after == 1.0
    assert cloud.deleted == []

    client.replace_all(VOLUMEATTACHMENTS, va("other", "n2", "pv-x"))
    result = await controller.reconcile("n1")
    assert cond(cluster, "VolumesDetached") == ("True", "VolumesDetached")
    assert cloud.deleted == ["fake://n1"]
    assert cond(cluster, "InstanceTerminating") == ("True", "InstanceTerminating")
    assert result is not None
    assert result.requeue_after == 5.0

    # Decided: the next pass does not list attachments again; the instance is gone -> release.
    lists = sum(1 for c in requests(client) if c[0] == "list")
    assert await controller.reconcile("n1") is None
    assert sum(1 for c in requests(client) if c[0] == "list") == lists
    assert not client.has(NODES, "n1")
    guarded_status_patches(client)


async def test_a_pod_bound_during_the_minimum_drain_time_is_drained() -> None:
    clock = FakeClock(NOW)
    controller, _, _, _, cluster = setup(clock)
    await controller.reconcile("n1")
    clock.step(4)
    late = mk_pod("late")
    cluster.upsert_pod(late)
    result = await controller.reconcile("n1")
    assert result is not None
    assert result.requeue_after == 1.0
    assert late in controller.evictions
    assert cond(cluster, "Drained") == ("Unknown", "Draining")


async def test_the_grace_period_cuts_the_volume_wait_short() -> None:
    clock = FakeClock(NOW)
    controller, client, cloud, _recorder, cluster = setup(
        clock, deadline=NOW + timedelta(seconds=8)
    )
    client.replace_all(VOLUMEATTACHMENTS, va("a", "n1", "pv-a"))
    await controller.reconcile("n1")
    clock.step(5)
    result = await controller.reconcile("n1")
    assert result is not None
    assert result.requeue_after == 1.0
    assert cond(cluster, "VolumesDetached") == ("Unknown", "AwaitingVolumeDetachment")

    clock.step(3)  # at the deadline
    result = await controller.reconcile("n1")
    assert cond(cluster, "VolumesDetached") == ("False", "TerminationGracePeriodElapsed")
    assert cloud.deleted == ["fake://n1"]
    assert result is not None
    assert result.requeue_after == 5.0


async def test_attachments_of_staying_pods_do_not_block() -> None:
    clock = FakeClock(NOW)
    controller, client, cloud, _, cluster = setup(clock)
    cluster.upsert_pod(mk_pod("agent", claims=("agent-data", "missing"), tolerate=True))
    client.put(
        PERSISTENTVOLUMECLAIMS,
        {"metadata": {"name": "agent-data", "namespace": "ns"}, "spec": {"volumeName": "pv-agent"}},
    )
    client.replace_all(VOLUMEATTACHMENTS, va("a", "n1", "pv-agent"))
    await controller.reconcile("n1")
    clock.step(5)
    await controller.reconcile("n1")
    assert cond(cluster, "VolumesDetached") == ("True", "VolumesDetached")
    assert cloud.deleted == ["fake://n1"]


async def test_pending_attachments_skip_claim_reads_when_nothing_is_attached() -> None:
    client = FakeKube()
    client.replace_all(VOLUMEATTACHMENTS, va("x", "n2", "pv-x"))
    pods = [mk_pod("agent", claims=("agent-data",), tolerate=True)]
    assert await pending_volume_attachments(client, pods, "n1", NOW) == []
    assert requests(client) == [("list", "volumeattachments", "")]

    client.put(VOLUMEATTACHMENTS, va("y", "n1", "pv-y"))
    pending = await pending_volume_attachments(client, pods, "n1", NOW)
    assert [v["metadata"]["name"] for v in pending] == ["y"]
    assert ("get", "persistentvolumeclaims", "agent-data") in requests(client)
