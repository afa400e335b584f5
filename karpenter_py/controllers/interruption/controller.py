"""The interruption worker: long-polls the queue and acts on EC2 / AWS Health events.

Each received batch (up to 10 messages) is handled in parallel. Per message:

* it does not parse: log the message id and the reason, delete it (retrying cannot help);
* it parses: act, then delete it;
* acting failed (the API refused a NodeClaim delete): log and leave it on the queue, so it comes
  back after the visibility timeout and is retried.

Acting, as upstream does: the NodeClaim whose providerID names the instance is deleted (the
termination controllers then taint, drain and terminate it) for a spot interruption, an AWS
Health scheduled change, a capacity-reservation interruption and an instance stopping or
terminating; a spot interruption also marks its (type, zone, spot) offering unavailable so the
replacement avoids the pool being reclaimed. A rebalance recommendation only records an event,
unless ``replace_on_rebalance`` (not upstream; aws#2813) makes it delete the NodeClaim too.
Instances without a NodeClaim are not ours: their messages are deleted without action.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from enum import StrEnum
from typing import Final, Protocol

from karpenter_py.aio.backoff import Backoff
from karpenter_py.cloudprovider.aws.messages import (
    CapacityReservationInterruption,
    Message,
    MessageParseError,
    NoOp,
    QueueMessage,
    RebalanceRecommendation,
    ScheduledChange,
    SpotInterruption,
    StateChange,
    parse_message,
)
from karpenter_py.controllers.runtime import Deps, Watch, wait_synced
from karpenter_py.kube.errors import ConflictError, NotFoundError
from karpenter_py.kube.events import NORMAL, WARNING, EventType, object_ref
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.launcher.launch import UnavailableOfferings
from karpenter_py.model.api.nodeclaim import API_VERSION, KIND, NodeClaim
from karpenter_py.model.core import Node
from karpenter_py.model.labels import (
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.state.cluster import Cluster

log = logging.getLogger("karpenter.interruption")

API_TIMEOUT: Final = 10.0  # one NodeClaim delete; longer means the apiserver is in trouble


class Reason:
    """Upstream's interruption event reasons (provider-aws ``interruption/events``)."""

    SPOT_INTERRUPTED: Final = "SpotInterrupted"
    SPOT_REBALANCE_RECOMMENDATION: Final = "SpotRebalanceRecommendation"
    INSTANCE_UNHEALTHY: Final = "InstanceUnhealthy"
    INSTANCE_STOPPING: Final = "InstanceStopping"
    INSTANCE_TERMINATING: Final = "InstanceTerminating"
    CAPACITY_RESERVATION_INTERRUPTED: Final = "CapacityReservationInstanceInterrupted"
    TERMINATING_ON_INTERRUPTION: Final = "TerminatingOnInterruption"


class Outcome(StrEnum):
    """What became of one queue message."""

    UNPARSEABLE = "unparseable"  # deleted without acting
    HANDLED = "handled"  # acted on (or nothing to do), then deleted
    FAILED = "failed"  # acting failed: left on the queue to reappear
    DELETE_FAILED = "delete_failed"  # handled, but the queue refused the delete


class QueuePort(Protocol):
    """What the worker needs from the queue (``cloudprovider.aws.sqs.InterruptionQueue``)."""

    async def receive(self) -> list[QueueMessage]: ...

    async def delete(self, msg: QueueMessage) -> None: ...


class InstanceIndex:
    """NodeClaims by EC2 instance ID (the last segment of ``aws:///<zone>/<instance-id>``).

    Rebuilt only when the cluster's generation moved since the last lookup, so a burst of
    messages between two informer events costs one pass over the NodeClaims, not one per message.
    """

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._generation = -1
        self._names: dict[str, list[str]] = {}

    def nodeclaims(self, instance_id: str) -> list[NodeClaim]:
        if self._cluster.generation != self._generation:
            self._rebuild()
        claims = self._cluster.nodeclaims
        return [claims[n] for n in self._names.get(instance_id, ()) if n in claims]

    def _rebuild(self) -> None:
        names: dict[str, list[str]] = {}
        for name, nc in self._cluster.nodeclaims.items():
            iid = instance_id_of(nc.status.provider_id)
            if iid:
                names.setdefault(iid, []).append(name)
        self._names = names
        self._generation = self._cluster.generation


def instance_id_of(provider_id: str) -> str:
    """``i-0abc`` from ``aws:///us-west-2a/i-0abc`` ("" when there is no ID)."""
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if provider_id else ""


class Interruption:
    name = "interruption"

    def __init__(
        self,
        deps: Deps,
        queue: QueuePort,
        unavailable: UnavailableOfferings,
        *,
        replace_on_rebalance: bool = False,
        backoff: Backoff | None = None,
    ) -> None:
        self.deps = deps
        self.queue = queue
        self.unavailable = unavailable
        self.replace_on_rebalance = replace_on_rebalance
        self.backoff = backoff if backoff is not None else Backoff(initial=1.0, maximum=60.0)
        self.index = InstanceIndex(deps.cluster)
        self.outcomes: dict[Outcome, int] = dict.fromkeys(Outcome, 0)

    # ------------------------------------------------------------------ loop
    def watches(self) -> Sequence[Watch]:
        return ()  # woken by its queue's messages, not by the cluster

    async def run(self) -> None:
        """Poll and handle forever; owned by the manager's leader-gated TaskGroup. Acts only on a
        complete view: an instance not in a half-listed cache is not "unknown"."""
        await wait_synced(self.deps.cluster)
        while True:
            await self.poll_once()

    async def poll_once(self) -> list[Outcome]:
        """One receive and the handling of what it returned. A failed receive is logged and
        followed by a backoff sleep (the queue missing, credentials, throttling)."""
        try:
            batch = await self.queue.receive()
        except Exception as e:
            delay = self.backoff.next()
            log.warning(
                "receiving from the interruption queue failed",
                extra={
                    "error": str(e),
                    "code": getattr(e, "code", ""),
                    "retry_in": round(delay, 2),
                    "attempt": self.backoff.attempts,
                },
            )
            await self.deps.clock.sleep(delay)
            return []
        self.backoff.reset()
        return await self.handle_batch(batch)

    async def handle_batch(self, batch: list[QueueMessage]) -> list[Outcome]:
        """Every message in parallel; one failing never cancels the others."""
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._guarded(m)) for m in batch]
        return [t.result() for t in tasks]

    async def _guarded(self, msg: QueueMessage) -> Outcome:
        try:
            outcome = await self.handle(msg)
        except Exception:
            log.exception("interruption message handling crashed", extra={"message_id": msg.id})
            outcome = Outcome.FAILED
        self.outcomes[outcome] += 1
        return outcome

    # ------------------------------------------------------------------ one message
    async def handle(self, msg: QueueMessage) -> Outcome:
        try:
            parsed = parse_message(msg.body)
        except MessageParseError as e:
            log.warning(
                "deleting an unparseable interruption message",
                extra={"message_id": msg.id, "reason": e.reason},
            )
            return await self._delete(msg, Outcome.UNPARSEABLE)
        if self.deps.metrics is not None:
            self.deps.metrics.interruption_received_messages.labels(message_type=parsed.kind).inc()
        try:
            await self.act(parsed)
        except Exception as e:
            log.error(
                "handling an interruption message failed; it will reappear and be retried",
                extra={"message_id": msg.id, "kind": str(parsed.kind), "error": str(e)},
            )
            return Outcome.FAILED
        return await self._delete(msg, Outcome.HANDLED)

    async def _delete(self, msg: QueueMessage, outcome: Outcome) -> Outcome:
        try:
            await self.queue.delete(msg)
        except Exception as e:
            # Handling is idempotent: the message reappears and is handled again, harmlessly.
            log.warning(
                "deleting an interruption message failed",
                extra={"message_id": msg.id, "error": str(e)},
            )
            return Outcome.DELETE_FAILED
        if self.deps.metrics is not None:
            self.deps.metrics.interruption_deleted_messages.inc()
            if msg.sent_at is not None:
                waited = (self.deps.clock.now() - msg.sent_at).total_seconds()
                self.deps.metrics.interruption_message_queue_duration.observe(max(0.0, waited))
        return outcome

    async def act(self, msg: Message) -> None:
        """Act on every NodeClaim the message names; the first failure is raised after all
        were tried (a scheduled change can name many instances)."""
        if isinstance(msg, NoOp):
            return
        failure: Exception | None = None
        for instance_id in msg.instance_ids:
            for nc in self.index.nodeclaims(instance_id):
                try:
                    await self._act_on(msg, nc)
                except Exception as e:
                    failure = failure or e
        if failure is not None:
            raise failure

    async def _act_on(self, msg: Message, nc: NodeClaim) -> None:
        node = self.deps.cluster.node_for_provider_id(nc.status.provider_id)
        self._notify(msg, nc, node)
        if isinstance(msg, SpotInterruption):
            self._mark_unavailable(msg, nc, CAPACITY_TYPE_SPOT)
        elif isinstance(msg, CapacityReservationInterruption):
            self._mark_unavailable(msg, nc, CAPACITY_TYPE_RESERVED)
        if not self.deletes(msg):
            return
        if nc.metadata.deletion_timestamp is not None:
            return  # already terminating: the termination controllers own it
        await self._delete_nodeclaim(msg, nc, node)

    def deletes(self, msg: Message) -> bool:
        """Whether this kind of message deletes the NodeClaim it names."""
        if isinstance(msg, RebalanceRecommendation):
            return self.replace_on_rebalance
        return not isinstance(msg, NoOp)

    def _mark_unavailable(self, msg: Message, nc: NodeClaim, capacity_type: str) -> None:
        labels = nc.metadata.labels
        instance_type = labels.get(LABEL_INSTANCE_TYPE, "")
        zone = labels.get(LABEL_TOPOLOGY_ZONE, "")
        if not instance_type or not zone:
            return
        self.unavailable.mark_unavailable(instance_type, zone, capacity_type)
        log.info(
            "marked offering unavailable after an interruption",
            extra={
                "instance_type": instance_type,
                "zone": zone,
                "capacity_type": capacity_type,
                "kind": str(msg.kind),
            },
        )

    async def _delete_nodeclaim(self, msg: Message, nc: NodeClaim, node: Node | None) -> None:
        try:
            async with asyncio.timeout(API_TIMEOUT):
                await self.deps.client.delete(NODECLAIMS, nc.name, uid=nc.metadata.uid or None)
        except (NotFoundError, ConflictError):
            return  # gone already, or a same-named successor we must not touch
        kind = str(msg.kind)
        log.info(
            "deleting nodeclaim on interruption",
            extra={"nodeclaim": nc.name, "node": node.name if node else "", "kind": kind},
        )
        text = f"Deleting the NodeClaim ahead of the interruption ({kind})"
        self._record(nc, node, Reason.TERMINATING_ON_INTERRUPTION, text, WARNING)
        if self.deps.metrics is not None:
            labels = nc.metadata.labels
            self.deps.metrics.nodeclaims_disrupted.labels(
                reason=kind,
                nodepool=labels.get(LABEL_NODEPOOL, ""),
                capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
            ).inc()

    # ------------------------------------------------------------------ events
    def _notify(self, msg: Message, nc: NodeClaim, node: Node | None) -> None:
        reason, text, type_ = _event_for(msg)
        if reason:
            self._record(nc, node, reason, text, type_)

    def _record(
        self, nc: NodeClaim, node: Node | None, reason: str, text: str, type_: EventType
    ) -> None:
        self.deps.recorder.record(
            object_ref(API_VERSION, KIND, nc.name, uid=nc.metadata.uid or None),
            reason,
            text,
            event_type=type_,
        )
        if node is not None:
            self.deps.recorder.record(
                object_ref("v1", "Node", node.name, uid=node.uid or None),
                reason,
                text,
                event_type=type_,
            )


def _event_for(msg: Message) -> tuple[str, str, EventType]:
    """The event a message records on its NodeClaim and Node ("" reason: none)."""
    if isinstance(msg, SpotInterruption):
        return Reason.SPOT_INTERRUPTED, "EC2 sent a spot interruption warning", WARNING
    if isinstance(msg, RebalanceRecommendation):
        return (
            Reason.SPOT_REBALANCE_RECOMMENDATION,
            "EC2 sent a rebalance recommendation (elevated risk of spot interruption)",
            NORMAL,
        )
    if isinstance(msg, ScheduledChange):
        code = f" ({msg.event_type_code})" if msg.event_type_code else ""
        return Reason.INSTANCE_UNHEALTHY, f"AWS Health scheduled a change{code}", WARNING
    if isinstance(msg, StateChange):
        reason = (
            Reason.INSTANCE_STOPPING
            if msg.kind == "instance_stopped"
            else Reason.INSTANCE_TERMINATING
        )
        return reason, f"Instance is {msg.state}", WARNING
    if isinstance(msg, CapacityReservationInterruption):
        return (
            Reason.CAPACITY_RESERVATION_INTERRUPTED,
            "EC2 is reclaiming the capacity reservation this instance runs in",
            WARNING,
        )
    return "", "", NORMAL
