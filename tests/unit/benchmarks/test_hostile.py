"""The ``bad-input`` scenario's hostile objects: their sizes, that they stay out of the workload
the runner lists, and why that matters: the empty-node invariant sees a node bought for them;
and how a refusal is judged (it must name the field and the CEL rule's message)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import hostile
from benchmarks.chaos import APP, NAMESPACE, POOL, refused
from benchmarks.invariants import Violation, empty_nodes
from karpenter_py.kube import InvalidError
from karpenter_py.model.labels import LABEL_NODEPOOL
from tests import factories
from tests.unit.fakes import FakeKube


@pytest.mark.parametrize(
    ("name", "namespace", "app"),
    [
        ("chaos-huge", hostile.NAMESPACE, "chaos-huge"),
        ("chaos-unknown-label", NAMESPACE, "chaos-unknown-label"),
        ("chaos-no-class", NAMESPACE, "chaos-no-class"),
    ],
)
def test_hostile_pods_are_outside_the_workload(name: str, namespace: str, app: str) -> None:
    pod = {p["metadata"]["name"]: p for p in hostile.pods()}[name]
    meta = pod["metadata"]
    assert (meta["namespace"], meta["labels"]["app"]) == (namespace, app)
    assert app != APP
    assert meta["labels"][hostile.HOSTILE_LABEL] == "true"
    assert len(meta["labels"]["chaos.karpenter-py.dev/long"]) == 63
    blob = meta["annotations"]["chaos.karpenter-py.dev/blob"]
    assert len(blob) == 256_000  # 250 KiB: under the apiserver's 262,144 bytes for all of them


@pytest.mark.parametrize(
    ("kind", "name", "field"),
    [
        ("NodePool", "chaos-bad-label", "spec.template.metadata.labels"),
        ("NodePool", "chaos-bad-class", "spec.template.spec.nodeClassRef.name"),
        ("NodeClaim", "chaos-bad-key", "spec.requirements[0].key"),
        ("NodeClaim", "chaos-bad-values", "spec.requirements"),
    ],
)
def test_refusals(kind: str, name: str, field: str) -> None:
    refusal = {r.name: r for r in hostile.refusals()}[name]
    assert (refusal.resource.kind, refusal.body["kind"], refusal.field) == (kind, kind, field)
    assert refusal.body["metadata"]["labels"][hostile.HOSTILE_LABEL] == "true"


def _node(name: str) -> dict[str, Any]:
    return factories.node_dict(name, labels={LABEL_NODEPOOL: POOL})


EMPTY = Violation("empty-node", "bought", "no pod runs on it and none is pending")


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param(
            [factories.pod_dict("w", node_name="used")],
            [EMPTY],
            id="the workload listed: a node for a hostile pod is empty",
        ),
        pytest.param(
            [
                factories.pod_dict("w", node_name="used"),
                factories.pod_dict("chaos-huge", namespace=hostile.NAMESPACE, pending=True),
            ],
            [],
            id="a pending hostile pod listed too would hide it",
        ),
    ],
)
def test_a_node_bought_for_hostile_pods_counts_as_empty(
    pods: list[dict[str, Any]], expected: list[Violation]
) -> None:
    assert empty_nodes([_node("used"), _node("bought")], pods) == expected


def _invalid(field: str, message: str) -> InvalidError:
    causes = [{"reason": "FieldValueInvalid", "field": field, "message": message}]
    return InvalidError(status=422, verb="create", details={"causes": causes})


RESTRICTED = 'Invalid value: "object": label domain "karpenter.sh" is restricted'


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(
            _invalid("spec.template.metadata.labels", RESTRICTED), [], id="refused, naming both"
        ),
        pytest.param(
            _invalid("spec.template.metadata", RESTRICTED),
            [
                Violation(
                    "refusal-unnamed",
                    "NodePool chaos-bad-label",
                    "spec.template.metadata.labels not in "
                    f"[('spec.template.metadata', {RESTRICTED!r})]",
                )
            ],
            id="refused, naming another field",
        ),
        pytest.param(
            None,
            [
                Violation(
                    "invalid-accepted",
                    "NodePool chaos-bad-label",
                    'spec.template.metadata.labels: label domain "karpenter.sh" is restricted',
                )
            ],
            id="accepted",
        ),
    ],
)
async def test_refused(answer: InvalidError | None, expected: list[Violation]) -> None:
    refusal = hostile.refusals()[0]
    kube = FakeKube()
    if answer is not None:
        kube.fail("create", refusal.name, answer)
    assert await refused(kube, refusal) == expected
