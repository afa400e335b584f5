"""The two decisions the viewer shows, made by the code ``plan`` and ``plan --disruption`` run.

Both are pure and slow on a big cluster (a 5,000-node disruption pass takes seconds), so the live
viewer makes them in a worker thread on a snapshot taken on the event loop, on its own cadence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from karpenter_py.cli import plan as plan_cli
from karpenter_py.cli.disruption import DisruptionPlan, plan_disruption
from karpenter_py.cli.plan import PoolCatalogs
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.plan import Plan
from karpenter_py.state.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Decisions:
    """What disruption would do now, and where the provisioner would put the pending pods."""

    disruption: DisruptionPlan
    provisioning: Plan

    @property
    def instance_types(self) -> Mapping[str, Sequence[InstanceType]]:
        return self.disruption.instance_types


def decide(
    snapshot: Snapshot,
    catalogs: PoolCatalogs,
    options: SolveOptions | None = None,
    *,
    every_command: bool = True,
) -> Decisions:
    """``every_command``: list every command disruption would take in order, as
    ``plan --disruption`` does (a dump); else only the next one, as the controller's next pass
    (live: the full list of a big cluster takes one pass per command)."""
    disruption = plan_disruption(snapshot, catalogs, options=options, every_command=every_command)
    inp = plan_cli.solve_input(snapshot, catalogs, options)
    provisioning = plan_cli.load_solver()(inp, namespace_labels=snapshot.namespace_labels)
    return Decisions(disruption, provisioning)
