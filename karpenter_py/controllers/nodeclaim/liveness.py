"""Lifecycle phase 4, liveness: give up on NodeClaims that never launch or never register.

Upstream's pkg/controllers/nodeclaim/lifecycle/liveness.go. Both clocks start at the Launched
condition's lastTransitionTime: a NodeClaim whose launch keeps failing is deleted after
``launch_timeout`` (5 min), one launched whose Node never shows up after ``registration_timeout``
(15 min). Deleting frees the pods to be provisioned elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from karpenter_py.controllers.nodeclaim.common import DONE, PhaseResult, delete_nodeclaim
from karpenter_py.controllers.runtime import Deps
from karpenter_py.model.api.meta import CONDITION_TRUE
from karpenter_py.model.api.nodeclaim import CONDITION_LAUNCHED, CONDITION_REGISTERED, NodeClaim

LAUNCH_TIMEOUT = 5 * 60.0
REGISTRATION_TIMEOUT = 15 * 60.0


@dataclass(frozen=True, slots=True)
class LivenessDecision:
    delete_reason: str | None = None  # upstream metric reason
    requeue_after: float | None = None  # when to look again


def liveness_decision(
    nc: NodeClaim,
    now: datetime,
    *,
    launch_timeout: float = LAUNCH_TIMEOUT,
    registration_timeout: float = REGISTRATION_TIMEOUT,
) -> LivenessDecision:
    if nc.status.is_true(CONDITION_REGISTERED):
        return LivenessDecision()
    launched = nc.status.get_condition(CONDITION_LAUNCHED)
    if launched is None:
        return LivenessDecision()
    elapsed = (now - launched.last_transition_time).total_seconds()
    if launched.status != CONDITION_TRUE:
        if elapsed >= launch_timeout:
            return LivenessDecision(delete_reason="launch_timeout")
        return LivenessDecision(requeue_after=launch_timeout - elapsed)
    if elapsed >= registration_timeout:
        return LivenessDecision(delete_reason="registration_timeout")
    return LivenessDecision(requeue_after=registration_timeout - elapsed)


class Liveness:
    def __init__(
        self,
        deps: Deps,
        *,
        launch_timeout: float = LAUNCH_TIMEOUT,
        registration_timeout: float = REGISTRATION_TIMEOUT,
    ) -> None:
        self.deps = deps
        self.launch_timeout = launch_timeout
        self.registration_timeout = registration_timeout

    async def reconcile(self, nc: NodeClaim) -> PhaseResult:
        decision = liveness_decision(
            nc,
            self.deps.clock.now(),
            launch_timeout=self.launch_timeout,
            registration_timeout=self.registration_timeout,
        )
        if decision.delete_reason is not None:
            await delete_nodeclaim(self.deps, nc, decision.delete_reason)
            return PhaseResult(deleted=True)
        if decision.requeue_after is not None:
            return PhaseResult(requeue_after=decision.requeue_after)
        return DONE
