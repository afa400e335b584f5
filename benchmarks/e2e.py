"""End-to-end scale-out benchmark: upstream's kind+kwok "Basic" case on the local control plane.

500 pods of 0.9 CPU / 3,100 Mi and 500 of 3.5 CPU / 28 Gi (performance-anchors.md §2.1), a
NodePool like upstream's perf pool (linux, on-demand, under 32 vCPU, kwok catalog), and the real
``karpenter-py controller`` in a subprocess. Measured from the moment the Deployments exist:

* ``seconds_to_first_nodeclaim``: until the first NodeClaim exists (the controller's own share:
  batch window + solve + writes). ``seconds_to_first_nodeclaims`` carries the same value under the
  name earlier results used, for readers of older JSON;
* ``seconds_to_nodeclaims``: until the NodeClaim count reaches its final value (later rounds add
  claims when the kube-scheduler binds pods differently from the plan);
* ``seconds_to_running``: until every pod is Running (adds ReplicaSet pod creation, kwok nodes,
  kube-scheduler binding, kwok pod status);
* ``seconds_nodeclaims_after_last_unschedulable``: from the last moment the kube-scheduler marked
  a pod unschedulable (the latest PodScheduled=False/Unschedulable lastTransitionTime over all
  pods, caught by a watch while each pod was pending) to the creationTimestamp of the last
  NodeClaim (API timestamps, whole seconds): how long the controller trails the scheduler;
* ``rss_p95_mb`` / ``cpu_avg_cores``: the controller process, sampled from /proc every 0.5 s;
* ``control_plane``: when the pods were all created (kube-controller-manager) and bound
  (kube-scheduler), and at what rate, as this process's pod watch saw them;
* ``rounds``: the controller's provisioning rounds that had pods, in order, from the Deployments'
  creation until every pod is Running (or ``--timeout``), as its log says them (one JSON line per round, message
  ``provisioning round``): ``[{"pods", "nodeclaims", "existing", "unschedulable", "seconds"}]``;
* ``nominate_pods``: whether the controller nominated pods onto the capacity it planned for them
  (``--no-nominate`` starts it with ``NOMINATE_PODS=false``; refused when the controller has no
  such setting, since it would ignore the variable and the JSON would say what did not run).

Does the cluster end where the plan says? (kwok provider only; the keys are absent on aws)

* ``plan_hourly`` / ``plan_nodes``: what ``karpenter-py plan`` makes of the same NodePool,
  Deployments and catalog (its code run in this process, as for the scale-in target below);
* ``hourly_after_scale_out`` / ``nodes_after_scale_out``: the cluster's hourly cost and Nodes
  when every pod is Running (priced as for the scale-in below: each Node at its labels' offering,
  plus each NodeClaim without a Node yet, counted in ``nodeclaims_in_flight_after_scale_out``);
  null when the pods never all ran;
* ``cost_ratio_to_plan_after_scale_out`` / ``node_ratio_to_plan_after_scale_out``: those over
  the plan's (4 places); the cost ratio is null when some Node or NodeClaim had no price, the
  sum then being short.

    python benchmarks/e2e.py --out benchmarks/results/e2e.json [--pods-per-deployment 500]

``--pods N``: N pods over 16 Deployments of 0.1-4 CPU / 128 Mi-16 Gi (``MIXED``), six of them
spread over zones (maxSkew 1, DoNotSchedule), instead of the Basic two.

    python benchmarks/e2e.py --pods 10000 --timeout 2700 --out benchmarks/results/e2e-10000.json

The kwok NodePool's ``consolidateAfter`` is ``Never`` until the scale-in starts (then 30 s), so
the scale-out's measures are the provisioning path's alone: consolidation that drains nodes while
pods still arrive sends their pods back to the provisioner, and the NodeClaims it launches for
them come after the last Unschedulable mark for reasons of its own (a 10,000-pod run measured
457 s that way against 11 s in the run before). ``--consolidate-during-scale-out`` puts 30 s
from the start; the JSON says which (``consolidation_during_scale_out``).

``--scale-in``: upstream's Basic scale-in. After the scale-out above (every pod Running), every
Deployment goes down to ``--scale-in-fraction`` of its replicas (default 0.7: 700 of the Basic
1,000 pods, 7,000 of ``--pods 10000``), and every few seconds the cluster's hourly cost is summed: each Node of the NodePool priced at its
instance type, zone and capacity type (the labels the kwok provider gives it) in the catalog the
controller uses (``INSTANCE_TYPES_FILE_PATH`` or the built-in kwok one), plus each NodeClaim
without a Node yet (its own labels, else the cheapest offering its requirements allow). The
target is what ``karpenter-py plan`` prices a fresh cluster for the remaining pods (the plan code
run in-process on the same NodePool, Deployments and catalog). Consolidated = cost within 10 % of
that target with every remaining pod Running; the run gives up after ``--scale-in-limit`` (300 s).
RSS and CPU are those of the scale-in phase.

    python benchmarks/e2e.py --scale-in --out benchmarks/results/e2e-scale-in.json

``--cloud-provider aws``: the same scale-out with the AWS provider against moto's server
(benchmarks/awsworld.py: moto in this process over HTTP, an EC2NodeClass selecting the tagged
VPC, a NodePool of on-demand linux types under 32 vCPU, and the fake kubelet registering a Node
for each instance moto launches). Adds ``create_fleet_calls`` (CreateFleet calls the controller
made, counted from moto's fleets: batching shows as fewer calls than NodeClaims).

    python benchmarks/e2e.py --cloud-provider aws --out benchmarks/results/e2e-aws.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

if __package__ in (None, ""):  # run as a script: the repo root holds benchmarks/ and tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.awsworld import EC2NODECLASSES, AwsWorld, aws_world
from karpenter_py.cli.manifests import load_manifests
from karpenter_py.cli.offline import build_cluster
from karpenter_py.cli.plan import solve_input as plan_solve_input
from karpenter_py.cloudprovider.kwok import KWOK_NODE_LABEL
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import load_config
from karpenter_py.kube.errors import AlreadyExistsError, KubeError
from karpenter_py.kube.objects import resource_version_of
from karpenter_py.kube.resources import DEPLOYMENTS, NODECLAIMS, NODES, PODS, Resource
from karpenter_py.manager.app import kwok_instance_types
from karpenter_py.manager.settings import OPTIONS as CONTROLLER_OPTIONS
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.scheduler import solve
from tests.cluster.awskubelet import running_kubelet

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack"))
LocalCluster: Any = importlib.import_module(
    "cluster"
).LocalCluster  # hack/cluster.py, not a package

CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
KWOKNODECLASSES = Resource(
    "karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", False, "KWOKNodeClass"
)
NODEPOOLS = Resource("karpenter.sh", "v1", "nodepools", False, "NodePool")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


CONSOLIDATE_AFTER = "30s"
# What the scale-out runs with unless --consolidate-during-scale-out: nodes that consolidation
# drains while pods are still arriving send their pods back to the provisioner, whose later
# NodeClaims then say nothing about how fast the controller follows the scheduler.
CONSOLIDATION_DEFERRED = "Never"


def nodepool(
    cloud_provider: str = "kwok", *, consolidate_after: str = CONSOLIDATE_AFTER
) -> dict[str, Any]:
    if cloud_provider == "aws":
        return aws_nodepool()
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {
                            "key": "karpenter.kwok.sh/instance-cpu",
                            "operator": "Lt",
                            "values": ["32"],
                        },
                    ],
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": consolidate_after,
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


def aws_nodepool() -> dict[str, Any]:
    """Upstream's perf pool on the AWS provider: linux, on-demand, under 32 vCPU."""
    reqs = [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["32"]},
    ]
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {"nodeClassRef": ref, "requirements": reqs}},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "30s",
            },
        },
    }


def deployment(
    name: str, replicas: int, cpu: str, memory: str, *, spread: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": LABEL_TOPOLOGY_ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": name}},
            }
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


@dataclass(frozen=True)
class Shape:
    """One Deployment of a workload: its pods' requests, its share of the pods (``weight``) and
    whether its pods spread over zones (maxSkew 1, DoNotSchedule)."""

    name: str
    cpu: str
    memory: str
    weight: int
    spread: bool = False


# Upstream's Basic case: two Deployments of equal size.
BASIC = (Shape("small", "900m", "3100Mi", 1), Shape("large", "3500m", "28Gi", 1))
# ``--pods N``: a realistic mix, many small services and a few big ones, a third of them spread
# over zones. The weights sum to 100, so at 10,000 pods every count and its 70 % are whole.
MIXED = (
    Shape("web-a", "100m", "128Mi", 10, spread=True),
    Shape("web-b", "100m", "256Mi", 10),
    Shape("api-a", "250m", "512Mi", 10, spread=True),
    Shape("api-b", "250m", "1Gi", 8),
    Shape("worker-a", "500m", "1Gi", 8),
    Shape("worker-b", "500m", "2Gi", 8, spread=True),
    Shape("svc-a", "1", "2Gi", 8),
    Shape("svc-b", "1", "4Gi", 6, spread=True),
    Shape("batch-a", "1500m", "3Gi", 6),
    Shape("batch-b", "2", "4Gi", 6),
    Shape("cache-a", "2", "8Gi", 5, spread=True),
    Shape("cache-b", "2500m", "6Gi", 4),
    Shape("db-a", "3", "12Gi", 4),
    Shape("db-b", "3500m", "8Gi", 3, spread=True),
    Shape("ml-a", "4", "16Gi", 2),
    Shape("ml-b", "4", "8Gi", 2),
)
Workload = tuple[tuple[Shape, int], ...]  # each Deployment with its replicas


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights``, largest remainders first (the parts sum to
    ``total`` exactly; ties go to the earlier weight)."""
    whole = sum(weights)
    parts = [total * w // whole for w in weights]
    by_remainder = sorted(range(len(weights)), key=lambda i: -(total * weights[i] % whole))
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return parts


def workload(shapes: Sequence[Shape], total: int) -> Workload:
    return tuple(zip(shapes, apportion(total, [s.weight for s in shapes]), strict=True))


def deployments(load: Workload) -> list[dict[str, Any]]:
    return [deployment(s.name, n, s.cpu, s.memory, spread=s.spread) for s, n in load]


def pods_of(load: Workload) -> int:
    return sum(n for _, n in load)


class ProcSampler:
    """RSS and CPU time of one process, from /proc (no extra dependency)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rss: list[float] = []
        self.cpu: list[tuple[float, float]] = []  # (wall, cpu seconds)

    def sample(self) -> None:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            statm = Path(f"/proc/{self.pid}/statm").read_text().split()
        except OSError:
            return
        self.cpu.append((time.monotonic(), (int(stat[11]) + int(stat[12])) / CLK_TCK))
        self.rss.append(int(statm[1]) * PAGE / 2**20)

    def p95_rss(self) -> float:
        values = sorted(self.rss)
        return values[int(0.95 * (len(values) - 1))] if values else 0.0

    def avg_cores(self, since: float, until: float) -> float:
        window = [c for c in self.cpu if since <= c[0] <= until]
        if len(window) < 2:
            return 0.0
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def install_crds(client: KubeClient) -> None:
    for f in sorted((REPO / "manifests" / "crds").glob("*.yaml")):
        with contextlib.suppress(AlreadyExistsError):
            await client.create(CRDS, yaml.safe_load(f.read_text()))
    for _ in range(60):
        crds = (await client.list(CRDS)).items
        if sum(1 for c in crds if _established(c)) >= 4:
            break
        await asyncio.sleep(0.5)


async def setup(client: KubeClient, *, consolidate_after: str = CONSOLIDATE_AFTER) -> None:
    await install_crds(client)
    await client.create(
        KWOKNODECLASSES,
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": "default"},
        },
    )
    await client.create(NODEPOOLS, nodepool(consolidate_after=consolidate_after))


# ----------------------------------------------------------------------------- watches
class Tracker(Protocol):
    def replace(self, objs: Sequence[Mapping[str, Any]]) -> None: ...

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None: ...


def _api_time(text: object) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) and text else None


def _unschedulable_since(pod: Mapping[str, Any]) -> datetime | None:
    """When the kube-scheduler marked the pod unschedulable (PodScheduled=False/Unschedulable);
    None unless that is its condition now."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ):
            return _api_time(c.get("lastTransitionTime"))
    return None


class PodWatch:
    """The benchmark's pods as a watch delivers them. A poll would list 10,000 pods (about
    50 MB of JSON) every half second on a machine the controller shares; the watch reads each
    change once. Keeps which pods exist (not deleting) and run, the latest moment the
    kube-scheduler marked each pod Unschedulable (a bound pod's condition no longer says when,
    so it must be caught while pending), and when this process first saw each pod and its
    binding (the control plane's own creation and binding rates)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.clock = clock
        self.wall = wall
        self.live: set[str] = set()
        self.running: set[str] = set()
        self.unschedulable_at: dict[str, datetime] = {}
        self.seen_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.bound_wall: dict[str, datetime] = {}  # the same moments, comparable to API times
        # The last status.nominatedNodeName each pod showed while pending, and the node it
        # was bound to: how many pods landed where the controller nominated them.
        self.nominated: dict[str, str] = {}
        self.bound_to: dict[str, str] = {}
        # Each pod's nominatedNodeName as its last pending state showed it (the value it still
        # carried when the scheduler bound it: "" when it had been cleared by then).
        self.carried: dict[str, str] = {}
        self.carried_at_bind: dict[str, str] = {}

    def replace(self, objs: Sequence[Mapping[str, Any]]) -> None:
        self.live.clear()
        self.running.clear()
        for obj in objs:
            self.apply("ADDED", obj)

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        now = self.clock()
        self.seen_at.setdefault(name, now)
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            self.bound_at.setdefault(name, now)
            self.bound_wall.setdefault(name, self.wall())
            self.bound_to.setdefault(name, str(node))
            self.carried_at_bind.setdefault(name, self.carried.get(name, ""))
        else:
            nominated = (obj.get("status") or {}).get("nominatedNodeName")
            self.carried[name] = str(nominated or "")
            if nominated:
                self.nominated[name] = str(nominated)
        since = _unschedulable_since(obj)
        if since is not None:
            self.unschedulable_at[name] = max(since, self.unschedulable_at.get(name, since))
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            self.live.discard(name)
            self.running.discard(name)
            return
        self.live.add(name)
        if (obj.get("status") or {}).get("phase") == "Running":
            self.running.add(name)
        else:
            self.running.discard(name)

    def last_unschedulable(self) -> datetime | None:
        return max(self.unschedulable_at.values(), default=None)

    def nominations(self) -> dict[str, int]:
        """Pods ever nominated while pending, and of them those bound to that very node."""
        kept = sum(1 for pod, node in self.nominated.items() if self.bound_to.get(pod) == node)
        elsewhere = [
            p for p, n in self.nominated.items() if p in self.bound_to and self.bound_to[p] != n
        ]
        # Of those bound elsewhere: still carrying a nomination when bound (the scheduler found
        # that node unfit then), or cleared before (a failed attempt, or taken back).
        carrying = sum(1 for p in elsewhere if self.carried_at_bind.get(p))
        return {
            "nominated": len(self.nominated),
            "bound_where_nominated": kept,
            "bound_elsewhere_still_nominated": carrying,
            "bound_elsewhere_nomination_cleared": len(elsewhere) - carrying,
        }

    def unbound_at(self, when: datetime) -> int:
        """Pods that existed and were not bound yet at ``when`` (the scheduler's backlog)."""
        return sum(
            1
            for name in self.seen_at
            if name not in self.bound_wall or self.bound_wall[name] > when
        )


class ClaimWatch:
    """The NodeClaims as a watch delivers them: each one's creationTimestamp, and the count
    after every change (``counts``: (clock, count))."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.created: dict[str, datetime | None] = {}
        self.counts: list[tuple[float, int]] = []

    def replace(self, objs: Sequence[Mapping[str, Any]]) -> None:
        self.created.clear()
        for obj in objs:
            self.apply("ADDED", obj)

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        if kind == "DELETED":
            self.created.pop(name, None)
        else:
            self.created[name] = _api_time(meta.get("creationTimestamp"))
        if not self.counts or self.counts[-1][1] != len(self.created):
            self.counts.append((self.clock(), len(self.created)))

    def last_created(self) -> datetime | None:
        return max((t for t in self.created.values() if t is not None), default=None)

    def created_after(self, when: datetime) -> int:
        return sum(1 for t in self.created.values() if t is not None and t > when)


async def follow(
    client: KubeClient, resource: Resource, tracker: Tracker, *, namespace: str | None = None
) -> None:
    """List then watch ``resource`` into ``tracker`` until cancelled; relist after any break."""
    while True:
        try:
            listed = await client.list(resource, namespace=namespace)
            tracker.replace(listed.items)
            rv = listed.resource_version
            while True:  # the server ends each watch at timeoutSeconds: resume from rv
                async with client.watch(
                    resource, namespace=namespace, resource_version=rv, timeout_seconds=240
                ) as stream:
                    async for event in stream:
                        rv = resource_version_of(event.object) or rv
                        if event.type in ("ADDED", "MODIFIED", "DELETED"):
                            tracker.apply(event.type, event.object)
        except KubeError as e:
            print(f"[watch] {resource.qualified}: {e}; relisting", file=sys.stderr, flush=True)
            await asyncio.sleep(0.5)


def seconds_between(earlier: datetime | None, later: datetime | None) -> float | None:
    return None if earlier is None or later is None else (later - earlier).total_seconds()


def first_n(times: Sequence[float], n: int, since: float) -> tuple[float | None, float | None]:
    """(seconds from ``since`` until the n-th of ``times``, rate per second until then). Only
    the first n count: pods consolidation evicts come back under new names, and their late
    creations and bindings are not the control plane's initial rate."""
    ordered = sorted(t for t in times if t >= since)
    if n <= 0 or len(ordered) < n:
        return None, None
    took = ordered[n - 1] - since
    return round(took, 1), (round(n / took, 1) if took > 0 else None)


def control_plane_rates(pods: PodWatch, since: float, total: int) -> dict[str, Any]:
    """How fast the local control plane itself went: the controller-manager creating the pods
    (first seen by this watch) and the kube-scheduler binding them."""
    created, created_rate = first_n(list(pods.seen_at.values()), total, since)
    bound, bound_rate = first_n(list(pods.bound_at.values()), total, since)
    return {
        "seconds_to_pods_created": created,
        "pods_created_per_second": created_rate,
        "seconds_to_pods_bound": bound,
        "binds_per_second": bound_rate,
    }


ROUND_MESSAGE = "provisioning round"  # karpenter_py/controllers/provisioning/provisioner.py
ROUND_FIELDS = ("pods", "nodeclaims", "existing", "unschedulable", "seconds")


def _to_millisecond(when: datetime) -> datetime:
    return when.replace(microsecond=when.microsecond // 1000 * 1000)


def provisioning_rounds(
    lines: Iterable[str], since: datetime, until: datetime | None = None
) -> list[dict[str, int | float]]:
    """The controller's provisioning rounds that had pods, in log order, logged from ``since``
    to ``until`` (None: no end): each line's ``pods``, ``nodeclaims``, ``existing``,
    ``unschedulable`` and ``seconds``. Other messages, lines that are not JSON and rounds without
    a time or a numeric field are skipped. The log's times are cut to the millisecond, so
    ``since`` is too."""
    start = _to_millisecond(since)
    rounds: list[dict[str, int | float]] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("message") != ROUND_MESSAGE:
            continue
        try:
            logged = datetime.fromisoformat(entry["time"])
        except (KeyError, TypeError, ValueError):
            continue
        if logged < start or (until is not None and logged > until):
            continue
        row: dict[str, int | float] = {}
        for key in ROUND_FIELDS:
            value = entry.get(key)
            if not isinstance(value, int | float) or isinstance(value, bool):
                break
            row[key] = value
        else:
            if row["pods"] > 0:
                rounds.append(row)
    return rounds


def ratio_to_plan(value: float | None, plan: float) -> float | None:
    """``value`` over the plan's, to 4 places; None without a value or a plan."""
    return None if value is None or not plan else round(value / plan, 4)


def against_plan(
    after: Mapping[str, Any] | None, plan_hourly: float, plan_nodes: int
) -> dict[str, Any]:
    """The cluster when every pod runs (``cluster_cost``'s sum; None when they never all ran)
    against the plan for the same input."""
    hourly = None if after is None else float(after["hourly"])
    nodes = None if after is None else int(after["nodes"])
    priced = after is not None and after["unpriced"] == 0
    return {
        "plan_hourly": round(plan_hourly, 4),
        "plan_nodes": plan_nodes,
        "hourly_after_scale_out": None if hourly is None else round(hourly, 4),
        "nodes_after_scale_out": nodes,
        "nodeclaims_in_flight_after_scale_out": None if after is None else after["in_flight"],
        "cost_ratio_to_plan_after_scale_out": ratio_to_plan(
            hourly if priced else None, plan_hourly
        ),
        "node_ratio_to_plan_after_scale_out": ratio_to_plan(nodes, plan_nodes),
    }


NOMINATE_ENV = "NOMINATE_PODS"
CONTROLLER_ENV = frozenset(option.env for option in CONTROLLER_OPTIONS)  # what it reads


def nominate_env(nominate: bool, known: Collection[str] = CONTROLLER_ENV) -> dict[str, str]:
    """The controller's environment for pod nomination on or off. ``known``: the variables the
    controller reads; it ignores others, so turning nomination off where ``NOMINATE_PODS`` is
    unknown would run with it on: ValueError."""
    if NOMINATE_ENV in known:
        return {NOMINATE_ENV: "true" if nominate else "false"}
    if nominate:
        return {}
    raise ValueError(f"the controller has no {NOMINATE_ENV} setting: it always nominates")


async def measure(
    client: KubeClient,
    sampler: ProcSampler,
    load: Workload,
    pods: PodWatch,
    claims: ClaimWatch,
    limit: float,
    *,
    log_path: Path,
    target: PlanTarget | None = None,
) -> dict[str, Any]:
    """The scale-out: create the Deployments, wait for every pod to run (at most ``limit``
    seconds), then read the controller's log at ``log_path`` for its rounds. With ``target``,
    the cluster's cost the moment every pod runs, against the plan's."""
    total = pods_of(load)
    start = time.monotonic()
    start_wall = datetime.now(UTC)
    for obj in deployments(load):
        await client.create(DEPLOYMENTS, obj)
    running_at = None
    running_wall: datetime | None = None
    after_cost: dict[str, Any] | None = None
    shown = 0.0
    while time.monotonic() - start < limit:
        sampler.sample()
        now = time.monotonic() - start
        if now - shown >= 10:
            shown = now
            print(
                f"[scale-out] t={now:6.1f}s pods={len(pods.live)} bound={len(pods.bound_at)} "
                f"running={len(pods.running)}/{total} nodeclaims={len(claims.created)} "
                f"rss={sampler.rss[-1] if sampler.rss else 0:.0f}MB",
                file=sys.stderr,
                flush=True,
            )
        if len(pods.running) >= total:
            running_at = now
            running_wall = datetime.now(UTC)
            after_cost = None if target is None else await cluster_cost(client, target.prices)
            break
        await asyncio.sleep(0.5)
    counts = [(t - start, n) for t, n in claims.counts if t >= start]
    final = len(claims.created)
    to_nodeclaims = next((t for t, n in counts if n == final), None)
    # The first round's NodeClaims: the controller's own share (batch window + solve + writes).
    first_round = next((t for t, n in counts if n > 0), None)
    nodes = (await client.list(NODES, label_selector="karpenter.sh/nodepool")).items
    log = await asyncio.to_thread(log_path.read_text, errors="replace")
    last_unschedulable = pods.last_unschedulable()
    last_claim = claims.last_created()
    after = seconds_between(last_unschedulable, last_claim)
    last_bound = max(pods.bound_wall.values(), default=None)
    result: dict[str, Any] = {
        "pods": total,
        "deployments": len(load),
        "seconds_to_running": None if running_at is None else round(running_at, 2),
        "seconds_to_nodeclaims": None if to_nodeclaims is None else round(to_nodeclaims, 2),
        "seconds_to_first_nodeclaim": None if first_round is None else round(first_round, 2),
        "seconds_to_first_nodeclaims": None if first_round is None else round(first_round, 2),
        # API timestamps (whole seconds): the last Unschedulable mark to the last NodeClaim.
        "seconds_nodeclaims_after_last_unschedulable": after,
        "last_unschedulable_at": None if last_unschedulable is None else str(last_unschedulable),
        "last_nodeclaim_created_at": None if last_claim is None else str(last_claim),
        # What the lag above waits on: the kube-scheduler's backlog at the last mark, when it
        # bound the last pod, and how many NodeClaims came after the mark (later rounds launch
        # for pods the scheduler bound elsewhere than the controller's plan put them).
        "pod_nominations": pods.nominations(),
        "pods_unbound_at_last_unschedulable": (
            None if last_unschedulable is None else pods.unbound_at(last_unschedulable)
        ),
        "seconds_last_bound_after_last_unschedulable": seconds_between(
            last_unschedulable, last_bound
        ),
        "nodeclaims_after_last_unschedulable": (
            None if last_unschedulable is None else claims.created_after(last_unschedulable)
        ),
        "nodeclaims": final,
        "nodes": len(nodes),
        "rss_p95_mb": round(sampler.p95_rss(), 1),
        "cpu_avg_cores": round(sampler.avg_cores(0, float("inf")), 3),
        "control_plane": control_plane_rates(pods, start, total),
        "rounds": provisioning_rounds(log.splitlines(), start_wall, running_wall),
    }
    if target is not None:
        result.update(against_plan(after_cost, target.hourly, target.nodes))
    return result


# ------------------------------------------------------------ prices: the plan's, the cluster's
KWOKNODECLASS = {
    "apiVersion": "karpenter.kwok.sh/v1alpha1",
    "kind": "KWOKNodeClass",
    "metadata": {"name": "default"},
}
PriceKey = tuple[str, str, str]  # instance type, zone, capacity type


def controller_catalog() -> list[InstanceType]:
    """The instance types the controller subprocess loads (same environment variable)."""
    return kwok_instance_types(os.environ.get("INSTANCE_TYPES_FILE_PATH", ""))


def plan_price(load: Workload, catalog: Sequence[InstanceType]) -> tuple[float, int]:
    """What ``karpenter-py plan`` prices a fresh cluster for the Deployments of ``load``, on
    the benchmark's NodePool: (hourly cost, NodeClaims)."""
    docs = [nodepool(), KWOKNODECLASS, *deployments(load)]
    with tempfile.TemporaryDirectory(prefix="karpy-plan-") as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        manifests = load_manifests([str(path)])
    now = datetime.now(UTC)
    snapshot = build_cluster(manifests.cluster, now)[0].snapshot(now)
    plan = solve(plan_solve_input(snapshot, catalog), namespace_labels=snapshot.namespace_labels)
    if plan.errors:
        raise RuntimeError(f"plan left {len(plan.errors)} pods unschedulable: {plan.errors[0]}")
    return plan.hourly_cost, len(plan.new_node_claims)


def price_table(catalog: Sequence[InstanceType]) -> dict[PriceKey, float]:
    return {(it.name, o.zone, o.capacity_type): o.price for it in catalog for o in it.offerings}


@dataclass(frozen=True)
class PlanTarget:
    """What the plan makes of a workload (hourly cost, NodeClaims) and the prices to hold the
    cluster against it."""

    hourly: float
    nodes: int
    prices: Mapping[PriceKey, float]


def plan_target(load: Workload) -> PlanTarget:
    catalog = controller_catalog()
    hourly, nodes = plan_price(load, catalog)
    return PlanTarget(hourly, nodes, price_table(catalog))


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _claim_estimate(claim: Mapping[str, Any], prices: Mapping[PriceKey, float]) -> float | None:
    """A NodeClaim not launched yet: the cheapest offering its requirements allow (what the kwok
    provider will pick), or None when it names nothing priceable."""
    allowed: dict[str, set[str]] = {}
    for req in (claim.get("spec") or {}).get("requirements") or []:
        if req.get("operator") == "In":
            allowed[req["key"]] = set(req.get("values") or [])
    types = allowed.get(LABEL_INSTANCE_TYPE)
    zones = allowed.get(LABEL_TOPOLOGY_ZONE)
    capacity_types = allowed.get(LABEL_CAPACITY_TYPE)
    candidates = [
        price
        for (name, zone, ct), price in prices.items()
        if (types is None or name in types)
        and (zones is None or zone in zones)
        and (capacity_types is None or ct in capacity_types)
    ]
    return min(candidates) if candidates and types is not None else None


def _labelled_price(labels: Mapping[str, str], prices: Mapping[PriceKey, float]) -> float | None:
    key = (
        labels.get(LABEL_INSTANCE_TYPE, ""),
        labels.get(LABEL_TOPOLOGY_ZONE, ""),
        labels.get(LABEL_CAPACITY_TYPE, ""),
    )
    return prices.get(key)


async def cluster_cost(client: KubeClient, prices: Mapping[PriceKey, float]) -> dict[str, Any]:
    """The NodePool's hourly cost now: its Nodes, plus the NodeClaims that have no Node yet."""
    nodes = (await client.list(NODES, label_selector=LABEL_NODEPOOL)).items
    claims = (await client.list(NODECLAIMS)).items
    hourly = 0.0
    unpriced = 0
    node_names = set()
    for node in nodes:
        labels = _labels(node)
        if labels.get(KWOK_NODE_LABEL) != "fake":
            continue
        node_names.add(node["metadata"]["name"])
        price = _labelled_price(labels, prices)
        if price is None:
            unpriced += 1
        else:
            hourly += price
    in_flight = 0
    for claim in claims:
        name = claim["metadata"]["name"]
        if name in node_names or (claim.get("status") or {}).get("nodeName") in node_names:
            continue
        in_flight += 1
        price = _labelled_price(_labels(claim), prices)
        if price is None:
            price = _claim_estimate(claim, prices)
        if price is None:
            unpriced += 1
        else:
            hourly += price
    return {
        "hourly": hourly,
        "nodes": len(node_names),
        "in_flight": in_flight,
        "unpriced": unpriced,
    }


async def _sample_forever(sampler: ProcSampler, every: float = 0.5) -> None:
    while True:
        sampler.sample()
        await asyncio.sleep(every)


async def scale_in(
    client: KubeClient,
    pid: int,
    load: Workload,
    pods: PodWatch,
    *,
    limit: float,
    every: float,
    tolerance: float = 0.10,
) -> dict[str, Any]:
    catalog = controller_catalog()
    prices = price_table(catalog)
    target, target_claims = plan_price(load, catalog)
    total = pods_of(load)
    before = await cluster_cost(client, prices)
    sampler = ProcSampler(pid)
    sampling = asyncio.create_task(_sample_forever(sampler))
    start = time.monotonic()
    try:
        for shape, replicas in load:
            await client.patch(
                DEPLOYMENTS, shape.name, {"spec": {"replicas": replicas}}, namespace="default"
            )
        series: list[list[float]] = []
        consolidated_at: float | None = None
        cost: dict[str, Any] = before
        running = live = 0
        while True:
            now = time.monotonic() - start
            cost = await cluster_cost(client, prices)
            running, live = len(pods.running), len(pods.live)
            series.append([round(now, 1), round(cost["hourly"], 4)])
            print(
                f"[scale-in] t={now:6.1f}s ${cost['hourly']:.3f}/h (plan ${target:.3f}/h) "
                f"nodes={cost['nodes']} in-flight={cost['in_flight']} running={running}/{live}",
                file=sys.stderr,
                flush=True,
            )
            settled = running == total and live == total and cost["unpriced"] == 0
            if settled and cost["hourly"] <= target * (1 + tolerance):
                consolidated_at = now
                break
            if now >= limit:
                break
            await asyncio.sleep(every)
        until = time.monotonic()
    finally:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
    return {
        "pods": total,
        "seconds_to_consolidated": None if consolidated_at is None else round(consolidated_at, 1),
        "cost_ratio_to_plan": round(cost["hourly"] / target, 3) if target else None,
        "cost_over_time": series,
        "rss_p95_mb": round(sampler.p95_rss(), 1),
        "cpu_avg_cores": round(sampler.avg_cores(start, until), 3),
        "plan_hourly": round(target, 4),
        "plan_nodeclaims": target_claims,
        "hourly_before": round(before["hourly"], 4),
        "hourly_after": round(cost["hourly"], 4),
        "nodes_before": before["nodes"],
        "nodes_after": cost["nodes"],
        "pods_running_after": running,
        "limit_seconds": limit,
        "tolerance": tolerance,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def controller_env(kubeconfig: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The controller subprocess's environment: single replica, free ports, info logs; ``extra``
    adds to it or overrides it (leader election back on, for several replicas)."""
    env = dict(
        os.environ,
        KUBECONFIG=str(kubeconfig),
        DISABLE_LEADER_ELECTION="true",
        HEALTH_PROBE_PORT=str(free_port()),
        METRICS_PORT=str(free_port()),
        LOG_LEVEL="info",
    )
    return {**env, **extra}


def stop_controller(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def start_controller(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "karpenter_py", "controller"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def wait_nodeclass_ready(
    client: KubeClient, name: str = "default", limit: float = 120.0
) -> None:
    start = time.monotonic()
    nc: dict[str, Any] = {}
    while time.monotonic() - start < limit:
        nc = await client.get(EC2NODECLASSES, name)
        conditions = (nc.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"EC2NodeClass {name} not Ready after {limit} s: {nc.get('status')}")


def scale_out_load(args: argparse.Namespace) -> Workload:
    """``--pods N``: the mixed Deployments; otherwise upstream's Basic two."""
    if args.pods is None:
        return workload(BASIC, 2 * args.pods_per_deployment)
    return workload(MIXED, args.pods)


def scaled(load: Workload, fraction: float) -> Workload:
    """Every Deployment of ``load`` scaled to ``fraction`` of its replicas (rounded so the
    total is ``fraction`` of the total)."""
    counts = apportion(round(pods_of(load) * fraction), [n for _, n in load])
    return tuple((shape, n) for (shape, _), n in zip(load, counts, strict=True))


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.cloud_provider == "aws":
        async with aws_world() as world:
            return await _run(args, world)
    return await _run(args, None)


async def _run(args: argparse.Namespace, world: AwsWorld | None) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="karpy-e2e-"))
    fast = ["--kube-api-qps=500", "--kube-api-burst=1000"]
    # The scheduler's client as fast as the controller-manager's; percentageOfNodesToScore is
    # the knob Kubernetes documents for large clusters: its adaptive default scores ~42 % of
    # 1,000 nodes for every pod, on 2 cores shared with the whole control plane and the
    # controller, and the backlog that builds is pods bound late and elsewhere than planned.
    scheduler_config: dict[str, Any] = {
        "clientConnection": {"qps": 500, "burst": 1000},
        "percentageOfNodesToScore": args.scheduler_score_percent,
    }
    cluster = LocalCluster(
        state_dir=state,
        controller_manager_args=[*fast, "--concurrent-replicaset-syncs=10"],
        scheduler_config=scheduler_config,
        # /metrics open: scheduler_pending_pods and the client's request latencies show when
        # the control plane, not the controller, is what a run waits for.
        scheduler_args=["--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"],
    )
    cluster.start()
    proc = None
    try:
        config = load_config(str(cluster.kubeconfig_path))
        async with KubeClient(config) as client, contextlib.AsyncExitStack() as stack:
            consolidate_after = (
                CONSOLIDATE_AFTER if args.consolidate_during_scale_out else CONSOLIDATION_DEFERRED
            )
            if world is None:
                await setup(client, consolidate_after=consolidate_after)
            else:
                await install_crds(client)
                await client.create(EC2NODECLASSES, world.nodeclass())
                await client.create(NODEPOOLS, aws_nodepool())
            extra = nominate_env(not args.no_nominate)
            if world is not None:
                extra.update(world.controller_env())
            env = controller_env(cluster.kubeconfig_path, extra)
            log_path = state / "controller.log"
            proc = await asyncio.to_thread(start_controller, env, log_path)
            sampler = ProcSampler(proc.pid)
            if world is not None:
                await wait_nodeclass_ready(client)
                await world.load_types(client)
                await stack.enter_async_context(running_kubelet(world.kubelet(client)))
            await asyncio.sleep(2.0)  # informers list and sync
            load = scale_out_load(args)
            # Before the Deployments exist: the plan's solve (in this process) does not take
            # CPU from the controller and control plane during the timed scale-out.
            target = plan_target(load) if world is None else None
            pods, claims = PodWatch(), ClaimWatch()
            for task in (
                follow(client, PODS, pods, namespace="default"),
                follow(client, NODECLAIMS, claims),
            ):
                stack.push_async_callback(_cancel, asyncio.create_task(task))
            result = await measure(
                client, sampler, load, pods, claims, args.timeout, log_path=log_path, target=target
            )
            result["nominate_pods"] = not args.no_nominate
            if args.scale_in and result["seconds_to_running"] is None:
                # Keep what was measured (a 10,000-pod scale-out is half an hour here).
                result = {"scale_out": result, "error": "scale-out did not finish in --timeout"}
            elif args.scale_in:
                scale_out = result
                await client.patch(
                    NODEPOOLS,
                    "default",
                    {"spec": {"disruption": {"consolidateAfter": CONSOLIDATE_AFTER}}},
                )
                result = await scale_in(
                    client,
                    proc.pid,
                    scaled(load, args.scale_in_fraction),
                    pods,
                    limit=args.scale_in_limit,
                    every=args.scale_in_every,
                )
                result["scale_out"] = scale_out
            if world is not None:
                result["cloud_provider"] = "aws"
                result["create_fleet_calls"] = await world.create_fleet_calls()
                result["instances"] = len(await world.instances("pending", "running"))
            outer = result.get("scale_out", result)
            outer["consolidation_during_scale_out"] = world is not None or (
                args.consolidate_during_scale_out
            )
            outer["scheduler_config"] = scheduler_config
            result["controller_log"] = str(log_path)
            return result
    finally:
        if proc is not None:
            stop_controller(proc)
        cluster.stop()
        if not args.keep:
            shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pods",
        type=int,
        help=f"total pods over {len(MIXED)} mixed Deployments (default: upstream's Basic two)",
    )
    parser.add_argument(
        "--pods-per-deployment", type=int, default=500, help="Basic case (without --pods)"
    )
    parser.add_argument("--cloud-provider", choices=("kwok", "aws"), default="kwok")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--keep", action="store_true", help="keep the cluster state dir and controller log"
    )
    parser.add_argument(
        "--scale-in",
        action="store_true",
        help="after the scale-out, scale in and time consolidation",
    )
    parser.add_argument(
        "--scale-in-fraction",
        type=float,
        default=0.7,
        help="scale each Deployment to this share of its replicas",
    )
    parser.add_argument(
        "--scale-in-limit", type=float, default=300.0, help="give up consolidating after this"
    )
    parser.add_argument(
        "--consolidate-during-scale-out",
        action="store_true",
        help=f"consolidateAfter {CONSOLIDATE_AFTER} from the start (default: Never until the "
        "scale-in, so consolidation's evictions do not mix into the scale-out's measures)",
    )
    parser.add_argument("--scale-in-every", type=float, default=3.0, help="cost sampling period")
    parser.add_argument(
        "--no-nominate",
        action="store_true",
        help=f"start the controller with {NOMINATE_ENV}=false (no pod nominations)",
    )
    parser.add_argument(
        "--scheduler-score-percent",
        type=int,
        default=10,
        help="the kube-scheduler's percentageOfNodesToScore (0: its adaptive default, about "
        "42 %% at 1,000 nodes; it never scores fewer than 100 feasible nodes)",
    )
    args = parser.parse_args(argv)
    if args.scale_in and args.cloud_provider == "aws":
        parser.error("--scale-in runs on the kwok provider only")
    if not 0 < args.scale_in_fraction <= 1:
        parser.error("--scale-in-fraction must be in (0, 1]")
    try:
        nominate_env(not args.no_nominate)
    except ValueError as e:
        parser.error(f"--no-nominate: {e}")
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.scale_in:
        return 0 if result.get("seconds_to_consolidated") is not None else 1
    return 0 if result["seconds_to_running"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
