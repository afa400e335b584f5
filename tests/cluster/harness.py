"""Reusable setup for controller tests against the local control plane (the ``cluster`` fixture).

* :func:`open_client` — the project's :class:`KubeClient` for the fixture's cluster.
* :func:`install_crds` — apply ``manifests/crds/*.yaml`` (server-side apply, idempotent) and wait
  until each CRD is Established.
* :class:`Harness` — a :class:`Cluster` fed by reflectors for every kind ``state`` needs (nodes,
  nodeclaims, pods, nodepools, daemonsets). Register controller triggers with :meth:`Harness.on`
  *before* :meth:`Harness.running`; they run after the state sinks, as the manager wires them.
  Inside ``running()`` use :meth:`Harness.spawn` for controller loops: they are owned by the
  harness's TaskGroup and cancelled on exit. Objects the test creates with :meth:`Harness.labels`
  are force-cleaned (finalizers stripped) on exit, so a failed test never leaves NodeClaims or
  Nodes behind for the next one's controllers to pick up.
* Factories: :func:`kwok_nodeclass`, :func:`nodepool`, :func:`nodeclaim`, :func:`pod`, :func:`pdb`.
* :func:`prepared_client` (CRDs + KWOKNodeClass ``default``), :func:`namespace`, and small
  readers: :func:`get_or_none`, :func:`condition`, :func:`is_true`, :func:`events_for`.
* :func:`eventually` — poll a (sync or async) condition until it returns something truthy.
* :func:`lifecycle_stack` — the kwok provider and every NodeClaim/Node lifecycle controller
  (launch/registration/initialization/liveness, garbage collection, both terminations, the
  eviction queue, the NodePool counter) wired to a :class:`Harness`, with short timers; call it
  before ``running()`` and :meth:`Stack.start` inside. Provisioning tests need it so that nodes
  register (their ``karpenter.sh/unregistered`` taint goes) and pods can bind.

Example::

    async with open_client(cluster) as client:
        await install_crds(client)
        h = Harness(client)
        h.on(NODECLAIMS, upsert=my_controller.on_nodeclaim)
        async with h.running():
            h.spawn(my_controller.run())
            await client.create(NODECLAIMS, nodeclaim(unique("nc"), pool, labels=h.labels()))
            await eventually(lambda: ..., within=30, what="the claim to launch")
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from karpenter_py.aio.clock import Clock, RealClock
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.controllers.nodeclaim import NodeClaimGarbageCollector, NodeClaimLifecycle
from karpenter_py.controllers.nodepool import NodePoolCounter
from karpenter_py.controllers.termination import (
    EvictionQueue,
    NodeClaimTermination,
    NodeTermination,
)
from karpenter_py.informer import CallbackSink, KubeListWatch, Reflector, Sink
from karpenter_py.kube import (
    DAEMONSETS,
    EVENTS,
    KWOKNODECLASSES,
    NAMESPACES,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
    KubeClient,
    KubeError,
    KubeObject,
    NotFoundError,
    PatchType,
    Resource,
    load_kubeconfig,
)
from karpenter_py.kube.events import EventRecorder
from karpenter_py.launcher.launch import Launcher
from karpenter_py.manager.adapters import KubeNodeAPI
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.labels import KWOK_GROUP, LABEL_NODEPOOL
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import (
    DaemonSetSink,
    NodeClaimSink,
    NodeClassSink,
    NodePoolSink,
    NodeSink,
    PodSink,
)
from tests import factories
from tests.clusterfixture import ClusterHandle
from tests.unit.fakes import deps

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "manifests" / "crds"
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
TEST_LABEL = "karpy-test"
FIELD_MANAGER = "karpy-tests"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextlib.asynccontextmanager
async def open_client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    config = await asyncio.to_thread(load_kubeconfig, [cluster.kubeconfig_path])
    async with KubeClient(config, qps=500, burst=1000) as client:
        yield client


@contextlib.asynccontextmanager
async def prepared_client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    """A client for a cluster with the CRDs installed and KWOKNodeClass ``default`` present."""
    async with open_client(cluster) as client:
        await install_crds(client)
        await client.apply(KWOKNODECLASSES, kwok_nodeclass(), field_manager=FIELD_MANAGER)
        yield client


@contextlib.asynccontextmanager
async def namespace(client: KubeClient, prefix: str = "karpy") -> AsyncIterator[str]:
    """A fresh namespace, deleted on exit."""
    name = unique(prefix)
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    try:
        yield name
    finally:
        with contextlib.suppress(NotFoundError):
            await client.delete(NAMESPACES, name)


def condition(obj: KubeObject | None, type_: str) -> dict[str, Any] | None:
    """``status.conditions[type]`` of a wire object, or None."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def is_true(obj: KubeObject | None, type_: str) -> bool:
    c = condition(obj, type_)
    return c is not None and c.get("status") == "True"


async def get_or_none(
    client: KubeClient, resource: Resource, name: str, namespace: str | None = None
) -> KubeObject | None:
    try:
        return await client.get(resource, name, namespace=namespace)
    except NotFoundError:
        return None


async def events_for(client: KubeClient, name: str, reason: str | None = None) -> list[KubeObject]:
    """Events (any namespace) about objects called ``name``, optionally of one reason."""
    items = (await client.list(EVENTS, field_selector=f"involvedObject.name={name}")).items
    return [e for e in items if reason is None or e.get("reason") == reason]


async def eventually(
    cond: Callable[[], Any],
    *,
    within: float = 30.0,
    interval: float = 0.1,
    what: str = "condition",
) -> Any:
    """Poll ``cond`` until it returns something truthy (returned); AssertionError on timeout.
    A transient API error (429 while a CRD's storage initialises, 5xx, no answer) is a "not
    yet", as a controller would retry it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: object = None
    while True:
        try:
            value = cond()
            if inspect.isawaitable(value):
                value = await value
        except KubeError as err:
            if not err.transient:
                raise
            value = None
            last = err
        else:
            last = value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval)


async def install_crds(client: KubeClient, crd_dir: Path = CRD_DIR) -> None:
    """Apply every CRD in ``crd_dir`` and wait until the apiserver serves them."""
    texts = await asyncio.to_thread(lambda: [p.read_text() for p in sorted(crd_dir.glob("*.yaml"))])
    names = []
    for text in texts:
        for doc in yaml.safe_load_all(text):
            if doc:
                await client.apply(CRDS, doc, field_manager=FIELD_MANAGER)
                names.append(doc["metadata"]["name"])

    async def established() -> bool:
        for name in names:
            crd = await client.get(CRDS, name)
            conds = (crd.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                return False
        return True

    await eventually(established, within=60, what="CRDs to be Established")


# ----------------------------------------------------------------------------- state + triggers


class Harness:
    """A Cluster kept current by reflectors, plus controller triggers and task ownership."""

    KINDS: tuple[tuple[Resource, Callable[[Cluster], Any]], ...] = (
        (NODES, NodeSink),
        (NODECLAIMS, NodeClaimSink),
        (PODS, PodSink),
        (NODEPOOLS, NodePoolSink),
        (DAEMONSETS, DaemonSetSink),
        (
            KWOKNODECLASSES,
            lambda c: NodeClassSink(c, group=KWOK_GROUP, kind="KWOKNodeClass", model=KWOKNodeClass),
        ),
    )

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.cluster = Cluster()
        self.run_id = uuid.uuid4().hex[:8]
        self.reflectors: dict[Resource, Reflector] = {}
        self._triggers: dict[Resource, list[Sink]] = {}
        self._tg: asyncio.TaskGroup | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    def labels(self, **extra: str) -> dict[str, str]:
        """Labels marking an object as this harness's (cleaned up on exit)."""
        return {TEST_LABEL: self.run_id, **extra}

    def on(
        self,
        resource: Resource,
        *,
        upsert: Callable[[KubeObject], None] | None = None,
        delete: Callable[[KubeObject], None] | None = None,
    ) -> None:
        """Deliver ``resource`` events to a controller trigger (after the state sinks)."""
        kw: dict[str, Any] = {}
        if upsert is not None:
            kw["on_upsert"] = upsert
        if delete is not None:
            kw["on_delete"] = delete
        self._triggers.setdefault(resource, []).append(CallbackSink(**kw))

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        if self._tg is None:
            raise RuntimeError("spawn() only inside `async with harness.running()`")
        task = self._tg.create_task(coro)
        self._tasks.append(task)
        return task

    @contextlib.asynccontextmanager
    async def running(self, *, sync_within: float = 30.0) -> AsyncIterator[Harness]:
        for resource, sink_cls in self.KINDS:
            sinks: Sequence[Sink] = [sink_cls(self.cluster), *self._triggers.get(resource, [])]
            self.reflectors[resource] = Reflector(
                KubeListWatch(self.client, resource),
                name=resource.plural,
                sinks=sinks,
                watch_timeout=(60.0, 120.0),
            )
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                for reflector in self.reflectors.values():
                    self.spawn(reflector.run())
                try:
                    async with asyncio.timeout(sync_within):
                        for reflector in self.reflectors.values():
                            await reflector.wait_synced()
                    yield self
                finally:
                    for task in self._tasks:
                        task.cancel()
        finally:
            self._tg = None
            self._tasks.clear()
            await self.cleanup()

    async def cleanup(self) -> None:
        """Strip finalizers from, and delete, every NodeClaim and Node labelled by us."""
        selector = f"{TEST_LABEL}={self.run_id}"
        for resource in (NODECLAIMS, NODES, NODEPOOLS):
            with contextlib.suppress(NotFoundError):
                items = (await self.client.list(resource, label_selector=selector)).items
                for obj in items:
                    name = obj["metadata"]["name"]
                    with contextlib.suppress(NotFoundError):
                        await self.client.patch(
                            resource,
                            name,
                            {"metadata": {"finalizers": None}},
                            patch_type=PatchType.MERGE,
                        )
                        await self.client.delete(resource, name)


# ----------------------------------------------------------------------------- factories


def kwok_nodeclass(name: str = "default") -> KubeObject:
    return {
        "apiVersion": f"{KWOK_GROUP}/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": name},
    }


def nodeclass_ref(nodeclass: str = "default") -> dict[str, str]:
    return {"group": KWOK_GROUP, "kind": "KWOKNodeClass", "name": nodeclass}


def nodepool(
    name: str,
    *,
    nodeclass: str = "default",
    requirements: Sequence[Mapping[str, Any]] = (),
    labels: Mapping[str, str] | None = None,
    template_labels: Mapping[str, str] | None = None,
    termination_grace_period: str | None = None,
    limits: Mapping[str, str] | None = None,
) -> KubeObject:
    return factories.nodepool_dict(
        name,
        uid="",
        pool_labels=dict(labels or {}),
        labels=dict(template_labels or {}),
        node_class_ref=nodeclass_ref(nodeclass),
        requirements=[dict(r) for r in requirements]
        or [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
        termination_grace_period=termination_grace_period or None,
        limits=dict(limits) if limits else None,
    )


def nodeclaim(
    name: str,
    pool: str,
    *,
    instance_type: str = "c-2x-amd64-linux",
    zone: str = "test-zone-a",
    capacity_type: str = "on-demand",
    requests: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    startup_taints: Sequence[Mapping[str, str]] = (),
    termination_grace_period: str | None = None,
    nodeclass: str = "default",
    finalizers: Sequence[str] = ("karpenter.sh/termination",),
) -> KubeObject:
    """A NodeClaim as the provisioner would write it (pinned to one offering by default)."""
    return factories.nodeclaim_dict(
        name,
        pool=pool,
        labels=dict(labels or {}),
        uid="",
        created=None,
        expire_after=None,
        launched=False,
        finalizers=list(finalizers),
        node_class_ref=nodeclass_ref(nodeclass),
        requirements=[
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": [instance_type],
            },
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
            {"key": LABEL_NODEPOOL, "operator": "In", "values": [pool]},
        ],
        resources=dict(requests or {"cpu": "500m", "memory": "256Mi"}),
        taints=[dict(t) for t in taints] or None,
        startup_taints=[dict(t) for t in startup_taints] or None,
        termination_grace_period=termination_grace_period or None,
    )


def pod(
    name: str,
    node: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority_class: str | None = None,
    termination_grace_period_seconds: int = 30,
) -> KubeObject:
    """A pod bound straight to ``node`` (no scheduler involved), tolerating nothing special."""
    spec: dict[str, Any] = {
        "nodeName": node,
        "terminationGracePeriodSeconds": termination_grace_period_seconds,
        "containers": [{"name": "c", "image": "fake", "resources": {"requests": {"cpu": "10m"}}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


def pdb(
    name: str,
    selector: Mapping[str, str],
    *,
    min_available: int = 1,
    max_unavailable: int | None = None,
) -> KubeObject:
    """A PDB by ``minAvailable``, or by ``maxUnavailable`` when that is given (it needs pods
    owned by a scalable controller for the disruption controller to compute a budget; bare test
    pods are not)."""
    budget = (
        {"minAvailable": min_available}
        if max_unavailable is None
        else {"maxUnavailable": max_unavailable}
    )
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {**budget, "selector": {"matchLabels": dict(selector)}},
    }


# ----------------------------------------------------------------------------- controller stack


@dataclass
class Stack:
    harness: Harness
    provider: KwokCloudProvider
    recorder: EventRecorder
    launcher: Launcher
    lifecycle: NodeClaimLifecycle
    garbage_collector: NodeClaimGarbageCollector
    nodeclaim_termination: NodeClaimTermination
    node_termination: NodeTermination
    evictions: EvictionQueue
    counter: NodePoolCounter

    def start(self) -> None:
        for loop in (
            self.recorder.run(),
            self.lifecycle.run(),
            self.garbage_collector.run(),
            self.nodeclaim_termination.run(),
            self.node_termination.run(),
            self.evictions.run(),
            self.counter.run(),
        ):
            self.harness.spawn(loop)


def lifecycle_stack(
    harness: Harness,
    *,
    clock: Clock | None = None,
    metrics: Metrics | None = None,
    registration_delay: float = 0.0,
    launch_timeout: float = 300.0,
    registration_timeout: float = 900.0,
    gc_interval: float = 120.0,
    orphan_grace: float = 30.0,
) -> Stack:
    """Build and wire the lifecycle controllers (call before ``harness.running()``)."""
    clock = clock if clock is not None else RealClock()
    client, cluster = harness.client, harness.cluster
    provider = KwokCloudProvider(
        KubeNodeAPI(client), kwok_catalog(), registration_delay=registration_delay
    )
    recorder = EventRecorder(client, clock=clock, dedupe_window=30.0)
    launcher = Launcher(provider, clock=clock, metrics=metrics)
    shared = deps(
        client=client,
        cluster=cluster,
        cloud=provider,
        recorder=recorder,
        clock=clock,
        metrics=metrics,
    )
    lifecycle = NodeClaimLifecycle(
        shared,
        launcher,
        launch_timeout=launch_timeout,
        registration_timeout=registration_timeout,
    )
    gc = NodeClaimGarbageCollector(shared, interval=gc_interval, orphan_grace=orphan_grace)
    nc_term = NodeClaimTermination(shared, launcher=launcher)
    evictions = EvictionQueue(client, recorder, metrics=metrics)
    node_term = NodeTermination(shared, evictions)
    counter = NodePoolCounter(dataclasses.replace(shared, metrics=None))

    harness.on(NODECLAIMS, upsert=lifecycle.on_nodeclaim, delete=lifecycle.on_nodeclaim_deleted)
    harness.on(NODECLAIMS, upsert=nc_term.on_nodeclaim)
    harness.on(NODECLAIMS, upsert=counter.on_nodeclaim, delete=counter.on_nodeclaim)
    harness.on(NODES, upsert=lifecycle.on_node)
    harness.on(NODES, upsert=node_term.on_node, delete=nc_term.on_node_deleted)
    harness.on(NODES, upsert=counter.on_node, delete=counter.on_node)
    harness.on(PODS, upsert=node_term.on_pod, delete=node_term.on_pod)
    harness.on(NODEPOOLS, upsert=counter.on_nodepool)
    return Stack(
        harness, provider, recorder, launcher, lifecycle, gc, nc_term, node_term, evictions, counter
    )


# ----------------------------------------------------------------------------- running the App
def deployment(
    name: str,
    ns: str,
    pool: str,
    *,
    replicas: int = 1,
    cpu: str = "1",
    memory: str = "1Gi",
    annotations: Mapping[str, str] | None = None,
) -> KubeObject:
    """A Deployment of ``pause`` pods that select ``pool``'s nodes (a ReplicaSet owns them, so
    a node that vanishes never takes a pod with it for good)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": dict(annotations or {})},
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": pool},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "app",
                            "image": "pause",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def running(app: Any, **kw: Any) -> AsyncIterator[asyncio.Task[None]]:
    """``app.run`` (a ``manager.App``) as a task for the block; cancelled and awaited after."""
    task = asyncio.create_task(app.run(host="127.0.0.1", **kw))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def claims_of(client: KubeClient, pool: str) -> list[dict[str, Any]]:
    selector = f"karpenter.sh/nodepool={pool}"
    return list((await client.list(NODECLAIMS, label_selector=selector)).items)


async def running_pods(client: KubeClient, ns: str) -> list[dict[str, Any]]:
    """Pods of ``ns`` in phase Running and not being deleted."""
    pods = (await client.list(PODS, namespace=ns)).items
    return [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


async def force_delete_pool(client: KubeClient, pool: str) -> None:
    """Last resort after a test: strip the finalizers of the pool's NodeClaims (a controller
    that is gone can no longer remove them) and delete the NodePool."""
    for nc in await claims_of(client, pool):
        with contextlib.suppress(NotFoundError):
            await client.patch(
                NODECLAIMS,
                nc["metadata"]["name"],
                {"metadata": {"finalizers": None}},
                patch_type=PatchType.MERGE,
            )
    with contextlib.suppress(NotFoundError):
        await client.delete(NODEPOOLS, pool)
