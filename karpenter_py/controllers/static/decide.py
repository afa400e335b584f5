"""Static NodePools (``spec.replicas``, gate ``StaticCapacity``), pure: how many NodeClaims each
pool is missing, which of its extra ones go, and the NodeClaims that fill the gap.

Upstream's static provisioning and deprovisioning controllers (pkg/controllers/static), as rules:

* a pool counts its NodeClaims that are not being deleted (``running``) and those that are
  (``deleting``). It launches ``replicas - (running + deleting)`` more, never past
  ``limits.nodes`` (a node on its way out still holds its slot until it is gone), and only while
  its NodeClass is Ready;
* it removes ``running - replicas``, picked in this order: NodeClaims that never launched (no
  provider ID; higher ``karpenter.sh/deprovisioning-priority`` first), then empty nodes (only
  DaemonSet or mirror pods, none protected by ``karpenter.sh/do-not-disrupt``), then the rest:
  nodes without a protected pod before those with one, higher priority annotation first, then
  the lowest disruption cost (Σ eviction costs x lifetime remaining). Ties by name. Disruption
  budgets do not apply; PDBs do, in the termination controller's drain of the deleted
  NodeClaim.

The controller and ``karpenter-py plan`` both call :func:`decide`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Pod
from karpenter_py.model.disruptioncost import disruption_cost
from karpenter_py.model.donotdisrupt import do_not_disrupt_active
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.fromstate import provisionable_pools, static_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.scheduling.plan import NewNodeClaim
from karpenter_py.scheduling.scheduler import static_claims
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode
from karpenter_py.state.staticpool import Count, count, is_static, leaving, node_limit, pool_members

ANNOTATION_DEPROVISIONING_PRIORITY: Final = "karpenter.sh/deprovisioning-priority"
# The NodeClaim deletion reason upstream's static deprovisioning gives.
REASON_OVERPROVISIONED: Final = "overprovisioned"


@dataclass(frozen=True, slots=True)
class StaticDecision:
    """What one static NodePool needs now."""

    pool: str
    replicas: int
    count: Count
    launch: tuple[NewNodeClaim, ...]  # the NodeClaims to create now
    remove: tuple[str, ...]  # NodeClaim names to delete, in the order picked
    # Why fewer NodeClaims are launched than are missing ("" when none are held back).
    held_back: str = ""

    @property
    def missing(self) -> int:
        return max(0, self.replicas - self.count.total)


def static_pools(nodepools: Mapping[str, NodePool]) -> list[NodePool]:
    """The static NodePools not being deleted, by name."""
    return [
        nodepools[name]
        for name in sorted(nodepools)
        if is_static(nodepools[name]) and nodepools[name].metadata.deletion_timestamp is None
    ]


def to_launch(np: NodePool, counted: Count) -> tuple[int, str]:
    """How many NodeClaims to create now, and why fewer than are missing ("" when all)."""
    replicas = np.spec.replicas or 0
    missing = replicas - counted.total
    if missing <= 0:
        return 0, ""
    limit = node_limit(np)
    if limit is None or counted.total + missing <= limit:
        return missing, ""
    allowed = max(0, limit - counted.total)
    return allowed, f"limits.nodes {limit} allows {allowed} of the {missing} missing"


def _priority(sn: StateNode) -> int:
    assert sn.nodeclaim is not None
    raw = sn.nodeclaim.metadata.annotations.get(ANNOTATION_DEPROVISIONING_PRIORITY, "")
    try:
        return int(raw)
    except ValueError:
        return 0


def _protected(pods: Sequence[Pod], now: datetime) -> bool:
    return any(do_not_disrupt_active(p, now) for p in pods)


def _empty(pods: Sequence[Pod], now: datetime) -> bool:
    """Only pods that go with the node (a DaemonSet's, a mirror pod) or are done, none of them
    protected by do-not-disrupt."""
    return all(
        p.is_daemonset_pod() or p.is_mirror_pod() or p.is_terminal() for p in pods
    ) and not _protected(pods, now)


def to_remove(
    members: Sequence[StateNode],
    excess: int,
    pods_by_node: Mapping[str, Sequence[Pod]],
    now: datetime,
) -> tuple[str, ...]:
    """The NodeClaim names of ``excess`` of the pool's NodeClaims, in upstream's order."""
    if excess <= 0:
        return ()
    alive = [sn for sn in members if not leaving(sn)]
    unlaunched = sorted(
        (sn for sn in alive if not sn.provider_id),
        key=lambda sn: (-_priority(sn), sn.nodeclaim_name),
    )
    launched = [sn for sn in alive if sn.provider_id]
    empty = sorted(
        (sn for sn in launched if _empty(pods_by_node.get(sn.name, ()), now)),
        key=lambda sn: sn.nodeclaim_name,
    )
    taken = {sn.nodeclaim_name for sn in empty}

    def busy_order(sn: StateNode) -> tuple[bool, int, float, str]:
        pods = pods_by_node.get(sn.name, ())
        assert sn.nodeclaim is not None
        return (
            _protected(pods, now),
            -_priority(sn),
            disruption_cost(pods, sn.nodeclaim, now),
            sn.nodeclaim_name,
        )

    busy = sorted((sn for sn in launched if sn.nodeclaim_name not in taken), key=busy_order)
    return tuple(sn.nodeclaim_name for sn in (*unlaunched, *empty, *busy)[:excess])


def decide(
    snapshot: Snapshot,
    instance_types: Mapping[str, Sequence[InstanceType]],
    *,
    options: SolveOptions | None = None,
    indexes: IndexCache | None = None,
    pool: str | None = None,
) -> tuple[StaticDecision, ...]:
    """Every static NodePool's decision (only ``pool``'s when given), by pool name.
    ``instance_types`` needs only the pools that launch; a pool whose NodeClass is missing or
    not Ready launches nothing and says so."""
    ready = {np.metadata.name for np in provisionable_pools(snapshot)}
    out: list[StaticDecision] = []
    for np in static_pools(snapshot.nodepools):
        name = np.metadata.name or ""
        if pool is not None and name != pool:
            continue
        members = pool_members(snapshot.nodes, name)
        counted = count(members)
        replicas = np.spec.replicas or 0
        n, held_back = to_launch(np, counted)
        launch: tuple[NewNodeClaim, ...] = ()
        if n and name not in ready:
            n, held_back = 0, "its NodeClass is missing or not Ready"
        if n:
            inp = static_input(
                snapshot,
                np,
                instance_types=instance_types.get(name, ()),
                options=options or SolveOptions(),
            )
            built = static_claims(inp, n, indexes=indexes)
            if isinstance(built, str):
                held_back = built
            else:
                launch = built
        remove = to_remove(members, counted.running - replicas, snapshot.pods_by_node, snapshot.now)
        out.append(StaticDecision(name, replicas, counted, launch, remove, held_back))
    return tuple(out)
