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


@pytest.mark.parametrize("text", ["", "1d", "h", "1.2.3s", "Never", "10", "1h 30m", "-", ".s"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_parse_nillable_duration():
    assert parse_nillable_duration("Never") is None
    assert parse_nillable_duration("720h") == timedelta(hours=720)


@pytest.mark.parametrize(
    ("key", "allow_nodepool", "problem"),
    [
        ("example.com/team", False, None),
        ("team", False, None),
        ("karpenter.sh/capacity-type", False, None),
        ("karpenter.sh/nodepool", True, None),
        ("karpenter.sh/nodepool", False, "Karpenter sets it"),
        ("kubernetes.io/hostname", True, "every node gets its own hostname"),
        ("karpenter.sh/registered", True, 'label domain "karpenter.sh" is restricted'),
        ("sub.karpenter.sh/x", True, 'label domain "karpenter.sh" is restricted'),
        ("topology.kubernetes.io/zone", False, None),
        ("failure-domain.beta.kubernetes.io/zone", False, None),
        ("node.kubernetes.io/anything", False, None),
        ("x.node.kubernetes.io/anything", False, None),
        ("node-restriction.kubernetes.io/team", False, None),
        ("kubernetes.io/team", False, 'label domain "kubernetes.io" is restricted'),
        ("k8s.io/team", False, 'label domain "k8s.io" is restricted'),
        ("kops.k8s.io/instancegroup", False, None),
        ("karpenter.k8s.aws/instance-family", False, None),
        ("karpenter.k8s.aws/ec2nodeclass", False, None),
        ("karpenter.k8s.aws/made-up", False, 'label domain "karpenter.k8s.aws" is restricted'),
        ("topology.k8s.aws/zone-id", False, None),
        ("karpenter.kwok.sh/instance-size", False, None),
    ],
)
def test_restricted_label_problem(key, allow_nodepool, problem):
    result = restricted_label_problem(key, allow_nodepool=allow_nodepool)
    if problem is None:
        assert result is None
    else:
        assert result is not None
        assert problem in result


def test_cel_label_rules_cover_the_same_domains_as_python():
    nodepool_rules = {msg: rule for rule, msg in label_key_cel_rules("self", allow_nodepool=False)}
    nodeclaim_rules = {msg: rule for rule, msg in label_key_cel_rules("self", allow_nodepool=True)}
    assert set(nodepool_rules) - set(nodeclaim_rules) == {
        'label "karpenter.sh/nodepool" is restricted'
    }
    for domain in ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws"):
        assert f'label domain "{domain}" is restricted' in nodeclaim_rules
    assert (
        '"node.kubernetes.io/windows-build"'
        in nodepool_rules['label domain "kubernetes.io" is restricted']
    )
    assert 'endsWith("kops.k8s.io")' in nodepool_rules['label domain "k8s.io" is restricted']


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
