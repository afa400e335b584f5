"""The CRDs' restricted-label CEL rules as the real apiserver evaluates them (upstream's current
rules: only the karpenter.sh domain, karpenter.sh/nodepool and kubernetes.io/hostname, plus the
AWS CRD's karpenter.k8s.aws domain, are restricted), and the pydantic model agreeing with them.

Each case is a server-side dry-run create of a NodePool, so nothing is left behind."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from karpenter_py.kube import NODEPOOLS, InvalidError, KubeClient
from karpenter_py.model.api.base import format_validation_error
from karpenter_py.model.api.nodepool import NodePool
from tests.cluster.harness import nodepool, prepared_client, unique
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

LABELS = "spec.template.metadata.labels"
KEY0 = "spec.template.spec.requirements[0].key"
REQS = "spec.template.spec.requirements"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def _req(key: str) -> list[dict[str, Any]]:
    return [{"key": key, "operator": "Exists"}]


# (template labels, requirements, the (field, message) causes the apiserver reports)
CASES: list[tuple[Mapping[str, str], Sequence[Mapping[str, Any]], list[tuple[str, str]]]] = [
    ({"kubernetes.io/team": "a"}, (), []),
    ({"node-role.kubernetes.io/worker": ""}, (), []),
    ({"example.kubernetes.io/team": "a", "sub.k8s.io/team": "b", "k8s.io/x": "c"}, (), []),
    ({"karpenter.sh/capacity-type": "spot"}, (), []),
    ({}, _req("kubernetes.io/team"), []),
    ({}, _req("example.k8s.io/team"), []),
    (
        {"karpenter.sh/team": "a"},
        (),
        [(LABELS, 'Invalid value: label domain "karpenter.sh" is restricted')],
    ),
    (
        {"karpenter.sh/nodepool": "a"},
        (),
        [(LABELS, 'Invalid value: label "karpenter.sh/nodepool" is restricted')],
    ),
    (
        {"kubernetes.io/hostname": "a"},
        (),
        [(LABELS, 'Invalid value: label "kubernetes.io/hostname" is restricted')],
    ),
    (
        {"karpenter.k8s.aws/team": "a"},
        (),
        [(LABELS, 'Invalid value: label domain "karpenter.k8s.aws" is restricted')],
    ),
    (
        {},
        _req("karpenter.sh/team"),
        [
            (
                KEY0,
                'Invalid value: "karpenter.sh/team": label domain "karpenter.sh" is restricted',
            )
        ],
    ),
    (
        {},
        _req("kubernetes.io/hostname"),
        [
            (
                KEY0,
                'Invalid value: "kubernetes.io/hostname": '
                'label "kubernetes.io/hostname" is restricted',
            )
        ],
    ),
    (
        {},
        _req("karpenter.sh/nodepool"),
        [(REQS, 'Invalid value: label "karpenter.sh/nodepool" is restricted')],
    ),
]


def _model_problems(body: Mapping[str, Any]) -> list[str]:
    try:
        NodePool.model_validate(body)
    except ValidationError as err:
        return format_validation_error(err)
    return []


@pytest.mark.parametrize(("labels", "requirements", "causes"), CASES)
async def test_restricted_label_rules_on_the_apiserver(
    client: KubeClient,
    labels: Mapping[str, str],
    requirements: Sequence[Mapping[str, Any]],
    causes: list[tuple[str, str]],
) -> None:
    body = nodepool(unique("labels"), template_labels=labels, requirements=requirements)
    got: list[tuple[str, str]] = []
    try:
        await client.create(NODEPOOLS, body, dry_run=True)
    except InvalidError as err:
        got = [(str(c.get("field")), str(c.get("message"))) for c in err.causes]
    assert got == causes
    # The Python model (what `plan` and the controllers check) agrees: it fails exactly when
    # the apiserver does, naming the same field.
    problems = _model_problems(body)
    assert [p.split(": ", 1)[0] for p in problems] == [field for field, _ in causes]
