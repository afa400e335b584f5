"""Hostile input for the chaos suite's ``bad-input`` scenario (issue 17), as plain objects.

Three kinds: objects the apiserver must refuse (each with the field and the CRD's CEL message
its refusal must name), a NodePool that validates but names a KWOKNodeClass that does not
exist, and pods no node can take (1000 CPUs; an unknown required node label; the pool without
its class), each carrying a ~250 KB annotation and 63-character label values. Every object is
labelled :data:`HOSTILE_LABEL` so the run's teardown finds them. Nothing here talks to the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from benchmarks.e2e import deployment
from karpenter_py.kube.resources import NODECLAIMS, NODEPOOLS, Resource
from karpenter_py.model.labels import LABEL_NODEPOOL
from tests.cluster.harness import nodeclaim, nodepool

HOSTILE_LABEL: Final = "chaos.karpenter-py.dev/hostile"
NAMESPACE: Final = "chaos-hostile"  # besides ``default``, where the workload runs
MISSING_CLASS_POOL: Final = "chaos-missing-class"
MISSING_CLASS: Final = "chaos-missing"
ANNOTATION_BYTES: Final = 250 * 1024  # under the apiserver's 256 KiB for all annotations
LONG_VALUE: Final = "v" * 63  # the longest label value the apiserver takes
UNKNOWN_LABEL: Final = "chaos.karpenter-py.dev/nowhere"

_MARK: Final = {HOSTILE_LABEL: "true"}


@dataclass(frozen=True)
class Refusal:
    """An object the apiserver must refuse: its answer must name ``field`` with ``message``."""

    resource: Resource
    body: dict[str, Any]
    field: str
    message: str  # the CEL rule's message (the cause's message may add a prefix)

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


def _pool(name: str, **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = nodepool(name, labels=_MARK, **kw)
    return body


def _claim(name: str) -> dict[str, Any]:
    body: dict[str, Any] = nodeclaim(name, MISSING_CLASS_POOL, labels=_MARK)
    return body


def refusals() -> list[Refusal]:
    """Invalid NodePools and NodeClaims, one broken rule each."""
    restricted_label = _pool("chaos-bad-label", template_labels={"karpenter.sh/team": "a"})
    empty_class = _pool("chaos-bad-class")
    empty_class["spec"]["template"]["spec"]["nodeClassRef"]["name"] = ""
    hostname_key = _claim("chaos-bad-key")
    hostname_key["spec"]["requirements"][0]["key"] = "kubernetes.io/hostname"
    no_values = _claim("chaos-bad-values")
    no_values["spec"]["requirements"][0]["values"] = []
    return [
        Refusal(
            NODEPOOLS,
            restricted_label,
            "spec.template.metadata.labels",
            'label domain "karpenter.sh" is restricted',
        ),
        Refusal(
            NODEPOOLS,
            empty_class,
            "spec.template.spec.nodeClassRef.name",
            "name may not be empty",
        ),
        Refusal(
            NODECLAIMS,
            hostname_key,
            "spec.requirements[0].key",
            'label "kubernetes.io/hostname" is restricted',
        ),
        Refusal(
            NODECLAIMS,
            no_values,
            "spec.requirements",
            "requirements with operator 'In' must have a value defined",
        ),
    ]


def missing_class_pool() -> dict[str, Any]:
    """Valid, but its KWOKNodeClass does not exist: nothing may be launched for it."""
    return _pool(MISSING_CLASS_POOL, nodeclass=MISSING_CLASS)


def _pod(name: str, namespace: str, cpu: str, **spec: Any) -> dict[str, Any]:
    template = deployment(name, 1, cpu, "128Mi")["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": name, "chaos.karpenter-py.dev/long": LONG_VALUE, **_MARK},
            "annotations": {"chaos.karpenter-py.dev/blob": "x" * ANNOTATION_BYTES},
        },
        "spec": {**template["spec"], **spec},
    }


def pods() -> list[dict[str, Any]]:
    """Pods no node can take, outside the workload (another namespace or another app label)."""
    return [
        _pod("chaos-huge", NAMESPACE, "1000"),
        _pod("chaos-unknown-label", "default", "100m", nodeSelector={UNKNOWN_LABEL: LONG_VALUE}),
        _pod(
            "chaos-no-class", "default", "100m", nodeSelector={LABEL_NODEPOOL: MISSING_CLASS_POOL}
        ),
    ]
