"""Interruption queue bodies for tests: well-formed samples of every kind and a deterministic
fuzzer that mutates them (field deletions, type swaps, truncation, random bytes, huge numbers,
nested junk). Shared by the parser's unit tests and the worker's moto test."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Sequence
from typing import Any

TIME = "2026-03-01T12:00:00Z"
ACCOUNT = "123456789012"
REGION = "us-west-2"

Body = dict[str, Any]


def envelope(source: str, detail_type: str, detail: Any, **extra: Any) -> Body:
    return {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": detail_type,
        "source": source,
        "account": ACCOUNT,
        "time": TIME,
        "region": REGION,
        "resources": [f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1"],
        "detail": detail,
        **extra,
    }


def spot(instance_id: str, action: str = "terminate") -> Body:
    return envelope(
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        {"instance-id": instance_id, "instance-action": action},
    )


def rebalance(instance_id: str) -> Body:
    return envelope(
        "aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": instance_id}
    )


def state_change(instance_id: str, state: str) -> Body:
    return envelope(
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"instance-id": instance_id, "state": state},
    )


def capacity_reservation(instance_id: str) -> Body:
    return envelope(
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
        {
            "instance-id": instance_id,
            "instance-action": "terminate",
            "instance-termination-time": "2026-03-01T12:05:00Z",
            "availability-zone-id": "usw2-az1",
            "instance-lifecycle": "capacity-block",
        },
    )


def scheduled_change(
    *instance_ids: str, service: str = "EC2", category: str = "scheduledChange"
) -> Body:
    return envelope(
        "aws.health",
        "AWS Health Event",
        {
            "eventArn": f"arn:aws:health:{REGION}::event/EC2/AWS_EC2_X/abc",
            "service": service,
            "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
            "eventTypeCategory": category,
            "startTime": "Sat, 07 Mar 2026 12:00:00 GMT",
            "eventDescription": [{"language": "en_US", "latestDescription": "retiring"}],
            "affectedEntities": [{"entityValue": i} for i in instance_ids],
        },
    )


STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")
DETAIL_TYPES = (
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("aws.ec2", "EC2 Instance State-change Notification"),
    ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
    ("aws.health", "AWS Health Event"),
    ("aws.ec2", "EC2 AMI State Change"),
    ("aws.s3", "Object Created"),
)


def valid_sample(rng: random.Random, ids: Sequence[str]) -> Body:
    """One well-formed message of a random kind about instances drawn from ``ids``."""
    pick = rng.randrange(6)
    iid = rng.choice(ids)
    if pick == 0:
        return spot(iid)
    if pick == 1:
        return rebalance(iid)
    if pick == 2:
        return state_change(iid, rng.choice(STATES))
    if pick == 3:
        return capacity_reservation(iid)
    if pick == 4:
        return scheduled_change(*rng.sample(list(ids), k=min(len(ids), rng.randint(1, 3))))
    return scheduled_change(iid, service=rng.choice(("EC2", "S3")), category="issue")


# ----------------------------------------------------------------------------- mutations

JUNK: tuple[Any, ...] = (None, 0, -1, 1.5, True, False, "", "x", [], {}, [1, "a"], {"a": 1})


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((*prefix, i))
            out.extend(_paths(v, (*prefix, i)))
    return out


def _parent(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path[:-1]:
        obj = obj[p]
    return obj


def _junk(rng: random.Random) -> Any:
    """A junk value, copied: mutations later write into it and must not touch ``JUNK``."""
    return copy.deepcopy(rng.choice(JUNK))


def _nested(rng: random.Random, depth: int) -> Any:
    value: Any = _junk(rng)
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def _delete(rng: random.Random, body: Body) -> None:
    path = rng.choice(_paths(body))
    parent = _parent(body, path)
    del parent[path[-1]]


def _swap(rng: random.Random, body: Body) -> None:
    path = rng.choice(_paths(body))
    _parent(body, path)[path[-1]] = _junk(rng)


def _nest(rng: random.Random, body: Body) -> None:
    path = rng.choice(_paths(body))
    _parent(body, path)[path[-1]] = _nested(rng, rng.randint(1, 60))


def _retarget(rng: random.Random, body: Body) -> None:
    """A valid body wearing another kind's source / detail-type (or version)."""
    roll = rng.random()
    if roll < 0.4:
        body["source"], body["detail-type"] = rng.choice(DETAIL_TYPES)
    elif roll < 0.7:
        body["source"] = rng.choice(("aws.ec2", "aws.health", "aws.sqs", "AWS.EC2"))
    else:
        body["version"] = rng.choice(("1", "", "00", 0))


def _id(rng: random.Random, body: Body) -> None:
    detail = body.get("detail")
    if isinstance(detail, dict):
        detail["instance-id"] = rng.choice(("i-", "I-0abc", "i-0abc/x", "", "i-" + "a" * 40))


STRUCTURAL: tuple[Callable[[random.Random, Body], None], ...] = (
    _delete,
    _swap,
    _nest,
    _retarget,
    _id,
)


def _text_mutation(rng: random.Random, text: str) -> str:
    roll = rng.randrange(7)
    if roll == 0:  # truncated
        return text[: rng.randrange(len(text))]
    if roll == 1:  # a huge number in place of a string value
        digits = "9" * rng.choice((20, 400, 5000))
        return (
            text.replace('"0"', digits, 1)
            if rng.random() < 0.5
            else text.replace(f'"{TIME}"', f"1e{rng.choice((308, 999, 99999))}", 1)
        )
    if roll == 2:  # random characters spliced in
        at = rng.randrange(len(text) + 1)
        junk = "".join(chr(rng.randint(0x20, 0x2FF)) for _ in range(rng.randint(1, 8)))
        return text[:at] + junk + text[at:]
    if roll == 3:  # a character flipped
        at = rng.randrange(len(text))
        return text[:at] + chr(rng.randint(0x20, 0x7E)) + text[at + 1 :]
    if roll == 4:  # deep nesting, past the JSON decoder's recursion limit
        depth = rng.choice((100, 2000, 5000))
        return "[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth
    if roll == 5:  # another JSON value altogether
        return rng.choice(("null", "[]", "1", '"x"', "true", "{}", "[" + text + "]"))
    return text + rng.choice(("}", ",", " junk", "\x00"))


def random_text(rng: random.Random) -> str:
    """Random bytes read as Latin-1 (every byte is a character), some of it printable."""
    raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    return raw.decode("latin-1")


def fuzz_bodies(n: int, *, seed: int, ids: Sequence[str]) -> list[str]:
    """``n`` bodies: about a fifth well-formed, the rest mutated or random."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n):
        body = valid_sample(rng, ids)
        roll = rng.random()
        if roll < 0.2:
            out.append(json.dumps(body))
            continue
        if roll < 0.3:
            out.append(random_text(rng))
            continue
        mutated = copy.deepcopy(body)
        for _ in range(rng.randint(1, 3)):
            rng.choice(STRUCTURAL)(rng, mutated)
        text = json.dumps(mutated)
        if roll > 0.65:
            text = _text_mutation(rng, text)
        out.append(text)
    return out
