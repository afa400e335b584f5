"""Every metric the shipped Grafana dashboards query is one the controller registers, so renaming
a metric without its panels fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.obs.metrics import Metrics
from tests.helmtool import CHART

DASHBOARDS = sorted((CHART / "dashboards").glob("*.json"))

# PromQL words that are not metric names: aggregation modifiers, set and comparison operators.
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")  # label matchers (strings already gone)
_RANGE = re.compile(r"\[[^\]]*\]")  # range and subquery selectors: [5m], [$__rate_interval]
_GROUPING = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)"
)  # label lists of aggregations and vector matching
_OFFSET = re.compile(r"\boffset\s+-?\S+")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: what is left once strings, label matchers,
    ranges, grouping label lists and offsets are removed, minus function names (an identifier
    followed by a parenthesis), keywords and numbers."""
    text = _STRING.sub("", expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    text = _OFFSET.sub("", text)
    out = set()
    for m in _IDENT.finditer(text):
        rest = text[m.end() :].lstrip()
        if rest.startswith("(") or m.group() in _KEYWORDS:
            continue
        out.add(m.group())
    return out


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        pytest.param("karpenter_cluster_state_node_count", {"karpenter_cluster_state_node_count"}),
        pytest.param(
            'sum by (nodepool) (karpenter_nodepools_hourly_price{nodepool=~"$nodepool"}) * 730',
            {"karpenter_nodepools_hourly_price"},
            id="aggregation, matcher, number",
        ),
        pytest.param(
            "histogram_quantile(0.99, sum by (le, method) "
            "(rate(karpenter_cloudprovider_duration_seconds_bucket[$__rate_interval])))",
            {"karpenter_cloudprovider_duration_seconds_bucket"},
            id="histogram quantile",
        ),
        pytest.param(
            "sum(rate(a_sum[5m])) / sum(rate(a_count[5m] offset 1h)) and on (x) b unless c",
            {"a_sum", "a_count", "b", "c"},
            id="operators, vector matching, offset",
        ),
        pytest.param(
            'count(up{job="kube-state-metrics", pod=~"a{1}"})', {"up"}, id="braces in a string"
        ),
    ],
)
def test_metric_names_are_extracted_from_promql(expr: str, want: set[str]) -> None:
    assert metric_names(expr) == want


@pytest.mark.parametrize(
    ("name", "known"),
    [
        ("karpenter_cloudprovider_duration_seconds_bucket", True),  # histogram
        ("karpenter_nodes_termination_duration_seconds_count", True),  # summary
        ("karpenter_scheduler_unschedulable_pods_count", True),  # a gauge named *_count
        ("karpenter_nodes_created_total", True),  # counter
        ("karpenter_nodes_hourly_price_bucket", False),  # a gauge has no buckets
        ("karpenter_nodes_created", False),  # a counter is exposed with _total only
    ],
)
def test_sample_names_know_the_suffixes_of_each_metric_type(name: str, known: bool) -> None:
    assert (name in Metrics().sample_names()) is known


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", ())]
    for var in dashboard.get("templating", {}).get("list", ()):
        query = var.get("query")
        if isinstance(query, dict) and (m := _LABEL_VALUES.match(query["query"])):
            exprs.append(m.group(1))
    return exprs


def test_there_are_a_capacity_and_a_controller_dashboard() -> None:
    assert [p.name for p in DASHBOARDS] == ["capacity.json", "controller.json"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_queried_metric_is_registered(path: Path) -> None:
    dashboard = json.loads(path.read_text())
    exprs = _exprs(dashboard)
    assert all(p["targets"] for p in dashboard["panels"])  # no panel without a query
    known = Metrics().sample_names()
    unknown = {(expr, name) for expr in exprs for name in metric_names(expr) if name not in known}
    assert unknown == set()
