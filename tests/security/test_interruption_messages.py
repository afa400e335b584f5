"""The interruption queue's message parser under fuzzed bodies: whatever arrives, it returns a
message or raises :class:`MessageParseError`, never anything else (an unexpected exception
leaves the message on the queue, received again and again).

Bodies: the well-formed samples of every kind (``interruption_samples``) with one to three of
their fields replaced (timestamps across the whole range a datetime holds, in any UTC offset;
strings, numbers, lists and objects where strings belong) or deleted, arbitrary JSON, and raw
text. Examples are derandomized.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from hypothesis import given, settings
from hypothesis import strategies as st

from karpenter_py.cloudprovider.aws.messages import MessageParseError, parse_message
from tests.unit.cloudprovider.aws import interruption_samples as s

SAMPLES: Final = (
    s.spot("i-0aaa"),
    s.rebalance("i-0aaa"),
    s.state_change("i-0aaa", "stopped"),
    s.capacity_reservation("i-0aaa"),
    s.scheduled_change("i-0aaa", "i-0bbb"),
)
# Where the samples carry values the parser reads.
PATHS: Final = (
    ("version",),
    ("source",),
    ("detail-type",),
    ("time",),
    ("id",),
    ("region",),
    ("account",),
    ("detail",),
    ("detail", "instance-id"),
    ("detail", "instance-action"),
    ("detail", "instance-termination-time"),
    ("detail", "state"),
    ("detail", "service"),
    ("detail", "eventTypeCategory"),
    ("detail", "eventTypeCode"),
    ("detail", "affectedEntities"),
)
DELETE: Final = object()

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
any_json = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
offsets = st.builds(
    timezone,
    st.timedeltas(
        min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
    ),
)
timestamps = st.datetimes(timezones=offsets | st.none()).map(datetime.isoformat) | st.sampled_from(
    (
        "9999-12-31T23:59:59+14:00",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00+14:00",
        "0001-01-01T00:00:00-14:00",
        "2026-13-01T12:00:00Z",
    )
)
replacements = (
    timestamps
    | any_json
    | st.just(DELETE)
    | st.from_regex(r"i-[0-9a-f]{1,17}", fullmatch=True)
    | st.lists(st.fixed_dictionaries({"entityValue": any_json}), max_size=2)
)


def mutated(sample: dict[str, Any], edits: list[tuple[tuple[str, ...], object]]) -> str:
    body = copy.deepcopy(sample)
    for path, value in edits:
        node: Any = body
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        if value is DELETE:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    return json.dumps(body)


TIME_PATHS: Final = (("time",), ("detail", "instance-termination-time"))
bodies = (
    # A timestamp in a message otherwise well formed, of the kinds that carry a time of action
    # (the parser does arithmetic on these).
    st.builds(
        mutated,
        st.sampled_from((s.spot("i-0aaa"), s.capacity_reservation("i-0aaa"))),
        st.lists(st.tuples(st.sampled_from(TIME_PATHS), timestamps), min_size=1, max_size=2),
    )
    | st.builds(
        mutated,
        st.sampled_from(SAMPLES),
        st.lists(st.tuples(st.sampled_from(PATHS), replacements), min_size=1, max_size=3),
    )
    | any_json.map(json.dumps)
    | st.text(max_size=64)
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(body=bodies)
def test_any_body_parses_or_raises_message_parse_error(body: str) -> None:
    try:
        message = parse_message(body)
    except MessageParseError as err:
        reason = err.reason
    else:
        assert all(isinstance(i, str) for i in message.instance_ids)
        return
    assert reason  # says why: the worker logs it and deletes the message
