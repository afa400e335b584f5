"""The kwok provider's launch: cheapest allowed offering, boot delay from the KWOKNodeClass,
capacity failures, idempotent retries."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.cloudprovider.errors import InsufficientCapacityError, NodeClaimNotFoundError
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.catalog import kwok_catalog
from tests import factories
from tests.unit.fakes import FakeNodeAPI


def claim(name: str = "nc-1", *requirements: dict[str, Any]) -> NodeClaim:
    return factories.nodeclaim(
        name,
        launched=False,
        requirements=list(requirements)
        or [
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["c-4x-amd64-linux", "m-4x-amd64-linux"],
            }
        ],
        resources={"cpu": "1"},
    )


def provider(api: FakeNodeAPI, slept: list[float], default: float = 0.0) -> KwokCloudProvider:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return KwokCloudProvider(api, kwok_catalog(), registration_delay=default, sleep=sleep)


@pytest.mark.parametrize(
    ("nodeclass", "default", "expected"),
    [
        ({"spec": {"nodeRegistrationDelay": "45s"}}, 0.0, [45.0]),
        ({"spec": {"nodeRegistrationDelay": "1m30s"}}, 5.0, [90.0]),
        ({"spec": {}}, 5.0, [5.0]),  # class without a delay: the provider's default
        (None, 0.0, []),  # no class at all, no default: no wait
    ],
)
async def test_boot_delay_comes_from_the_nodeclass(
    nodeclass: dict[str, Any] | None, default: float, expected: list[float]
) -> None:
    api, slept = FakeNodeAPI(), list[float]()
    if nodeclass is not None:
        api.nodeclasses["default"] = {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": "default"},
            **nodeclass,
        }
    cloud = provider(api, slept, default)
    await cloud.create(claim("a"))
    await cloud.create(claim("b"))
    assert slept == expected * 2
    assert api.nodeclass_reads == 1  # a burst of launches reads the class once


async def test_launch_picks_the_cheapest_allowed_offering_and_is_idempotent() -> None:
    api, slept = FakeNodeAPI(), list[float]()
    cloud = provider(api, slept)
    launched = await cloud.create(claim())
    node = api.nodes["nc-1"]
    assert launched.status.provider_id == "kwok://nc-1"
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c-4x-amd64-linux"
    assert {"key": "karpenter.sh/unregistered", "effect": "NoExecute"} in node["spec"]["taints"]
    again = await cloud.create(claim())  # a retry after a crash finds the instance
    assert again.status.provider_id == launched.status.provider_id
    assert len(api.nodes) == 1


async def test_capacity_failures_fall_back_then_raise() -> None:
    api, slept = FakeNodeAPI(), list[float]()
    cloud = provider(api, slept)
    for zone in ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"):
        for ct in ("spot", "on-demand"):
            cloud.simulate_insufficient_capacity("c-4x-amd64-linux", zone, ct)
    launched = await cloud.create(claim())
    assert launched.metadata.labels["node.kubernetes.io/instance-type"] == "m-4x-amd64-linux"
    only_c = {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["c-4x-amd64-linux"],
    }
    with pytest.raises(InsufficientCapacityError) as err:
        await cloud.create(claim("nc-2", only_c))
    assert ("c-4x-amd64-linux", "test-zone-a", "on-demand") in err.value.offerings


async def test_delete_reports_not_found_once_the_node_is_gone() -> None:
    api, slept = FakeNodeAPI(), list[float]()
    cloud = provider(api, slept)
    launched = await cloud.create(claim())
    await cloud.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await cloud.delete(launched)


# The kubelet's and the cloud's labels: what even a bare Node carries.
KUBELET = {
    "node.kubernetes.io/instance-type": "c-4x-amd64-linux",
    "topology.kubernetes.io/zone": "test-zone-a",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
    "kubernetes.io/hostname": "nc-1",
    "kwok.x-k8s.io/node": "fake",
}
# What the launch resolves and reports on the NodeClaim (registration copies it to the Node).
RESOLVED = {
    "node.kubernetes.io/instance-type": "c-4x-amd64-linux",
    "topology.kubernetes.io/zone": "test-zone-a",
    "karpenter.sh/capacity-type": "spot",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
    "karpenter.kwok.sh/instance-size": "4",
    "karpenter.kwok.sh/instance-family": "c",
    "karpenter.kwok.sh/instance-cpu": "4",
    "karpenter.kwok.sh/instance-memory": "8Gi",
    "karpenter.sh/nodepool": "default",
    "team": "a",
}
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
TEAM = {"key": "team", "value": "a", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("bare", "node_labels", "node_taints"),
    [
        pytest.param(False, {**RESOLVED, **KUBELET}, [UNREGISTERED, TEAM], id="labelled"),
        pytest.param(True, KUBELET, [UNREGISTERED], id="bare"),
    ],
)
async def test_a_bare_node_registers_without_the_nodeclaims_labels_and_taints(
    bare: bool, node_labels: dict[str, str], node_taints: list[dict[str, str]]
) -> None:
    api = FakeNodeAPI()
    cloud = KwokCloudProvider(api, kwok_catalog(), bare_nodes=bare)
    nc = factories.nodeclaim(
        "nc-1",
        launched=False,
        labels={"team": "a"},
        taints=[TEAM],
        requirements=[
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["c-4x-amd64-linux"],
            },
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        ],
    )
    launched = await cloud.create(nc)
    node = api.nodes["nc-1"]
    assert node["metadata"]["labels"] == node_labels
    assert node["spec"]["taints"] == node_taints
    assert launched.metadata.labels == RESOLVED  # either way
