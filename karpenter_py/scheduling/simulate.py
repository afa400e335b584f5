"""``simulate``: the solver asked "what if these nodes were gone?".

Disruption's what-if, as upstream's SimulateScheduling: the candidates' capacity disappears,
their reschedulable pods join the pending pods and the pods of nodes already being deleted, and
the same pure solver places them all on the remaining nodes and, where needed, new NodeClaims.
The candidates can go only if every pod that was running on them finds a place; a pending pod
that fails does not matter (it fails today too). A moved pod placed on a node that is not
initialized yet makes the answer unusable: that capacity may never arrive.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.scheduling.plan import NewNodeClaim, Plan, PodError
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.state.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Simulation:
    plan: Plan
    moved: tuple[Pod, ...]  # the candidates' pods that had to find a new home
    # Why a moved pod has no home: a solver error, or a placement on an uninitialized node.
    errors: tuple[PodError, ...]
    # New NodeClaims holding at least one moved pod (claims only for pending pods are the
    # provisioner's business, not a replacement).
    replacements: tuple[NewNodeClaim, ...]

    @property
    def all_scheduled(self) -> bool:
        return not self.errors


def simulate(
    snapshot: Snapshot,
    candidates: Collection[str],
    *,
    instance_types: Mapping[str, Sequence[InstanceType]],
    options: SolveOptions | None = None,
    indexes: IndexCache | None = None,
) -> Simulation:
    """Solve the cluster without the ``candidates`` (node names)."""
    after = snapshot.without(candidates)
    existing = {p.key for p in snapshot.reschedulable}
    moved = tuple(p for p in after.reschedulable if p.key not in existing)
    inp = solve_input(after, instance_types=instance_types, options=options or SolveOptions())
    plan = solve(inp, namespace_labels=snapshot.namespace_labels, indexes=indexes)
    moved_keys = {p.key for p in moved}
    errors = [e for e in plan.errors if e.pod.key in moved_keys]
    uninitialized = {n.name for n in after.nodes if not n.initialized}
    for placement in plan.existing:
        if placement.node_name in uninitialized:
            errors.extend(
                PodError(p, f"would schedule to node {placement.node_name}, not initialized yet")
                for p in placement.pods
                if p.key in moved_keys
            )
    replacements = tuple(
        nc for nc in plan.new_node_claims if any(p.key in moved_keys for p in nc.pods)
    )
    return Simulation(plan=plan, moved=moved, errors=tuple(errors), replacements=replacements)
