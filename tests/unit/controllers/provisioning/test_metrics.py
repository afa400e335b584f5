"""A provisioning round, observed through the provisioner's ``observe`` hook, updates the
``karpenter_scheduler_*`` and scheduling-decision metrics a scrape returns."""

from __future__ import annotations

from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.controllers.provisioning.provisioner import Provisioner
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.manager.statemetrics import SchedulingMetrics
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.core import Pod, pod_from_dict
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import KINDS, Cluster
from tests import factories
from tests.unit.fakes import FakeNodeAPI, FakeWriter
from tests.unit.obs.exposition import scrape, series, value

CTRL = {"controller": "provisioner"}


def nodepool() -> NodePool:
    return factories.nodepool(uid="np-uid")


def pending(name: str, cpu: str = "1") -> Pod:
    return factories.pod(name, uid=f"uid-{name}", cpu=cpu, memory=None, owner=None, pending=True)


def setup(pods: list[Pod]) -> tuple[Cluster, Provisioner, SchedulingMetrics, Metrics, FakeClock]:
    cluster = Cluster()
    cluster.upsert_nodepool(nodepool())
    cluster.upsert_nodeclass(("karpenter.kwok.sh", "KWOKNodeClass", "default"), True)
    for pod in pods:
        cluster.upsert_pod(pod)
    for kind in KINDS:
        cluster.mark_synced(kind)
    clock, metrics = FakeClock(), Metrics()
    observer = SchedulingMetrics(metrics, cluster, clock)
    prov = Provisioner(
        RoundRunner(
            cluster=cluster,
            writer=FakeWriter(),
            cloud=KwokCloudProvider(FakeNodeAPI(), kwok_catalog()),
            clock=clock,
        ),
        Batcher(idle=0.01, max_window=0.05),
        observe=observer.observe_round,
    )
    return cluster, prov, observer, metrics, clock


async def test_a_round_updates_the_scheduler_metrics() -> None:
    pods = [pending("a"), pending("b"), pending("c"), pending("huge", cpu="100000")]
    _, prov, observer, metrics, clock = setup(pods)
    for pod in pods:
        observer.pod_seen(pod)
    clock.step(2.0)

    result = await prov.provision()

    assert (result.pods, result.errors) == (4, 1)
    assert result.solve_seconds > 0
    assert sorted(result.decided) == sorted(p.key for p in pods)
    s = scrape(metrics)
    assert value(s, "karpenter_scheduler_scheduling_duration_seconds_count", **CTRL) == 1
    total = value(s, "karpenter_scheduler_scheduling_duration_seconds_sum", **CTRL)
    assert total == result.solve_seconds
    depth = series(s, "karpenter_scheduler_queue_depth")
    assert list(depth.values()) == [4.0]
    (labels,) = depth
    assert dict(labels)["controller"] == "provisioner"
    assert dict(labels)["scheduling_id"]
    assert value(s, "karpenter_scheduler_unschedulable_pods_count", **CTRL) == 1
    # Each pod was first seen 2 s (fake clock) before its first decision.
    assert value(s, "karpenter_pods_scheduling_decision_duration_seconds_count") == 4
    assert value(s, "karpenter_pods_scheduling_decision_duration_seconds_sum") == 8.0


async def test_later_rounds_replace_the_queue_depth_series_and_decide_once() -> None:
    pods = [pending("a"), pending("huge", cpu="100000")]
    _, prov, observer, metrics, clock = setup(pods)
    for pod in pods:
        observer.pod_seen(pod)
    await prov.provision()
    first = set(series(scrape(metrics), "karpenter_scheduler_queue_depth"))

    for pod in pods:  # still pending: the watch delivers them again
        observer.pod_seen(pod)
    clock.step(5.0)
    await prov.provision()

    s = scrape(metrics)
    assert value(s, "karpenter_scheduler_scheduling_duration_seconds_count", **CTRL) == 2
    depth = series(s, "karpenter_scheduler_queue_depth")
    assert len(depth) == 1
    assert not set(depth) & first
    # A pod's decision is timed once, at its first decision.
    assert value(s, "karpenter_pods_scheduling_decision_duration_seconds_count") == 2


async def test_a_round_without_pods_reports_nothing() -> None:
    _, prov, _, metrics, _ = setup([])
    result = await prov.provision()
    assert result.pods == 0
    s = scrape(metrics)
    assert value(s, "karpenter_scheduler_scheduling_duration_seconds_count", **CTRL) is None
    assert series(s, "karpenter_scheduler_queue_depth") == {}


async def test_a_recreated_pod_is_timed_from_when_it_was_seen() -> None:
    cluster, prov, observer, metrics, clock = setup([pending("a")])
    observer.pod_seen(pending("a"))
    clock.step(10.0)
    cluster.delete_pod("default/a")
    observer.prune()
    again = pod_from_dict(
        {
            "metadata": {"name": "a", "namespace": "default", "uid": "uid-a-2"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ]
            },
        }
    )
    cluster.upsert_pod(again)
    observer.pod_seen(again)
    clock.step(3.0)
    await prov.provision()
    s = scrape(metrics)
    assert value(s, "karpenter_pods_scheduling_decision_duration_seconds_count") == 1
    assert value(s, "karpenter_pods_scheduling_decision_duration_seconds_sum") == 3.0
