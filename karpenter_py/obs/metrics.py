"""Prometheus metrics with upstream Karpenter's names and label names.

This is the only module that imports ``prometheus_client`` (an import-linter contract says so);
everything else takes a :class:`Metrics` object and calls its typed attributes::

    metrics.nodeclaims_created.labels(reason="provisioned", nodepool="default",
                                      min_values_relaxed="false").inc()

Each :class:`Metrics` owns a private registry (never the process-global default one), so tests
can build as many as they like. :meth:`Metrics.render` produces the ``/metrics`` payload.

Names and labels follow kubernetes-sigs/karpenter (``pkg/metrics``, ``pkg/controllers/...``),
operatorpkg's client-go metrics and controller-runtime's workqueue/reconcile metrics. Where
upstream's labels are Go-specific (``goversion``, ``goarch`` on ``karpenter_build_info``) the
names are kept and filled with the Python equivalents.
"""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Sequence
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    disable_created_metrics,
    generate_latest,
)

__all__ = [
    "CONTENT_TYPE",
    "DURATION_BUCKETS",
    "POD_STATE_LABELS",
    "RECONCILE_RESULTS",
    "Counter",
    "Gauge",
    "Histogram",
    "Metrics",
    "Summary",
]

# Go's client_golang emits no ``*_created`` series; without this every counter and histogram
# would grow a ``<name>_created`` sibling that upstream dashboards have never seen.
disable_created_metrics()  # type: ignore[no-untyped-call]

NAMESPACE: Final = "karpenter"
# What generate_latest() writes is the classic text format; say so the way client_golang does
# (newer prometheus_client advertises version=1.0.0, which older scrapers may not know).
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

# Upstream's DurationBuckets(): controller-runtime's buckets plus long tails for singletons.
DURATION_BUCKETS: Final[tuple[float, ...]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
    40, 50, 60, 120, 150, 300, 450, 600,
)  # fmt: skip
# Node lifetimes: 15m .. 1 year, as upstream's node lifetime histogram.
LIFETIME_BUCKETS: Final[tuple[float, ...]] = (
    900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800, 345600, 604800, 1209600,
    2592000, 7776000, 15552000, 31536000,
)  # fmt: skip
# client-go request latency (operatorpkg): ExponentialBuckets(0.001, 2, 10)
CLIENT_BUCKETS: Final[tuple[float, ...]] = tuple(0.001 * 2**i for i in range(10))
# workqueue latencies (controller-runtime): ExponentialBuckets(10e-9, 10, 12)
WORKQUEUE_BUCKETS: Final[tuple[float, ...]] = tuple(10e-9 * 10**i for i in range(12))

POD_STATE_LABELS: Final[tuple[str, ...]] = (
    "name",
    "namespace",
    "owner",
    "node",
    "scheduled",
    "nodepool",
    "zone",
    "arch",
    "capacity_type",
    "instance_type",
    "phase",
)

# controller-runtime's values for controller_runtime_reconcile_total{result}.
RECONCILE_RESULTS: Final[tuple[str, ...]] = ("success", "error", "requeue", "requeue_after")

_HTTP_METHOD: Final = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "evict": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
}
_CLIENT_VERB: Final = {
    "get": "GET",
    "list": "LIST",
    "watch": "WATCH",
    "create": "CREATE",
    "evict": "CREATE",
    "update": "UPDATE",
    "patch": "PATCH",
    "delete": "DELETE",
}


class Metrics:
    """Every metric the controller exports, registered on one private registry.

    Attribute names drop the ``karpenter_`` prefix and the ``_total`` suffix; the exported names
    are upstream's (see each attribute's first argument).
    """

    def __init__(self, *, version: str = "unknown", commit: str = "") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry

        def counter(name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
            return Counter(name, doc, labelnames=labels, registry=r)

        def gauge(name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
            return Gauge(name, doc, labelnames=labels, registry=r)

        def histogram(
            name: str,
            doc: str,
            labels: Sequence[str] = (),
            buckets: Sequence[float] = DURATION_BUCKETS,
        ) -> Histogram:
            return Histogram(name, doc, labelnames=labels, buckets=buckets, registry=r)

        k = NAMESPACE
        # ---- build
        self.build_info = gauge(
            f"{k}_build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            ("version", "goversion", "goarch", "commit"),
        )
        self.build_info.labels(
            version=version,
            goversion=f"python{platform.python_version()}",
            goarch=platform.machine(),
            commit=commit,
        ).set(1)

        # ---- nodeclaims
        self.nodeclaims_created = counter(
            f"{k}_nodeclaims_created_total",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim "
            "was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
            ("reason", "nodepool", "min_values_relaxed"),
        )
        self.nodeclaims_terminated = counter(
            f"{k}_nodeclaims_terminated_total",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning "
            "nodepool, capacity type, and zone.",
            ("nodepool", "capacity_type", "zone"),
        )
        self.nodeclaims_disrupted = counter(
            f"{k}_nodeclaims_disrupted_total",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the "
            "nodeclaim was disrupted and the owning nodepool.",
            ("reason", "nodepool", "capacity_type"),
        )
        self.nodeclaims_termination_duration = histogram(
            f"{k}_nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds.",
            ("nodepool",),
        )
        self.nodeclaims_instance_termination_duration = histogram(
            f"{k}_nodeclaims_instance_termination_duration_seconds",
            "Duration of CloudProvider Instance termination in seconds.",
            ("nodepool",),
        )

        # ---- nodes
        self.nodes_created = counter(
            f"{k}_nodes_created_total",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.",
            ("nodepool", "zone"),
        )
        self.nodes_terminated = counter(
            f"{k}_nodes_terminated_total",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and "
            "zone.",
            ("nodepool", "zone"),
        )
        self.nodes_drained = counter(
            f"{k}_nodes_drained_total",
            "The total number of nodes drained by Karpenter",
            ("nodepool",),
        )
        self.nodes_termination_duration = Summary(
            f"{k}_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            labelnames=("nodepool",),
            registry=r,
        )
        self.nodes_lifetime_duration = histogram(
            f"{k}_nodes_lifetime_duration_seconds",
            "The lifetime duration of the nodes since creation.",
            ("nodepool",),
            LIFETIME_BUCKETS,
        )

        # ---- pods
        self.pods_state = gauge(
            f"{k}_pods_state",
            "Pod state is the current state of pods. This metric can be used several ways as it "
            "is labeled by the pod name, namespace, owner, node, nodepool name, zone, "
            "architecture, capacity type, instance type and pod phase.",
            POD_STATE_LABELS,
        )
        self.pods_startup_duration = Summary(
            f"{k}_pods_startup_duration_seconds",
            "The time from pod creation until the pod is running.",
            registry=r,
        )
        self.pods_bound_duration = histogram(
            f"{k}_pods_bound_duration_seconds",
            "The time from pod creation until the pod is bound.",
        )
        self.pods_scheduling_decision_duration = histogram(
            f"{k}_pods_scheduling_decision_duration_seconds",
            "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
        )
        self.pods_eviction_requests = counter(
            f"{k}_pods_eviction_requests_total",
            "The total number of pod eviction requests made by Karpenter, labeled by response code",
            ("code",),
        )
        self.pods_drained = counter(
            f"{k}_pods_drained_total",
            "The total number of pods drained during node termination by Karpenter, labeled by "
            "reason",
            ("reason",),
        )

        # ---- nodepools
        self.nodepools_usage = gauge(
            f"{k}_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by "
            "nodepool name and resource type.",
            ("resource_type", "nodepool"),
        )
        self.nodepools_limit = gauge(
            f"{k}_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources "
            "provisioned. Labeled by nodepool name and resource type.",
            ("resource_type", "nodepool"),
        )

        # ---- voluntary disruption (upstream's pkg/controllers/disruption/metrics.go names)
        self.nodepools_allowed_disruptions = gauge(
            f"{k}_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a "
            "point in time. Labeled by NodePool and disruption reason.",
            ("nodepool", "reason"),
        )
        self.voluntary_disruption_decisions = counter(
            f"{k}_voluntary_disruption_decisions_total",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, "
            "and consolidation type.",
            ("decision", "reason", "consolidation_type"),
        )
        self.voluntary_disruption_eligible_nodes = gauge(
            f"{k}_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
            ("reason",),
        )
        self.voluntary_disruption_decision_evaluation_duration = histogram(
            f"{k}_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds. Labeled by "
            "method and consolidation type.",
            ("method", "consolidation_type"),
        )
        self.voluntary_disruption_consolidation_timeouts = counter(
            f"{k}_voluntary_disruption_consolidation_timeouts_total",
            "Number of times the Consolidation algorithm has reached a timeout. Labeled by "
            "consolidation type.",
            ("consolidation_type",),
        )
        self.voluntary_disruption_failed_validations = counter(
            f"{k}_voluntary_disruption_failed_validations_total",
            "Number of candidates that were selected for disruption but failed validation. "
            "Labeled by consolidation type.",
            ("consolidation_type",),
        )
        self.voluntary_disruption_queue_failures = counter(
            f"{k}_voluntary_disruption_queue_failures_total",
            "The number of times that an enqueued disruption decision failed. Labeled by "
            "disruption method.",
            ("decision", "reason", "consolidation_type"),
        )

        # ---- scheduler
        self.scheduler_scheduling_duration = histogram(
            f"{k}_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in "
            "seconds.",
            ("controller",),
        )
        self.scheduler_queue_depth = gauge(
            f"{k}_scheduler_queue_depth",
            "The number of pods currently waiting to be scheduled.",
            ("controller", "scheduling_id"),
        )
        self.scheduler_unfinished_work = gauge(
            f"{k}_scheduler_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed "
            "by scheduling_duration_seconds.",
            ("controller", "scheduling_id"),
        )
        self.scheduler_unschedulable_pods = gauge(
            f"{k}_scheduler_unschedulable_pods_count",
            "The number of unschedulable Pods.",
            ("controller",),
        )
        self.scheduler_ignored_pods = gauge(
            f"{k}_scheduler_ignored_pods_count",
            "Number of pods ignored during scheduling by Karpenter",
        )

        # ---- cluster state
        self.cluster_state_synced = gauge(
            f"{k}_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims "
            "and nodes that are stored in the APIServer have the same representation as "
            "Karpenter's cluster state",
        )
        self.cluster_state_node_count = gauge(
            f"{k}_cluster_state_node_count", "Current count of nodes in cluster state"
        )
        self.cluster_state_unsynced_time = gauge(
            f"{k}_cluster_state_unsynced_time_seconds",
            "The time for which cluster state is not synced",
        )

        # ---- cloud provider
        self.cloudprovider_duration = histogram(
            f"{k}_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name "
            "and provider.",
            ("controller", "method", "provider"),
        )
        self.cloudprovider_errors = counter(
            f"{k}_cloudprovider_errors_total",
            "Total number of errors returned from CloudProvider calls.",
            ("controller", "method", "provider", "error"),
        )

        # ---- client-go (operatorpkg's names)
        self.client_go_requests = counter(
            "client_go_request_total",
            "Number of HTTP requests, partitioned by status code and method.",
            ("code", "method"),
        )
        self.client_go_request_duration = histogram(
            "client_go_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, group, version, kind, and "
            "subresource.",
            ("verb", "group", "version", "kind", "subresource"),
            CLIENT_BUCKETS,
        )

        # ---- controller-runtime style work queues and reconcilers
        wq = ("name", "controller")
        self.workqueue_depth = gauge("workqueue_depth", "Current depth of workqueue", wq)
        self.workqueue_adds = counter(
            "workqueue_adds_total", "Total number of adds handled by workqueue", wq
        )
        self.workqueue_queue_duration = histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            wq,
            WORKQUEUE_BUCKETS,
        )
        self.workqueue_work_duration = histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            wq,
            WORKQUEUE_BUCKETS,
        )
        self.workqueue_retries = counter(
            "workqueue_retries_total", "Total number of retries handled by workqueue", wq
        )
        self.workqueue_unfinished_work = gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration.",
            wq,
        )
        self.workqueue_longest_running_processor = gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            wq,
        )
        self.reconcile_total = counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ("controller", "result"),
        )
        self.reconcile_errors = counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ("controller",),
        )
        self.reconcile_time = histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ("controller",),
        )

        # ---- leader election (client-go's leaderelection metrics provider)
        self.leader_election_master_status = gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ("name",),
        )

        # ---- interruption (AWS SQS queue; upstream's provider-aws interruption metrics)
        self.interruption_received_messages = counter(
            f"{k}_interruption_received_messages_total",
            "Count of messages received from the SQS queue. Broken down by message type and "
            "whether the message was actionable.",
            ("message_type",),
        )
        self.interruption_deleted_messages = counter(
            f"{k}_interruption_deleted_messages_total",
            "Count of messages deleted from the SQS queue.",
        )
        self.interruption_message_queue_duration = histogram(
            f"{k}_interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by "
            "karpenter.",
        )

    # ------------------------------------------------------------------ helpers

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of every metric, and its Content-Type."""
        return generate_latest(self.registry), CONTENT_TYPE

    def names(self) -> set[str]:
        """Every metric family name registered (``_total`` included for counters)."""
        out: set[str] = set()
        for family in self.registry.collect():
            out.add(f"{family.name}_total" if family.type == "counter" else family.name)
        return out

    @staticmethod
    def remove_series(metric: Gauge, labels: Sequence[str]) -> None:
        """Drop one labelled series (by label values, in declaration order) if it exists."""
        with contextlib.suppress(KeyError):
            metric.remove(*labels)

    def observe_reconcile(self, controller: str, result: str, seconds: float) -> None:
        """One work item reconciled: controller-runtime's reconcile metrics and the work queue's
        work duration (taken to done). ``result`` is one of :data:`RECONCILE_RESULTS`."""
        self.reconcile_total.labels(controller=controller, result=result).inc()
        if result == "error":
            self.reconcile_errors.labels(controller=controller).inc()
        self.reconcile_time.labels(controller=controller).observe(seconds)
        self.workqueue_work_duration.labels(name=controller, controller=controller).observe(seconds)

    def observe_workqueue(
        self,
        name: str,
        *,
        depth: int,
        adds: int,
        retries: int,
        unfinished_seconds: float,
        longest_running_seconds: float,
    ) -> None:
        """A work queue's periodic report; ``adds`` and ``retries`` count since the last one.
        controller-runtime names the queue after its controller and sets both labels to it."""
        labels = {"name": name, "controller": name}
        self.workqueue_depth.labels(**labels).set(depth)
        self.workqueue_adds.labels(**labels).inc(adds)
        self.workqueue_retries.labels(**labels).inc(retries)
        self.workqueue_unfinished_work.labels(**labels).set(unfinished_seconds)
        self.workqueue_longest_running_processor.labels(**labels).set(longest_running_seconds)

    def observe_kube_request(self, verb: str, resource: str, status: int, seconds: float) -> None:
        """A ``kube.RequestObserver``: feed ``client_go_request_*`` from the kube client.

        ``verb`` is the client's (``get``, ``list``, ``update/status``, ``evict``, ...),
        ``resource`` is ``plural.group`` (``pods`` for the core group), ``status`` the HTTP
        status or 0 when no answer arrived.
        """
        base, _, subresource = verb.partition("/")
        if base == "evict":
            subresource = "eviction"
        code = str(status) if status else "<error>"
        self.client_go_requests.labels(code=code, method=_HTTP_METHOD.get(base, base.upper())).inc()
        plural, _, group = resource.partition(".")
        self.client_go_request_duration.labels(
            verb=_CLIENT_VERB.get(base, base.upper()),
            group=group,
            version="",  # the observer is not told the version; kept for label compatibility
            kind=plural,
            subresource=subresource,
        ).observe(seconds)
