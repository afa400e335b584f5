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
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Generic, Self, TypeVar, overload

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
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


# controller-runtime names each work queue after its controller and labels it with both.
_WORKQUEUE: Final = ("name", "controller")

_M = TypeVar("_M", Counter, Gauge, Histogram, Summary)


class _Declared(Generic[_M]):
    """A metric declared on :class:`Metrics`: how to build it on an instance's own registry.

    Reading the attribute on an instance never reaches :meth:`__get__` (the built metric sits in
    the instance's ``__dict__``, which wins over a non-data descriptor); ``__get__`` is here to
    give the attribute its metric type."""

    def __init__(self, build: Callable[[CollectorRegistry], _M]) -> None:
        self.build: Callable[[CollectorRegistry], _M] = build

    @overload
    def __get__(self, obj: None, owner: type[object]) -> Self: ...
    @overload
    def __get__(self, obj: object, owner: type[object]) -> _M: ...
    def __get__(self, obj: object | None, owner: type[object]) -> Self | _M:
        if obj is None:
            return self
        raise AttributeError("metrics are built by Metrics.__init__")


def _counter(name: str, doc: str, labels: Sequence[str] = ()) -> _Declared[Counter]:
    return _Declared(lambda r: Counter(name, doc, labelnames=labels, registry=r))


def _gauge(name: str, doc: str, labels: Sequence[str] = ()) -> _Declared[Gauge]:
    return _Declared(lambda r: Gauge(name, doc, labelnames=labels, registry=r))


def _histogram(
    name: str, doc: str, labels: Sequence[str] = (), buckets: Sequence[float] = DURATION_BUCKETS
) -> _Declared[Histogram]:
    return _Declared(lambda r: Histogram(name, doc, labelnames=labels, buckets=buckets, registry=r))


def _summary(name: str, doc: str, labels: Sequence[str] = ()) -> _Declared[Summary]:
    return _Declared(lambda r: Summary(name, doc, labelnames=labels, registry=r))


class Metrics:
    """Every metric the controller exports, registered on one private registry.

    Each metric is declared once, below, as a class attribute (exported name, help, labels);
    every instance builds all of them on its own registry. Attribute names drop the
    ``karpenter_`` prefix and the ``_total`` suffix; the exported names are upstream's.
    """

    # ---- build
    build_info = _gauge(
        "karpenter_build_info",
        "A metric with a constant '1' value labeled by version from which karpenter was built.",
        ("version", "goversion", "goarch", "commit"),
    )

    # ---- nodeclaims
    nodeclaims_created = _counter(
        "karpenter_nodeclaims_created_total",
        "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim "
        "was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
        ("reason", "nodepool", "min_values_relaxed"),
    )
    nodeclaims_terminated = _counter(
        "karpenter_nodeclaims_terminated_total",
        "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning "
        "nodepool, capacity type, and zone.",
        ("nodepool", "capacity_type", "zone"),
    )
    nodeclaims_disrupted = _counter(
        "karpenter_nodeclaims_disrupted_total",
        "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the "
        "nodeclaim was disrupted and the owning nodepool.",
        ("reason", "nodepool", "capacity_type"),
    )
    nodeclaims_unhealthy_disrupted = _counter(
        "karpenter_nodeclaims_unhealthy_disrupted_total",
        "Number of unhealthy nodeclaims disrupted in total by Karpenter. Labeled by condition on "
        "the node was disrupted, the owning nodepool, and the image ID.",
        ("condition", "nodepool", "capacity_type", "image_id"),
    )
    nodeclaims_termination_duration = _histogram(
        "karpenter_nodeclaims_termination_duration_seconds",
        "Duration of NodeClaim termination in seconds.",
        ("nodepool",),
    )
    nodeclaims_instance_termination_duration = _histogram(
        "karpenter_nodeclaims_instance_termination_duration_seconds",
        "Duration of CloudProvider Instance termination in seconds.",
        ("nodepool",),
    )

    # ---- nodes
    nodes_created = _counter(
        "karpenter_nodes_created_total",
        "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.",
        ("nodepool", "zone"),
    )
    nodes_terminated = _counter(
        "karpenter_nodes_terminated_total",
        "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.",
        ("nodepool", "zone"),
    )
    nodes_drained = _counter(
        "karpenter_nodes_drained_total",
        "The total number of nodes drained by Karpenter",
        ("nodepool",),
    )
    nodes_termination_duration = _summary(
        "karpenter_nodes_termination_duration_seconds",
        "The time taken between a node's deletion request and the removal of its finalizer",
        ("nodepool",),
    )
    nodes_lifetime_duration = _histogram(
        "karpenter_nodes_lifetime_duration_seconds",
        "The lifetime duration of the nodes since creation.",
        ("nodepool",),
        LIFETIME_BUCKETS,
    )

    # ---- pods
    pods_state = _gauge(
        "karpenter_pods_state",
        "Pod state is the current state of pods. This metric can be used several ways as it "
        "is labeled by the pod name, namespace, owner, node, nodepool name, zone, "
        "architecture, capacity type, instance type and pod phase.",
        POD_STATE_LABELS,
    )
    pods_startup_duration = _summary(
        "karpenter_pods_startup_duration_seconds",
        "The time from pod creation until the pod is running.",
    )
    pods_bound_duration = _histogram(
        "karpenter_pods_bound_duration_seconds",
        "The time from pod creation until the pod is bound.",
    )
    pods_scheduling_decision_duration = _histogram(
        "karpenter_pods_scheduling_decision_duration_seconds",
        "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
    )
    pods_eviction_requests = _counter(
        "karpenter_pods_eviction_requests_total",
        "The total number of pod eviction requests made by Karpenter, labeled by response code",
        ("code",),
    )
    pods_drained = _counter(
        "karpenter_pods_drained_total",
        "The total number of pods drained during node termination by Karpenter, labeled by reason",
        ("reason",),
    )

    # ---- nodepools
    nodepools_usage = _gauge(
        "karpenter_nodepools_usage",
        "The amount of resources that have been provisioned for a nodepool. Labeled by "
        "nodepool name and resource type.",
        ("resource_type", "nodepool"),
    )
    nodepools_limit = _gauge(
        "karpenter_nodepools_limit",
        "Limits specified on the nodepool that restrict the quantity of resources "
        "provisioned. Labeled by nodepool name and resource type.",
        ("resource_type", "nodepool"),
    )

    # ---- voluntary disruption (upstream's pkg/controllers/disruption/metrics.go names)
    nodepools_allowed_disruptions = _gauge(
        "karpenter_nodepools_allowed_disruptions",
        "The number of nodes for a given NodePool that can be concurrently disrupting at a "
        "point in time. Labeled by NodePool and disruption reason.",
        ("nodepool", "reason"),
    )
    voluntary_disruption_decisions = _counter(
        "karpenter_voluntary_disruption_decisions_total",
        "Number of disruption decisions performed. Labeled by disruption decision, reason, "
        "and consolidation type.",
        ("decision", "reason", "consolidation_type"),
    )
    voluntary_disruption_eligible_nodes = _gauge(
        "karpenter_voluntary_disruption_eligible_nodes",
        "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
        ("reason",),
    )
    voluntary_disruption_decision_evaluation_duration = _histogram(
        "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
        "Duration of the disruption decision evaluation process in seconds. Labeled by "
        "method and consolidation type.",
        ("method", "consolidation_type"),
    )
    voluntary_disruption_consolidation_timeouts = _counter(
        "karpenter_voluntary_disruption_consolidation_timeouts_total",
        "Number of times the Consolidation algorithm has reached a timeout. Labeled by "
        "consolidation type.",
        ("consolidation_type",),
    )
    voluntary_disruption_failed_validations = _counter(
        "karpenter_voluntary_disruption_failed_validations_total",
        "Number of candidates that were selected for disruption but failed validation. "
        "Labeled by consolidation type.",
        ("consolidation_type",),
    )
    voluntary_disruption_queue_failures = _counter(
        "karpenter_voluntary_disruption_queue_failures_total",
        "The number of times that an enqueued disruption decision failed. Labeled by "
        "disruption method.",
        ("decision", "reason", "consolidation_type"),
    )

    # ---- scheduler
    scheduler_scheduling_duration = _histogram(
        "karpenter_scheduler_scheduling_duration_seconds",
        "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
        ("controller",),
    )
    scheduler_queue_depth = _gauge(
        "karpenter_scheduler_queue_depth",
        "The number of pods currently waiting to be scheduled.",
        ("controller", "scheduling_id"),
    )
    scheduler_unfinished_work = _gauge(
        "karpenter_scheduler_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been observed "
        "by scheduling_duration_seconds.",
        ("controller", "scheduling_id"),
    )
    scheduler_unschedulable_pods = _gauge(
        "karpenter_scheduler_unschedulable_pods_count",
        "The number of unschedulable Pods.",
        ("controller",),
    )
    scheduler_ignored_pods = _gauge(
        "karpenter_scheduler_ignored_pods_count",
        "Number of pods ignored during scheduling by Karpenter",
    )

    # ---- cluster state
    cluster_state_synced = _gauge(
        "karpenter_cluster_state_synced",
        "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims "
        "and nodes that are stored in the APIServer have the same representation as "
        "Karpenter's cluster state",
    )
    cluster_state_node_count = _gauge(
        "karpenter_cluster_state_node_count", "Current count of nodes in cluster state"
    )
    cluster_state_unsynced_time = _gauge(
        "karpenter_cluster_state_unsynced_time_seconds",
        "The time for which cluster state is not synced",
    )

    # ---- cost (the prices the disruption pass decides with; karpenter-py names except the first)
    cloudprovider_instance_type_offering_price_estimate = _gauge(
        "karpenter_cloudprovider_instance_type_offering_price_estimate",
        "Estimated hourly price of an offering (instance type, capacity type, zone) as "
        "provisioning and consolidation compare it. The lowest where NodePools (overlays) or "
        "reservations price one offering differently.",
        ("instance_type", "capacity_type", "zone"),
    )
    nodes_hourly_price = _gauge(
        "karpenter_nodes_hourly_price",
        "karpenter-py: hourly price of a managed node, the offering it runs on as the "
        "disruption pass prices it (0 when no offering of its NodePool prices it). Labeled by "
        "node, nodepool, instance type, capacity type and zone.",
        ("node_name", "nodepool", "instance_type", "capacity_type", "zone"),
    )
    nodepools_hourly_price = _gauge(
        "karpenter_nodepools_hourly_price",
        "karpenter-py: sum of karpenter_nodes_hourly_price over a NodePool's nodes.",
        ("nodepool",),
    )
    voluntary_disruption_blocked_savings = _gauge(
        "karpenter_voluntary_disruption_blocked_savings_hourly",
        "karpenter-py: hourly saving the last disruption pass found but could not act on, by "
        "reason: budget (empty nodes a disruption budget kept), validation (the command was "
        "rejected when re-checked after the validation delay), start_failed (the command could "
        "not be started: taint or replacement create failed). 0 when nothing is blocked.",
        ("reason",),
    )

    # ---- cloud provider
    cloudprovider_duration = _histogram(
        "karpenter_cloudprovider_duration_seconds",
        "Duration of cloud provider method calls. Labeled by the controller, method name "
        "and provider.",
        ("controller", "method", "provider"),
    )
    cloudprovider_errors = _counter(
        "karpenter_cloudprovider_errors_total",
        "Total number of errors returned from CloudProvider calls.",
        ("controller", "method", "provider", "error"),
    )

    # ---- client-go (operatorpkg's names)
    client_go_requests = _counter(
        "client_go_request_total",
        "Number of HTTP requests, partitioned by status code and method.",
        ("code", "method"),
    )
    client_go_request_duration = _histogram(
        "client_go_request_duration_seconds",
        "Request latency in seconds. Broken down by verb, group, version, kind, and subresource.",
        ("verb", "group", "version", "kind", "subresource"),
        CLIENT_BUCKETS,
    )

    # ---- controller-runtime style work queues and reconcilers
    workqueue_depth = _gauge("workqueue_depth", "Current depth of workqueue", _WORKQUEUE)
    workqueue_adds = _counter(
        "workqueue_adds_total", "Total number of adds handled by workqueue", _WORKQUEUE
    )
    workqueue_queue_duration = _histogram(
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        _WORKQUEUE,
        WORKQUEUE_BUCKETS,
    )
    workqueue_work_duration = _histogram(
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes.",
        _WORKQUEUE,
        WORKQUEUE_BUCKETS,
    )
    workqueue_retries = _counter(
        "workqueue_retries_total", "Total number of retries handled by workqueue", _WORKQUEUE
    )
    workqueue_unfinished_work = _gauge(
        "workqueue_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been "
        "observed by work_duration.",
        _WORKQUEUE,
    )
    workqueue_longest_running_processor = _gauge(
        "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for workqueue been running.",
        _WORKQUEUE,
    )
    reconcile_total = _counter(
        "controller_runtime_reconcile_total",
        "Total number of reconciliations per controller",
        ("controller", "result"),
    )
    reconcile_errors = _counter(
        "controller_runtime_reconcile_errors_total",
        "Total number of reconciliation errors per controller",
        ("controller",),
    )
    reconcile_time = _histogram(
        "controller_runtime_reconcile_time_seconds",
        "Length of time per reconciliation per controller",
        ("controller",),
    )

    # ---- informers (karpenter-py names: upstream's client-go reflectors export none)
    informer_watch_restarts = _counter(
        "karpenter_informer_watch_restarts_total",
        "karpenter-py: watches an informer opened again after its first (the server ended the "
        "stream, it failed, or its resourceVersion expired). Labeled by informer.",
        ("informer",),
    )
    informer_relists = _counter(
        "karpenter_informer_relists_total",
        "karpenter-py: lists an informer made after its first, to recover from an expired "
        "resourceVersion (410 Gone). Labeled by informer.",
        ("informer",),
    )
    informer_errors = _counter(
        "karpenter_informer_errors_total",
        "karpenter-py: list or watch failures an informer backed off from. Labeled by informer.",
        ("informer",),
    )

    # ---- leader election (client-go's leaderelection metrics provider)
    leader_election_master_status = _gauge(
        "leader_election_master_status",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
        "backup, 1 indicates master. 'name' is the string used to identify the lease.",
        ("name",),
    )

    # ---- interruption (AWS SQS queue; upstream's provider-aws interruption metrics)
    interruption_received_messages = _counter(
        "karpenter_interruption_received_messages_total",
        "Count of messages received from the SQS queue. Broken down by message type and "
        "whether the message was actionable.",
        ("message_type",),
    )
    interruption_deleted_messages = _counter(
        "karpenter_interruption_deleted_messages_total",
        "Count of messages deleted from the SQS queue.",
    )
    interruption_message_queue_duration = _histogram(
        "karpenter_interruption_message_queue_duration_seconds",
        "Amount of time an interruption message is on the queue before it is processed by "
        "karpenter.",
    )

    def __init__(self, *, version: str = "unknown", commit: str = "") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # process_resident_memory_bytes, process_cpu_seconds_total, ...: client_golang's process
        # collector exports the same names (read from /proc; nothing on other platforms).
        ProcessCollector(registry=self.registry)
        # Registered in declaration order (the order /metrics lists them). Each lands in the
        # instance's __dict__, so reading ``metrics.x`` costs no descriptor call.
        for attr, declared in vars(Metrics).items():
            if isinstance(declared, _Declared):
                setattr(self, attr, declared.build(self.registry))
        self.build_info.labels(
            version=version,
            goversion=f"python{platform.python_version()}",
            goarch=platform.machine(),
            commit=commit,
        ).set(1)

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

    def sample_names(self) -> set[str]:
        """Every sample name ``/metrics`` may carry, whether or not it has a series yet:
        counters' ``_total``, histograms' ``_bucket``/``_sum``/``_count``, summaries' own name
        with ``_sum``/``_count``, gauges' own name. What a PromQL query may select."""
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("", "_sum", "_count"),
        }
        return {
            family.name + suffix
            for family in self.registry.collect()
            for suffix in suffixes.get(family.type, ("",))
        }

    @staticmethod
    def remove_series(metric: Gauge, labels: Sequence[str]) -> None:
        """Drop one labelled series (by label values, in declaration order) if it exists."""
        with contextlib.suppress(KeyError):
            metric.remove(*labels)

    @staticmethod
    def replace_series(
        gauge: Gauge,
        old: Mapping[tuple[str, ...], float],
        new: Mapping[tuple[str, ...], float],
    ) -> None:
        """Make ``gauge`` hold the series of ``new`` (label values -> value) where it held those
        of ``old``: write the series whose value changed, remove those no longer present."""
        for labels, value in new.items():
            if old.get(labels) != value:
                gauge.labels(*labels).set(value)
        for labels in old.keys() - new.keys():
            Metrics.remove_series(gauge, labels)

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
