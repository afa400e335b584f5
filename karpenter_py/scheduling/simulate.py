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
from dataclasses import dataclass, replace

from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.fromstate import solve_input
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.scheduling.plan import NewNodeClaim, Plan, PodError
from karpenter_py.scheduling.scheduler import solve
from karpenter_py.scheduling.volumes import volume_inputs
from karpenter_py.state.snapshot import Snapshot, is_reschedulable


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


class Simulator:
    """Many what-ifs against one snapshot: the solver input (pools, existing capacity with its
    DaemonSet reservations, volume facts) is built once and each simulation only drops the
    candidates' nodes and adds their pods. A consolidation pass runs hundreds of these."""

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        instance_types: Mapping[str, Sequence[InstanceType]],
        options: SolveOptions | None = None,
        indexes: IndexCache | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.indexes = indexes if indexes is not None else IndexCache()
        # What-ifs solve greedily (a consolidation search runs hundreds); ``run(repack=True)``
        # packs, for the command finally chosen. It never splits one replacement into several:
        # consolidation counts replacements, and more than it allows is no command.
        chosen = options or SolveOptions()
        self.may_repack = chosen.repack
        self.base = solve_input(
            snapshot,
            instance_types=instance_types,
            options=replace(chosen, repack=False, repack_split=False),
        )
        # Every what-if's nodes are these less some: each solve's base is cut from this one
        # (``IndexCache.existing_base``) instead of built over thousands of nodes again.
        self.indexes.existing_base(self.base.existing)
        self._uninitialized = {n.name for n in snapshot.nodes if not n.initialized}
        self._marked = {n.name for n in snapshot.nodes if n.marked_for_deletion}
        self.runs = 0

    def moved_pods(self, candidates: Collection[str]) -> tuple[Pod, ...]:
        return tuple(
            p
            for name in sorted(set(candidates) - self._marked)
            for p in self.snapshot.pods_by_node.get(name, ())
            if is_reschedulable(p)
        )

    def run(self, candidates: Collection[str], *, repack: bool = False) -> Simulation:
        """Solve the cluster without the ``candidates`` (node names); with ``repack``, the new
        NodeClaims are packed onto cheaper types (``scheduling.packing``) where the options
        allow it."""
        self.runs += 1
        gone = set(candidates)
        moved = self.moved_pods(gone)
        volume_requirements, volume_errors = volume_inputs(moved, self.snapshot.storage)
        options = self.base.options
        if repack and self.may_repack:
            options = replace(options, repack=True)
        inp = replace(
            self.base,
            options=options,
            pods=[*self.base.pods, *moved],
            existing=[e for e in self.base.existing if e.node.name not in gone],
            volume_requirements={**self.base.volume_requirements, **volume_requirements},
            volume_errors={**self.base.volume_errors, **volume_errors},
        )
        plan = solve(inp, namespace_labels=self.snapshot.namespace_labels, indexes=self.indexes)
        moved_keys = {p.key for p in moved}
        errors = [e for e in plan.errors if e.pod.key in moved_keys]
        for placement in plan.existing:
            if placement.node_name in self._uninitialized:
                errors.extend(
                    PodError(
                        p, f"would schedule to node {placement.node_name}, not initialized yet"
                    )
                    for p in placement.pods
                    if p.key in moved_keys
                )
        replacements = tuple(
            nc for nc in plan.new_node_claims if any(p.key in moved_keys for p in nc.pods)
        )
        return Simulation(plan=plan, moved=moved, errors=tuple(errors), replacements=replacements)


def simulate(
    snapshot: Snapshot,
    candidates: Collection[str],
    *,
    instance_types: Mapping[str, Sequence[InstanceType]],
    options: SolveOptions | None = None,
    indexes: IndexCache | None = None,
) -> Simulation:
    """Solve the cluster without the ``candidates`` (node names): one what-if."""
    sim = Simulator(snapshot, instance_types=instance_types, options=options, indexes=indexes)
    return sim.run(candidates)
