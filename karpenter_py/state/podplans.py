"""Where the provisioner last planned each pending pod: a NodeClaim it created, or a node.

A round's plan puts every pod it places on a new NodeClaim or on an existing (or in-flight)
node. The kube-scheduler does not know that plan and binds pods by its own scoring; the
controller tells it through each pod's ``status.nominatedNodeName`` once the planned node exists
(``controllers.provisioning.nominations``). This is the in-memory half of that: pod key ->
target name (a NodeClaim's name, or a node's as the snapshot names it), kept by the cluster's
mutators so it never outlives the pod's pending life or its target.

A plan is dropped when the pod binds, ends or is deleted, when its target NodeClaim or Node is
deleted, and replaced when a later round plans the pod again.
"""

from __future__ import annotations


class PodPlans:
    __slots__ = ("_by_target", "_target")

    def __init__(self) -> None:
        self._target: dict[str, str] = {}  # pod key -> target name
        self._by_target: dict[str, set[str]] = {}  # target name -> pod keys

    def __len__(self) -> int:
        return len(self._target)

    def plan(self, pod_key: str, target: str) -> None:
        """Record (or move) the pod's planned target."""
        old = self._target.get(pod_key)
        if old == target:
            return
        if old is not None:
            self._unindex(pod_key, old)
        self._target[pod_key] = target
        self._by_target.setdefault(target, set()).add(pod_key)

    def target(self, pod_key: str) -> str | None:
        return self._target.get(pod_key)

    def pods_for(self, target: str) -> tuple[str, ...]:
        """The pods planned onto ``target``, sorted (a stable order for the writes)."""
        return tuple(sorted(self._by_target.get(target, ())))

    def forget_pod(self, pod_key: str) -> None:
        old = self._target.pop(pod_key, None)
        if old is not None:
            self._unindex(pod_key, old)

    def forget_target(self, target: str) -> tuple[str, ...]:
        """Drop every plan onto ``target``; returns the pods that had one."""
        keys = self._by_target.pop(target, set())
        for key in keys:
            self._target.pop(key, None)
        return tuple(sorted(keys))

    def _unindex(self, pod_key: str, target: str) -> None:
        keys = self._by_target.get(target)
        if keys is not None:
            keys.discard(pod_key)
            if not keys:
                del self._by_target[target]
