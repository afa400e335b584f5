"""In-memory API, recorder and builders for the orchestration queue's tests.

``FakeAPI`` keeps raw Nodes and NodeClaims the way the API server does (resourceVersion checked
on every write that carries one, UID preconditions on delete, finalizers keep a deleted NodeClaim
around with a deletionTimestamp) and mirrors every write into the ``Cluster``, as the informers
would. ``log`` records each write in order, so tests can assert what happened before what.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.controllers.disruption.queue import OrchestrationQueue
from karpenter_py.controllers.disruption.singlenode import SINGLE_NODE
from karpenter_py.controllers.disruption.types import Candidate, Command, Method
from karpenter_py.kube.client import KubeClient, PatchType
from karpenter_py.kube.errors import ConflictError, NotFoundError, ServerError
from karpenter_py.kube.events import EventRecorder, EventType
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import NODECLAIMS, NODES, Resource
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.core import node_from_dict
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.obs.metrics import Metrics
from karpenter_py.scheduling.plan import NewNodeClaim
from karpenter_py.state.cluster import KINDS, Cluster
from karpenter_py.state.statenode import StateNode
from tests import factories
from tests.unit.fakes import FakeNodeAPI, deps

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
OTHER_TAINT = {"key": "team", "value": "a", "effect": "NoSchedule"}
DISRUPTED_TAINT = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


class FakeAPI:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.objects: dict[str, dict[str, KubeObject]] = {"nodes": {}, "nodeclaims": {}}
        self.log: list[tuple[str, str, str]] = []  # (verb, plural, name)
        self.fail: set[tuple[str, str, str]] = set()  # (verb, plural, name) answered with 500
        self._rv = itertools.count(100)
        self._ids = itertools.count()

    # ------------------------------------------------------------------ seeding
    def add(self, resource: Resource, raw: KubeObject) -> None:
        raw = copy.deepcopy(raw)
        raw["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[resource.plural][raw["metadata"]["name"]] = raw
        self._mirror(resource, raw)

    def raw(self, resource: Resource, name: str) -> KubeObject:
        return self.objects[resource.plural][name]

    def taints(self, node: str) -> list[dict[str, Any]]:
        return list(self.raw(NODES, node).get("spec", {}).get("taints") or [])

    def conditions(self, nodeclaim: str) -> dict[str, dict[str, Any]]:
        conds = self.raw(NODECLAIMS, nodeclaim).get("status", {}).get("conditions") or []
        return {c["type"]: c for c in conds}

    def set_conditions(self, nodeclaim: str, *types: str) -> None:
        """What the lifecycle controller would do: mark conditions True."""
        raw = self.raw(NODECLAIMS, nodeclaim)
        conds = [
            c for c in raw.setdefault("status", {}).get("conditions", []) if c["type"] not in types
        ]
        conds.extend(factories.condition(t) for t in types)
        raw["status"]["conditions"] = conds
        raw["metadata"]["resourceVersion"] = str(next(self._rv))
        self._mirror(NODECLAIMS, raw)

    def remove(self, resource: Resource, name: str) -> None:
        self.objects[resource.plural].pop(name, None)
        if resource == NODES:
            self.cluster.delete_node(name)
        else:
            self.cluster.delete_nodeclaim(name)

    def _mirror(self, resource: Resource, raw: KubeObject) -> None:
        if resource == NODES:
            self.cluster.upsert_node(node_from_dict(copy.deepcopy(raw)))
        else:
            self.cluster.upsert_nodeclaim(NodeClaim.model_validate(copy.deepcopy(raw)))

    def _check(self, verb: str, resource: Resource, name: str) -> KubeObject:
        if (verb, resource.plural, name) in self.fail:
            raise ServerError(status=500, verb=verb, resource=resource.plural, name=name)
        obj = self.objects[resource.plural].get(name)
        if obj is None:
            raise NotFoundError(status=404, verb=verb, resource=resource.plural, name=name)
        return obj

    # ------------------------------------------------------------------ the client surface
    async def get(self, resource: Resource, name: str, **_: Any) -> KubeObject:
        return copy.deepcopy(self._check("get", resource, name))

    async def patch(
        self,
        resource: Resource,
        name: str,
        body: KubeObject,
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        **_: Any,
    ) -> KubeObject:
        assert patch_type == PatchType.MERGE
        obj = self._check("patch", resource, name)
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv is not None and rv != obj["metadata"]["resourceVersion"]:
            raise ConflictError(status=409, verb="patch", resource=resource.plural, name=name)
        if resource == NODES:
            assert subresource is None
            obj.setdefault("spec", {})["taints"] = copy.deepcopy(body["spec"]["taints"])
        else:
            assert subresource == "status"
            obj.setdefault("status", {})["conditions"] = copy.deepcopy(body["status"]["conditions"])
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.log.append(("patch", resource.plural, name))
        self._mirror(resource, obj)
        return copy.deepcopy(obj)

    async def delete(
        self, resource: Resource, name: str, *, uid: str | None = None, **_: Any
    ) -> KubeObject:
        obj = self._check("delete", resource, name)
        if uid is not None and obj["metadata"].get("uid") != uid:
            raise ConflictError(status=409, verb="delete", resource=resource.plural, name=name)
        obj["metadata"]["deletionTimestamp"] = factories.T0
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.log.append(("delete", resource.plural, name))
        self._mirror(resource, obj)
        return copy.deepcopy(obj)

    async def create_event(self, event: KubeObject, *, namespace: str | None = None) -> KubeObject:
        return event

    # ------------------------------------------------------------------ NodeClaimWriter
    async def create_nodeclaim(self, body: dict[str, Any]) -> dict[str, Any]:
        if ("create", "nodeclaims", "*") in self.fail:
            raise ServerError(status=500, verb="create", resource="nodeclaims")
        meta = body["metadata"]
        name = f"{meta['generateName']}{next(self._ids):05d}"
        raw = copy.deepcopy(body)
        raw["metadata"] = {**meta, "name": name, "uid": f"uid-{name}"}
        raw["metadata"].pop("generateName", None)
        raw["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects["nodeclaims"][name] = raw
        self.log.append(("create", "nodeclaims", name))
        # What the writer returns; RoundRunner.create records it in the cluster itself.
        return copy.deepcopy(raw)


class CapturingRecorder(EventRecorder):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.recorded: list[tuple[str, str, str, str]] = []  # (kind, name, reason, message)

    def record(
        self,
        involved: KubeObject,
        reason: str,
        message: str,
        *,
        event_type: EventType = "Normal",
        dedupe: bool = True,
        dedupe_values: tuple[str, ...] | None = None,
        dedupe_window: float | None = None,
    ) -> None:
        self.recorded.append((involved["kind"], involved["metadata"]["name"], reason, message))

    def reasons(self) -> list[str]:
        return [r for _, _, r, _ in self.recorded]


class World:
    """A synced cluster with one NodePool, the fake API, a real RoundRunner and the queue."""

    def __init__(self, pool: NodePool | None = None) -> None:
        self.clock = FakeClock(NOW)
        self.cluster = Cluster()
        for kind in KINDS:
            self.cluster.mark_synced(kind)
        self.pool = pool or factories.nodepool("default")
        self.cluster.upsert_nodepool(self.pool)
        self.cluster.upsert_nodeclass(factories.KWOK_NODECLASS_KEY, True)
        self.api = FakeAPI(self.cluster)
        self.metrics = Metrics()
        self.recorder = CapturingRecorder(self.api, clock=self.clock)
        self.catalog = kwok_catalog()
        self.rounds = RoundRunner(
            cluster=self.cluster,
            writer=self.api,
            cloud=KwokCloudProvider(FakeNodeAPI(), self.catalog),
            clock=self.clock,
        )
        self.client = cast(KubeClient, self.api)
        self.queue = OrchestrationQueue(
            deps(
                client=self.client,
                cluster=self.cluster,
                cloud=self.rounds.cloud,
                recorder=self.recorder,
                clock=self.clock,
                metrics=self.metrics,
            ),
            self.rounds,
        )

    def add_node(
        self,
        name: str,
        *,
        taints: Sequence[dict[str, str]] = (OTHER_TAINT,),
        instance_type: str = "c-2x-amd64-linux",
        nodeclaim_conditions: list[dict[str, Any]] | None = None,
        pool: str = "default",
    ) -> None:
        labels = factories.node_labels(pool, instance_type)
        alloc = {"cpu": "2", "memory": "8Gi", "pods": "110"}
        node = factories.node_dict(name, labels=labels, allocatable=alloc, taints=list(taints))
        self.api.add(NODES, node)
        nc = factories.nodeclaim_dict(
            name, pool=pool, labels=labels, conditions=nodeclaim_conditions
        )
        self.api.add(NODECLAIMS, nc)

    def state_node(self, name: str) -> StateNode:
        return next(n for n in self.cluster.state_nodes(self.clock.now()) if n.name == name)

    def candidate(self, name: str) -> Candidate:
        sn = self.state_node(name)
        it = self.instance_type(sn.labels["node.kubernetes.io/instance-type"])
        return Candidate(
            node=sn,
            nodepool=self.pool,
            instance_type=it,
            capacity_type="on-demand",
            zone="test-zone-a",
            price=1.0,
            pods=(),
            disruption_cost=0.0,
        )

    def instance_type(self, name: str) -> InstanceType:
        return next(it for it in self.catalog if it.name == name)

    def replacement(self, instance_type: str = "c-1x-amd64-linux") -> NewNodeClaim:
        it = self.instance_type(instance_type)
        offering = next(o for o in it.offerings if o.capacity_type == "on-demand")
        return NewNodeClaim(
            node_pool="default",
            hostname="hostname-placeholder-0000",
            instance_types=(it,),
            requirements=(),
            labels={},
            taints=(),
            startup_taints=(),
            pods=(),
            requests={},
            instance_type=it,
            offering=offering,
        )

    def command(
        self,
        *names: str,
        method: Method = SINGLE_NODE,
        replacements: Sequence[NewNodeClaim] = (),
        explanation: str = "test command",
    ) -> Command:
        return Command(
            method,
            tuple(self.candidate(n) for n in names),
            replacements=tuple(replacements),
            explanation=explanation,
        )

    def metric(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value
