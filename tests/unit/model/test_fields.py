"""model.fields: the one set of path-aware readers, and the rules every document follows."""

from __future__ import annotations

import pytest

from karpenter_py.model.catalog import instance_types_from_kwok_json
from karpenter_py.model.core import node_from_dict, pod_from_dict
from karpenter_py.model.fields import (
    ParseError,
    describe,
    json_bool,
    json_int,
    json_list,
    json_number,
    json_object,
    json_str,
    json_str_list,
    required_key,
    string_map,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "a boolean"),
        (3, "the number 3"),
        (0.5, "the number 0.5"),
        ("x", "the string 'x'"),
        ({}, "an object"),
        ([], "a list"),
    ],
)
def test_describe(value, text):
    assert describe(value) == text


def test_the_error_carries_path_and_problem():
    with pytest.raises(ParseError) as info:
        json_object([1], "spec.template")
    assert (info.value.path, info.value.problem) == (
        "spec.template",
        "expected an object, got a list",
    )
    assert str(info.value) == "spec.template: expected an object, got a list"
    assert isinstance(info.value, ValueError)


def test_null_is_unset_where_optional_and_a_wrong_type_where_required():
    assert json_object(None, "a") == {}
    assert json_list(None, "a") == []
    assert json_str(None, "a", "dflt") == "dflt"
    assert json_int(None, "a", 7) == 7
    assert json_number(None, "a", 1.5) == 1.5
    assert json_bool(None, "a", True) is True
    assert json_str_list(["x", None], "a") == ["x", ""]
    for read, expected in [
        (json_object, "an object"),
        (json_list, "a list"),
        (json_str, "a string"),
        (json_int, "an integer"),
        (json_number, "a number"),
        (json_str_list, "a list"),
    ]:
        with pytest.raises(ParseError) as info:
            read(None, "a", required=True)  # type: ignore[operator]
        assert str(info.value) == f"a: expected {expected}, got null"


def test_a_missing_required_key_is_missing_not_null():
    assert required_key({"k": None}, "k", "rec") is None
    with pytest.raises(ParseError) as info:
        required_key({}, "k", "rec")
    assert str(info.value) == "rec.k: required field is missing"


@pytest.mark.parametrize("read", [json_int, json_number])
def test_a_boolean_is_never_a_number(read):
    with pytest.raises(ParseError) as info:
        read(True, "n")
    assert str(info.value).endswith(", got a boolean")


def test_integers_have_an_optional_minimum():
    assert json_int(0, "replicas", minimum=0) == 0
    with pytest.raises(ParseError) as info:
        json_int(-1, "replicas", minimum=0)
    assert str(info.value) == "replicas: must be greater than or equal to 0, got -1"
    with pytest.raises(ParseError) as info:
        json_int("3", "replicas")
    assert str(info.value) == "replicas: expected an integer, got the string '3'"


def test_strings_may_be_required_nonempty():
    assert json_str("", "k") == ""
    with pytest.raises(ParseError) as info:
        json_str("", "k", nonempty=True)
    assert str(info.value) == "k: must not be empty"


def test_a_list_of_strings_names_the_bad_element():
    with pytest.raises(ParseError) as info:
        json_str_list(["a", 2], "values", required=True)
    assert str(info.value) == "values[1]: expected a string, got the number 2"
    with pytest.raises(ParseError) as info:
        json_str_list(["a", None], "values", required=True)
    assert str(info.value) == "values[1]: expected a string, got null"


def test_string_maps_say_to_quote_yaml_scalars_and_read_null_as_empty():
    assert string_map({"a": "1", "b": None}, "labels") == {"a": "1", "b": ""}
    for value, shown in [(1, "the number 1"), (True, "a boolean"), (1.5, "the number 1.5")]:
        with pytest.raises(ParseError) as info:
            string_map({"team": value}, "labels")
        assert str(info.value) == f"labels.team: expected a string, got {shown} (quote it)"


def test_every_document_reports_a_bad_label_the_same_way():
    """Pods and nodes (API JSON or YAML) and KWOK catalogs share the rule."""
    expected = "expected a string, got the number 1 (quote it)"
    with pytest.raises(ParseError) as pod:
        pod_from_dict({"metadata": {"name": "p", "labels": {"team": 1}}, "spec": {}})
    assert (pod.value.path, pod.value.problem) == ("pod.metadata.labels.team", expected)
    with pytest.raises(ParseError) as node:
        node_from_dict({"metadata": {"name": "n", "labels": {"team": 1}}})
    assert (node.value.path, node.value.problem) == ("node.metadata.labels.team", expected)
    record = {
        "name": "t",
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "1", "memory": "1Gi"},
        "offerings": [],
        "labels": {"team": 1},
    }
    with pytest.raises(ParseError) as catalog:
        instance_types_from_kwok_json([record])
    assert (catalog.value.path, catalog.value.problem) == ("catalog[0].labels.team", expected)
