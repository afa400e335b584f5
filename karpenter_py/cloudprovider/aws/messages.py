"""EventBridge messages on the interruption queue, parsed into typed values (no I/O).

Every message is an EventBridge envelope (``version`` "0", ``source``, ``detail-type``,
``detail``). :func:`parse_message` turns a queue body into one of the message classes below or
raises :class:`MessageParseError`; it never raises anything else, whatever the input (the worker
deletes what does not parse, so an unexpected exception here would poison the queue instead).

A well-formed envelope of a kind Karpenter does not act on (an unknown detail-type, a Health
event for another service, an instance entering ``running``) is a :class:`NoOp`, not an error.
A known detail-type arriving from the wrong source is an error: it is not the event it claims.

:class:`QueueMessage` is the transport-neutral view of one received queue message, shared by the
SQS client (``sqs``) and the worker, which must not depend on the AWS SDK.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

SOURCE_EC2: Final = "aws.ec2"
SOURCE_HEALTH: Final = "aws.health"
DETAIL_SPOT_INTERRUPTION: Final = "EC2 Spot Instance Interruption Warning"
DETAIL_REBALANCE: Final = "EC2 Instance Rebalance Recommendation"
DETAIL_STATE_CHANGE: Final = "EC2 Instance State-change Notification"
DETAIL_CAPACITY_RESERVATION: Final = "EC2 Capacity Reservation Instance Interruption Warning"
DETAIL_HEALTH: Final = "AWS Health Event"
HEALTH_SERVICE_EC2: Final = "EC2"
HEALTH_CATEGORY_SCHEDULED_CHANGE: Final = "scheduledChange"
ENVELOPE_VERSION: Final = "0"

# The detail-types we parse, each with the only source that may send it.
KNOWN_DETAIL_TYPES: Final = {
    DETAIL_SPOT_INTERRUPTION: SOURCE_EC2,
    DETAIL_REBALANCE: SOURCE_EC2,
    DETAIL_STATE_CHANGE: SOURCE_EC2,
    DETAIL_CAPACITY_RESERVATION: SOURCE_EC2,
    DETAIL_HEALTH: SOURCE_HEALTH,
}
STOPPING_STATES: Final = frozenset({"stopping", "stopped"})
TERMINATING_STATES: Final = frozenset({"shutting-down", "terminated"})
# EC2 gives a Spot instance two minutes between the warning and the interruption.
SPOT_WARNING_LEAD: Final = timedelta(minutes=2)
# SQS caps a body at 256 KiB; anything longer did not come from EventBridge.
MAX_BODY_CHARS: Final = 262_144

_INSTANCE_ID = re.compile(r"i-[0-9a-zA-Z]{1,32}")
# The timestamps a message may carry (see _opt_time).
_EARLIEST: Final = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
_LATEST: Final = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)


class MessageKind(StrEnum):
    """Upstream's message kinds (the ``message_type`` metric label)."""

    SPOT_INTERRUPTION = "spot_interrupted"
    REBALANCE_RECOMMENDATION = "rebalance_recommendation"
    SCHEDULED_CHANGE = "scheduled_change"
    INSTANCE_STOPPED = "instance_stopped"
    INSTANCE_TERMINATED = "instance_terminated"
    CAPACITY_RESERVATION_INTERRUPTION = "capacity_reservation_interrupted"
    NO_OP = "no_op"


class MessageParseError(ValueError):
    """The body is not a well-formed interruption message; ``reason`` says what is wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Envelope:
    """The EventBridge fields every message carries (optional ones default to empty)."""

    source: str
    detail_type: str
    event_id: str = ""
    time: datetime | None = None
    region: str = ""
    account: str = ""


@dataclass(frozen=True, slots=True)
class SpotInterruption:
    envelope: Envelope
    instance_id: str
    action: str  # terminate | stop | hibernate
    action_time: datetime | None  # when EC2 will act: two minutes after the warning

    kind = MessageKind.SPOT_INTERRUPTION

    @property
    def instance_ids(self) -> tuple[str, ...]:
        return (self.instance_id,)


@dataclass(frozen=True, slots=True)
class RebalanceRecommendation:
    envelope: Envelope
    instance_id: str

    kind = MessageKind.REBALANCE_RECOMMENDATION

    @property
    def instance_ids(self) -> tuple[str, ...]:
        return (self.instance_id,)


@dataclass(frozen=True, slots=True)
class ScheduledChange:
    """An AWS Health scheduled change for EC2 (retirement, maintenance); may name several."""

    envelope: Envelope
    instance_ids: tuple[str, ...]
    event_type_code: str

    kind = MessageKind.SCHEDULED_CHANGE


@dataclass(frozen=True, slots=True)
class StateChange:
    """An instance entering stopping, stopped, shutting-down or terminated."""

    envelope: Envelope
    instance_id: str
    state: str

    @property
    def kind(self) -> MessageKind:
        if self.state in STOPPING_STATES:
            return MessageKind.INSTANCE_STOPPED
        return MessageKind.INSTANCE_TERMINATED

    @property
    def instance_ids(self) -> tuple[str, ...]:
        return (self.instance_id,)


@dataclass(frozen=True, slots=True)
class CapacityReservationInterruption:
    """A reserved (capacity block / ODCR) instance is about to be reclaimed."""

    envelope: Envelope
    instance_id: str
    action: str
    termination_time: datetime | None

    kind = MessageKind.CAPACITY_RESERVATION_INTERRUPTION

    @property
    def instance_ids(self) -> tuple[str, ...]:
        return (self.instance_id,)


@dataclass(frozen=True, slots=True)
class NoOp:
    """A well-formed message of a kind (or state, or service) Karpenter ignores."""

    envelope: Envelope
    why: str

    kind = MessageKind.NO_OP

    @property
    def instance_ids(self) -> tuple[str, ...]:
        return ()


Message = (
    SpotInterruption
    | RebalanceRecommendation
    | ScheduledChange
    | StateChange
    | CapacityReservationInterruption
    | NoOp
)


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """One received queue message: what handling needs, whatever the transport."""

    id: str
    receipt_handle: str
    body: str
    sent_at: datetime | None  # when the queue accepted it (SQS SentTimestamp)


# ----------------------------------------------------------------------------- parsing


def parse_message(body: str) -> Message:
    """The typed message in ``body``; :class:`MessageParseError` for anything malformed."""
    if not isinstance(body, str):
        raise MessageParseError(f"body is {type(body).__name__}, not text")
    if len(body) > MAX_BODY_CHARS:
        raise MessageParseError(f"body is {len(body)} characters, over {MAX_BODY_CHARS}")
    raw = _decode(body)
    obj = _object(raw, "message")
    version = obj.get("version")
    if version != ENVELOPE_VERSION:
        raise MessageParseError(f'version is {_show(version)}, want "0"')
    envelope = _envelope(obj)
    detail = _object(obj.get("detail"), "detail")
    want_source = KNOWN_DETAIL_TYPES.get(envelope.detail_type)
    if want_source is None:
        return NoOp(envelope, f"detail-type {envelope.detail_type!r} is not handled")
    if envelope.source != want_source:
        raise MessageParseError(
            f"detail-type {envelope.detail_type!r} comes from {want_source!r}, "
            f"not {envelope.source!r}"
        )
    return _PARSERS[envelope.detail_type](envelope, detail)


def _decode(body: str) -> Any:
    try:
        return json.loads(body)
    except RecursionError:
        raise MessageParseError("JSON nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, and integers over Python's digit limit
        raise MessageParseError(f"not JSON: {_clip(str(e))}") from None


def _envelope(obj: dict[str, Any]) -> Envelope:
    return Envelope(
        source=_str(obj, "source", "message"),
        detail_type=_str(obj, "detail-type", "message"),
        event_id=_opt_str(obj, "id", "message"),
        time=_opt_time(obj, "time", "message"),
        region=_opt_str(obj, "region", "message"),
        account=_opt_str(obj, "account", "message"),
    )


def _spot(envelope: Envelope, detail: dict[str, Any]) -> Message:
    instance_id = _instance_id(detail, "instance-id", "detail")
    action = _opt_str(detail, "instance-action", "detail")
    action_time = envelope.time + SPOT_WARNING_LEAD if envelope.time is not None else None
    return SpotInterruption(envelope, instance_id, action, action_time)


def _rebalance(envelope: Envelope, detail: dict[str, Any]) -> Message:
    return RebalanceRecommendation(envelope, _instance_id(detail, "instance-id", "detail"))


def _state_change(envelope: Envelope, detail: dict[str, Any]) -> Message:
    instance_id = _instance_id(detail, "instance-id", "detail")
    state = _str(detail, "state", "detail")
    if state in STOPPING_STATES or state in TERMINATING_STATES:
        return StateChange(envelope, instance_id, state)
    return NoOp(envelope, f"instance state {state!r} is not handled")


def _capacity_reservation(envelope: Envelope, detail: dict[str, Any]) -> Message:
    return CapacityReservationInterruption(
        envelope,
        instance_id=_instance_id(detail, "instance-id", "detail"),
        action=_opt_str(detail, "instance-action", "detail"),
        termination_time=_opt_time(detail, "instance-termination-time", "detail"),
    )


def _health(envelope: Envelope, detail: dict[str, Any]) -> Message:
    service = _str(detail, "service", "detail")
    category = _str(detail, "eventTypeCategory", "detail")
    code = _opt_str(detail, "eventTypeCode", "detail")
    entities = detail.get("affectedEntities", [])
    if not isinstance(entities, list):
        raise MessageParseError(f"detail.affectedEntities is {_kind(entities)}, not a list")
    ids: list[str] = []
    for i, entity in enumerate(entities):
        value = _str(_object(entity, f"detail.affectedEntities[{i}]"), "entityValue", "entity")
        # Health events can also name hosts or volumes; only instances are ours to drain.
        if _INSTANCE_ID.fullmatch(value) and value not in ids:
            ids.append(value)
    if service != HEALTH_SERVICE_EC2:
        return NoOp(envelope, f"health event for service {service!r}")
    if category != HEALTH_CATEGORY_SCHEDULED_CHANGE:
        return NoOp(envelope, f"health event category {category!r}")
    return ScheduledChange(envelope, tuple(ids), code)


_PARSERS: Final = {
    DETAIL_SPOT_INTERRUPTION: _spot,
    DETAIL_REBALANCE: _rebalance,
    DETAIL_STATE_CHANGE: _state_change,
    DETAIL_CAPACITY_RESERVATION: _capacity_reservation,
    DETAIL_HEALTH: _health,
}


# ----------------------------------------------------------------------------- field readers


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MessageParseError(f"{where} is {_kind(value)}, not an object")
    return value


def _str(obj: dict[str, Any], key: str, where: str) -> str:
    if key not in obj:
        raise MessageParseError(f"{where}.{key} is missing")
    value = obj[key]
    if not isinstance(value, str):
        raise MessageParseError(f"{where}.{key} is {_kind(value)}, not a string")
    if not value:
        raise MessageParseError(f"{where}.{key} is empty")
    return value


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MessageParseError(f"{where}.{key} is {_kind(value)}, not a string")
    return value


def _instance_id(obj: dict[str, Any], key: str, where: str) -> str:
    value = _str(obj, key, where)
    if not _INSTANCE_ID.fullmatch(value):
        raise MessageParseError(f"{where}.{key} {_clip(value)!r} is not an EC2 instance ID")
    return value


def _opt_time(obj: dict[str, Any], key: str, where: str) -> datetime | None:
    """A timestamp, in UTC. One a day or less from either end of what a datetime holds is out of
    range: the times of action computed from it (``SPOT_WARNING_LEAD`` later) must exist."""
    text = _opt_str(obj, key, where)
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise MessageParseError(f"{where}.{key} {_clip(text)!r} is not a timestamp") from None
    # EventBridge writes UTC with a Z; a zoneless time is read the same way.
    try:
        utc = parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    except OverflowError:  # the offset moves it past year 1 or 9999
        utc = None
    if utc is None or not _EARLIEST <= utc <= _LATEST:
        raise MessageParseError(f"{where}.{key} {_clip(text)!r} is out of range")
    return utc


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else _kind(value)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."
