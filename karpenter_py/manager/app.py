"""The composition root: builds the object graph and runs it under one TaskGroup.

Informers run on every replica (a standby keeps a warm cache); decision workers (provisioning,
NodeClaim lifecycle, termination, ...) run only while this replica holds the leader Lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import Clock, RealClock
from karpenter_py.cloudprovider.aws.nodeclass import NodeClassResolver
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.controllers.disruption.controller import Disruption
from karpenter_py.controllers.interruption.controller import Interruption
from karpenter_py.controllers.nodeclaim.consistency import NodeClaimConsistency
from karpenter_py.controllers.nodeclaim.disruption import NodeClaimDisruption
from karpenter_py.controllers.nodeclaim.expiration import NodeClaimExpiration
from karpenter_py.controllers.nodeclaim.garbagecollection import NodeClaimGarbageCollector
from karpenter_py.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpenter_py.controllers.nodeclaim.podevents import NodeClaimPodEvents
from karpenter_py.controllers.nodeclaim.tagging import NodeClaimTagging
from karpenter_py.controllers.nodeclass.status import KubernetesVersion, NodeClassStatus
from karpenter_py.controllers.nodepool.counter import NodePoolCounter
from karpenter_py.controllers.nodepool.readiness import NodePoolReadiness
from karpenter_py.controllers.provisioning.provisioner import Provisioner
from karpenter_py.controllers.termination.eviction import EvictionQueue
from karpenter_py.controllers.termination.node import NodeTermination
from karpenter_py.controllers.termination.nodeclaim import NodeClaimTermination
from karpenter_py.informer.events import CallbackSink, Sink
from karpenter_py.informer.reflector import Reflector
from karpenter_py.informer.source import KubeListWatch
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.events import EventRecorder, object_ref
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import (
    DAEMONSETS,
    EC2NODECLASSES,
    KWOKNODECLASSES,
    NAMESPACES,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODDISRUPTIONBUDGETS,
    PODS,
    STORAGECLASSES,
    Resource,
)
from karpenter_py.launcher.launch import Launcher
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.manager import webhook
from karpenter_py.manager.adapters import KubeNodeAPI, KubeNodeClaimWriter
from karpenter_py.manager.aws import AwsStack
from karpenter_py.manager.leader import LeaderElector, Leadership, default_identity
from karpenter_py.manager.probes import serve
from karpenter_py.manager.settings import Settings
from karpenter_py.manager.statemetrics import SchedulingMetrics, run_state_metrics
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.catalog import instance_types_from_kwok_json, kwok_catalog
from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import AWS_GROUP, KWOK_GROUP
from karpenter_py.obs.metrics import Metrics
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import (
    DaemonSetSink,
    NodeClaimSink,
    NodeClassSink,
    NodePoolSink,
    NodeSink,
    PDBSink,
    PersistentVolumeClaimSink,
    PersistentVolumeSink,
    PodSink,
    StorageClassSink,
    object_key,
)

log = logging.getLogger("karpenter.manager")

# NodeClass kinds a provider may declare: where they live in the API and how to read them.
NODECLASS_KINDS: dict[tuple[str, str], tuple[Resource, type[BaseModel]]] = {
    (KWOK_GROUP, "KWOKNodeClass"): (KWOKNODECLASSES, KWOKNodeClass),
    (AWS_GROUP, "EC2NodeClass"): (EC2NODECLASSES, EC2NodeClass),
}


def kwok_instance_types(path: str) -> list[InstanceType]:
    """INSTANCE_TYPES_FILE_PATH when set, else the built-in kwok catalog (144 types)."""
    if not path:
        return kwok_catalog()
    import json

    return instance_types_from_kwok_json(json.loads(Path(path).read_text()), source=path)


class ProvisioningEvents:
    """Pod events (upstream reasons) and the created-NodeClaims counter for the provisioner."""

    def __init__(self, recorder: EventRecorder, metrics: Metrics) -> None:
        self.recorder = recorder
        self.metrics = metrics

    @staticmethod
    def _ref(pod: Pod) -> KubeObject:
        return object_ref("v1", "Pod", pod.name, namespace=pod.namespace, uid=pod.uid or None)

    def pod_nominated(self, pod: Pod, target: str) -> None:
        self.recorder.record(self._ref(pod), "Nominated", f"Pod should schedule on: {target}")

    def pod_failed_scheduling(self, pod: Pod, reason: str) -> None:
        self.recorder.record(
            self._ref(pod),
            "FailedScheduling",
            f"Failed to schedule pod, {reason}",
            event_type="Warning",
        )

    def nodeclaim_created(self, nodepool: str, reason: str, min_values_relaxed: bool) -> None:
        self.metrics.nodeclaims_created.labels(
            reason=reason,
            nodepool=nodepool,
            min_values_relaxed="true" if min_values_relaxed else "false",
        ).inc()


class App:
    def __init__(
        self,
        settings: Settings,
        client: KubeClient,
        *,
        clock: Clock | None = None,
        cloud: CloudProvider | None = None,
        metrics: Metrics | None = None,
        aws: AwsStack | None = None,
    ) -> None:
        self.settings = settings
        self.aws = aws
        self.client = client
        self.clock = clock or RealClock()
        self.metrics = metrics or Metrics()
        self.cluster = Cluster()
        self.cloud = (
            cloud
            or (aws.provider if aws is not None else None)
            or KwokCloudProvider(
                KubeNodeAPI(client), kwok_instance_types(settings.instance_types_file_path)
            )
        )
        self.recorder = EventRecorder(client, clock=self.clock)
        # With AWS the launcher shares the cache the provider was built with.
        self.launcher = Launcher(
            self.cloud,
            clock=self.clock,
            unavailable=aws.offerings if aws is not None else None,
            metrics=self.metrics,
        )
        self.scheduling_metrics = SchedulingMetrics(self.metrics, self.cluster, self.clock)
        self.batcher: Batcher[str] = Batcher(
            idle=settings.batch_idle_duration, max_window=settings.batch_max_duration
        )
        options = SolveOptions(
            preference_policy=settings.preference_policy,
            min_values_policy=settings.min_values_policy,
        )
        # One round runner for provisioning and disruption: the same instance types, solver
        # and index cache.
        self.rounds = RoundRunner(
            cluster=self.cluster,
            writer=KubeNodeClaimWriter(client),
            cloud=self.cloud,
            clock=self.clock,
            offerings=self.launcher.unavailable,
            events=ProvisioningEvents(self.recorder, self.metrics),
            # Upstream: nominations last max(2 x BATCH_MAX_DURATION, 10 s).
            nomination_seconds=max(2 * settings.batch_max_duration, 10.0),
        )
        self.provisioner = Provisioner(
            cluster=self.cluster,
            writer=self.rounds.writer,
            cloud=self.cloud,
            clock=self.clock,
            batcher=self.batcher,
            options=options,
            observe=self.scheduling_metrics.observe_round,
            rounds=self.rounds,
        )
        self.disruption = Disruption(
            client=client,
            cluster=self.cluster,
            rounds=self.rounds,
            recorder=self.recorder,
            clock=self.clock,
            metrics=self.metrics,
            options=options,
            spot_to_spot=settings.feature_gates.spot_to_spot_consolidation,
        )
        self._build_lifecycle()
        self.reflectors = self._reflectors()

    def _build_lifecycle(self) -> None:
        client, cluster, cloud, clock, metrics = (
            self.client,
            self.cluster,
            self.cloud,
            self.clock,
            self.metrics,
        )
        rec = self.recorder
        self.lifecycle = NodeClaimLifecycle(
            client, cluster, cloud, self.launcher, rec, clock=clock, metrics=metrics
        )
        self.gc = NodeClaimGarbageCollector(
            client, cluster, cloud, rec, clock=clock, metrics=metrics
        )
        self.nodeclaim_termination = NodeClaimTermination(
            client, cluster, cloud, rec, clock=clock, metrics=metrics, launcher=self.launcher
        )
        self.evictions = EvictionQueue(client, rec, metrics=metrics)
        self.node_termination = NodeTermination(
            client, cluster, cloud, self.evictions, rec, clock=clock, metrics=metrics
        )
        self.expiration = NodeClaimExpiration(
            client, cluster, cloud, rec, clock=clock, metrics=metrics
        )
        # Consolidatable and Drifted conditions, which disruption reads.
        self.nodeclaim_disruption = NodeClaimDisruption(
            client, cluster, cloud, rec, clock=clock, metrics=metrics
        )
        self.readiness = NodePoolReadiness(client, cluster, clock=clock, metrics=metrics)
        self.counter = NodePoolCounter(client, cluster, clock=clock, metrics=metrics)
        self.podevents = NodeClaimPodEvents(client, cluster, clock=clock, metrics=metrics)
        self.consistency = NodeClaimConsistency(client, cluster, rec, clock=clock, metrics=metrics)
        self._build_aws()

    def _build_aws(self) -> None:
        """EC2NodeClass status, instance tagging and interruption (aws provider only)."""
        self.nodeclass_status: NodeClassStatus | None = None
        self.tagging: NodeClaimTagging | None = None
        self.interruption: Interruption | None = None
        aws = self.aws
        if aws is None:
            return
        resolver = NodeClassResolver(
            aws.clients,
            aws.cluster.name,
            kubernetes_version=KubernetesVersion(self.client, clock=self.clock),
            clock=self.clock,
        )
        self.nodeclass_status = NodeClassStatus(
            self.client,
            self.cluster,
            resolver,
            self.recorder,
            clock=self.clock,
            metrics=self.metrics,
        )
        self.tagging = NodeClaimTagging(
            self.client,
            self.cluster,
            aws.provider,
            cluster_name=aws.cluster.name,
            metrics=self.metrics,
        )
        if aws.queue is not None:
            self.interruption = Interruption(
                aws.queue,
                self.client,
                self.cluster,
                self.launcher.unavailable,
                self.recorder,
                clock=self.clock,
                metrics=self.metrics,
                replace_on_rebalance=self.settings.interruption_replace_on_rebalance,
            )

    # ------------------------------------------------------------------ wiring
    def _reflector(self, resource: Resource, name: str, sinks: Sequence[Sink]) -> Reflector:
        return Reflector(KubeListWatch(self.client, resource), name=name, sinks=sinks)

    def _reflectors(self) -> list[Reflector]:
        # State sinks first: triggers read the model the state sink just updated.
        c = self.cluster
        return [
            self._reflector(
                NODES,
                "nodes",
                [
                    NodeSink(c),
                    CallbackSink(on_upsert=self._on_node),
                    CallbackSink(on_upsert=self.lifecycle.on_node),
                    CallbackSink(
                        on_upsert=self.node_termination.on_node,
                        on_delete=self.nodeclaim_termination.on_node_deleted,
                    ),
                    CallbackSink(on_upsert=self.counter.on_node, on_delete=self.counter.on_node),
                ],
            ),
            self._reflector(
                NODECLAIMS,
                "nodeclaims",
                [
                    NodeClaimSink(c),
                    CallbackSink(
                        on_upsert=self.lifecycle.on_nodeclaim,
                        on_delete=self.lifecycle.on_nodeclaim_deleted,
                    ),
                    CallbackSink(on_upsert=self.nodeclaim_termination.on_nodeclaim),
                    CallbackSink(on_upsert=self.expiration.on_nodeclaim),
                    CallbackSink(
                        on_upsert=self.nodeclaim_disruption.on_nodeclaim,
                        on_delete=self.nodeclaim_disruption.on_nodeclaim_deleted,
                    ),
                    CallbackSink(
                        on_upsert=self.consistency.on_nodeclaim,
                        on_delete=self.consistency.on_nodeclaim_deleted,
                    ),
                    CallbackSink(
                        on_upsert=self.counter.on_nodeclaim, on_delete=self.counter.on_nodeclaim
                    ),
                    *self._aws_nodeclaim_sinks(),
                ],
            ),
            self._reflector(
                PODS,
                "pods",
                [
                    PodSink(c),
                    CallbackSink(on_upsert=self._on_pod),
                    CallbackSink(
                        on_upsert=self.node_termination.on_pod,
                        on_delete=self.node_termination.on_pod,
                    ),
                    CallbackSink(
                        on_upsert=self.podevents.on_pod,
                        on_delete=self.podevents.on_pod_deleted,
                        on_replace=self.podevents.on_pods_listed,
                    ),
                ],
            ),
            self._reflector(
                NODEPOOLS,
                "nodepools",
                [
                    NodePoolSink(c),
                    CallbackSink(on_upsert=self.counter.on_nodepool),
                    CallbackSink(on_upsert=self.readiness.on_nodepool),
                    CallbackSink(on_upsert=self.nodeclaim_disruption.on_nodepool),
                ],
            ),
            self._reflector(DAEMONSETS, "daemonsets", [DaemonSetSink(c)]),
            self._reflector(PODDISRUPTIONBUDGETS, "pdbs", [PDBSink(c)]),
            # Volume topology: where the volumes pending pods mount can attach.
            self._reflector(
                PERSISTENTVOLUMECLAIMS, "persistentvolumeclaims", [PersistentVolumeClaimSink(c)]
            ),
            self._reflector(PERSISTENTVOLUMES, "persistentvolumes", [PersistentVolumeSink(c)]),
            self._reflector(STORAGECLASSES, "storageclasses", [StorageClassSink(c)]),
            *self._nodeclass_reflectors(),
            self._reflector(NAMESPACES, "namespaces", [CallbackSink(on_upsert=self._on_namespace)]),
        ]

    def _nodeclass_reflectors(self) -> list[Reflector]:
        """One reflector per NodeClass kind the cloud provider supports."""
        out = []
        for ref in self.cloud.supported_node_classes():
            resource, model = NODECLASS_KINDS[(ref.group, ref.kind)]
            sink = NodeClassSink(self.cluster, group=ref.group, kind=ref.kind, model=model)
            readiness = CallbackSink(
                on_upsert=self.readiness.on_nodeclass, on_delete=self.readiness.on_nodeclass
            )
            sinks: list[Sink] = [sink, readiness]
            if self.aws is not None and ref.group == AWS_GROUP:
                store = self.aws.nodeclasses
                sinks.append(
                    CallbackSink(
                        on_upsert=store.upsert, on_delete=store.delete, on_replace=store.replace
                    )
                )
            if self.nodeclass_status is not None and ref.group == AWS_GROUP:
                sinks.append(
                    CallbackSink(
                        on_upsert=self.nodeclass_status.on_nodeclass,
                        on_delete=self.nodeclass_status.on_nodeclass_deleted,
                    )
                )
            out.append(self._reflector(resource, resource.plural, sinks))
        return out

    def _aws_nodeclaim_sinks(self) -> list[Sink]:
        out: list[Sink] = []
        if self.tagging is not None:
            out.append(CallbackSink(on_upsert=self.tagging.on_nodeclaim))
        if self.nodeclass_status is not None:
            out.append(CallbackSink(on_delete=self.nodeclass_status.on_nodeclaim_deleted))
        return out

    def _on_pod(self, obj: KubeObject) -> None:
        pod = self.cluster.pods.get(object_key(obj))
        if pod is not None:
            self.scheduling_metrics.pod_seen(pod)
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
            tg.create_task(self.recorder.run())
            tg.create_task(self.provisioner.run())
            tg.create_task(self.lifecycle.run())
            tg.create_task(self.gc.run())
            tg.create_task(self.nodeclaim_termination.run())
            tg.create_task(self.evictions.run())
            tg.create_task(self.node_termination.run())
            tg.create_task(self.counter.run())
            tg.create_task(self.readiness.run())
            tg.create_task(self.expiration.run())
            tg.create_task(self.nodeclaim_disruption.run())
            tg.create_task(self.disruption.run())
            tg.create_task(self.podevents.run())
            tg.create_task(self.consistency.run())
            for worker in (self.nodeclass_status, self.tagging, self.interruption):
                if worker is not None:
                    tg.create_task(worker.run())
            if self.aws is not None:
                tg.create_task(self.aws.pricing.run())
                tg.create_task(self.aws.instance_types.run())

    async def run(self, *, identity: str | None = None, host: str = "0.0.0.0") -> None:
        """Probes, informers and cluster-state metrics on every replica; decisions only while
        leading.

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
                    # The last disruption decision: commands, and why each other node stays.
                    debug={"disruption": self.disruption.report},
                )
            )
            if s.webhook_port:
                # Every replica answers conversions (the API server calls whichever it reaches).
                tg.create_task(
                    webhook.serve(
                        self.client,
                        webhook.WebhookConfig(
                            namespace=s.leader_election_namespace,
                            service=s.webhook_service_name,
                            port=s.webhook_port,
                        ),
                        host=host,
                    )
                )
            tg.create_task(self.run_informers())
            tg.create_task(
                run_state_metrics(
                    self.cluster, self.metrics, self.clock, scheduling=self.scheduling_metrics
                )
            )
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
