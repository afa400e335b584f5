"""Scale benchmark: 5,000 nodes, 100,000 pods, 20,000 pending, through the controller's own code.

Pure and in-process (no API server): a child process writes the cluster as the API server would
send it (list pages of 500 JSON items per kind, and watch events as JSON lines) into a temporary
directory; this process builds the real ``manager.App`` (kwok cloud provider over the built-in
1,340-type AWS catalog) and feeds its reflectors from those files through an in-memory
``ListWatch`` that decodes each page and event with orjson as the API client does. So ingest goes
through the same reflectors, stores, sinks and controller watches as in the controller.

The cluster: 10 NodePools (different instance categories, capacity types and zones; consolidation
``WhenEmptyOrUnderutilized``, the default 10 % budget), 5,000 Nodes each with its launched,
registered, initialized and consolidatable NodeClaim, 100,000 bound pods (two DaemonSets on every
node, the rest from 900 Deployments, some with zone spread or hostname anti-affinity
preferences, each node filled to a random 30-95 % of its CPU), one PDB per Deployment. A pod is
what the API server returns for a Deployment's pod (managedFields, status, the projected service
account token volume, probes, env): about 4.5 KB of JSON.

Measured, in order. Times are CPU seconds of this process (``time.process_time``, the solver's
worker thread included), so other load on a shared machine does not inflate them; the work is
single-core, so on an idle machine they equal wall time. ``--profile`` uses the same clock.

* ``ingest_seconds``: every reflector's first list until the cluster state is synced;
  ``rss_mb`` the process RSS after it (and a GC), ``rss_peak_mb`` the high-water mark;
* ``event_us``: one pod update (MODIFIED, JSON line decoded) through reflector, store, sinks
  and every controller watch: the mean over ``--events`` updates;
* ``disruption_pass_seconds``: one disruption decision (``Disruption.facts`` then the
  controller's ``decide``: emptiness, drift, multi-node, single-node) over every candidate, with
  upstream's time limits, after the pools' instance-type indexes are built as a running
  controller's provisioning rounds have built them (``index_build_seconds``); ``saving_hourly`` the saving of the command it finds, and
  ``saving_upstream_style_hourly`` that of the same pass with ``search="upstream"``;
* ``provision_round_seconds``: after the 20,000 pending pods arrive (ADDED events), one
  provisioning round to its NodeClaims decided (``Provisioner.decide``: snapshot, instance
  types, solve input, solve), no writes;
* ``warm_round_ms``: the pending pods gone, the median of ``--warm-rounds`` rounds of one new
  pending pod each; ``warm_round_churn_ms`` the same with one bound pod leaving its node
  before each round and coming back after it (pods come and go between two rounds).

    python benchmarks/scale.py --out benchmarks/results/scale.json
    python benchmarks/scale.py --nodes 50 --pods 1000 --pending 200   # 1 % size
    python benchmarks/scale.py --profile ingest|event|disruption|provision|warm

Targets (issue 16): RSS under 1 GiB, ingest under 60 s, the 20,000-pod round under 10 s, warm
round under 20 ms, the disruption pass under 30 s with a saving at least upstream-style's, a pod
event under 200 microseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests.factories (benchmarks run as a script)

from karpenter_py.aio.clock import FakeClock  # noqa: E402
from karpenter_py.cloudprovider.aws.instancetype_math import builtin_aws_catalog  # noqa: E402
from karpenter_py.cloudprovider.kwok import KwokCloudProvider  # noqa: E402
from karpenter_py.controllers.disruption.candidates import hourly_price  # noqa: E402
from karpenter_py.controllers.disruption.decide import next_command  # noqa: E402
from karpenter_py.controllers.disruption.types import Decision  # noqa: E402
from karpenter_py.kube.client import KubeClient  # noqa: E402
from karpenter_py.kube.config import KubeConfig  # noqa: E402
from karpenter_py.kube.objects import Page, WatchEvent  # noqa: E402
from karpenter_py.kube.resources import Resource  # noqa: E402
from karpenter_py.launcher import round as round_module  # noqa: E402
from karpenter_py.manager.adapters import KubeNodeAPI  # noqa: E402
from karpenter_py.manager.app import App  # noqa: E402
from karpenter_py.manager.settings import Settings  # noqa: E402
from karpenter_py.model.instancetype import InstanceType  # noqa: E402
from karpenter_py.model.labels import (  # noqa: E402
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.simulate import Simulator  # noqa: E402
from tests import factories  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=2)
STAMP = "2026-01-01T00:00:00Z"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
CATEGORY = "karpenter.k8s.aws/instance-category"
GENERATION = "karpenter.k8s.aws/instance-generation"
PAGE = 500
MiB = 2**20

# (instance category values, capacity type, node types the pool's nodes run): 10 NodePools.
POOLS: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...] = (
    (("m",), "on-demand", ("m5.2xlarge", "m5.4xlarge", "m6i.4xlarge")),
    (("c",), "on-demand", ("c5.4xlarge", "c6i.4xlarge", "c5.2xlarge")),
    (("r",), "on-demand", ("r5.2xlarge", "r6i.2xlarge", "r5.4xlarge")),
    (("m", "c"), "spot", ("m5.4xlarge", "c5.4xlarge", "m6a.4xlarge")),
    (("m", "r"), "spot", ("r5.4xlarge", "m5.2xlarge", "r6a.2xlarge")),
    (("c", "m", "r"), "on-demand", ("m6i.2xlarge", "c6i.2xlarge", "r6i.2xlarge")),
    (("m",), "spot", ("m6i.4xlarge", "m5a.4xlarge", "m5.2xlarge")),
    (("c",), "spot", ("c6a.4xlarge", "c5a.4xlarge", "c6i.2xlarge")),
    (("r",), "spot", ("r6a.4xlarge", "r5a.2xlarge", "r6i.4xlarge")),
    (("m", "c", "r"), "spot", ("m6a.2xlarge", "c6a.2xlarge", "r5.2xlarge")),
)
POD_CPU_M = (100, 250, 250, 500, 500, 1000)
DAEMONSETS = (("kube-proxy", 100, 128), ("node-exporter", 50, 64))


# ============================================================================ the world
@dataclass(frozen=True, slots=True)
class Size:
    nodes: int
    pods: int  # bound, DaemonSet pods included
    pending: int
    deployments: int  # of the bound pods
    pending_deployments: int


def pool_name(i: int) -> str:
    return f"pool-{i:02d}"


def nodepool(i: int) -> dict[str, Any]:
    categories, capacity_type, _ = POOLS[i % len(POOLS)]
    return factories.nodepool_dict(
        pool_name(i),
        requirements=[
            {"key": CATEGORY, "operator": "In", "values": list(categories)},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
            {"key": ARCH, "operator": "In", "values": ["amd64"]},
            {"key": OS, "operator": "In", "values": ["linux"]},
            {"key": GENERATION, "operator": "Gt", "values": ["4"]},
        ],
        labels={"example.com/team": f"team-{i % 5}"},
        disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
        resource_version="1",
    )


def kwok_nodeclass() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default", "uid": "kwok-default", "resourceVersion": "1"},
        "spec": {},
        "status": {"conditions": [factories.condition("Ready", at=STAMP)]},
    }


def _managed(manager: str, operation: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": STAMP,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def _quantity(items: dict[str, int]) -> dict[str, str]:
    return {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in items.items()}


def node_objects(
    i: int, pool: int, it: InstanceType, zone: str, capacity_type: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Node as a kubelet registers it (images, conditions, managedFields) and its NodeClaim."""
    name = f"node-{i:05d}"
    labels = factories.node_labels(pool_name(pool), it.name, zone=zone, capacity_type=capacity_type)
    labels |= {k: next(iter(v)) for k, v in it.requirements.items() if len(v) == 1}
    labels |= {ARCH: "amd64", OS: "linux", "example.com/team": f"team-{pool % 5}"}
    keep = ("cpu", "memory", "pods", "ephemeral-storage")
    alloc = _quantity({k: v for k, v in it.allocatable.items() if k in keep})
    cap = _quantity({k: v for k, v in it.capacity.items() if k in keep})
    node = factories.node_dict(
        name,
        labels=labels,
        allocatable=alloc,
        capacity=cap,
        resource_version=str(10 + i),
        annotations={
            "karpenter.sh/nodepool-hash": "1234567890",
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        },
    )
    node["metadata"]["managedFields"] = [
        _managed("kubelet", "Update", {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}}}),
        _managed("kube-controller-manager", "Update", {"f:spec": {"f:podCIDR": {}}}),
    ]
    node["spec"]["podCIDR"] = f"10.{i // 250}.{i % 250}.0/24"
    node["status"]["images"] = [
        {
            "names": [f"registry.example.com/team/image-{k}@sha256:{'0' * 64}"],
            "sizeBytes": 100_000_000 + k,
        }
        for k in range(12)
    ]
    node["status"]["nodeInfo"] = {
        "kubeletVersion": "v1.31.0",
        "osImage": "Amazon Linux 2023",
        "kernelVersion": "6.1.0",
        "containerRuntimeVersion": "containerd://1.7.0",
        "architecture": "amd64",
        "operatingSystem": "linux",
    }
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": f"10.{i // 250}.{i % 250}.1"},
        {"type": "Hostname", "address": name},
    ]
    claim_labels = {k: v for k, v in labels.items() if k != LABEL_NODEPOOL}
    conditions = [
        factories.condition(t, at=STAMP)
        for t in ("Launched", "Registered", "Initialized", "Consolidatable", "Ready")
    ]
    claim = factories.nodeclaim_dict(
        name,
        pool=pool_name(pool),
        labels=claim_labels,
        conditions=conditions,
        created=STAMP,
        resource_version=str(10 + i),
        capacity=cap,
        allocatable=alloc,
        requirements=[
            {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [it.name]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
            {"key": LABEL_TOPOLOGY_ZONE, "operator": "In", "values": [zone]},
        ],
        resources={"cpu": "1", "memory": "1Gi"},
    )
    return node, claim


@dataclass(frozen=True, slots=True)
class PodShape:
    namespace: str
    app: str
    cpu_m: int
    mem_mi: int
    spread: bool = False  # zone topology spread
    anti: bool = False  # hostname anti-affinity preference
    selector: dict[str, str] = field(default_factory=dict)
    hard_spread: bool = False  # DoNotSchedule (pending pods only)


def api_pod(
    name: str, shape: PodShape, *, node: str, owner: str, rv: int, pending: bool = False
) -> dict[str, Any]:
    """A pod as the API server returns it for a Deployment's ReplicaSet."""
    labels = {"app": shape.app, "pod-template-hash": "5d8f7c9b6d"}
    owner_kind = "DaemonSet" if owner.startswith("ds-") else "ReplicaSet"
    spec: dict[str, Any] = {
        "volumes": [
            {
                "name": "kube-api-access-abcde",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {
                                            "apiVersion": "v1",
                                            "fieldPath": "metadata.namespace",
                                        },
                                    }
                                ]
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            }
        ],
        "containers": [
            {
                "name": "app",
                "image": f"registry.example.com/{shape.namespace}/{shape.app}:v1.2.3",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [
                    {"name": "LOG_LEVEL", "value": "info"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "GOMAXPROCS", "value": "2"},
                ],
                "resources": {
                    "requests": {"cpu": f"{shape.cpu_m}m", "memory": f"{shape.mem_mi}Mi"},
                    "limits": {"memory": f"{shape.mem_mi}Mi"},
                },
                "volumeMounts": [
                    {
                        "name": "kube-api-access-abcde",
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    }
                ],
                "livenessProbe": {
                    "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                    "timeoutSeconds": 1,
                    "periodSeconds": 10,
                    "successThreshold": 1,
                    "failureThreshold": 3,
                },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if node:
        spec["nodeName"] = node
    if shape.selector:
        spec["nodeSelector"] = dict(shape.selector)
    if shape.spread or shape.hard_spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": LABEL_TOPOLOGY_ZONE,
                "whenUnsatisfiable": "DoNotSchedule" if shape.hard_spread else "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": shape.app}},
            }
        ]
    if shape.anti:
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": shape.app}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        }
    status: dict[str, Any]
    if pending:
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": STAMP,
                    "reason": "Unschedulable",
                    "message": "0/5000 nodes are available: 5000 Insufficient cpu.",
                }
            ],
            "qosClass": "Burstable",
        }
    else:
        status = {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": STAMP}
                for t in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                )
            ],
            "hostIP": "10.0.0.1",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": "10.1.2.3",
            "podIPs": [{"ip": "10.1.2.3"}],
            "startTime": STAMP,
            "containerStatuses": [
                {
                    "name": "app",
                    "state": {"running": {"startedAt": STAMP}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": f"registry.example.com/{shape.namespace}/{shape.app}:v1.2.3",
                    "imageID": f"registry.example.com/{shape.app}@sha256:{'a' * 64}",
                    "containerID": f"containerd://{'b' * 64}",
                    "started": True,
                }
            ],
            "qosClass": "Burstable",
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{owner}-",
            "namespace": shape.namespace,
            "uid": f"uid-{shape.namespace}-{name}",
            "resourceVersion": str(rv),
            "creationTimestamp": STAMP,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner_kind,
                    "name": owner,
                    "uid": f"uid-{owner}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                _managed(
                    "kube-controller-manager",
                    "Update",
                    {
                        "f:metadata": {
                            "f:generateName": {},
                            "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                            "f:ownerReferences": {".": {}, f'k:{{"uid":"uid-{owner}"}}': {}},
                        },
                        "f:spec": {
                            "f:containers": {
                                'k:{"name":"app"}': {
                                    ".": {},
                                    "f:env": {},
                                    "f:image": {},
                                    "f:imagePullPolicy": {},
                                    "f:livenessProbe": {},
                                    "f:name": {},
                                    "f:ports": {},
                                    "f:resources": {},
                                    "f:terminationMessagePath": {},
                                }
                            },
                            "f:dnsPolicy": {},
                            "f:enableServiceLinks": {},
                            "f:restartPolicy": {},
                            "f:schedulerName": {},
                            "f:securityContext": {},
                            "f:terminationGracePeriodSeconds": {},
                        },
                    },
                ),
                _managed(
                    "kubelet",
                    "Update",
                    {
                        "f:status": {
                            "f:conditions": {},
                            "f:containerStatuses": {},
                            "f:hostIP": {},
                            "f:phase": {},
                            "f:podIP": {},
                            "f:startTime": {},
                        }
                    },
                ),
            ],
        },
        "spec": spec,
        "status": status,
    }


def daemonset(name: str, cpu_m: int, mem_mi: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "uid": f"uid-ds-{name}",
            "resourceVersion": "2",
        },
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": name,
                            "image": f"registry.example.com/{name}:v1",
                            "resources": {
                                "requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"}
                            },
                        }
                    ],
                    "tolerations": [{"operator": "Exists"}],
                },
            },
        },
    }


def pdb(namespace: str, app: str, allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": app,
            "namespace": namespace,
            "uid": f"uid-pdb-{namespace}-{app}",
            "resourceVersion": "3",
        },
        "spec": {"maxUnavailable": "10%", "selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 100, "expectedPods": 100},
    }


def namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": f"uid-ns-{name}",
            "resourceVersion": "1",
            "labels": {"kubernetes.io/metadata.name": name},
        },
    }


def _shape(rng: random.Random, d: int, *, pending: bool) -> PodShape:
    cpu = rng.choice(POD_CPU_M) * (2 if pending else 1)
    mem = max(64, int(cpu * rng.uniform(1.0, 4.0)))
    ns = f"team-{d % 50:02d}"
    kind = d % 10
    return PodShape(
        namespace=ns,
        app=f"{'new' if pending else 'app'}-{d:04d}",
        cpu_m=cpu,
        mem_mi=mem,
        spread=kind in (1, 2),
        anti=kind == 3,
        hard_spread=pending and kind == 4,
        selector={"example.com/team": f"team-{d % 5}"} if pending and kind == 5 else {},
    )


@dataclass(slots=True)
class Writer:
    """Writes one kind's list as pages of ``PAGE`` items, as the API server serves a list."""

    root: Path
    plural: str
    items: list[dict[str, Any]] = field(default_factory=list)
    pages: int = 0
    count: int = 0

    def add(self, obj: dict[str, Any]) -> None:
        self.items.append(obj)
        self.count += 1
        if len(self.items) == PAGE:
            self.flush()

    def flush(self) -> None:
        if not self.items and self.pages:
            return
        folder = self.root / self.plural
        folder.mkdir(parents=True, exist_ok=True)
        body = {"metadata": {"resourceVersion": "1000000"}, "items": self.items}
        (folder / f"{self.pages:05d}.json").write_bytes(orjson.dumps(body))
        self.pages += 1
        self.items = []


def generate(root: Path, size: Size, seed: int) -> dict[str, int]:
    """Write the world under ``root``; returns object counts."""
    rng = random.Random(seed)
    catalog = {it.name: it for it in builtin_aws_catalog()}
    writers = {
        p: Writer(root, p)
        for p in (
            "nodepools",
            "kwoknodeclasses",
            "nodes",
            "nodeclaims",
            "pods",
            "daemonsets",
            "poddisruptionbudgets",
            "namespaces",
            "persistentvolumeclaims",
            "persistentvolumes",
            "storageclasses",
        )
    }
    for i in range(len(POOLS)):
        writers["nodepools"].add(nodepool(i))
    writers["kwoknodeclasses"].add(kwok_nodeclass())
    for ns in {f"team-{d % 50:02d}" for d in range(50)} | {"kube-system", "default"}:
        writers["namespaces"].add(namespace(ns))
    for name, cpu, mem in DAEMONSETS:
        writers["daemonsets"].add(daemonset(name, cpu, mem))
    shapes = [_shape(rng, d, pending=False) for d in range(size.deployments)]
    for shape in shapes:
        writers["poddisruptionbudgets"].add(pdb(shape.namespace, shape.app, 10))
    app_pods = size.pods - size.nodes * len(DAEMONSETS)
    per_node = app_pods / size.nodes
    placed = 0
    rv = 100_000
    for i in range(size.nodes):
        pool = i % len(POOLS)
        _, capacity_type, types = POOLS[pool]
        it = catalog[rng.choice(types)]
        zone = ZONES[i % len(ZONES)]
        node, claim = node_objects(i, pool, it, zone, capacity_type)
        writers["nodes"].add(node)
        writers["nodeclaims"].add(claim)
        for name, cpu, mem in DAEMONSETS:
            rv += 1
            ds_shape = PodShape("kube-system", name, cpu, mem)
            writers["pods"].add(
                api_pod(
                    f"{name}-{i:05d}",
                    ds_shape,
                    node=node["metadata"]["name"],
                    owner=f"ds-{name}",
                    rv=rv,
                )
            )
        target = round(per_node * (i + 1)) - placed
        free = it.allocatable["cpu"] - sum(c for _, c, _ in DAEMONSETS)
        budget = free * rng.uniform(0.30, 0.95)
        used = 0
        for k in range(target):
            shape = shapes[(placed + k) % len(shapes)]
            # Keep to the drawn utilisation where the pods allow it (small pods always fit).
            cpu = shape.cpu_m if used + shape.cpu_m <= budget else 50
            used += cpu
            rv += 1
            bound = PodShape(
                shape.namespace,
                shape.app,
                cpu,
                shape.mem_mi if cpu > 50 else 64,
                shape.spread,
                shape.anti,
            )
            writers["pods"].add(
                api_pod(
                    f"{shape.app}-{placed + k:06d}",
                    bound,
                    node=node["metadata"]["name"],
                    owner=f"{shape.app}-5d8f7c9b6d",
                    rv=rv,
                )
            )
        placed += target
    for w in writers.values():
        w.flush()
    events = root / "events"
    events.mkdir(parents=True, exist_ok=True)
    # Pod updates for the hot path: a bound pod's status and resourceVersion change.
    with (events / "updates.jsonl").open("wb") as f:
        for k in range(min(5000, placed)):
            shape = shapes[k % len(shapes)]
            obj = api_pod(
                f"{shape.app}-{k:06d}",
                shape,
                node=f"node-{k % size.nodes:05d}",
                owner=f"{shape.app}-5d8f7c9b6d",
                rv=rv + 1 + k,
            )
            obj["status"]["conditions"][2]["lastTransitionTime"] = "2026-01-01T01:00:00Z"
            f.write(orjson.dumps({"type": "MODIFIED", "object": obj}) + b"\n")
    rv += 10_000
    pending_shapes = [_shape(rng, d, pending=True) for d in range(size.pending_deployments)]
    with (events / "pending.jsonl").open("wb") as f:
        for k in range(size.pending):
            shape = pending_shapes[k % len(pending_shapes)]
            rv += 1
            obj = api_pod(
                f"{shape.app}-{k:06d}",
                shape,
                node="",
                owner=f"{shape.app}-7f6d5c4b3a",
                rv=rv,
                pending=True,
            )
            f.write(orjson.dumps({"type": "ADDED", "object": obj}) + b"\n")
    counts = {p: w.count for p, w in writers.items()}
    counts["pod_json_bytes"] = len(
        orjson.dumps(api_pod("x", shapes[0], node="node-00000", owner="o", rv=1))
    )
    return counts


# ============================================================================ measuring
Feeds = dict[str, "asyncio.Queue[bytes]"]


@dataclass(slots=True)
class FileListWatch:
    """A ``ListWatch`` over the generated files: each list page is decoded from its JSON as the
    API client decodes it; the watch delivers the JSON lines put on the resource's feed."""

    root: Path
    resource: Resource
    feeds: Feeds

    async def pages(
        self, *, resource_version: str | None, limit: int | None
    ) -> AsyncIterator[Page]:
        files = sorted((self.root / self.resource.plural).glob("*.json"))
        for n, path in enumerate(files, start=1):
            body = orjson.loads(path.read_bytes())
            for item in body["items"]:
                # As KubeClient.list_page: list items carry no apiVersion/kind.
                item.setdefault("apiVersion", self.resource.api_version)
                item.setdefault("kind", self.resource.kind)
            token = None if n == len(files) else str(n)
            yield Page(body["items"], body["metadata"]["resourceVersion"], token)

    def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[WatchEvent]]:
        return self._watch()

    @contextlib.asynccontextmanager
    async def _watch(self) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        yield self._events(self.feeds.setdefault(self.resource.plural, asyncio.Queue()))

    @staticmethod
    async def _events(queue: asyncio.Queue[bytes]) -> AsyncIterator[WatchEvent]:
        while True:
            line = await queue.get()
            raw = orjson.loads(line)
            yield WatchEvent(type=raw["type"], object=raw["object"])
            queue.task_done()  # the consumer asked for the next event: this one was applied


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return round(fields["VmRSS"], 1), round(fields["VmHWM"], 1)


class Profiled:
    """cProfile around the stage named by ``--profile``; prints its top lines."""

    def __init__(self, wanted: str | None) -> None:
        self.wanted = wanted

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.wanted != name:
            yield
            return
        # cProfile sees one thread: solve on the event loop's, not in the round's worker.
        threshold, round_module.THREAD_THRESHOLD = round_module.THREAD_THRESHOLD, 10**9
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        try:
            yield
        finally:
            profiler.disable()
            round_module.THREAD_THRESHOLD = threshold
            stats = pstats.Stats(profiler, stream=sys.stderr)
            stats.sort_stats("tottime").print_stats(25)
            stats.sort_stats("cumulative").print_stats(25)


async def feed(feeds: Feeds, plural: str, lines: list[bytes]) -> float:
    """Put ``lines`` on the watch feed and wait until the reflector applied them; seconds."""
    queue = feeds.setdefault(plural, asyncio.Queue())
    started = time.process_time()
    for line in lines:
        queue.put_nowait(line)
    await queue.join()
    return time.process_time() - started


def as_event(line: bytes, event_type: str) -> bytes:
    raw = orjson.loads(line)
    raw["type"] = event_type
    return orjson.dumps(raw)


def _saving(decision: Decision) -> tuple[float, str]:
    if not decision.commands:
        return 0.0, "no command"
    command = decision.commands[0]
    return round(command.savings, 4), f"{command.method.name}: {command.explanation}"


async def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    profile = Profiled(args.profile)
    catalog = list(builtin_aws_catalog())
    client = KubeClient(KubeConfig(server="https://127.0.0.1:1"))  # never contacted
    clock = FakeClock(NOW)
    app = App(
        Settings(), client, clock=clock, cloud=KwokCloudProvider(KubeNodeAPI(client), catalog)
    )
    feeds: Feeds = {}
    reflectors = app.reflectors_over(lambda r: FileListWatch(root, r, feeds))
    out: dict[str, Any] = {}
    gc.collect()
    before, _ = rss_mb()
    async with asyncio.TaskGroup() as tg:
        started = time.process_time()
        with profile.stage("ingest"):
            informers = tg.create_task(app.run_informers(reflectors))
            await app.informers_synced.wait()
        out["ingest_seconds"] = round(time.process_time() - started, 2)
        if not app.cluster.synced():
            raise RuntimeError(f"not synced: {app.cluster.unsynced()}")
        gc.collect()
        rss, peak = rss_mb()
        out |= {"rss_mb": rss, "rss_peak_mb": peak, "rss_before_ingest_mb": before}
        out["nodes"] = len(app.cluster.nodes)
        out["pods"] = len(app.cluster.pods)
        print(f"ingest: {out['ingest_seconds']} s, RSS {rss} MB (peak {peak})", file=sys.stderr)

        updates = (root / "events" / "updates.jsonl").read_bytes().splitlines()[: args.events]
        with profile.stage("event"):
            seconds = await feed(feeds, "pods", updates)
        out["event_us"] = round(seconds / len(updates) * 1e6, 1)
        print(f"pod event: {out['event_us']} us", file=sys.stderr)

        if not args.skip_disruption:
            await disruption_pass(app, clock, args, profile, out)

        pending = (root / "events" / "pending.jsonl").read_bytes().splitlines()
        out["pending_pods"] = len(pending)
        out["pending_ingest_seconds"] = round(await feed(feeds, "pods", pending), 2)
        gc.collect()
        with profile.stage("provision"):
            started = time.process_time()
            decided = await app.provisioner.decide()
            out["provision_round_seconds"] = round(time.process_time() - started, 2)
        assert decided is not None
        plan = decided.plan
        out["provision_solve_seconds"] = round(decided.solve_seconds, 2)
        out["provision_nodeclaims"] = len(plan.new_node_claims)
        out["provision_on_existing"] = sum(len(p.pods) for p in plan.existing)
        out["provision_on_new"] = sum(len(nc.pods) for nc in plan.new_node_claims)
        out["provision_unschedulable"] = len(plan.errors)
        print(
            f"provisioning round: {out['provision_round_seconds']} s "
            f"({out['provision_nodeclaims']} NodeClaims)",
            file=sys.stderr,
        )
        del decided, plan
        await feed(feeds, "pods", [as_event(line, "DELETED") for line in pending])

        with profile.stage("warm"):
            for key, churn in (("warm_round_ms", False), ("warm_round_churn_ms", True)):
                warm = await warm_rounds(app, feeds, pending, updates if churn else [], args)
                out[key] = round(statistics.median(warm) * 1000, 2)
                print(f"{key}: {out[key]} ms", file=sys.stderr)
        informers.cancel()
    await client.close()
    return out


async def warm_rounds(
    app: App, feeds: Feeds, pending: list[bytes], churn: list[bytes], args: argparse.Namespace
) -> list[float]:
    """CPU seconds of ``--warm-rounds`` rounds of one new pending pod each. With ``churn``
    (bound pods), one of them leaves its node before each round and comes back after it, as
    pods come and go on a busy cluster between two rounds."""
    taken: list[float] = []
    for k in range(args.warm_rounds):
        line = pending[k % len(pending)]
        raw = orjson.loads(line)
        raw["object"]["metadata"]["name"] += f"-warm{k}"
        raw["object"]["metadata"]["uid"] += f"-warm{k}"
        added = orjson.dumps(raw)
        moved = churn[k % len(churn)] if churn else None
        if moved is not None:
            await feed(feeds, "pods", [as_event(moved, "DELETED")])
        await feed(feeds, "pods", [added])
        started = time.process_time()
        decided = await app.provisioner.decide()
        taken.append(time.process_time() - started)
        assert decided is not None
        assert len(decided.inp.pods) == 1
        await feed(feeds, "pods", [as_event(added, "DELETED")])
        if moved is not None:
            await feed(feeds, "pods", [as_event(moved, "ADDED")])
    return taken


async def disruption_pass(
    app: App, clock: FakeClock, args: argparse.Namespace, profile: Profiled, out: dict[str, Any]
) -> None:
    """The disruption stage: index build, our pass, and upstream-style beside it."""
    snapshot = app.cluster.snapshot(clock.now())
    facts = await app.disruption.facts(snapshot)
    out["disruption_candidates"] = sum(1 for n in snapshot.nodes if n.nodeclaim is not None)
    # Each pool's instance-type index, as a running controller's provisioning rounds have
    # already built it (the disruption pass shares the round runner's cache).
    started = time.process_time()
    sim = Simulator(
        snapshot,
        instance_types=facts.instance_types,
        options=facts.options,
        indexes=facts.indexes,
    )
    sim.run([])
    out["index_build_seconds"] = round(time.process_time() - started, 2)
    del sim
    gc.collect()
    with profile.stage("disruption"):
        started = time.process_time()
        decision = app.disruption.decide(facts)
        out["disruption_pass_seconds"] = round(time.process_time() - started, 2)
    out["saving_hourly"], out["disruption_command"] = _saving(decision)
    out["disruption_timed_out"] = [t.explanation for t in decision.timed_out]
    print(
        f"disruption: {out['disruption_pass_seconds']} s, {out['disruption_command']}",
        file=sys.stderr,
    )
    if not args.skip_upstream:
        started = time.process_time()
        upstream = next_command(replace(facts, search="upstream"))
        out["disruption_pass_upstream_style_seconds"] = round(time.process_time() - started, 2)
        out["saving_upstream_style_hourly"], out["upstream_style_command"] = _saving(upstream)
        print(
            f"upstream-style: {out['disruption_pass_upstream_style_seconds']} s, "
            f"{out['upstream_style_command']}",
            file=sys.stderr,
        )
    out["cluster_hourly"] = round(
        sum(hourly_price(n, facts.instance_types) for n in snapshot.nodes), 2
    )


TARGETS: dict[str, tuple[str, float]] = {
    "rss_mb": ("<", 1024.0),
    "ingest_seconds": ("<", 60.0),
    "provision_round_seconds": ("<", 10.0),
    "warm_round_ms": ("<", 20.0),
    "warm_round_churn_ms": ("<", 20.0),
    "disruption_pass_seconds": ("<", 30.0),
    "event_us": ("<", 200.0),
}


def table(result: dict[str, Any]) -> str:
    rows = [f"{'measure':<28} {'value':>12} {'target':>10}  met"]
    for key, value in result.items():
        if isinstance(value, (dict, list)) or key == "world":
            continue
        target = TARGETS.get(key)
        met = ""
        if target is not None and isinstance(value, (int, float)):
            met = "yes" if value < target[1] else "NO"
        goal = f"{target[0]} {target[1]:g}" if target else ""
        rows.append(f"{key:<28} {value!s:>12} {goal:>10}  {met}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--warm-rounds", type=int, default=20)
    parser.add_argument("--skip-upstream", action="store_true")
    parser.add_argument("--skip-disruption", action="store_true")
    parser.add_argument("--profile", choices=("ingest", "event", "disruption", "provision", "warm"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--world", type=Path, help=argparse.SUPPRESS)  # internal: generate only
    args = parser.parse_args(argv)
    size = Size(
        nodes=args.nodes,
        pods=args.pods,
        pending=args.pending,
        deployments=max(1, (args.pods - args.nodes * len(DAEMONSETS)) // 100),
        pending_deployments=max(1, args.pending // 100),
    )
    if args.world is not None:
        counts = generate(args.world, size, args.seed)
        print(json.dumps(counts))
        return 0
    root = Path(tempfile.mkdtemp(prefix="karpy-scale-"))
    try:
        # A child process writes the world, so its memory is not this process's RSS.
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, *(argv or sys.argv[1:]), "--world", str(root)],
            check=True,
            capture_output=True,
            text=True,
        )
        world = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"world written in {time.perf_counter() - started:.1f} s: {world}", file=sys.stderr)
        result: dict[str, Any] = {
            "nodes": args.nodes,
            "pods": args.pods,
            "pending_pods": args.pending,
        }
        result |= asyncio.run(measure(root, args))
        result["world"] = world
        result["cpus"] = sorted(os.sched_getaffinity(0))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(table(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
