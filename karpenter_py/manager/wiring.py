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

from karpenter_py.controllers.runtime import EVERY_NODECLASS, ObjectHandler, Watch
from karpenter_py.informer.events import Sink
from karpenter_py.informer.store import Keep
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import Resource


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
