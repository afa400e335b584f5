"""In-memory stand-ins for the ports of lower layers, shared by unit tests.

``FakeKube`` is a ``KubeClient`` that keeps objects in a dict instead of talking HTTP, and
``FakeCloudProvider`` implements the ``CloudProvider`` protocol over a dict of instances. Both
record every call and have a ``reset()``, as upstream's ``pkg/cloudprovider/fake`` does, so a
test states what the code under test asked for instead of re-implementing the port.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_py.aio.clock import Clock, FakeClock
from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.cloudprovider.protocol import CloudProvider, NodeClassRef, RepairPolicy
from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.client import KubeClient, PatchType
from karpenter_py.kube.config import KubeConfig
from karpenter_py.kube.errors import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    InvalidError,
    NotFoundError,
)
from karpenter_py.kube.events import EventRecorder
from karpenter_py.kube.objects import KubeObject, ListResult, Page
from karpenter_py.kube.resources import NODECLAIMS, NODEPOOLS, NODES, Resource
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import node_from_dict
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.obs.metrics import Metrics
from karpenter_py.state.cluster import Cluster
from tests import factories

# --------------------------------------------------------------------------- Kubernetes


@dataclass(slots=True)
class Call:
    """One request as the fake API received it (``body`` is the patch, object or event sent)
    and the HTTP status it was answered with (0 while it waits for ``gate``)."""

    verb: str
    plural: str
    name: str = ""
    namespace: str | None = None
    subresource: str | None = None
    body: Any = None
    patch_type: PatchType | None = None
    uid: str | None = None
    status: int = 0


Key = tuple[str, str, str]  # (resource.qualified, namespace or "", name)
WriteHook = Callable[[Resource, KubeObject | None, str], None]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, ``None`` deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]


def json_patch(target: KubeObject, ops: Sequence[KubeObject], error: ApiError) -> KubeObject:
    """RFC 6902 ``test``/``add``/``replace``/``remove``; a failed ``test`` raises ``error``."""
    out = copy.deepcopy(target)
    for op in ops:
        *parents, last = _pointer(op["path"])
        node: Any = out
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if op["op"] == "test":
            current = node[int(last)] if isinstance(node, list) else node.get(last)
            if current != op["value"]:
                raise error
        elif op["op"] == "remove":
            if isinstance(node, list):
                node.pop(int(last))
            else:
                node.pop(last, None)
        elif isinstance(node, list):
            if last == "-":
                node.append(op["value"])
            elif op["op"] == "add":
                node.insert(int(last), op["value"])
            else:
                node[int(last)] = op["value"]
        else:
            node[last] = op["value"]
    return out


class FakeKube(KubeClient):
    """A ``KubeClient`` over a dict: objects by (resource, namespace, name), every call recorded.

    Writes behave as the API server's do where the controllers rely on it: a resourceVersion in a
    merge patch's metadata or a JSON patch ``test`` is a precondition (409 when stale), each write
    bumps resourceVersion, a delete of an object with finalizers only marks it, a delete with a
    stale ``uid`` precondition is a 409. ``on_write`` sees each stored object (``None`` once gone),
    so a test can feed a ``Cluster`` as the informer would (``into_cluster``). ``fail(verb, name,
    error)`` answers the next such call with ``error``; ``gate`` holds every call until it is set.
    """

    def __init__(
        self, *objects: tuple[Resource, KubeObject], on_write: WriteHook | None = None
    ) -> None:
        super().__init__(KubeConfig(server="http://fake.invalid", source="FakeKube"))
        self.on_write = on_write
        self.objects: dict[Key, KubeObject] = {}
        self.calls: list[Call] = []
        self.events: list[KubeObject] = []
        self.failures: dict[tuple[str, str], list[Exception]] = {}
        self.gate: asyncio.Event | None = None
        self.version_info: KubeObject = {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}
        self._list_rv = itertools.count(1)
        self._ids = itertools.count()
        for resource, obj in objects:
            self.put(resource, obj)

    def reset(self) -> None:
        """Forget objects, calls, events and planned failures."""
        self.objects.clear()
        self.calls.clear()
        self.events.clear()
        self.failures.clear()
        self.gate = None

    # ------------------------------------------------------------------ test side

    def put(self, resource: Resource, obj: KubeObject) -> KubeObject:
        """Store ``obj`` as it is (no call recorded, no hook): the world before the test."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("resourceVersion", "1")
        self.objects[self._key(resource, meta.get("namespace"), meta["name"])] = obj
        return obj

    def replace_all(self, resource: Resource, *objs: KubeObject) -> None:
        """Make ``objs`` the only stored objects of ``resource`` (no call recorded, no hook)."""
        for key in [k for k in self.objects if k[0] == resource.qualified]:
            del self.objects[key]
        for obj in objs:
            self.put(resource, obj)

    def remove(self, resource: Resource, name: str, namespace: str | None = None) -> None:
        """Delete behind the test's back (no call recorded, no hook): gone meanwhile."""
        del self.objects[self._key(resource, namespace, name)]

    def stored(self, resource: Resource, name: str, namespace: str | None = None) -> KubeObject:
        return self.objects[self._key(resource, namespace, name)]

    def has(self, resource: Resource, name: str, namespace: str | None = None) -> bool:
        return self._key(resource, namespace, name) in self.objects

    def fail(self, verb: str, name: str, *errors: Exception) -> None:
        """Answer the next ``len(errors)`` ``verb`` calls on ``name`` (``"*"``: on any name)
        with these errors, in order."""
        self.failures.setdefault((verb, name), []).extend(errors)

    def calls_of(
        self, verb: str, resource: Resource | None = None, *, ok: bool = False
    ) -> builtins.list[Call]:
        """The ``verb`` calls (on ``resource``), in order; ``ok``: only those answered 2xx."""
        return [
            c
            for c in self.calls
            if c.verb == verb
            and (resource is None or c.plural == resource.plural)
            and (not ok or 200 <= c.status < 300)
        ]

    # ------------------------------------------------------------------ plumbing

    @staticmethod
    def _key(resource: Resource, namespace: str | None, name: str) -> Key:
        return (resource.qualified, (namespace or "") if resource.namespaced else "", name)

    @contextlib.asynccontextmanager
    async def _answer(self, call: Call) -> AsyncIterator[None]:
        """Record ``call``, hold it at ``gate``, raise a planned failure, then note the answer."""
        self.calls.append(call)
        try:
            if self.gate is not None:
                await self.gate.wait()
            planned = self.failures.get((call.verb, call.name)) or self.failures.get(
                (call.verb, "*")
            )
            if planned:
                raise planned.pop(0)
            yield
        except ApiError as e:
            call.status = e.status
            raise
        except BaseException:
            call.status = -1
            raise
        call.status = 200

    def _missing(self, verb: str, resource: Resource, name: str, ns: str | None) -> NotFoundError:
        return NotFoundError(
            status=404, verb=verb, resource=resource.qualified, name=name, namespace=ns
        )

    def _stored(self, resource: Resource, obj: KubeObject) -> KubeObject:
        """Store a write: its resourceVersion is one more than the stored one (deterministic
        numbers for tests, where the API server's are only opaque and increasing)."""
        meta = obj["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        self.objects[self._key(resource, meta.get("namespace"), meta["name"])] = obj
        if self.on_write is not None:
            self.on_write(resource, copy.deepcopy(obj), meta["name"])
        return copy.deepcopy(obj)

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to disconnect."""

    # ------------------------------------------------------------------ reads

    async def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> KubeObject:
        async with self._answer(Call("get", resource.plural, name, namespace, subresource)):
            obj = self.objects.get(self._key(resource, namespace, name))
            if obj is None:
                raise self._missing("get", resource, name, namespace)
            return copy.deepcopy(obj)

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = 500,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> ListResult:
        async with self._answer(Call("list", resource.plural, "", namespace)):
            items = [
                copy.deepcopy(obj)
                for (qualified, ns, _), obj in self.objects.items()
                if qualified == resource.qualified and (namespace is None or ns == namespace)
            ]
            return ListResult(items=items, resource_version=str(next(self._list_rv)))

    async def list_page(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> Page:
        """Everything in one page."""
        result = await self.list(resource, namespace=namespace)
        return Page(
            items=result.items, resource_version=result.resource_version, continue_token=None
        )

    # ------------------------------------------------------------------ writes

    async def create(
        self,
        resource: Resource,
        body: KubeObject,
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if namespace is not None and resource.namespaced:
            meta["namespace"] = namespace
        n = next(self._ids)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{n:05d}"
        async with self._answer(
            Call("create", resource.plural, meta["name"], namespace, body=body)
        ):
            if self.has(resource, meta["name"], meta.get("namespace")):
                raise AlreadyExistsError(
                    status=409, reason="AlreadyExists", verb="create", name=meta["name"]
                )
            meta.setdefault("uid", f"uid-{n}")
            if dry_run:
                return obj
            return self._stored(resource, obj)

    async def update(
        self,
        resource: Resource,
        body: KubeObject,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject:
        meta = body["metadata"]
        ns = namespace or meta.get("namespace")
        call = Call("update", resource.plural, meta["name"], ns, subresource, body)
        async with self._answer(call):
            current = self.objects.get(self._key(resource, ns, meta["name"]))
            if current is None:
                raise self._missing("update", resource, meta["name"], ns)
            rv = meta.get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise ConflictError(status=409, verb="update", name=meta["name"])
            return self._stored(resource, copy.deepcopy(body))

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: KubeObject | Sequence[KubeObject],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> KubeObject:
        async with self._answer(
            Call("patch", resource.plural, name, namespace, subresource, patch, patch_type)
        ):
            current = self.objects.get(self._key(resource, namespace, name))
            if current is None:
                raise self._missing("patch", resource, name, namespace)
            conflict = ConflictError(status=409, verb="patch", name=name)
            if isinstance(patch, dict):
                rv = patch.get("metadata", {}).get("resourceVersion")
                if rv is not None and rv != current["metadata"]["resourceVersion"]:
                    raise conflict
                obj = merge_patch(current, patch)
            else:
                # The apiserver answers a failed ``test`` op with 422 Invalid, not 409.
                invalid = InvalidError(status=422, verb="patch", name=name)
                obj = json_patch(current, patch, invalid)
            if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
                return self._gone(resource, name, namespace, obj)
            return self._stored(resource, obj)

    def _gone(
        self, resource: Resource, name: str, namespace: str | None, obj: KubeObject
    ) -> KubeObject:
        del self.objects[self._key(resource, namespace, name)]
        if self.on_write is not None:
            self.on_write(resource, None, name)
        return obj

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> KubeObject:
        async with self._answer(Call("delete", resource.plural, name, namespace, uid=uid)):
            current = self.objects.get(self._key(resource, namespace, name))
            if current is None:
                raise self._missing("delete", resource, name, namespace)
            if uid is not None and current["metadata"].get("uid") != uid:
                raise ConflictError(status=409, verb="delete", name=name)
            if current["metadata"].get("finalizers"):
                current["metadata"].setdefault("deletionTimestamp", "2026-01-01T00:00:00Z")
                return self._stored(resource, current)
            return self._gone(resource, name, namespace, current)

    async def evict(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        async with self._answer(Call("evict", "pods", name, namespace, uid=uid)):
            pass

    async def create_event(self, event: KubeObject, *, namespace: str | None = None) -> KubeObject:
        async with self._answer(Call("create", "events", "", namespace, body=event)):
            self.events.append(event)
            return event

    async def version(self) -> KubeObject:
        async with self._answer(Call("get", "version")):
            return dict(self.version_info)


def into_cluster(cluster: Cluster) -> WriteHook:
    """A ``FakeKube.on_write`` that delivers written Nodes, NodeClaims and NodePools to
    ``cluster``, as the informer would after the watch event."""

    def deliver(resource: Resource, obj: KubeObject | None, name: str) -> None:
        if resource == NODECLAIMS:
            if obj is None:
                cluster.delete_nodeclaim(name)
            else:
                cluster.upsert_nodeclaim(NodeClaim.model_validate(obj))
        elif resource == NODES:
            if obj is None:
                cluster.delete_node(name)
            else:
                cluster.upsert_node(node_from_dict(obj))
        elif resource == NODEPOOLS:
            if obj is None:
                cluster.delete_nodepool(name)
            else:
                cluster.upsert_nodepool(NodePool.model_validate(obj))

    return deliver


def wire(obj: NodeClaim | NodePool) -> KubeObject:
    """The dict the API server would hold for a model object."""
    raw: KubeObject = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return raw


# --------------------------------------------------------------------------- cloud provider


@dataclass
class FakeCloudProvider:
    """A ``CloudProvider`` over a dict of instances by provider ID, with recorded calls.

    ``create`` launches ``fake://<nodeclaim name>``; ``delete`` and ``get`` answer
    ``NodeClaimNotFoundError`` for an unknown ID. ``next_errors[method]`` are raised by the next
    calls of that method, in order; ``drifted`` is every instance's drift reason.
    """

    name: str = "fake"
    instance_types: builtins.list[InstanceType] = field(default_factory=builtins.list)
    instances: dict[str, NodeClaim] = field(default_factory=dict)
    drifted: str = ""
    policies: builtins.list[RepairPolicy] = field(default_factory=builtins.list)
    node_classes: builtins.list[NodeClassRef] = field(default_factory=builtins.list)
    next_errors: dict[str, builtins.list[Exception]] = field(default_factory=dict)
    create_calls: builtins.list[NodeClaim] = field(default_factory=builtins.list)
    delete_calls: builtins.list[NodeClaim] = field(default_factory=builtins.list)
    get_calls: builtins.list[str] = field(default_factory=builtins.list)
    list_calls: int = 0
    instance_type_calls: builtins.list[NodePool] = field(default_factory=builtins.list)
    drift_calls: builtins.list[NodeClaim] = field(default_factory=builtins.list)
    deleted: builtins.list[str] = field(default_factory=builtins.list)  # terminated, in order

    def reset(self) -> None:
        """Forget instances, calls, planned errors and drift; keep the instance types."""
        self.instances.clear()
        self.next_errors.clear()
        self.drifted = ""
        self.create_calls.clear()
        self.delete_calls.clear()
        self.get_calls.clear()
        self.list_calls = 0
        self.instance_type_calls.clear()
        self.drift_calls.clear()
        self.deleted.clear()

    def fail(self, method: str, *errors: Exception) -> None:
        self.next_errors.setdefault(method, []).extend(errors)

    def launched(self, *names: str) -> None:
        """Instances that exist before the test (``fake://<name>``), as ``list`` reports them."""
        for n in names:
            self.instances[f"fake://{n}"] = factories.nodeclaim(
                n, pool="", provider_id=f"fake://{n}", node_name="", conditions=[]
            )

    def _raise_planned(self, method: str) -> None:
        planned = self.next_errors.get(method)
        if planned:
            raise planned.pop(0)

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        self.create_calls.append(nodeclaim)
        self._raise_planned("create")
        out = nodeclaim.model_copy(deep=True)
        out.status.provider_id = f"fake://{nodeclaim.name}"
        self.instances[out.status.provider_id] = out
        return out

    async def delete(self, nodeclaim: NodeClaim) -> None:
        self.delete_calls.append(nodeclaim)
        self._raise_planned("delete")
        pid = nodeclaim.status.provider_id
        if self.instances.pop(pid, None) is None:
            raise NodeClaimNotFoundError(pid)
        self.deleted.append(pid)

    async def get(self, provider_id: str) -> NodeClaim:
        self.get_calls.append(provider_id)
        self._raise_planned("get")
        try:
            return self.instances[provider_id]
        except KeyError:
            raise NodeClaimNotFoundError(provider_id) from None

    async def list(self) -> builtins.list[NodeClaim]:
        self.list_calls += 1
        self._raise_planned("list")
        return builtins.list(self.instances.values())

    async def get_instance_types(self, nodepool: NodePool) -> builtins.list[InstanceType]:
        self.instance_type_calls.append(nodepool)
        self._raise_planned("get_instance_types")
        return self.instance_types

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        self.drift_calls.append(nodeclaim)
        self._raise_planned("is_drifted")
        return self.drifted

    def repair_policies(self) -> builtins.list[RepairPolicy]:
        return self.policies

    def supported_node_classes(self) -> builtins.list[NodeClassRef]:
        return self.node_classes


# --------------------------------------------------------------------------- kwok and launcher


class FakeNodeAPI:
    """``cloudprovider.kwok.NodeAPI`` over dicts: nodes by name, KWOKNodeClasses by name."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.nodeclasses: dict[str, dict[str, Any]] = {}
        self.nodeclass_reads = 0

    async def create_node(self, body: dict[str, Any]) -> dict[str, Any]:
        self.nodes[body["metadata"]["name"]] = body
        return body

    async def get_node(self, name: str) -> dict[str, Any] | None:
        return self.nodes.get(name)

    async def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)

    async def list_nodes(self, label_selector: str) -> list[dict[str, Any]]:
        return list(self.nodes.values())

    async def get_nodeclass(self, name: str) -> dict[str, Any] | None:
        self.nodeclass_reads += 1
        return self.nodeclasses.get(name)


class FakeWriter:
    """``Provisioner``'s NodeClaim writer: assigns names and UIDs as generateName would."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self._ids = itertools.count()

    async def create_nodeclaim(self, body: dict[str, Any]) -> dict[str, Any]:
        n = next(self._ids)
        meta = {
            **body["metadata"],
            "name": f"{body['metadata']['generateName']}{n:05d}",
            "uid": f"uid-{n}",
        }
        obj = {**body, "metadata": meta}
        self.created.append(obj)
        return obj


# --------------------------------------------------------------------------- controller deps


def deps(
    *,
    client: KubeClient | None = None,
    cluster: Cluster | None = None,
    cloud: CloudProvider | None = None,
    recorder: EventRecorder | None = None,
    clock: Clock | None = None,
    metrics: Metrics | None = None,
) -> Deps:
    """The one way tests build a controller's shared dependencies: what is not given is a
    ``FakeKube``, an empty ``Cluster``, a ``FakeCloudProvider``, a ``FakeClock`` and an
    ``EventRecorder`` writing through the client (no metrics)."""
    client = client if client is not None else FakeKube()
    clock = clock if clock is not None else FakeClock()
    return Deps(
        client=client,
        cluster=cluster if cluster is not None else Cluster(),
        cloud=cloud if cloud is not None else FakeCloudProvider(),
        recorder=recorder if recorder is not None else EventRecorder(client, clock=clock),
        clock=clock,
        metrics=metrics,
    )
