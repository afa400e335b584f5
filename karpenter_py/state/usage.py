"""How much of each NodePool's ``limits`` its nodes use: one rule for the provisioner, the
NodePool counter and ``karpenter-py plan``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from karpenter_py.state.statenode import StateNode

# The count of a pool's nodes, kept beside its resources (``limits.nodes``, ``status.resources``).
RESOURCE_NODES: Final = "nodes"


def nodepool_usage(nodes: Iterable[StateNode]) -> dict[str, dict[str, int]]:
    """NodePool name -> the summed ``StateNode.charged`` of its nodes and NodeClaims, plus their
    count as ``nodes``.

    NodeClaims that have not launched yet count too, at their reserved or requested size, as
    upstream charges them: otherwise a burst of launches could overshoot a pool's limits before
    the first of them reports its capacity. Pools without nodes are absent.
    """
    usage: dict[str, dict[str, int]] = {}
    for sn in nodes:
        if not sn.node_pool:
            continue
        acc = usage.setdefault(sn.node_pool, {})
        for name, amount in sn.charged.items():
            acc[name] = acc.get(name, 0) + amount
        acc[RESOURCE_NODES] = acc.get(RESOURCE_NODES, 0) + 1
    return usage
