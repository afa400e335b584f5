"""Events the disruption controller and its queue publish (each method carries its own metric
labels: ``Method.reason_label``, ``Method.consolidation_type``).

Reason strings are upstream's (``karpenter.sh`` event reasons, so ``kubectl get events
--field-selector reason=...`` filters the same); the messages are ours. Every node-level event is
published on both the Node and its NodeClaim, as upstream does, so either object's ``kubectl
describe`` shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from karpenter_py.controllers.disruption.types import Candidate, Timeout
from karpenter_py.kube.events import NORMAL, WARNING, EventRecorder, EventType, object_ref
from karpenter_py.kube.objects import KubeObject
from karpenter_py.model.api.nodeclaim import API_VERSION as NODECLAIM_API_VERSION
from karpenter_py.model.api.nodeclaim import KIND as NODECLAIM_KIND
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import API_VERSION as NODEPOOL_API_VERSION
from karpenter_py.model.api.nodepool import KIND as NODEPOOL_KIND
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.donotdisrupt import INVALID_DO_NOT_DISRUPT, do_not_disrupt_problem
from karpenter_py.model.labels import ANNOTATION_DO_NOT_DISRUPT
from karpenter_py.state.snapshot import Snapshot
from karpenter_py.state.statenode import StateNode

DISRUPTION_BLOCKED: Final = "DisruptionBlocked"
DISRUPTION_LAUNCHING: Final = "DisruptionLaunching"
DISRUPTION_WAITING_READINESS: Final = "DisruptionWaitingReadiness"
DISRUPTION_TERMINATING: Final = "DisruptionTerminating"
UNCONSOLIDATABLE: Final = "Unconsolidatable"
CONSOLIDATION_REJECTED: Final = "ConsolidationRejected"
CONSOLIDATION_CANDIDATE: Final = "ConsolidationCandidate"
# Ours: upstream only logs a consolidation timeout. Published on the NodePools concerned, like
# DisruptionBlocked, in upstream's reason style.
CONSOLIDATION_TIMED_OUT: Final = "ConsolidationTimedOut"


def invalid_do_not_disrupt(recorder: EventRecorder, snapshot: Snapshot) -> None:
    """``InvalidDoNotDisruptAnnotation`` on every pod of a managed node whose
    ``karpenter.sh/do-not-disrupt`` value is ignored (neither ``"true"`` nor a positive
    duration), de-duplicated per pod and value as upstream."""
    for sn in snapshot.nodes:
        if sn.nodeclaim is None:
            continue
        for pod in snapshot.pods_by_node.get(sn.name, ()):
            problem = do_not_disrupt_problem(pod)
            if problem is None:
                continue
            recorder.record(
                object_ref("v1", "Pod", pod.name, namespace=pod.namespace, uid=pod.uid or None),
                INVALID_DO_NOT_DISRUPT,
                problem,
                event_type=WARNING,
                dedupe_values=(pod.uid, pod.annotations[ANNOTATION_DO_NOT_DISRUPT]),
            )


def node_ref(name: str, uid: str = "") -> KubeObject:
    return object_ref("v1", "Node", name, uid=uid or None)


def nodepool_ref(np: NodePool) -> KubeObject:
    name = np.metadata.name or ""
    return object_ref(NODEPOOL_API_VERSION, NODEPOOL_KIND, name, uid=np.metadata.uid or None)


def nodeclaim_ref(nc: NodeClaim) -> KubeObject:
    return object_ref(NODECLAIM_API_VERSION, NODECLAIM_KIND, nc.name, uid=nc.metadata.uid or None)


def refs_of(node: StateNode) -> list[KubeObject]:
    """The Node and the NodeClaim behind a state node (whichever exist)."""
    out: list[KubeObject] = []
    if node.node is not None:
        out.append(node_ref(node.node.name, node.node.uid))
    if node.nodeclaim is not None:
        out.append(nodeclaim_ref(node.nodeclaim))
    return out


def publish(
    recorder: EventRecorder,
    node: StateNode,
    reason: str,
    message: str,
    *,
    event_type: EventType = NORMAL,
    dedupe: bool = True,
) -> None:
    for ref in refs_of(node):
        recorder.record(ref, reason, message, event_type=event_type, dedupe=dedupe)


def launching(
    recorder: EventRecorder, candidate: Candidate, replacements: str, reason: str
) -> None:
    publish(
        recorder,
        candidate.node,
        DISRUPTION_LAUNCHING,
        f"Launching replacement {replacements} before disrupting the node ({reason})",
    )


def waiting_readiness(recorder: EventRecorder, candidate: Candidate, replacements: str) -> None:
    publish(
        recorder,
        candidate.node,
        DISRUPTION_WAITING_READINESS,
        f"Waiting for replacement {replacements} to initialize before disrupting the node",
    )


def terminating(recorder: EventRecorder, candidate: Candidate, reason: str) -> None:
    publish(recorder, candidate.node, DISRUPTION_TERMINATING, f"Disrupting node: {reason}")


def rejected(recorder: EventRecorder, candidate: Candidate, why: str) -> None:
    publish(
        recorder,
        candidate.node,
        CONSOLIDATION_REJECTED,
        f"Disruption command rejected at validation: {why}",
        event_type=WARNING,
    )


def candidate(
    recorder: EventRecorder, candidate: Candidate, explanation: str, delay: float
) -> None:
    """The node is in a command that waits ``delay`` seconds for re-validation."""
    publish(
        recorder,
        candidate.node,
        CONSOLIDATION_CANDIDATE,
        f"Node is a disruption candidate: {explanation}; re-validating in {delay:g}s",
    )


def timed_out(recorder: EventRecorder, timeout: Timeout, nodepools: Mapping[str, NodePool]) -> None:
    """A method hit its time limit: on each NodePool concerned, with how many candidates were
    left. De-duplicated per pool and method, whatever the counts (the recorder's window)."""
    for name in timeout.nodepools:
        np = nodepools.get(name)
        if np is None:
            continue
        recorder.record(
            nodepool_ref(np),
            CONSOLIDATION_TIMED_OUT,
            timeout.explanation,
            event_type=WARNING,
            dedupe_values=(timeout.method.name,),
        )
