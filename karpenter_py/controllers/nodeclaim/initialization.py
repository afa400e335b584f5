"""Lifecycle phase 3, initialization: the node is usable once it is Ready and fully set up.

Upstream's pkg/controllers/nodeclaim/lifecycle/initialization.go: Ready, no startup taint left,
no known ephemeral (boot-time) taint left, and every resource the NodeClaim was sized for shows a
non-zero allocatable (a device plugin registers extended resources late). Then the Node is
labelled ``karpenter.sh/initialized=true`` and the NodeClaim's Initialized condition turns True.
"""

from __future__ import annotations

from karpenter_py.controllers.common import nodes_for
from karpenter_py.controllers.nodeclaim.common import DONE, PhaseResult
from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.client import PatchType
from karpenter_py.kube.resources import NODES
from karpenter_py.model.api.meta import CONDITION_TRUE, CONDITION_UNKNOWN
from karpenter_py.model.api.nodeclaim import (
    CONDITION_INITIALIZED,
    CONDITION_REGISTERED,
    NodeClaim,
)
from karpenter_py.model.core import EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE, Node, Taint
from karpenter_py.model.labels import (
    EPHEMERAL_TAINT_PREFIXES,
    LABEL_NODE_INITIALIZED,
    TAINT_EXTERNAL_CLOUD_PROVIDER,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_UNREACHABLE,
    TAINT_UNREGISTERED_KEY,
)
from karpenter_py.model.quantity import parse_resources

# (key, effect) of taints nodes carry while booting (upstream scheduling.KnownEphemeralTaints).
KNOWN_EPHEMERAL_TAINTS = frozenset(
    {
        (TAINT_NODE_NOT_READY, EFFECT_NO_SCHEDULE),
        (TAINT_NODE_NOT_READY, EFFECT_NO_EXECUTE),
        (TAINT_NODE_UNREACHABLE, EFFECT_NO_SCHEDULE),
        (TAINT_EXTERNAL_CLOUD_PROVIDER, EFFECT_NO_SCHEDULE),
        (TAINT_UNREGISTERED_KEY, EFFECT_NO_EXECUTE),
    }
)


def is_ephemeral_taint(taint: Taint) -> bool:
    return (taint.key, taint.effect) in KNOWN_EPHEMERAL_TAINTS or taint.key.startswith(
        EPHEMERAL_TAINT_PREFIXES
    )


def initialization_problem(node: Node, nc: NodeClaim) -> tuple[str, str] | None:
    """Why ``node`` is not initialized yet, as (condition reason, message); None when it is."""
    if not node.ready:
        return "NodeNotReady", "Node status is NotReady"
    startup = {(t.key, t.effect) for t in nc.spec.startup_taints}
    for taint in node.taints:
        if (taint.key, taint.effect) in startup:
            return "StartupTaintsExist", f"StartupTaint {taint.key!r} still exists"
    for taint in node.taints:
        if is_ephemeral_taint(taint):
            return "KnownEphemeralTaintsExist", f"KnownEphemeralTaint {taint.key!r} still exists"
    for name, amount in parse_resources(nc.spec.resources.requests).items():
        if amount > 0 and node.allocatable.get(name, 0) <= 0:
            return "ResourceNotRegistered", f"Resource {name!r} was requested but not registered"
    return None


class Initialization:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def reconcile(self, nc: NodeClaim) -> PhaseResult:
        if not nc.status.is_true(CONDITION_REGISTERED):
            return DONE
        nodes = nodes_for(self.deps.cluster, nc)
        now = self.deps.clock.now()
        if len(nodes) != 1:
            nc.status.set_condition(
                CONDITION_INITIALIZED,
                CONDITION_UNKNOWN,
                now=now,
                reason="NodeNotFound",
                message="Node not registered with cluster",
            )
            return DONE
        node = nodes[0]
        if nc.status.is_true(CONDITION_INITIALIZED) and (
            node.labels.get(LABEL_NODE_INITIALIZED) == "true"
        ):
            return DONE
        if not nc.status.is_true(CONDITION_INITIALIZED):
            problem = initialization_problem(node, nc)
            if problem is not None:
                nc.status.set_condition(
                    CONDITION_INITIALIZED,
                    CONDITION_UNKNOWN,
                    now=now,
                    reason=problem[0],
                    message=problem[1],
                )
                return DONE  # Node updates trigger us again
        if node.labels.get(LABEL_NODE_INITIALIZED) != "true":
            # A map merge: no resourceVersion needed, other labels are untouched.
            await self.deps.client.patch(
                NODES,
                node.name,
                {"metadata": {"labels": {LABEL_NODE_INITIALIZED: "true"}}},
                patch_type=PatchType.MERGE,
            )
        nc.status.set_condition(CONDITION_INITIALIZED, CONDITION_TRUE, now=now)
        return DONE
