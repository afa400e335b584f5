"""The composition root: builds the object graph and runs it under one TaskGroup.

Informers run on every replica (a standby keeps a warm cache); decision workers (provisioning,
NodeClaim lifecycle, termination, ...) run only while this replica holds the leader Lease.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import Clock, RealClock
from karpenter_py.aio.tasks import supervise
from karpenter_py.cloudprovider.aws.nodeclass import NodeClassResolver
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.cloudprovider.protocol import CloudProvider
from karpenter_py.controllers.disruption.controller import Disruption
from karpenter_py.controllers.interruption.controller import Interruption
from karpenter_py.controllers.nodeclaim.consistency import NodeClaimConsistency
from karpenter_py.controllers.nodeclaim.disruption import NodeClaimDisruption
from karpenter_py.controllers.nodeclaim.expiration import NodeClaimExpiration
from karpenter_py.controllers.nodeclaim.garbagecollection import NodeClaimGarbageCollector
from karpenter_py.controllers.nodeclaim.health import NodeHealth
from karpenter_py.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpenter_py.controllers.nodeclaim.podevents import NodeClaimPodEvents
from karpenter_py.controllers.nodeclaim.reservationexpiry import CapacityBlockExpiration
from karpenter_py.controllers.nodeclaim.reservationlabels import ReservationCapacityType
from karpenter_py.controllers.nodeclaim.tagging import NodeClaimTagging
from karpenter_py.controllers.nodeclass.status import KubernetesVersion, NodeClassStatus
from karpenter_py.controllers.nodeoverlay import NodeOverlayStatus
from karpenter_py.controllers.nodepool.counter import NodePoolCounter
from karpenter_py.controllers.nodepool.readiness import NodePoolReadiness
from karpenter_py.controllers.provisioning.nominations import PodNominations
from karpenter_py.controllers.provisioning.provisioner import Provisioner
from karpenter_py.controllers.runtime import Background, Controller, Deps
from karpenter_py.controllers.static.controller import StaticCapacity
from karpenter_py.controllers.termination.eviction import EvictionQueue
from karpenter_py.controllers.termination.node import NodeTermination
from karpenter_py.controllers.termination.nodeclaim import NodeClaimTermination
from karpenter_py.informer.events import CallbackSink, Sink
from karpenter_py.informer.reflector import Reflector
from karpenter_py.informer.source import KubeListWatch, ListWatch
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.events import EventRecorder, object_ref
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import (
    Resource,
)
from karpenter_py.launcher.launch import Launcher
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.manager import webhook
from karpenter_py.manager.adapters import KubeNodeAPI, KubeNodeClaimWriter
from karpenter_py.manager.aws import AwsStack
from karpenter_py.manager.informermetrics import InformerMetrics
from karpenter_py.manager.leader import LeaderElector, Leadership, default_identity
from karpenter_py.manager.probes import serve
from karpenter_py.manager.settings import Settings
from karpenter_py.manager.statemetrics import SchedulingMetrics, run_state_metrics
from karpenter_py.manager.wiring import Kind, nodeclass_kind, reflectors, state_kinds
from karpenter_py.model.catalog import instance_types_from_kwok_json, kwok_catalog
from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import AWS_GROUP
from karpenter_py.obs.metrics import Metrics
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import (
    NodeOverlaySink,
)

log = logging.getLogger("karpenter.manager")

LABELS = ("metadata", "labels")


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
        if settings.feature_gates.node_overlay:
            # Decisions wait for the overlays too: a round before them would price types wrong.
            self.cluster.require(NodeOverlaySink.kind)
        self.cloud = (
            cloud
            or (aws.provider if aws is not None else None)
            or KwokCloudProvider(
                KubeNodeAPI(client),
                kwok_instance_types(settings.instance_types_file_path),
                bare_nodes=settings.kwok_bare_nodes,
            )
        )
        self.recorder = EventRecorder(client, clock=self.clock)
        # What every controller shares, built once.
        self.deps = Deps(client, self.cluster, self.cloud, self.recorder, self.clock, self.metrics)
        # With AWS the launcher shares the cache the provider was built with.
        self.launcher = Launcher(
            self.cloud,
            clock=self.clock,
            unavailable=aws.offerings if aws is not None else None,
            metrics=self.metrics,
        )
        self.scheduling_metrics = SchedulingMetrics(self.metrics, self.cluster, self.clock)
        self.batcher: Batcher[str] = Batcher(
            idle=settings.batch_idle_duration,
            max_window=settings.batch_max_duration,
            first_window=settings.batch_first_max_duration,
        )
        self.options = options = SolveOptions(
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
        # Planned pods' nominatedNodeName (NOMINATE_PODS, where the API server has the feature).
        self.nominations = PodNominations(self.deps, enabled=settings.nominate_pods)
        self.rounds.planned = self.nominations.planned
        self.provisioner = Provisioner(
            self.rounds,
            self.batcher,
            options=options,
            observe=self.scheduling_metrics.observe_round,
        )
        self.disruption = Disruption(
            self.deps,
            self.rounds,
            options=options,
            spot_to_spot=settings.feature_gates.spot_to_spot_consolidation,
            multi_node_timeout=settings.multi_node_consolidation_timeout,
            single_node_timeout=settings.single_node_consolidation_timeout,
        )
        self.gc = NodeClaimGarbageCollector(self.deps)
        # Node repair (feature gate NodeRepair, off by default as upstream).
        self.health = NodeHealth(self.deps) if settings.feature_gates.node_repair else None
        self.controllers = self._controllers()
        self.informers_synced = asyncio.Event()  # every reflector listed, state frozen
        self.reflectors = self.reflectors_over(lambda r: KubeListWatch(self.client, r))

    # ------------------------------------------------------------------ controllers
    def _controllers(self) -> list[Controller]:
        """Every controller, in one list as upstream's controllers.go keeps them. Each declares
        what wakes it (``watches()``); each runs while this replica leads."""
        deps = self.deps
        evictions = EvictionQueue(deps.client, deps.recorder, metrics=self.metrics)
        return [
            Background("events", self.recorder.run),
            self.provisioner,
            self.nominations,
            NodeClaimLifecycle(deps, self.launcher, before_register=self.nominations.settle),
            self.gc,
            NodeClaimTermination(deps, launcher=self.launcher),
            evictions,
            NodeTermination(deps, evictions),
            NodePoolCounter(deps),
            NodePoolReadiness(deps),
            NodeClaimExpiration(deps),
            # Consolidatable and Drifted conditions, which disruption reads.
            NodeClaimDisruption(deps),
            self.disruption,
            NodeClaimPodEvents(deps),
            NodeClaimConsistency(deps),
            *self._gated_controllers(),
            *self._aws_controllers(),
        ]

    def _gated_controllers(self) -> list[Controller]:
        """Controllers of alpha features, each present only with its feature gate on
        (upstream's defaults)."""
        gates = self.settings.feature_gates
        out: list[Controller] = [self.health] if self.health is not None else []
        if gates.node_overlay:
            out.append(NodeOverlayStatus(self.deps))
        if gates.static_capacity:
            out.append(StaticCapacity(self.deps, self.rounds, options=self.options))
        return out

    def _aws_controllers(self) -> list[Controller]:
        """EC2NodeClass status, instance tagging, interruption and the refresh of the provider's
        prices and instance types (aws provider only)."""
        aws = self.aws
        if aws is None:
            return []
        resolver = NodeClassResolver(
            aws.clients,
            aws.cluster.name,
            kubernetes_version=KubernetesVersion(self.client, clock=self.clock),
            clock=self.clock,
            reservations=aws.reservations,
        )
        out: list[Controller] = [
            NodeClassStatus(self.deps, resolver),
            NodeClaimTagging(self.deps, aws.provider, cluster_name=aws.cluster.name),
            Background("aws.pricing", aws.pricing.run),
            Background("aws.instancetypes", aws.instance_types.run),
        ]
        if aws.reservations is not None:  # the ReservedCapacity gate
            out.append(CapacityBlockExpiration(self.deps, aws.reservations))
            out.append(ReservationCapacityType(self.deps))
        if aws.queue is not None:
            out.append(
                Interruption(
                    self.deps,
                    aws.queue,
                    self.launcher.unavailable,
                    replace_on_rebalance=self.settings.interruption_replace_on_rebalance,
                )
            )
        return out

    # ------------------------------------------------------------------ wiring
    def reflectors_over(self, source: Callable[[Resource], ListWatch]) -> list[Reflector]:
        """One reflector per kind, listing and watching ``source(resource)`` (the API server's;
        the scale benchmark's in-memory one); the state takes each delivery in before any
        controller hears it (``wiring.IngestThenNotify``)."""
        kinds = state_kinds(
            self.cluster,
            self._nodeclass_kinds(),
            node_overlay=self.settings.feature_gates.node_overlay,
        )
        watches = [
            *self.scheduling_metrics.watches(),
            *(watch for controller in self.controllers for watch in controller.watches()),
        ]
        return reflectors(kinds, watches, source)

    def _nodeclass_kinds(self) -> list[Kind]:
        """One kind per NodeClass kind the cloud provider supports."""
        out = []
        for ref in self.cloud.supported_node_classes():
            extra: list[Sink] = []
            if self.aws is not None and ref.group == AWS_GROUP:
                store = self.aws.nodeclasses  # the AWS provider's own EC2NodeClass cache
                extra.append(CallbackSink(on_upsert=store.upsert, on_delete=store.delete))
            out.append(nodeclass_kind(self.cluster, ref.group, ref.kind, extra))
        return out

    # ------------------------------------------------------------------ running
    def ready(self) -> bool:
        return self.cluster.synced()

    async def run_informers(self, reflectors: Sequence[Reflector] | None = None) -> None:
        """Run every reflector (``self.reflectors`` unless given). Once all have listed, the
        objects alive are the cluster's steady state: they are moved out of the cyclic GC's
        view (``gc.freeze``), so its full collections no longer walk 100,000 pods' objects on
        the hot path of each watch event."""
        chosen = self.reflectors if reflectors is None else reflectors
        async with asyncio.TaskGroup() as tg:
            for r in chosen:
                tg.create_task(r.run())
            for r in chosen:
                await r.wait_synced()
            gc.collect()
            gc.freeze()
            log.info("informers synced", extra={"frozen_objects": gc.get_freeze_count()})
            self.informers_synced.set()

    async def run_decisions(self) -> None:
        """Every controller; run only by the leader."""
        async with asyncio.TaskGroup() as tg:
            for controller in self.controllers:
                tg.create_task(controller.run())

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
                    debug={"disruption": self.disruption_report},
                )
            )
            if s.webhook_port:
                # Every replica answers conversions (the API server calls whichever it reaches).
                # Restarted when it fails: v1beta1 clients wait, provisioning and disruption not.
                tg.create_task(
                    supervise(
                        "conversion webhook", lambda: self.run_webhook(host), clock=self.clock
                    )
                )
            tg.create_task(self.run_informers())
            tg.create_task(
                run_state_metrics(
                    self.cluster,
                    self.metrics,
                    self.clock,
                    scheduling=self.scheduling_metrics,
                    informers=InformerMetrics(self.metrics, self.reflectors),
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

    async def run_webhook(self, host: str) -> None:
        s = self.settings
        config = webhook.WebhookConfig(
            namespace=s.leader_election_namespace,
            service=s.webhook_service_name,
            port=s.webhook_port,
        )
        await webhook.serve(self.client, config, host=host)

    def disruption_report(self) -> dict[str, Any]:
        """``/debug/disruption``: the disruption controller's last decision and, with node
        repair on, what repair does about each unhealthy node (``repair``)."""
        report = self.disruption.report()
        if self.health is not None:
            report["repair"] = self.health.report()
        return report

    def _leadership_changed(self, leading: bool) -> None:
        gauge = self.metrics.leader_election_master_status.labels(
            name=self.settings.leader_election_name
        )
        gauge.set(1 if leading else 0)
