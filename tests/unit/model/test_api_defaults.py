"""Upstream's defaults, applied when a manifest leaves a field out."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from tests.unit.model._manifests import DELETE, edit, load


def _minimal_nodepool() -> dict[str, Any]:
    manifest = load("nodepool_default.yaml")
    manifest = edit(manifest, "spec.disruption", DELETE)
    manifest = edit(manifest, "spec.limits", DELETE)
    return edit(manifest, "spec.template.spec.expireAfter", DELETE)


def test_nodepool_defaults():
    np = NodePool.model_validate(_minimal_nodepool())
    assert np.spec.template.spec.expire_after == "720h"
    assert np.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert np.spec.disruption.consolidate_after == "0s"
    assert [b.model_dump(by_alias=True) for b in np.spec.disruption.budgets] == [{"nodes": "10%"}]
    assert np.spec.weight is None
    assert np.spec.replicas is None
    assert np.spec.limits is None
    assert np.spec.template.spec.termination_grace_period is None
    dumped = np.model_dump(by_alias=True, exclude_none=True)
    assert dumped["spec"]["disruption"] == {
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "budgets": [{"nodes": "10%"}],
    }
    assert dumped["spec"]["template"]["spec"]["expireAfter"] == "720h"


@pytest.mark.parametrize(
    ("disruption", "expected"),
    [
        # A partial disruption block still gets the rest of its defaults.
        (
            {"consolidateAfter": "5m"},
            ("5m", "WhenEmptyOrUnderutilized", ["10%"]),
        ),
        (
            {"consolidationPolicy": "WhenEmpty"},
            ("0s", "WhenEmpty", ["10%"]),
        ),
        # An explicit budget list replaces the default one entirely.
        (
            {"budgets": [{"nodes": "1"}]},
            ("0s", "WhenEmptyOrUnderutilized", ["1"]),
        ),
        # A budget without nodes gets 10%.
        (
            {"budgets": [{"schedule": "@daily", "duration": "1h"}]},
            ("0s", "WhenEmptyOrUnderutilized", ["10%"]),
        ),
    ],
)
def test_disruption_partial_defaults(disruption, expected):
    manifest = edit(_minimal_nodepool(), "spec.disruption", disruption)
    d = NodePool.model_validate(manifest).spec.disruption
    assert (d.consolidate_after, d.consolidation_policy, [b.nodes for b in d.budgets]) == expected


def test_nodeclaim_expire_after_defaults_to_720h():
    manifest = edit(load("nodeclaim.yaml"), "spec.expireAfter", DELETE)
    claim = NodeClaim.model_validate(manifest)
    assert claim.spec.expire_after == "720h"
    assert claim.spec.resources.requests["cpu"] == "1200m"


def test_ec2nodeclass_metadata_options_default():
    nc = EC2NodeClass.model_validate(load("ec2nodeclass_default.yaml"))
    mo = nc.spec.metadata_options
    assert (
        mo.http_endpoint,
        mo.http_protocol_ipv6,
        mo.http_put_response_hop_limit,
        mo.http_tokens,
    ) == ("enabled", "disabled", 1, "required")
    # A partial block keeps the other defaults.
    partial = edit(
        load("ec2nodeclass_default.yaml"), "spec.metadataOptions", {"httpTokens": "optional"}
    )
    mo = EC2NodeClass.model_validate(partial).spec.metadata_options
    assert (mo.http_endpoint, mo.http_tokens) == ("enabled", "optional")


def test_default_budget_list_is_not_shared_between_objects():
    a = NodePool.model_validate(_minimal_nodepool())
    b = NodePool.model_validate(_minimal_nodepool())
    a.spec.disruption.budgets[0].nodes = "1"
    assert b.spec.disruption.budgets[0].nodes == "10%"
