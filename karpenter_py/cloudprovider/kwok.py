"""The KWOK cloud provider: "instances" are fake Node objects that kwok marks Ready.

As upstream's kwok provider: ``create`` picks the cheapest compatible available offering of the
NodeClaim's instance types and writes a Node (annotated ``kwok.x-k8s.io/node=fake``) with that
offering's labels, capacity and allocatable, the NodeClaim's taints plus the unregistered taint,
and provider ID ``kwok://<name>``. A registration delay (KWOKNodeClass ``nodeRegistrationDelay``
or the constructor default) postpones the Node's creation to model boot time. Offerings can be
made unavailable to exercise insufficient-capacity handling.

Drift: ``create`` stamps the Node, and so the NodeClaim, with
``karpenter.kwok.sh/kwoknodeclass-hash`` (and ``...-hash-version``), a hash of the KWOKNodeClass
spec at launch. ``is_drifted`` answers ``NodeClassDrifted`` when the class's current spec hashes
differently (same hash version only; no annotation or no class: not drifted). Both read the class
through one short per-class cache, so a spec edit is noticed within ``NODECLASS_CACHE_SECONDS``.

Bare nodes (``bare_nodes=True``, a fault for tests, never a default): the Node registers as a
kubelet whose user data passes no ``--node-labels`` would, with only what the kubelet and the
cloud set (hostname, os, arch, instance type, zone, region) and the unregistered taint. The
NodeClaim's labels and taints reach it only through registration; the launch still reports the
offering it resolved.

The provider reaches the API through ``NodeAPI``, a port the manager fills with the kube client,
so this package stays independent of ``kube``.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Final, Protocol

from karpenter_py.cloudprovider.errors import InsufficientCapacityError, NodeClaimNotFoundError
from karpenter_py.cloudprovider.protocol import NodeClassRef, RepairPolicy
from karpenter_py.cloudprovider.selection import candidates
from karpenter_py.model.api.common import parse_duration
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    KWOK_ANNOTATION_KWOKNODECLASS_HASH,
    KWOK_ANNOTATION_KWOKNODECLASS_HASH_VERSION,
    KWOK_GROUP,
    KWOK_NODE_ANNOTATION,
    KWOKNODECLASS_HASH_VERSION,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_OS,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    TAINT_UNREGISTERED_KEY,
)
from karpenter_py.model.quantity import format_resources

log = logging.getLogger(__name__)

PROVIDER_PREFIX = "kwok://"
NODECLASS_CACHE_SECONDS = 30.0
KWOK_NODE_LABEL = "kwok.x-k8s.io/node"  # kwok's default node selector is the annotation; label too
REASON_NODECLASS_DRIFTED = "NodeClassDrifted"
Raw = dict[str, object]
OfferingKey = tuple[str, str, str]  # instance type, zone, capacity type
# What a Node carries when its kubelet registers it bare: the kubelet's and the cloud's labels.
KUBELET_LABELS: Final = frozenset(
    {
        LABEL_HOSTNAME,
        LABEL_OS,
        LABEL_ARCH,
        LABEL_INSTANCE_TYPE,
        LABEL_TOPOLOGY_ZONE,
        LABEL_TOPOLOGY_REGION,
        KWOK_NODE_LABEL,
    }
)


class NodeAPI(Protocol):
    """The slice of the Kubernetes API the kwok provider needs."""

    async def create_node(self, body: Raw) -> Raw: ...
    async def get_node(self, name: str) -> Raw | None: ...
    async def delete_node(self, name: str) -> None: ...
    async def list_nodes(self, label_selector: str) -> builtins.list[Raw]: ...
    async def get_nodeclass(self, name: str) -> Raw | None: ...


def _meta(obj: Raw) -> Mapping[str, object]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class KwokCloudProvider:
    def __init__(
        self,
        api: NodeAPI,
        instance_types: Sequence[InstanceType],
        *,
        registration_delay: float = 0.0,
        unavailable: Sequence[OfferingKey] = (),
        bare_nodes: bool = False,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self._types = {it.name: it for it in instance_types}
        self.registration_delay = registration_delay
        self.bare_nodes = bare_nodes
        self._sleep = sleep
        self._monotonic = monotonic
        self._unavailable: set[OfferingKey] = set(unavailable)
        # Listed as available, but launches fail: capacity that vanished between listing and
        # launching, which is what EC2's InsufficientInstanceCapacity looks like.
        self._no_capacity: set[OfferingKey] = set()
        self.created: dict[str, str] = {}  # NodeClaim name -> provider ID (launch log, for tests)
        # KWOKNodeClass name -> (the class, None if absent or unreadable; monotonic read time)
        self._classes: dict[str, tuple[KWOKNodeClass | None, float]] = {}
        # (unavailable offerings, catalog with them applied): the last answer, reused by identity.
        self._listed: tuple[frozenset[OfferingKey], builtins.list[InstanceType]] | None = None

    @property
    def name(self) -> str:
        return "kwok"

    # ------------------------------------------------------------------ availability knobs
    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> None:
        self._unavailable.add((instance_type, zone, capacity_type))

    def mark_available(self, instance_type: str, zone: str, capacity_type: str) -> None:
        self._unavailable.discard((instance_type, zone, capacity_type))

    def simulate_insufficient_capacity(
        self, instance_type: str, zone: str, capacity_type: str
    ) -> None:
        self._no_capacity.add((instance_type, zone, capacity_type))

    def _offering_available(self, it: InstanceType, o: Offering) -> bool:
        return o.available and (it.name, o.zone, o.capacity_type) not in self._unavailable

    # ------------------------------------------------------------------ CloudProvider
    async def get_instance_types(self, nodepool: NodePool) -> builtins.list[InstanceType]:
        """The catalog with availability applied. The same list object comes back while
        availability is unchanged, so callers can cache what they derive from it by identity
        (callers must not mutate it)."""
        key = frozenset(self._unavailable)
        if self._listed is not None and self._listed[0] == key:
            return self._listed[1]
        out = []
        for it in self._types.values():
            offerings = tuple(
                replace(o, available=self._offering_available(it, o)) for o in it.offerings
            )
            out.append(replace(it, offerings=offerings))
        self._listed = (key, out)
        return out

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        name = nodeclaim.metadata.name or ""
        existing = await self.api.get_node(name)
        if existing is not None:  # a retry after a crash: the instance already exists
            return self._to_nodeclaim(nodeclaim, existing)
        it, offering = self._choose(nodeclaim)
        annotations = {KWOK_NODE_ANNOTATION: "fake"}
        nodeclass = await self._nodeclass(nodeclaim)
        if nodeclass is not None:
            annotations[KWOK_ANNOTATION_KWOKNODECLASS_HASH] = nodeclass_hash(nodeclass)
            annotations[KWOK_ANNOTATION_KWOKNODECLASS_HASH_VERSION] = KWOKNODECLASS_HASH_VERSION
        resolved = self._labels(nodeclaim, it, offering)
        body = self._node(nodeclaim, it, resolved, annotations)
        delay = await self._registration_delay(nodeclaim)
        if delay > 0:
            await self._sleep(delay)
        created = await self.api.create_node(body)
        self.created[name] = f"{PROVIDER_PREFIX}{name}"
        return self._to_nodeclaim(nodeclaim, created, resolved)

    async def delete(self, nodeclaim: NodeClaim) -> None:
        name = self._node_name(nodeclaim)
        node = await self.api.get_node(name) if name else None
        if node is None or _meta(node).get("deletionTimestamp"):
            # A kwok instance is gone once its Node is going: nothing runs behind it.
            raise NodeClaimNotFoundError(f"instance {PROVIDER_PREFIX}{name} not found")
        await self.api.delete_node(name)

    async def get(self, provider_id: str) -> NodeClaim:
        name = provider_id.removeprefix(PROVIDER_PREFIX)
        node = await self.api.get_node(name)
        if node is None or not provider_id.startswith(PROVIDER_PREFIX):
            raise NodeClaimNotFoundError(f"instance {provider_id} not found")
        return self._from_node(node)

    async def list(self) -> builtins.list[NodeClaim]:
        nodes = await self.api.list_nodes(f"{KWOK_NODE_LABEL}=fake,{LABEL_NODEPOOL}")
        return [self._from_node(n) for n in nodes]

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """``NodeClassDrifted`` when the KWOKNodeClass spec changed since the launch."""
        annotations = nodeclaim.metadata.annotations
        launched_with = annotations.get(KWOK_ANNOTATION_KWOKNODECLASS_HASH)
        version = annotations.get(KWOK_ANNOTATION_KWOKNODECLASS_HASH_VERSION)
        if not launched_with or version != KWOKNODECLASS_HASH_VERSION:
            return ""
        nodeclass = await self._nodeclass(nodeclaim)
        if nodeclass is None:
            return ""
        return REASON_NODECLASS_DRIFTED if nodeclass_hash(nodeclass) != launched_with else ""

    def repair_policies(self) -> builtins.list[RepairPolicy]:
        return [
            RepairPolicy("Ready", "False", 30 * 60.0),
            RepairPolicy("Ready", "Unknown", 30 * 60.0),
        ]

    def supported_node_classes(self) -> builtins.list[NodeClassRef]:
        return [NodeClassRef(KWOK_GROUP, "KWOKNodeClass")]

    # ------------------------------------------------------------------ helpers
    async def _nodeclass(self, nodeclaim: NodeClaim) -> KWOKNodeClass | None:
        """The NodeClaim's KWOKNodeClass (None: another kind, absent or unreadable).

        Read through a short cache: a burst of launches or drift checks for one class costs one
        GET.
        """
        ref = nodeclaim.spec.node_class_ref
        if ref.group != KWOK_GROUP or ref.kind != "KWOKNodeClass":
            return None
        now = self._monotonic()
        cached = self._classes.get(ref.name)
        if cached is not None and now - cached[1] < NODECLASS_CACHE_SECONDS:
            return cached[0]
        nodeclass: KWOKNodeClass | None = None
        raw = await self.api.get_nodeclass(ref.name)
        if raw is not None:
            try:
                nodeclass = KWOKNodeClass.model_validate(raw)
            except ValueError:
                log.warning("unreadable KWOKNodeClass", extra={"nodeclass": ref.name})
        self._classes[ref.name] = (nodeclass, now)
        return nodeclass

    async def _registration_delay(self, nodeclaim: NodeClaim) -> float:
        """The KWOKNodeClass's nodeRegistrationDelay (boot time), else the constructor's default."""
        nodeclass = await self._nodeclass(nodeclaim)
        if nodeclass is None or not nodeclass.spec.node_registration_delay:
            return self.registration_delay
        try:
            return parse_duration(nodeclass.spec.node_registration_delay).total_seconds()
        except ValueError:
            log.warning(
                "unreadable nodeRegistrationDelay; using the default",
                extra={"nodeclass": nodeclaim.spec.node_class_ref.name},
            )
            return self.registration_delay

    @staticmethod
    def _node_name(nodeclaim: NodeClaim) -> str:
        if nodeclaim.status.provider_id.startswith(PROVIDER_PREFIX):
            return nodeclaim.status.provider_id.removeprefix(PROVIDER_PREFIX)
        return nodeclaim.status.node_name or nodeclaim.metadata.name or ""

    def _choose(self, nodeclaim: NodeClaim) -> tuple[InstanceType, Offering]:
        """The cheapest available offering that satisfies the NodeClaim's requirements."""
        best: tuple[float, str, InstanceType, Offering] | None = None
        exhausted: list[OfferingKey] = []
        types = list(self._types.values())
        for c in candidates(nodeclaim, types, lambda t, z, ct: (t, z, ct) in self._unavailable):
            it = c.instance_type
            for o in c.offerings:
                if (it.name, o.zone, o.capacity_type) in self._no_capacity:
                    exhausted.append((it.name, o.zone, o.capacity_type))
                elif best is None or (o.price, it.name) < (best[0], best[1]):
                    best = (o.price, it.name, it, o)
        if best is None:
            raise InsufficientCapacityError(
                f"insufficient capacity for every offering of nodeclaim {nodeclaim.metadata.name}",
                offerings=tuple(sorted(exhausted)),
            )
        return best[2], best[3]

    @staticmethod
    def _labels(nodeclaim: NodeClaim, it: InstanceType, offering: Offering) -> dict[str, str]:
        """Every label the launched node carries: the NodeClaim's and the offering's."""
        labels: dict[str, str] = {}
        for r in nodeclaim.spec.requirements:
            if r.operator == "In" and len(r.values) == 1:
                labels[r.key] = r.values[0]
        for key, values in it.requirements.items():
            if len(values) == 1:
                labels[key] = next(iter(values))
        labels.update(offering.labels)
        labels.update(nodeclaim.metadata.labels or {})
        labels.update(
            {
                LABEL_INSTANCE_TYPE: it.name,
                LABEL_TOPOLOGY_ZONE: offering.zone,
                LABEL_CAPACITY_TYPE: offering.capacity_type,
                LABEL_HOSTNAME: nodeclaim.metadata.name or "",
                KWOK_NODE_LABEL: "fake",
            }
        )
        return labels

    def _node(
        self,
        nodeclaim: NodeClaim,
        it: InstanceType,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
    ) -> Raw:
        """The Node with ``labels`` and the NodeClaim's taints; a bare one with the kubelet's
        labels alone and no taint but the unregistered one."""
        name = nodeclaim.metadata.name or ""
        taints = [{"key": TAINT_UNREGISTERED_KEY, "effect": "NoExecute"}]
        if self.bare_nodes:
            labels = {k: v for k, v in labels.items() if k in KUBELET_LABELS}
        else:
            for t in [*nodeclaim.spec.taints, *nodeclaim.spec.startup_taints]:
                taint = {"key": t.key, "effect": t.effect}
                if t.value:
                    taint["value"] = t.value
                taints.append(taint)
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": dict(labels),
                "annotations": dict(annotations),
            },
            "spec": {"providerID": f"{PROVIDER_PREFIX}{name}", "taints": taints},
            "status": {
                "capacity": format_resources(it.capacity),
                "allocatable": format_resources(it.allocatable),
                "phase": "Running",
            },
        }

    def _to_nodeclaim(
        self, nodeclaim: NodeClaim, node: Raw, resolved: Mapping[str, str] | None = None
    ) -> NodeClaim:
        """The NodeClaim with what the launch resolved: provider ID, capacity, labels (the
        offering's ``resolved`` labels when known, else the Node's)."""
        launched = self._from_node(node)
        out = nodeclaim.model_copy(deep=True)
        out.status.provider_id = launched.status.provider_id
        out.status.capacity = launched.status.capacity
        out.status.allocatable = launched.status.allocatable
        node_annotations = _meta(node).get("annotations")
        if isinstance(node_annotations, dict):
            for key in (
                KWOK_ANNOTATION_KWOKNODECLASS_HASH,
                KWOK_ANNOTATION_KWOKNODECLASS_HASH_VERSION,
            ):
                if isinstance(value := node_annotations.get(key), str):
                    out.metadata.annotations[key] = value
        labels = dict(resolved if resolved is not None else launched.metadata.labels or {})
        labels.update(out.metadata.labels or {})  # the NodeClaim's own labels win
        labels.pop(KWOK_NODE_LABEL, None)
        labels.pop(LABEL_HOSTNAME, None)
        out.metadata.labels = labels
        return out

    def _from_node(self, node: Raw) -> NodeClaim:
        """A live kwok Node seen as the NodeClaim it was launched for (for get/list/GC)."""
        meta = _meta(node)
        spec = node.get("spec")
        status = node.get("status")
        spec = spec if isinstance(spec, dict) else {}
        status = status if isinstance(status, dict) else {}
        labels = meta.get("labels")
        return NodeClaim.model_validate(
            {
                "metadata": {
                    "name": meta.get("name"),
                    "labels": dict(labels) if isinstance(labels, dict) else {},
                },
                "spec": {
                    "requirements": [],
                    "nodeClassRef": {
                        "group": KWOK_GROUP,
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                },
                "status": {
                    "providerID": spec.get("providerID", ""),
                    "capacity": status.get("capacity") or {},
                    "allocatable": status.get("allocatable") or {},
                    "nodeName": meta.get("name"),
                },
            }
        )


def nodeclass_hash(nodeclass: KWOKNodeClass) -> str:
    """A stable hash of the KWOKNodeClass spec (every field: each one shapes the fake node)."""
    spec = nodeclass.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return str(int(digest[:15], 16))
