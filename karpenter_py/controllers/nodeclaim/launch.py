"""Lifecycle phase 1, launch: create the instance and copy what the cloud resolved.

Upstream's pkg/controllers/nodeclaim/lifecycle/launch.go. The launcher guarantees one
``CloudProvider.create`` per NodeClaim UID; this phase turns its outcome into conditions,
deletion or a retry.
"""

from __future__ import annotations

from karpenter_py.controllers.nodeclaim.common import (
    DONE,
    PhaseResult,
    delete_nodeclaim,
    nodeclaim_ref,
)
from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.events import WARNING
from karpenter_py.launcher.launch import Launcher, LaunchStatus
from karpenter_py.model.api.meta import CONDITION_TRUE, CONDITION_UNKNOWN
from karpenter_py.model.api.nodeclaim import CONDITION_LAUNCHED, NodeClaim
from karpenter_py.model.labels import LABEL_HOSTNAME


def populate(nc: NodeClaim, launched: NodeClaim) -> None:
    """Merge the provider's answer into ``nc`` (upstream PopulateNodeClaimDetails).

    Label priority, lowest first: provider-resolved labels, labels implied by single-valued
    requirements, the NodeClaim's own labels (user-defined labels always win).
    """
    implied = {
        r.key: r.values[0]
        for r in nc.spec.requirements
        if r.operator == "In" and len(r.values) == 1 and r.key != LABEL_HOSTNAME
    }
    nc.metadata.labels = {**launched.metadata.labels, **implied, **nc.metadata.labels}
    nc.metadata.annotations = {**nc.metadata.annotations, **launched.metadata.annotations}
    nc.status.provider_id = launched.status.provider_id
    nc.status.image_id = launched.status.image_id or nc.status.image_id
    nc.status.capacity = dict(launched.status.capacity)
    nc.status.allocatable = dict(launched.status.allocatable)


class Launch:
    def __init__(self, deps: Deps, launcher: Launcher) -> None:
        self.deps = deps
        self.launcher = launcher

    async def reconcile(self, nc: NodeClaim) -> PhaseResult:
        if nc.status.is_true(CONDITION_LAUNCHED):
            return DONE
        outcome = await self.launcher.launch(nc)
        now = self.deps.clock.now()
        if outcome.status is LaunchStatus.LAUNCHED:
            assert outcome.nodeclaim is not None
            populate(nc, outcome.nodeclaim)
            nc.status.set_condition(CONDITION_LAUNCHED, CONDITION_TRUE, now=now)
            return DONE
        if outcome.status is LaunchStatus.DELETE:
            self.deps.recorder.record(
                nodeclaim_ref(nc),
                outcome.event_reason,
                f"NodeClaim {nc.name} event: {outcome.message}",
                event_type=WARNING,
            )
            await delete_nodeclaim(self.deps, nc, outcome.reason)
            return PhaseResult(deleted=True)
        nc.status.set_condition(
            CONDITION_LAUNCHED,
            CONDITION_UNKNOWN,
            now=now,
            reason=outcome.reason,
            message=outcome.message[:1024],
        )
        return PhaseResult(requeue_after=outcome.retry_after)
