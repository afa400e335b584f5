"""Parsing interruption queue bodies: every kind, what is ignored, what is refused, and a fuzz
run that must only ever produce a message or MessageParseError."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.cloudprovider.aws.messages import (
    CapacityReservationInterruption,
    Envelope,
    Message,
    MessageKind,
    MessageParseError,
    NoOp,
    RebalanceRecommendation,
    ScheduledChange,
    SpotInterruption,
    StateChange,
    parse_message,
)
from tests.unit.cloudprovider.aws import interruption_samples as s

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EVENT_ID = "7bf73129-1428-4cd3-a780-95db273d1602"


def env(source: str, detail_type: str) -> Envelope:
    return Envelope(
        source=source,
        detail_type=detail_type,
        event_id=EVENT_ID,
        time=T,
        region=s.REGION,
        account=s.ACCOUNT,
    )


SPOT = env("aws.ec2", "EC2 Spot Instance Interruption Warning")
REBALANCE = env("aws.ec2", "EC2 Instance Rebalance Recommendation")
STATE = env("aws.ec2", "EC2 Instance State-change Notification")
CR = env("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning")
HEALTH = env("aws.health", "AWS Health Event")
CODE = "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED"


def dumps(body: Any) -> str:
    return json.dumps(body)


@pytest.mark.parametrize(
    ("body", "expected", "kind"),
    [
        (
            s.spot("i-0abc"),
            SpotInterruption(SPOT, "i-0abc", "terminate", datetime(2026, 3, 1, 12, 2, tzinfo=UTC)),
            MessageKind.SPOT_INTERRUPTION,
        ),
        (
            s.spot("i-0abc", "hibernate"),
            SpotInterruption(SPOT, "i-0abc", "hibernate", datetime(2026, 3, 1, 12, 2, tzinfo=UTC)),
            MessageKind.SPOT_INTERRUPTION,
        ),
        (
            s.rebalance("i-0def"),
            RebalanceRecommendation(REBALANCE, "i-0def"),
            MessageKind.REBALANCE_RECOMMENDATION,
        ),
        (
            s.state_change("i-1", "stopping"),
            StateChange(STATE, "i-1", "stopping"),
            MessageKind.INSTANCE_STOPPED,
        ),
        (
            s.state_change("i-1", "stopped"),
            StateChange(STATE, "i-1", "stopped"),
            MessageKind.INSTANCE_STOPPED,
        ),
        (
            s.state_change("i-1", "shutting-down"),
            StateChange(STATE, "i-1", "shutting-down"),
            MessageKind.INSTANCE_TERMINATED,
        ),
        (
            s.state_change("i-1", "terminated"),
            StateChange(STATE, "i-1", "terminated"),
            MessageKind.INSTANCE_TERMINATED,
        ),
        (
            s.state_change("i-1", "running"),
            NoOp(STATE, "instance state 'running' is not handled"),
            MessageKind.NO_OP,
        ),
        (
            s.state_change("i-1", "pending"),
            NoOp(STATE, "instance state 'pending' is not handled"),
            MessageKind.NO_OP,
        ),
        (
            s.capacity_reservation("i-9"),
            CapacityReservationInterruption(
                CR, "i-9", "terminate", datetime(2026, 3, 1, 12, 5, tzinfo=UTC)
            ),
            MessageKind.CAPACITY_RESERVATION_INTERRUPTION,
        ),
        (
            s.scheduled_change("i-1", "i-2", "i-1", "h-0host", "vol-1"),
            ScheduledChange(HEALTH, ("i-1", "i-2"), CODE),
            MessageKind.SCHEDULED_CHANGE,
        ),
        (s.scheduled_change(), ScheduledChange(HEALTH, (), CODE), MessageKind.SCHEDULED_CHANGE),
        (
            s.scheduled_change("i-1", service="S3"),
            NoOp(HEALTH, "health event for service 'S3'"),
            MessageKind.NO_OP,
        ),
        (
            s.scheduled_change("i-1", category="issue"),
            NoOp(HEALTH, "health event category 'issue'"),
            MessageKind.NO_OP,
        ),
        (
            s.envelope("aws.ec2", "EC2 AMI State Change", {"ImageId": "ami-1"}),
            NoOp(
                env("aws.ec2", "EC2 AMI State Change"),
                "detail-type 'EC2 AMI State Change' is not handled",
            ),
            MessageKind.NO_OP,
        ),
    ],
)
def test_parses(body: Any, expected: Message, kind: MessageKind) -> None:
    got = parse_message(dumps(body))
    assert got == expected
    assert got.kind == kind


def test_minimal_envelope_defaults() -> None:
    body = {
        "version": "0",
        "source": "aws.ec2",
        "detail-type": "EC2 Instance Rebalance Recommendation",
        "detail": {"instance-id": "i-5"},
    }
    assert parse_message(dumps(body)) == RebalanceRecommendation(
        Envelope("aws.ec2", "EC2 Instance Rebalance Recommendation"), "i-5"
    )


def test_spot_without_time_has_no_action_time() -> None:
    body = s.spot("i-5")
    del body["time"]
    got = parse_message(dumps(body))
    assert isinstance(got, SpotInterruption)
    assert got.action_time is None
    assert got.instance_ids == ("i-5",)


def with_(body: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """``body`` with ``path`` set to ``value`` (the sentinel ``...`` deletes it)."""
    obj = body
    for p in path[:-1]:
        obj = obj[p]
    if value is ...:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "not JSON: Expecting value: line 1 column 1 (char 0)"),
        (
            "{",
            "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ("null", "message is null, not an object"),
        ("[1]", "message is a list, not an object"),
        ('"x"', "message is a string, not an object"),
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
        (
            '{"version": ' + "9" * 5000 + "}",
            "not JSON: Exceeds the limit (4300 digits) for integer string conversion: value has "
            "5000 di...",
        ),
        (" " * 262_145, "body is 262145 characters, over 262144"),
        (dumps(with_(s.spot("i-1"), ("version",), "1")), "version is '1', want \"0\""),
        (dumps(with_(s.spot("i-1"), ("version",), 0)), 'version is a number, want "0"'),
        (dumps(with_(s.spot("i-1"), ("version",), ...)), 'version is null, want "0"'),
        (dumps(with_(s.spot("i-1"), ("source",), ...)), "message.source is missing"),
        (dumps(with_(s.spot("i-1"), ("source",), 7)), "message.source is a number, not a string"),
        (dumps(with_(s.spot("i-1"), ("detail-type",), "")), "message.detail-type is empty"),
        (dumps(with_(s.spot("i-1"), ("id",), ["x"])), "message.id is a list, not a string"),
        (dumps(with_(s.spot("i-1"), ("time",), "noon")), "message.time 'noon' is not a timestamp"),
        # Timestamps at the ends of what a datetime holds: the lead or the move to UTC overflowed
        # (OverflowError, so the message was retried forever).
        (
            dumps(with_(s.spot("i-1"), ("time",), "9999-12-31T23:59:59+14:00")),
            "message.time '9999-12-31T23:59:59+14:00' is out of range",
        ),
        (
            dumps(with_(s.spot("i-1"), ("time",), "9999-12-31T23:59:59Z")),
            "message.time '9999-12-31T23:59:59Z' is out of range",
        ),
        (
            dumps(with_(s.rebalance("i-1"), ("time",), "0001-01-01T00:00:00+14:00")),
            "message.time '0001-01-01T00:00:00+14:00' is out of range",
        ),
        (
            dumps(
                with_(
                    s.capacity_reservation("i-1"),
                    ("detail", "instance-termination-time"),
                    "0001-01-01T00:00:00.5+00:30",
                )
            ),
            "detail.instance-termination-time '0001-01-01T00:00:00.5+00:30' is out of range",
        ),
        (dumps(with_(s.spot("i-1"), ("detail",), ...)), "detail is null, not an object"),
        (dumps(with_(s.spot("i-1"), ("detail",), [])), "detail is a list, not an object"),
        (
            dumps(with_(s.spot("i-1"), ("source",), "aws.health")),
            "detail-type 'EC2 Spot Instance Interruption Warning' comes from 'aws.ec2', "
            "not 'aws.health'",
        ),
        (
            dumps(with_(s.scheduled_change("i-1"), ("source",), "aws.ec2")),
            "detail-type 'AWS Health Event' comes from 'aws.health', not 'aws.ec2'",
        ),
        (
            dumps(with_(s.spot("i-1"), ("detail", "instance-id"), ...)),
            "detail.instance-id is missing",
        ),
        (
            dumps(with_(s.spot("i-1"), ("detail", "instance-id"), True)),
            "detail.instance-id is a boolean, not a string",
        ),
        (
            dumps(with_(s.rebalance("i-1"), ("detail", "instance-id"), "node-1")),
            "detail.instance-id 'node-1' is not an EC2 instance ID",
        ),
        (
            dumps(with_(s.spot("i-1"), ("detail", "instance-action"), 3)),
            "detail.instance-action is a number, not a string",
        ),
        (
            dumps(with_(s.state_change("i-1", "stopped"), ("detail", "state"), None)),
            "detail.state is null, not a string",
        ),
        (
            dumps(with_(s.state_change("i-1", "x"), ("detail", "state"), ...)),
            "detail.state is missing",
        ),
        (
            dumps(
                with_(
                    s.capacity_reservation("i-1"), ("detail", "instance-termination-time"), "soon"
                )
            ),
            "detail.instance-termination-time 'soon' is not a timestamp",
        ),
        (
            dumps(with_(s.scheduled_change("i-1"), ("detail", "service"), ...)),
            "detail.service is missing",
        ),
        (
            dumps(with_(s.scheduled_change("i-1"), ("detail", "eventTypeCategory"), {})),
            "detail.eventTypeCategory is an object, not a string",
        ),
        (
            dumps(with_(s.scheduled_change("i-1"), ("detail", "affectedEntities"), {})),
            "detail.affectedEntities is an object, not a list",
        ),
        (
            dumps(with_(s.scheduled_change("i-1"), ("detail", "affectedEntities"), ["i-1"])),
            "detail.affectedEntities[0] is a string, not an object",
        ),
        (
            dumps(with_(s.scheduled_change("i-1"), ("detail", "affectedEntities"), [{}])),
            "entity.entityValue is missing",
        ),
    ],
)
def test_refuses(text: str, reason: str) -> None:
    with pytest.raises(MessageParseError) as info:
        parse_message(text)
    assert info.value.reason == reason
    assert str(info.value) == reason


FUZZ_IDS = ("i-0aaa", "i-0bbb", "i-0ccc")


def test_fuzz_only_messages_or_parse_errors() -> None:
    """10,000 generated bodies: each parses or raises MessageParseError with a reason, and the
    mix really exercises both sides (so the generator is not silently all-valid or all-junk)."""
    bodies = s.fuzz_bodies(10_000, seed=20261202, ids=FUZZ_IDS)
    kinds: dict[str, int] = {}
    reasons: set[bool] = set()
    errors = 0
    for body in bodies:
        try:
            msg = parse_message(body)
        except MessageParseError as e:
            reasons.add(bool(e.reason))
            errors += 1
            continue
        kinds[msg.kind] = kinds.get(msg.kind, 0) + 1
        # Text mutations may rewrite an ID into another well-formed one; never into junk.
        assert all(re.fullmatch(r"i-[0-9a-zA-Z]{1,32}", i) for i in msg.instance_ids)
    assert len(bodies) == 10_000
    assert reasons == {True}  # every refusal says why
    assert errors > 5_000
    assert set(kinds) == set(MessageKind)
    assert sum(kinds.values()) + errors == 10_000


def test_fuzz_is_deterministic() -> None:
    assert s.fuzz_bodies(50, seed=7, ids=FUZZ_IDS) == s.fuzz_bodies(50, seed=7, ids=FUZZ_IDS)
