"""Wire objects as plain dicts (orjson-decoded), plus the few metadata accessors everyone needs.

No generated client models: decoding stays one ``orjson.loads`` per response or watch line, and
typed views are built above this layer only where a consumer needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

KubeObject = dict[str, Any]
# What an informer passes on of each object it receives (client-go's TransformFunc). It may
# change its argument in place: the decoded object is the informer's own.
Transform = Callable[[KubeObject], KubeObject]

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
BOOKMARK: Final = "BOOKMARK"
ERROR: Final = "ERROR"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    object: KubeObject


@dataclass(frozen=True, slots=True)
class ListResult:
    """All items of a (possibly paged) list and the resourceVersion to watch from."""

    items: list[KubeObject]
    resource_version: str


@dataclass(frozen=True, slots=True)
class Page:
    items: list[KubeObject]
    resource_version: str
    continue_token: str | None  # None on the last page
    remaining: int | None = None  # metadata.remainingItemCount, when the server reports it


def metadata(obj: KubeObject) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def name_of(obj: KubeObject) -> str:
    return str(metadata(obj).get("name", ""))


def namespace_of(obj: KubeObject) -> str | None:
    ns = metadata(obj).get("namespace")
    return str(ns) if ns else None


def uid_of(obj: KubeObject) -> str | None:
    uid = metadata(obj).get("uid")
    return str(uid) if uid else None


def resource_version_of(obj: KubeObject) -> str | None:
    rv = metadata(obj).get("resourceVersion")
    return str(rv) if rv else None


def object_key(obj: KubeObject) -> str:
    """client-go's MetaNamespaceKey: ``namespace/name`` for namespaced objects, else ``name``."""
    ns = namespace_of(obj)
    return f"{ns}/{name_of(obj)}" if ns else name_of(obj)


def new_event(
    *,
    involved: KubeObject,
    reason: str,
    message: str,
    now: datetime,
    event_type: Literal["Normal", "Warning"] = "Normal",
    component: str = "karpenter",
    host: str | None = None,
) -> KubeObject:
    """A core/v1 Event about ``involved``, named like client-go's recorder (``name.<hex ns>``).

    Events for cluster-scoped objects go to ``default``, as client-go does.
    """
    meta = metadata(involved)
    stamp = now.isoformat().replace("+00:00", "Z")
    ref = {
        "apiVersion": involved.get("apiVersion"),
        "kind": involved.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    nanos = int(now.timestamp() * 1e9)
    source = {"component": component, **({"host": host} if host else {})}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name', 'unknown')}.{nanos:x}",
            "namespace": meta.get("namespace") or "default",
        },
        "involvedObject": {k: v for k, v in ref.items() if v},
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": source,
        "reportingComponent": component,
        "reportingInstance": host or "",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def without_managed_fields(obj: KubeObject) -> KubeObject:
    """``obj`` without metadata.managedFields (in place), as upstream's informers cache objects:
    server-side-apply bookkeeping nobody here reads, often a third of an object's size."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj
