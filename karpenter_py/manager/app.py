"""The composition root: builds the object graph and runs it under one TaskGroup.

Informers run on every replica (a standby keeps a warm cache); decision workers (provisioning,
NodeClaim lifecycle, termination, ...) run only while this replica holds the leader Lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import Clock, RealClock
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.controllers.provisioning.provisioner import Provisioner
from karpenter_py.informer.events import CallbackSink, Sink
from karpenter_py.informer.reflector import Reflector
from karpenter_py.informer.source import KubeListWatch
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import (
    DAEMONSETS,
    NAMESPACES,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
    Resource,
)
from karpenter_py.manager.adapters import KubeNodeAPI, KubeNodeClaimWriter
from karpenter_py.manager.leader import LeaderElector, Leadership, default_identity
from karpenter_py.manager.probes import serve
from karpenter_py.manager.settings import Settings
from karpenter_py.model.catalog import instance_types_from_kwok_json, kwok_catalog
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.obs.metrics import Metrics
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import (
    DaemonSetSink,
    NodeClaimSink,
    NodePoolSink,
    NodeSink,
    PodSink,
    object_key,
)

log = logging.getLogger("karpenter.manager")


def kwok_instance_types(path: str) -> list[InstanceType]:
    """INSTANCE_TYPES_FILE_PATH when set, else the built-in kwok catalog (144 types)."""
    if not path:
        return kwok_catalog()
    import json

    return instance_types_from_kwok_json(json.loads(Path(path).read_text()), source=path)


class App:
    def __init__(
        self,
        settings: Settings,
        client: KubeClient,
        *,
        clock: Clock | None = None,
        cloud: CloudProvider | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.client = client
        self.clock = clock or RealClock()
        self.metrics = metrics or Metrics()
        self.cluster = Cluster()
        self.cloud = cloud or KwokCloudProvider(
            KubeNodeAPI(client), kwok_instance_types(settings.instance_types_file_path)
        )
        self.batcher: Batcher[str] = Batcher(
            idle=settings.batch_idle_duration, max_window=settings.batch_max_duration
        )
        self.provisioner = Provisioner(
            cluster=self.cluster,
            writer=KubeNodeClaimWriter(client),
            cloud=self.cloud,
            clock=self.clock,
            batcher=self.batcher,
            options=SolveOptions(
                preference_policy=settings.preference_policy,
                min_values_policy=settings.min_values_policy,
            ),
        )
        self.reflectors = self._reflectors()

    # ------------------------------------------------------------------ wiring
    def _reflector(self, resource: Resource, name: str, sinks: Sequence[Sink]) -> Reflector:
        return Reflector(KubeListWatch(self.client, resource), name=name, sinks=sinks)

    def _reflectors(self) -> list[Reflector]:
        c = self.cluster
        return [
            self._reflector(NODES, "nodes", [NodeSink(c), CallbackSink(on_upsert=self._on_node)]),
            self._reflector(NODECLAIMS, "nodeclaims", [NodeClaimSink(c)]),
            self._reflector(PODS, "pods", [PodSink(c), CallbackSink(on_upsert=self._on_pod)]),
            self._reflector(NODEPOOLS, "nodepools", [NodePoolSink(c)]),
            self._reflector(DAEMONSETS, "daemonsets", [DaemonSetSink(c)]),
            self._reflector(NAMESPACES, "namespaces", [CallbackSink(on_upsert=self._on_namespace)]),
        ]

    def _on_pod(self, obj: KubeObject) -> None:
        pod = self.cluster.pods.get(object_key(obj))
        if pod is not None:
            self.provisioner.on_pod(pod)

    def _on_node(self, obj: KubeObject) -> None:
        if obj.get("metadata", {}).get("deletionTimestamp"):
            self.provisioner.on_node_deleting(object_key(obj))

    def _on_namespace(self, obj: KubeObject) -> None:
        meta = obj.get("metadata", {})
        self.cluster.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})

    # ------------------------------------------------------------------ running
    def ready(self) -> bool:
        return self.cluster.synced()

    async def run_informers(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for r in self.reflectors:
                tg.create_task(r.run())

    async def run_decisions(self) -> None:
        """Everything that writes decisions; run only by the leader."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.provisioner.run())

    async def run(self, *, identity: str | None = None, host: str = "0.0.0.0") -> None:
        """Probes and informers on every replica; decisions only while leading.

        Losing the Lease raises ``LeadershipLost`` out of the TaskGroup: the process exits and
        its pod restarts as a standby, as controller-runtime does.
        """
        s = self.settings
        async with asyncio.TaskGroup() as tg:
            tg.create_task(
                serve(
                    readiness={"caches-synced": self.ready},
                    metrics=self.metrics,
                    host=host,
                    health_port=s.health_probe_port,
                    metrics_port=s.metrics_port,
                )
            )
            tg.create_task(self.run_informers())
            if s.disable_leader_election:
                leadership = Leadership.unconditional()
            else:
                elector = LeaderElector(
                    self.client,
                    name=s.leader_election_name,
                    namespace=s.leader_election_namespace,
                    identity=identity or default_identity(),
                    on_change=self._leadership_changed,
                )
                tg.create_task(elector.run())
                leadership = elector.leadership
            await leadership.wait_for_leadership()
            log.info("leading: starting decision workers")
            tg.create_task(self.run_decisions())

    def _leadership_changed(self, leading: bool) -> None:
        gauge = self.metrics.leader_election_master_status.labels(
            name=self.settings.leader_election_name
        )
        gauge.set(1 if leading else 0)
