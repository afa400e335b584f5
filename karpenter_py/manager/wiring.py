"""From what controllers watch to what each reflector delivers to.

Every watched kind has one reflector and one sink, :class:`IngestThenNotify`: each delivery goes
to the kind's ingest sinks (the cluster state, a provider's cache) first and then to every
controller :class:`~karpenter_py.controllers.runtime.Watch` of the kind. That order is this
module's contract, not the order of a list: a trigger may read back from the state the object it
was woken for (the provisioner reads the parsed Pod), however the controllers are listed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from karpenter_py.controllers.runtime import EVERY_NODECLASS, ObjectHandler, Watch
from karpenter_py.informer.events import CallbackSink, Sink
from karpenter_py.informer.reflector import Reflector
from karpenter_py.informer.source import ListWatch
from karpenter_py.informer.store import Keep, Store, keep_identity
from karpenter_py.kube.objects import KubeObject, without_managed_fields
from karpenter_py.kube.resources import (
    DAEMONSETS,
    EC2NODECLASSES,
    KWOKNODECLASSES,
    NAMESPACES,
    NODECLAIMS,
    NODEOVERLAYS,
    NODEPOOLS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODDISRUPTIONBUDGETS,
    PODS,
    STORAGECLASSES,
    Resource,
)
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.labels import AWS_GROUP, KWOK_GROUP
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.ingest import (
    DaemonSetSink,
    NodeClaimSink,
    NodeClassSink,
    NodeOverlaySink,
    NodePoolSink,
    NodeSink,
    PDBSink,
    PersistentVolumeClaimSink,
    PersistentVolumeSink,
    PodSink,
    StorageClassSink,
)


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind the manager reflects: where it lives, what takes its deliveries in, and whether
    it is a NodeClass kind (then ``EVERY_NODECLASS`` watches hear it too)."""

    resource: Resource
    ingest: Sequence[Sink]
    name: str = ""  # the reflector's name; the resource's plural when empty
    nodeclass: bool = False
    # What the reflector's store keeps of each object (whole when None). Every consumer parses
    # deliveries into its own model, so a numerous kind keeps only what a relist diff and the
    # delete handlers of its watches read.
    keep: Keep | None = None

    @property
    def reflector_name(self) -> str:
        return self.name or self.resource.plural

    def serves(self, watch: Watch) -> bool:
        if watch.kind == EVERY_NODECLASS:
            return self.nodeclass
        return watch.kind == self.resource


def _each(upsert: ObjectHandler) -> Callable[[Sequence[KubeObject]], None]:
    """A trigger without a list handler takes the first list as one upsert per object."""

    def listed(objs: Sequence[KubeObject]) -> None:
        for obj in objs:
            upsert(obj)

    return listed


class IngestThenNotify:
    """A Sink applying each delivery to ``ingest`` first, then to each watch in turn."""

    def __init__(self, ingest: Sequence[Sink], watches: Sequence[Watch]) -> None:
        self.ingest = tuple(ingest)
        self.watches = tuple(watches)
        self._upserts = [w.upsert for w in watches if w.upsert is not None]
        self._deletes = [w.delete for w in watches if w.delete is not None]
        self._listed: list[Callable[[Sequence[KubeObject]], None]] = []
        for w in watches:
            if w.listed is not None:
                self._listed.append(w.listed)
            elif w.upsert is not None:
                self._listed.append(_each(w.upsert))

    def upsert(self, obj: KubeObject) -> None:
        for sink in self.ingest:
            sink.upsert(obj)
        for handler in self._upserts:
            handler(obj)

    def delete(self, obj: KubeObject) -> None:
        for sink in self.ingest:
            sink.delete(obj)
        for handler in self._deletes:
            handler(obj)

    def listed(self, objs: Sequence[KubeObject]) -> None:
        for sink in self.ingest:
            sink.listed(objs)
        for handler in self._listed:
            handler(objs)

    def synced(self) -> None:
        # Only the state tracks "listed once"; triggers have nothing to mark.
        for sink in self.ingest:
            sink.synced()


def kind_sinks(kinds: Sequence[Kind], watches: Iterable[Watch]) -> list[tuple[Kind, Sink]]:
    """Each kind with its sink. A watch no kind serves is a wiring mistake (a controller would
    never wake): ``ValueError``."""
    pending = list(watches)
    for watch in pending:
        if not any(kind.serves(watch) for kind in kinds):
            raise ValueError(f"no reflector serves a watch of {watch.kind!r}")
    return [
        (kind, IngestThenNotify(kind.ingest, [w for w in pending if kind.serves(w)]))
        for kind in kinds
    ]


# ----------------------------------------------------------------------------- the state's kinds

LABELS = ("metadata", "labels")

# NodeClass kinds a provider may declare: where they live in the API and how to read them.
NODECLASS_KINDS: dict[tuple[str, str], tuple[Resource, type[BaseModel]]] = {
    (KWOK_GROUP, "KWOKNodeClass"): (KWOKNODECLASSES, KWOKNodeClass),
    (AWS_GROUP, "EC2NodeClass"): (EC2NODECLASSES, EC2NodeClass),
}


def nodeclass_kind(cluster: Cluster, group: str, kind: str, extra: Sequence[Sink] = ()) -> Kind:
    """A NodeClass kind, ingested into ``cluster`` (its readiness) and ``extra`` sinks."""
    resource, model = NODECLASS_KINDS[(group, kind)]
    ingest: list[Sink] = [NodeClassSink(cluster, group=group, kind=kind, model=model), *extra]
    return Kind(resource, ingest, nodeclass=True)


def state_kinds(cluster: Cluster, nodeclasses: Sequence[Kind], *, node_overlay: bool) -> list[Kind]:
    """Every kind the cluster state is built from, each ingested into ``cluster``: what the
    controller reflects, and what ``karpenter-py viewer`` reflects to show the same state."""

    def on_namespace(obj: KubeObject) -> None:
        meta = obj.get("metadata", {})
        cluster.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})

    c = cluster
    kinds = [
        # Node deletes are read for the NodePool label and the provider ID; pod deletes for
        # the node the pod was on.
        Kind(NODES, [NodeSink(c)], keep=keep_identity(LABELS, ("spec", "providerID"))),
        Kind(NODECLAIMS, [NodeClaimSink(c)]),
        Kind(PODS, [PodSink(c)], keep=keep_identity(("spec", "nodeName"))),
        Kind(NODEPOOLS, [NodePoolSink(c)]),
        Kind(DAEMONSETS, [DaemonSetSink(c)]),
        Kind(PODDISRUPTIONBUDGETS, [PDBSink(c)], name="pdbs"),
        # Volume topology: where the volumes pending pods mount can attach.
        Kind(PERSISTENTVOLUMECLAIMS, [PersistentVolumeClaimSink(c)]),
        Kind(PERSISTENTVOLUMES, [PersistentVolumeSink(c)]),
        Kind(STORAGECLASSES, [StorageClassSink(c)]),
        *nodeclasses,
        Kind(NAMESPACES, [CallbackSink(on_upsert=on_namespace)]),
    ]
    if node_overlay:
        kinds.append(Kind(NODEOVERLAYS, [NodeOverlaySink(c)]))
    return kinds


def reflectors(
    kinds: Sequence[Kind], watches: Iterable[Watch], source: Callable[[Resource], ListWatch]
) -> list[Reflector]:
    """One reflector per kind over ``source(resource)``, delivering to its ingest sinks and
    then to the watches of its kind (:func:`kind_sinks`)."""
    return [
        Reflector(
            source(kind.resource),
            name=kind.reflector_name,
            store=Store(keep=kind.keep),
            sinks=[sink],
            transform=without_managed_fields,
        )
        for kind, sink in kind_sinks(kinds, watches)
    ]
