"""Upstream-style manifests parse, keep their meaning, and dump back to the same JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from tests.unit.model._manifests import KINDS, edit, load

DEFAULT_BUDGETS = [{"nodes": "10%"}]
DEFAULT_METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}
KWOK_DEFAULT_STATUS = {
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Ready",
            "message": "",
            "lastTransitionTime": "2024-01-01T01:01:01Z",
        }
    ]
}


@pytest.mark.parametrize(
    ("filename", "defaults_added"),
    [
        ("nodepool_default.yaml", {"spec.disruption.budgets": DEFAULT_BUDGETS}),
        ("nodepool_full.yaml", {}),
        ("nodeclaim.yaml", {}),
        ("ec2nodeclass_default.yaml", {"spec.metadataOptions": DEFAULT_METADATA_OPTIONS}),
        ("ec2nodeclass_full.yaml", {}),
        ("kwoknodeclass.yaml", {"status": KWOK_DEFAULT_STATUS}),
    ],
)
def test_manifest_round_trips(filename, defaults_added):
    manifest = load(filename)
    expected = manifest
    for path, value in defaults_added.items():
        expected = edit(expected, path, value)

    obj = KINDS[manifest["kind"]].model_validate(manifest)
    dumped = obj.model_dump(by_alias=True, exclude_none=True)

    assert dumped == expected
    # JSON mode (what goes to the API server) is the same document.
    assert json.loads(obj.model_dump_json(by_alias=True, exclude_none=True)) == expected
    # And the dump parses back to an equal object.
    assert type(obj).model_validate(dumped) == obj


def test_dump_omits_empty_fields_like_go_omitempty():
    nodepool = NodePool.model_validate(load("nodepool_default.yaml"))
    dumped = nodepool.model_dump(by_alias=True)
    template = dumped["spec"]["template"]
    assert "metadata" not in template  # empty labels/annotations block
    assert "taints" not in template["spec"]
    assert "startupTaints" not in template["spec"]
    assert "status" not in dumped
    assert "values" in template["spec"]["requirements"][0]
    # Python-side names work too, and keep the same omissions.
    assert "startup_taints" not in nodepool.model_dump()["spec"]["template"]["spec"]


def test_condition_message_is_kept_even_when_empty():
    claim = NodeClaim.model_validate(load("nodeclaim.yaml"))
    for condition in claim.model_dump(by_alias=True)["status"]["conditions"]:
        assert condition["message"] == ""


def test_unknown_metadata_fields_survive_a_round_trip():
    manifest = load("nodepool_full.yaml")
    dumped = NodePool.model_validate(manifest).model_dump(by_alias=True, exclude_none=True)
    assert dumped["metadata"]["managedFields"] == [{"manager": "kubectl", "operation": "Apply"}]


def test_scheduler_attribute_paths():
    """The scheduler reads these exact attributes; keep them stable."""
    np = NodePool.model_validate(load("nodepool_full.yaml"))
    assert np.metadata.name == "everything"
    assert np.spec.weight == 10
    assert np.spec.limits == {"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": 4}
    tmpl = np.spec.template
    assert tmpl.metadata.labels["billing-team"] == "my-team"
    assert tmpl.metadata.annotations == {"example.com/owner": "my-team"}
    req = tmpl.spec.requirements[0]
    assert (req.key, req.operator, req.values, req.min_values) == (
        "karpenter.k8s.aws/instance-category",
        "In",
        ["c", "m", "r"],
        2,
    )
    assert tmpl.spec.requirements[2].min_values is None
    assert [(t.key, t.value, t.effect) for t in tmpl.spec.taints] == [
        ("example.com/special-taint", "true", "NoSchedule"),
        ("example.com/special-taint", "", "NoExecute"),
    ]
    assert [(t.key, t.value, t.effect) for t in tmpl.spec.startup_taints] == [
        ("example.com/another-taint", "", "NoSchedule")
    ]
    ref = tmpl.spec.node_class_ref
    assert (ref.group, ref.kind, ref.name) == ("karpenter.k8s.aws", "EC2NodeClass", "default")
    assert tmpl.spec.expire_after == "Never"
    assert tmpl.spec.termination_grace_period == "48h"
    assert np.spec.disruption.consolidation_policy == "Balanced"
    assert np.spec.disruption.consolidate_after == "1h30m"
    assert [b.nodes for b in np.spec.disruption.budgets] == ["10%", "0", "5"]
    assert np.spec.disruption.budgets[2].reasons == ["Drifted", "Empty"]
    assert np.status.resources == {"cpu": "12", "memory": "48Gi", "nodes": "3", "pods": "87"}
    assert np.status.is_true("Ready")


def test_minimal_nodepool_has_empty_collections_not_none():
    np = NodePool.model_validate(load("nodepool_default.yaml"))
    assert np.spec.template.metadata.labels == {}
    assert np.spec.template.metadata.annotations == {}
    assert np.spec.template.spec.taints == []
    assert np.spec.template.spec.startup_taints == []
    assert np.spec.weight is None
    assert np.spec.limits == {"cpu": 1000}
    assert np.spec.template.spec.termination_grace_period is None
    assert np.status.resources == {}


def test_nodeclaim_fields_and_conditions():
    claim = NodeClaim.model_validate(load("nodeclaim.yaml"))
    assert claim.name == "default-x7k2p"
    assert claim.is_ready()
    assert claim.status.provider_id == "aws:///us-west-2a/i-0123456789abcdef0"
    assert claim.status.allocatable["cpu"] == "1930m"
    assert claim.spec.resources.requests == {"cpu": "1200m", "memory": "2Gi", "pods": 5}
    assert claim.status.last_pod_event_time == datetime(2024, 6, 1, 10, 3, tzinfo=UTC)
    assert claim.metadata.owner_references[0].block_owner_deletion is True
    assert claim.metadata.creation_timestamp == datetime(2024, 6, 1, 10, tzinfo=UTC)


def test_nodeclaim_condition_helpers_move_transition_time_only_on_status_change():
    claim = NodeClaim.model_validate(load("nodeclaim.yaml"))
    t0 = datetime(2024, 6, 1, 10, 0, 5, tzinfo=UTC)
    later = t0 + timedelta(minutes=5)
    # Same status, new message: changed, but the transition time stays.
    assert claim.status.set_condition("Launched", "True", now=later, message="again")
    launched = claim.status.get_condition("Launched")
    assert launched is not None
    assert launched.last_transition_time == t0
    # Setting the identical condition again is a no-op.
    assert not claim.status.set_condition("Launched", "True", now=later, message="again")
    # A status flip moves the time.
    assert claim.status.set_condition("Launched", "False", now=later, reason="LaunchFailed")
    assert launched.last_transition_time == later
    assert launched.reason == "LaunchFailed"
    assert not claim.is_ready()
    # A new condition gets the type as its reason when none is given.
    assert claim.status.set_condition("Drifted", "True", now=later)
    drifted = claim.status.get_condition("Drifted")
    assert drifted is not None
    assert drifted.reason == "Drifted"
    assert claim.status.clear_condition("Drifted")
    assert claim.status.get_condition("Drifted") is None
    assert not claim.status.clear_condition("Drifted")


def test_condition_status_accepts_unquoted_yaml_booleans():
    manifest = edit(load("nodeclaim.yaml"), "status.conditions[0].status", True)
    claim = NodeClaim.model_validate(manifest)
    assert claim.status.conditions[0].status == "True"


def test_naive_timestamps_are_read_as_utc():
    manifest = edit(
        load("nodeclaim.yaml"),
        "metadata.creationTimestamp",
        datetime(2024, 6, 1, 10, 0, 0),  # noqa: DTZ001 - YAML gives naive datetimes
    )
    claim = NodeClaim.model_validate(manifest)
    dumped = claim.model_dump(by_alias=True)
    assert dumped["metadata"]["creationTimestamp"] == "2024-06-01T10:00:00Z"


def test_ec2nodeclass_alias_family_helpers():
    default = EC2NodeClass.model_validate(load("ec2nodeclass_default.yaml"))
    assert default.spec.alias_family() == "al2023"
    assert default.spec.resolved_ami_family() == "AL2023"
    assert default.spec.metadata_options.http_put_response_hop_limit == 1
    full = EC2NodeClass.model_validate(load("ec2nodeclass_full.yaml"))
    assert full.spec.alias_family() is None
    assert full.spec.resolved_ami_family() == "AL2023"
    assert full.spec.kubelet is not None
    assert full.spec.kubelet["shutdownGracePeriod"] == "30s"  # unknown kubelet keys pass through


def test_kwoknodeclass_defaults_ready():
    kwok = KWOKNodeClass.model_validate({"kind": "KWOKNodeClass", "metadata": {"name": "x"}})
    assert kwok.status.is_true("Ready")
    assert kwok.spec.node_registration_delay is None
