"""Helpers behind the API models: durations, label-key rules, omitempty output, error text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from karpenter_py.model.api.base import format_time, format_validation_error
from karpenter_py.model.api.common import (
    Taint,
    label_key_cel_rules,
    label_value_problem,
    parse_duration,
    parse_nillable_duration,
    qualified_name_problem,
    restricted_label_problem,
)
from karpenter_py.model.api.meta import Condition, set_condition
from karpenter_py.model.api.nodepool import NodePool


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("720h", timedelta(days=30)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1h30m0s", timedelta(hours=1, minutes=30)),
        ("0s", timedelta(0)),
        ("0", timedelta(0)),
        ("90s", timedelta(seconds=90)),
        ("1.5h", timedelta(minutes=90)),
        ("-2m", timedelta(minutes=-2)),
        ("+5s", timedelta(seconds=5)),
        ("300ms", timedelta(milliseconds=300)),
        ("10us", timedelta(microseconds=10)),
        ("2h45m30s", timedelta(hours=2, minutes=45, seconds=30)),
    ],
)
def test_parse_duration_matches_go(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    # Go's digits are ASCII: other Unicode digits ("\u0661" is Arabic-Indic one) are not a number;
    # nor is surrounding whitespace part of a duration.
    ["", "1d", "h", "1.2.3s", "Never", "10", "1h 30m", "-", ".s", "\u0661s", " 1s", "1s "],
)
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


# Go's time.Duration is an int64 of nanoseconds: time.ParseDuration refuses anything longer.
GO_MAX_DURATION = "2562047h47m16.854775807s"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2562047h", timedelta(hours=2562047)),
        ("-2562047h", timedelta(hours=-2562047)),
        ("9223372036854775807ns", timedelta(seconds=9223372036.854775807)),
    ],
)
def test_parse_duration_holds_what_go_time_duration_holds(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2562048h",
        "-2562048h",
        "99999999999999999999h",
        "153722868m",
        "9223372036854775808ns",
        "2562047h47m17s",
        "1" + "0" * 400 + "h",
        "9" * 1_000_001 + "h",  # past the decimal context's exponent
    ],
)
def test_parse_duration_rejects_out_of_range(text):
    message = f"invalid duration {text!r}: out of range (at most {GO_MAX_DURATION})"
    with pytest.raises(ValueError) as err:
        parse_duration(text)
    assert str(err.value) == message


def test_parse_nillable_duration():
    assert parse_nillable_duration("Never") is None
    assert parse_nillable_duration("720h") == timedelta(hours=720)


_OWN_DOMAIN = "otherwise use a label in your own domain"
_KARPENTER_SH_NODEPOOL = (
    'label domain "karpenter.sh" is restricted ({key!r}); allowed there: '
    f"karpenter.sh/capacity-type; {_OWN_DOMAIN}"
)
_KARPENTER_SH_NODECLAIM = (
    'label domain "karpenter.sh" is restricted ({key!r}); allowed there: '
    f"karpenter.sh/capacity-type, karpenter.sh/nodepool; {_OWN_DOMAIN}"
)
_NODEPOOL_KEY = (
    'label "karpenter.sh/nodepool" is restricted: Karpenter sets it to the NodePool name'
)
_HOSTNAME_KEY = 'label "kubernetes.io/hostname" is restricted: every node gets its own hostname'


@pytest.mark.parametrize(
    ("key", "allow_nodepool", "problem"),
    [
        ("example.com/team", False, None),
        ("team", False, None),
        ("karpenter.sh/capacity-type", False, None),
        ("karpenter.sh/nodepool", True, None),
        ("karpenter.sh/nodepool", False, _NODEPOOL_KEY),
        ("kubernetes.io/hostname", True, _HOSTNAME_KEY),
        ("kubernetes.io/hostname", False, _HOSTNAME_KEY),
        ("karpenter.sh/registered", True, _KARPENTER_SH_NODECLAIM),
        ("karpenter.sh/registered", False, _KARPENTER_SH_NODEPOOL),
        ("sub.karpenter.sh/x", True, _KARPENTER_SH_NODECLAIM),
        ("karpenter.sh", False, _KARPENTER_SH_NODEPOOL),
        ("topology.kubernetes.io/zone", False, None),
        ("failure-domain.beta.kubernetes.io/zone", False, None),
        ("node.kubernetes.io/anything", False, None),
        ("x.node.kubernetes.io/anything", False, None),
        ("node-restriction.kubernetes.io/team", False, None),
        # Upstream no longer restricts kubernetes.io, k8s.io or their sub-domains.
        ("kubernetes.io/team", False, None),
        ("node-role.kubernetes.io/worker", False, None),
        ("example.kubernetes.io/team", False, None),
        ("k8s.io/team", False, None),
        ("sub.k8s.io/team", True, None),
        ("kops.k8s.io/instancegroup", False, None),
        ("karpenter.k8s.aws/instance-family", False, None),
        ("karpenter.k8s.aws/ec2nodeclass", False, None),
        ("topology.k8s.aws/zone-id", False, None),
        ("karpenter.kwok.sh/instance-size", False, None),
        ("karpenter.kwok.sh/anything", False, None),
    ],
)
def test_restricted_label_problem(key, allow_nodepool, problem):
    expected = None if problem is None else problem.format(key=key)
    assert restricted_label_problem(key, allow_nodepool=allow_nodepool) == expected


def test_restricted_aws_label_lists_the_aws_well_known_keys():
    problem = restricted_label_problem("karpenter.k8s.aws/made-up", allow_nodepool=False)
    assert problem is not None
    head, allowed, tail = problem.split("; ")
    assert head == "label domain \"karpenter.k8s.aws\" is restricted ('karpenter.k8s.aws/made-up')"
    assert tail == _OWN_DOMAIN
    listed = allowed.removeprefix("allowed there: ").split(", ")
    assert listed[:4] == [
        "karpenter.k8s.aws/capacity-reservation-id",
        "karpenter.k8s.aws/capacity-reservation-interruptible",
        "karpenter.k8s.aws/capacity-reservation-type",
        "karpenter.k8s.aws/ec2nodeclass",
    ]
    assert len(listed) == 27
    assert listed == sorted(listed)


def test_cel_label_rules_are_upstreams_current_ones():
    nodepool = label_key_cel_rules("self", allow_nodepool=False)
    nodeclaim = label_key_cel_rules("self", allow_nodepool=True)
    dom = 'self.find("^([^/]+)")'
    assert [msg for _, msg in nodepool] == [
        'label domain "karpenter.sh" is restricted',
        'label domain "karpenter.k8s.aws" is restricted',
        'label "karpenter.sh/nodepool" is restricted',
        'label "kubernetes.io/hostname" is restricted',
    ]
    assert nodepool[0][0] == (
        f'self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || '
        f'!{dom}.endsWith("karpenter.sh")'
    )
    assert nodepool[1][0].startswith('self in ["karpenter.k8s.aws/capacity-reservation-id", ')
    assert nodepool[1][0].endswith(f'"] || !{dom}.endsWith("karpenter.k8s.aws")')
    assert nodepool[2:] == [
        ('self != "karpenter.sh/nodepool"', 'label "karpenter.sh/nodepool" is restricted'),
        ('self != "kubernetes.io/hostname"', 'label "kubernetes.io/hostname" is restricted'),
    ]
    assert nodeclaim == [nodepool[0], nodepool[1], nodepool[3]]
    assert not any('kubernetes.io")' in rule or 'k8s.io")' in rule for rule, _ in nodepool)


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("a", None),
        ("example.com/a-b_c.d", None),
        ("A1", None),
        ("-a", "starting and ending with an alphanumeric"),
        ("/a", "prefix before '/' must not be empty"),
        ("a/", "name part must not be empty"),
        ("UPPER.com/a", "DNS subdomain"),
        ("a" * 64, "at most 63 characters"),
        (f"{'a' * 254}/b", "DNS subdomain"),
    ],
)
def test_qualified_name_problem(key, problem):
    result = qualified_name_problem(key)
    assert (result is None) if problem is None else (result is not None and problem in result)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("", True),
        ("a", True),
        ("a.b-c_d", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("a b", False),
        ("-a", False),
    ],
)
def test_label_value_problem(value, ok):
    assert (label_value_problem(value) is None) == ok


def test_omitempty_output():
    taint = Taint(key="a", effect="NoSchedule")
    assert taint.model_dump(by_alias=True) == {"key": "a", "effect": "NoSchedule"}
    assert Taint(key="a", value="b", effect="NoSchedule").model_dump()["value"] == "b"


def test_format_time_is_utc_seconds():
    plus_two = timezone(timedelta(hours=2))
    assert (
        format_time(datetime(2024, 1, 2, 5, 4, 5, 999, tzinfo=plus_two)) == "2024-01-02T03:04:05Z"
    )


def test_set_condition_normalises_now_to_utc():
    conditions: list[Condition] = []
    plus_two = timezone(timedelta(hours=2))
    set_condition(conditions, "Ready", "True", now=datetime(2024, 1, 1, 12, tzinfo=plus_two))
    assert conditions[0].last_transition_time == datetime(2024, 1, 1, 10, tzinfo=UTC)
    set_condition(conditions, "Ready", "False", now=datetime(2024, 1, 1, 13, tzinfo=plus_two))
    assert conditions[0].last_transition_time.tzinfo == UTC
    assert conditions[0].model_dump(by_alias=True)["lastTransitionTime"] == "2024-01-01T11:00:00Z"


def test_format_validation_error_uses_manifest_paths():
    with pytest.raises(ValidationError) as info:
        NodePool.model_validate(
            {
                "spec": {
                    "template": {
                        "spec": {
                            "requirements": [{"key": "a", "operator": "In"}],
                            "nodeClassRef": {"group": "g", "kind": "K", "name": "n"},
                        }
                    }
                }
            }
        )
    assert format_validation_error(info.value) == [
        "spec.template.spec.requirements[0].values: operator In needs at least one value"
    ]
