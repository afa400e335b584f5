"""The manager's wiring: one flat list of controllers, each woken by the kinds it declares, and
the cluster state taking in every delivery before any controller hears it."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.controllers.provisioning.provisioner import Provisioner
from karpenter_py.controllers.runtime import EVERY_NODECLASS, Watch
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import KubeConfig
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import EC2NODECLASSES, KWOKNODECLASSES, NODES, PODS
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.manager.app import App
from karpenter_py.manager.settings import FeatureGates, Settings, parse_feature_gates
from karpenter_py.manager.wiring import Kind, kind_sinks
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import PodSink
from tests.unit.fakes import FakeNodeAPI, FakeWriter


def wire_pod(name: str, *, node: str = "") -> KubeObject:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    status: dict[str, Any] = {"phase": "Pending"}
    if node:
        spec["nodeName"] = node
    else:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": spec,
        "status": status,
    }


def test_every_watch_hears_a_delivery_only_after_the_state_took_it_in() -> None:
    cluster = Cluster()
    heard: list[tuple[str, str, bool]] = []

    def recorder(label: str) -> Watch:
        def upsert(obj: KubeObject) -> None:
            heard.append((label, "upsert", "default/" + obj["metadata"]["name"] in cluster.pods))

        def delete(obj: KubeObject) -> None:
            heard.append((label, "delete", "default/" + obj["metadata"]["name"] in cluster.pods))

        return Watch(PODS, upsert=upsert, delete=delete)

    [(_, sink)] = kind_sinks([Kind(PODS, [PodSink(cluster)])], [recorder("a"), recorder("b")])
    sink.listed([wire_pod("listed")])
    sink.synced()
    sink.upsert(wire_pod("added"))
    sink.delete(wire_pod("listed"))

    assert heard == [
        (
            "a",
            "upsert",
            True,
        ),  # the first list: one upsert per object, after the state took the page in
        ("b", "upsert", True),
        ("a", "upsert", True),
        ("b", "upsert", True),
        ("a", "delete", False),  # already gone from the state
        ("b", "delete", False),
    ]
    assert cluster.unsynced() == ["nodes", "nodeclaims", "nodepools", "daemonsets", "nodeclasses"]


async def test_the_provisioner_reads_the_pod_it_was_woken_for_from_the_state() -> None:
    """The trigger that used to depend on sink order: the provisioner looks the pod up in the
    state; wired through the manager it always finds it there."""
    cluster = Cluster()
    batcher: Batcher[str] = Batcher(idle=0.01, max_window=0.05)
    provisioner = Provisioner(
        RoundRunner(
            cluster=cluster,
            writer=FakeWriter(),
            cloud=KwokCloudProvider(FakeNodeAPI(), kwok_catalog()),
            clock=FakeClock(),
        ),
        batcher,
    )
    pods = [Kind(PODS, [PodSink(cluster)])]
    [(_, sink)] = kind_sinks(pods, [w for w in provisioner.watches() if w.kind == PODS])

    sink.upsert(wire_pod("pending"))
    sink.upsert(wire_pod("bound", node="n1"))  # not provisionable: no trigger

    assert await batcher.wait() == ("uid-pending",)


def test_a_watch_no_reflector_serves_is_a_wiring_error() -> None:
    with pytest.raises(ValueError, match="no reflector serves a watch of"):
        kind_sinks([Kind(PODS, [])], [Watch(NODES, upsert=lambda obj: None)])


def test_every_nodeclass_watches_reach_each_nodeclass_kind_and_no_other() -> None:
    heard: list[str] = []
    kinds = [
        Kind(KWOKNODECLASSES, [], nodeclass=True),
        Kind(EC2NODECLASSES, [], nodeclass=True),
        Kind(PODS, []),
    ]
    watch = Watch(EVERY_NODECLASS, upsert=lambda obj: heard.append(obj["kind"]))
    sinks = kind_sinks(kinds, [watch])
    for kind, sink in sinks:
        sink.upsert({"kind": kind.resource.kind, "metadata": {"name": "x"}})

    assert heard == ["KWOKNodeClass", "EC2NodeClass"]


def test_the_app_keeps_one_list_of_controllers_and_one_reflector_per_kind() -> None:
    app = App(Settings(), KubeClient(KubeConfig(server="https://127.0.0.1:1")))

    assert [c.name for c in app.controllers] == [
        "events",
        "provisioner",
        "pod.nomination",
        "nodeclaim.lifecycle",
        "nodeclaim.garbagecollection",
        "nodeclaim.termination",
        "eviction-queue",
        "node.termination",
        "nodepool.counter",
        "nodepool.readiness",
        "nodeclaim.expiration",
        "nodeclaim.disruption",
        "disruption",
        "nodeclaim.podevents",
        "nodeclaim.consistency",
    ]
    assert [r.name for r in app.reflectors] == [
        "nodes",
        "nodeclaims",
        "pods",
        "nodepools",
        "daemonsets",
        "pdbs",
        "persistentvolumeclaims",
        "persistentvolumes",
        "storageclasses",
        "kwoknodeclasses",
        "namespaces",
    ]


@pytest.mark.parametrize(
    ("gates", "controller", "reflector", "synced_waits_for_overlays"),
    [
        # Gate off (upstream's default): NodeOverlays are neither watched nor waited for.
        ("", False, False, False),
        ("NodeOverlay=true", True, True, True),
    ],
)
def test_node_overlays_are_wired_only_with_their_gate(
    gates: str, controller: bool, reflector: bool, synced_waits_for_overlays: bool
) -> None:
    settings = Settings(feature_gates=parse_feature_gates(gates))
    app = App(settings, KubeClient(KubeConfig(server="https://127.0.0.1:1")))

    assert ("nodeoverlay" in [c.name for c in app.controllers]) is controller
    assert ("nodeoverlays" in [r.name for r in app.reflectors]) is reflector
    assert ("nodeoverlays" in app.cluster.unsynced()) is synced_waits_for_overlays


def test_node_repair_runs_and_reports_only_with_its_feature_gate() -> None:
    """Gate off (upstream's default): no node.health controller and /debug/disruption as
    before; gate on: the controller after the others and a ``repair`` section in the report."""
    client = KubeClient(KubeConfig(server="https://127.0.0.1:1"))
    off = App(Settings(), client)
    on = App(Settings(feature_gates=FeatureGates(node_repair=True)), client)

    assert "node.health" not in [c.name for c in off.controllers]
    assert [c.name for c in on.controllers][-2:] == ["nodeclaim.consistency", "node.health"]
    assert off.disruption_report() == off.disruption.report()
    assert on.disruption_report() == {
        **on.disruption.report(),
        "repair": {
            "policies": [
                {"condition": "Ready=False", "tolerationSeconds": 1800.0},
                {"condition": "Ready=Unknown", "tolerationSeconds": 1800.0},
            ],
            "nodes": {},
        },
    }
    assert [r.name for r in on.reflectors] == [r.name for r in off.reflectors]


@pytest.mark.parametrize(
    ("settings", "windows"),
    [
        (Settings(), (1.0, 10.0, 1.0)),
        (
            Settings(batch_idle_duration=2, batch_max_duration=20, batch_first_max_duration=20),
            (2.0, 20.0, 20.0),
        ),
    ],
)
def test_the_provisioners_batcher_takes_the_three_batch_settings(
    settings: Settings, windows: tuple[float, float, float]
) -> None:
    app = App(settings, KubeClient(KubeConfig(server="https://127.0.0.1:1")))
    batcher = app.batcher
    assert (batcher.idle, batcher.max_window, batcher.first_window) == windows
