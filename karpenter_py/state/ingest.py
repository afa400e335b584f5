"""Sinks that turn raw watch objects into the cluster model (what upstream's state/informer/* do).

Each sink has the informer's ``Sink`` shape (upsert/delete/listed/synced) without importing the
informer: the manager plugs them in. ``listed`` takes the first list a page at a time into a
collection that is empty before it, so each page is upserted. An object that does not parse (a user wrote a bad quantity,
say) is skipped and remembered in ``Cluster.invalid`` instead of stopping the watch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar, cast

from pydantic import BaseModel, ValidationError

from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import (
    Node,
    Pod,
    label_selector_from_dict,
    node_from_dict,
    pod_from_dict,
    pod_from_parts,
)
from karpenter_py.model.fields import ParseError
from karpenter_py.model.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.pdb import PodDisruptionBudget

RawObject = Mapping[str, object]
T = TypeVar("T")


def _meta(obj: RawObject) -> Mapping[str, object]:
    meta = obj.get("metadata")
    return cast("Mapping[str, object]", meta) if isinstance(meta, dict) else {}


def object_key(obj: RawObject) -> str:
    meta = _meta(obj)
    ns, name = meta.get("namespace"), meta.get("name")
    return f"{ns}/{name}" if ns else str(name)


class _Sink(Generic[T]):
    kind = ""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def parse(self, obj: RawObject) -> T:
        raise NotImplementedError

    def _parse(self, obj: RawObject) -> T | None:
        key = f"{self.kind}/{object_key(obj)}"
        try:
            value = self.parse(obj)
        except (ParseError, ValidationError, ValueError) as err:
            self.cluster.invalid[key] = str(err)
            return None
        self.cluster.invalid.pop(key, None)
        return value

    def _parse_all(self, objs: Sequence[RawObject]) -> list[T]:
        return [v for v in (self._parse(o) for o in objs) if v is not None]

    def synced(self) -> None:
        self.cluster.mark_synced(self.kind)


class _StoredSink(_Sink[T]):
    """A kind the cluster stores as parsed values: deliveries go to its upsert and delete
    mutators. ``forget_unparseable``: an object that stops parsing is dropped (as if
    deleted) rather than kept as it last parsed, for kinds where a stale value misleads more
    than a missing one."""

    def __init__(
        self,
        cluster: Cluster,
        parse: Callable[[RawObject], T],
        upsert: Callable[[T], None],
        delete: Callable[[str], None],
        *,
        forget_unparseable: bool = False,
    ) -> None:
        super().__init__(cluster)
        self._parser = parse
        self._upsert, self._delete = upsert, delete
        self._forget_unparseable = forget_unparseable

    def parse(self, obj: RawObject) -> T:
        return self._parser(obj)

    def upsert(self, obj: RawObject) -> None:
        value = self._parse(obj)
        if value is not None:
            self._upsert(value)
        elif self._forget_unparseable:
            self._delete(object_key(obj))

    def delete(self, obj: RawObject) -> None:
        self._delete(object_key(obj))

    def listed(self, objs: Sequence[RawObject]) -> None:
        for value in self._parse_all(objs):
            self._upsert(value)


class NodeSink(_StoredSink[Node]):
    kind = "nodes"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        super().__init__(c, node_from_dict, c.upsert_node, c.delete_node)


class PodSink(_StoredSink[Pod]):
    kind = "pods"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        super().__init__(c, pod_from_dict, c.upsert_pod, c.delete_pod)


class NodeClaimSink(_StoredSink[NodeClaim]):
    kind = "nodeclaims"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        parse = NodeClaim.model_validate
        super().__init__(c, parse, c.upsert_nodeclaim, c.delete_nodeclaim)


class NodePoolSink(_StoredSink[NodePool]):
    kind = "nodepools"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        parse = NodePool.model_validate
        super().__init__(
            c,
            parse,
            c.upsert_nodepool,
            c.delete_nodepool,
            forget_unparseable=True,
        )


class NodeOverlaySink(_StoredSink[NodeOverlay]):
    """NodeOverlays (reflected only with the NodeOverlay gate on). One that stops parsing is
    dropped: an overlay applied as it once was would price instance types as nobody asked."""

    kind = "nodeoverlays"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        parse = NodeOverlay.model_validate
        super().__init__(c, parse, c.upsert_overlay, c.delete_overlay, forget_unparseable=True)


def daemonset_template(obj: RawObject) -> Pod:
    """A pod shaped like the DaemonSet's, owned by it, to size daemonset overhead."""
    spec = obj.get("spec")
    spec = cast("Mapping[str, object]", spec) if isinstance(spec, dict) else {}
    template = spec.get("template")
    template = cast("dict[str, object]", template) if isinstance(template, dict) else {}
    meta = dict(cast("dict[str, object]", template.get("metadata") or {}))
    outer = _meta(obj)
    meta.setdefault("namespace", outer.get("namespace"))
    meta["name"] = outer.get("name")
    meta["ownerReferences"] = [
        {
            "kind": "DaemonSet",
            "name": outer.get("name"),
            "uid": outer.get("uid", ""),
            "controller": True,
        }
    ]
    pod_spec = cast("dict[str, object]", template.get("spec") or {})
    return pod_from_parts(meta, pod_spec, {}, f"daemonset {object_key(obj)}.spec.template")


class DaemonSetSink(_Sink[Pod]):
    kind = "daemonsets"

    def parse(self, obj: RawObject) -> Pod:
        return daemonset_template(obj)

    def upsert(self, obj: RawObject) -> None:
        pod = self._parse(obj)
        if pod is not None:
            self.cluster.upsert_daemonset(object_key(obj), pod)

    def delete(self, obj: RawObject) -> None:
        self.cluster.delete_daemonset(object_key(obj))

    def listed(self, objs: Sequence[RawObject]) -> None:
        for obj in objs:
            self.upsert(obj)


class NodeClassSink(_Sink[tuple[str, bool]]):
    """Readiness of one NodeClass kind (EC2NodeClass, KWOKNodeClass): NodePools whose class is
    missing or not Ready are not provisioned for, as upstream does."""

    kind = "nodeclasses"

    def __init__(self, cluster: Cluster, *, group: str, kind: str, model: type[BaseModel]) -> None:
        super().__init__(cluster)
        self.group, self.nodeclass_kind, self.model = group, kind, model

    def parse(self, obj: RawObject) -> tuple[str, bool]:
        parsed = self.model.model_validate(obj)
        status = getattr(parsed, "status", None)
        ready = bool(status is not None and status.is_true("Ready"))
        return object_key(obj), ready

    def upsert(self, obj: RawObject) -> None:
        parsed = self._parse(obj)
        name = object_key(obj)
        self.cluster.upsert_nodeclass(
            (self.group, self.nodeclass_kind, name), parsed is not None and parsed[1]
        )

    def delete(self, obj: RawObject) -> None:
        self.cluster.delete_nodeclass((self.group, self.nodeclass_kind, object_key(obj)))

    def listed(self, objs: Sequence[RawObject]) -> None:
        for obj in objs:
            self.upsert(obj)


def pdb_from_dict(obj: RawObject) -> PodDisruptionBudget:
    meta = _meta(obj)
    spec = obj.get("spec")
    status = obj.get("status")
    spec = cast("Mapping[str, object]", spec) if isinstance(spec, dict) else {}
    status = cast("Mapping[str, object]", status) if isinstance(status, dict) else {}
    raw_selector = spec.get("selector")
    allowed = status.get("disruptionsAllowed", 0)
    return PodDisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name")),
        selector=None
        if raw_selector is None
        else label_selector_from_dict(raw_selector, "spec.selector"),
        disruptions_allowed=allowed if isinstance(allowed, int) else 0,
    )


class PDBSink(_StoredSink[PodDisruptionBudget]):
    kind = "pdbs"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        super().__init__(c, pdb_from_dict, c.upsert_pdb, c.delete_pdb)


# Storage: an unreadable claim, volume or class is as good as missing, so its pods get a clear
# reason rather than a placement from stale facts.


class PersistentVolumeClaimSink(_StoredSink[PersistentVolumeClaim]):
    kind = "persistentvolumeclaims"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        super().__init__(c, pvc_from_dict, c.upsert_pvc, c.delete_pvc, forget_unparseable=True)


class PersistentVolumeSink(_StoredSink[PersistentVolume]):
    kind = "persistentvolumes"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        super().__init__(c, pv_from_dict, c.upsert_pv, c.delete_pv, forget_unparseable=True)


class StorageClassSink(_StoredSink[StorageClass]):
    kind = "storageclasses"

    def __init__(self, cluster: Cluster) -> None:
        c = cluster
        super().__init__(
            c,
            storage_class_from_dict,
            c.upsert_storage_class,
            c.delete_storage_class,
            forget_unparseable=True,
        )
