"""A keyed object store with named indexes (client-go's ThreadSafeStore + Indexer).

Mutators are sync, so on one event loop they are atomic: no locks. ``keep`` decides what the
store holds of each object (everything by default): an informer whose consumers parse each
delivery into their own model needs only what a relist diff reads (key, uid, resourceVersion)
and what delete handlers read of the last known state. Indexes map an index value to
the set of object keys, kept up to date on every write, so lookups such as "pods on node X" or
"node with providerID Y" are O(result).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from karpenter_py.kube.objects import KubeObject, object_key, resource_version_of, uid_of

IndexFunc = Callable[[KubeObject], Iterable[str]]
Keep = Callable[[KubeObject], KubeObject]
KeyFunc = Callable[[KubeObject], str]
# Aliases, because ``Store.list`` shadows the builtin inside the class body.
ObjectList = list[KubeObject]
KeyList = list[str]


def field_indexer(*path: str) -> IndexFunc:
    """Index by a string field at ``path`` (e.g. ``field_indexer("spec", "nodeName")``);
    objects where the field is missing or empty are not indexed."""

    def index(obj: KubeObject) -> list[str]:
        value = _at(obj, path)
        return [value] if isinstance(value, str) and value else []

    return index


def _at(obj: KubeObject, path: tuple[str, ...]) -> object:
    """The value at ``path`` in ``obj``; None when any step is missing."""
    cur: object = obj
    for part in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


_IDENTITY = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")


def keep_identity(*paths: tuple[str, ...]) -> Keep:
    """A ``keep`` holding what a relist diff needs (apiVersion, kind, and metadata name,
    namespace, uid, resourceVersion, deletionTimestamp) plus the fields at ``paths``: what the
    consumers' delete handlers read of an object's last known state."""

    def keep(obj: KubeObject) -> KubeObject:
        meta = obj.get("metadata") or {}
        out: KubeObject = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": {k: meta[k] for k in _IDENTITY if k in meta},
        }
        for path in paths:
            value = _at(obj, path)
            if value is not None:
                place = out
                for part in path[:-1]:
                    place = place.setdefault(part, {})
                place[path[-1]] = value
        return out

    return keep


@dataclass(frozen=True, slots=True)
class ReplaceDiff:
    """What a :meth:`Store.replace` changed: the deltas a relist must deliver to sinks."""

    deleted: list[KubeObject] = field(default_factory=list)  # last known state of vanished objects
    upserted: list[KubeObject] = field(default_factory=list)  # new, or resourceVersion changed
    unchanged: int = 0


class Store:
    def __init__(
        self,
        *,
        indexers: Mapping[str, IndexFunc] | None = None,
        key_func: KeyFunc = object_key,
        keep: Keep | None = None,
    ) -> None:
        """Indexes see what the store keeps."""
        self._key = key_func
        self._keep = keep
        self._objects: dict[str, KubeObject] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._values: dict[str, dict[str, tuple[str, ...]]] = {}  # key -> index -> values indexed
        self.resource_version: str | None = None

    # ------------------------------------------------------------------ reads

    def key_of(self, obj: KubeObject) -> str:
        return self._key(obj)

    def get(self, key: str) -> KubeObject | None:
        return self._objects.get(key)

    def get_by_name(self, name: str, namespace: str | None = None) -> KubeObject | None:
        return self._objects.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> ObjectList:
        return list(self._objects.values())

    def keys(self) -> KeyList:
        return list(self._objects)

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def by_index(self, index: str, value: str) -> ObjectList:
        return [self._objects[k] for k in self.index_keys(index, value)]

    def index_keys(self, index: str, value: str) -> KeyList:
        try:
            keys = self._indices[index].get(value, ())
        except KeyError:
            raise KeyError(f"no index named {index!r}") from None
        return sorted(keys)  # deterministic order for callers and tests

    def index_values(self, index: str) -> KeyList:
        return sorted(self._indices[index])

    # ------------------------------------------------------------------ writes

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add an index (built over the current contents)."""
        if name in self._indexers:
            raise ValueError(f"index {name!r} already exists")
        self._indexers[name] = func
        self._indices[name] = {}
        for key, obj in self._objects.items():
            values = tuple(dict.fromkeys(func(obj)))
            self._values.setdefault(key, {})[name] = values
            for v in values:
                self._indices[name].setdefault(v, set()).add(key)

    def upsert(self, obj: KubeObject) -> KubeObject | None:
        """Insert or overwrite; returns the previous object, if any."""
        key = self._key(obj)
        old = self._objects.get(key)
        if self._keep is not None:
            obj = self._keep(obj)
        self._objects[key] = obj
        self._reindex(key, obj)
        return old

    def delete(self, obj: KubeObject) -> KubeObject | None:
        """Remove by the object's key; returns what was stored (None if absent)."""
        return self.delete_key(self._key(obj))

    def delete_key(self, key: str) -> KubeObject | None:
        old = self._objects.pop(key, None)
        if old is not None:
            self._reindex(key, None)
        return old

    def replace(self, objs: Iterable[KubeObject], resource_version: str | None) -> ReplaceDiff:
        """Make the contents exactly ``objs`` and report the difference from before.

        An object counts as changed when its resourceVersion differs (or, lacking one, its
        content does); the stored copy is always the new one. A name that now belongs to a
        different object (deleted and re-created while nobody watched: the UID changed) is
        reported as a delete of the old object *and* an upsert of the new one, so consumers
        keyed by UID do not keep a ghost.
        """
        incoming: dict[str, KubeObject] = {}
        for obj in objs:
            incoming[self._key(obj)] = obj
        deleted: ObjectList = []
        upserted: ObjectList = []
        for key in [k for k in self._objects if k not in incoming]:
            deleted.append(self._objects[key])
            self.delete_key(key)
        for key, obj in incoming.items():
            old = self._objects.get(key)
            if old is not None and uid_of(old) != uid_of(obj):
                deleted.append(old)
                upserted.append(obj)
            elif old is None or _changed(old, obj):
                upserted.append(obj)
            kept = obj if self._keep is None else self._keep(obj)
            self._objects[key] = kept
            self._reindex(key, kept)
        self.resource_version = resource_version
        return ReplaceDiff(
            deleted=deleted, upserted=upserted, unchanged=len(incoming) - len(upserted)
        )

    def _reindex(self, key: str, obj: KubeObject | None) -> None:
        if not self._indexers:
            return
        old_values = self._values.pop(key, {})
        new_values: dict[str, tuple[str, ...]] = {}
        for name, func in self._indexers.items():
            values = tuple(dict.fromkeys(func(obj))) if obj is not None else ()
            before = old_values.get(name, ())
            if values == before:
                if values:
                    new_values[name] = values
                continue
            index = self._indices[name]
            for v in before:
                keys = index.get(v)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[v]
            for v in values:
                index.setdefault(v, set()).add(key)
            if values:
                new_values[name] = values
        if new_values:
            self._values[key] = new_values


def _changed(old: KubeObject, new: KubeObject) -> bool:
    old_rv, new_rv = resource_version_of(old), resource_version_of(new)
    if old_rv is not None and new_rv is not None:
        return old_rv != new_rv
    return old != new
