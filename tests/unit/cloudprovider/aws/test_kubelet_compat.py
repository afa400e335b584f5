"""A converted v1beta1 NodePool's kubelet block along the launch path (pure): the NodeClaim
written for the pool carries the kubelet compatibility annotation, and the node's user data
says those kubelet settings in every family, as upstream v1.0 does."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_py.cloudprovider.aws import launchtemplates, userdata
from karpenter_py.launcher.persist import nodeclaim_body, nodepool_hash
from karpenter_py.model.api.convert import KUBELET_ANNOTATION
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.instancetype import Offering, make_instance_type
from karpenter_py.model.labels import (
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    NODEPOOL_HASH_VERSION,
)
from karpenter_py.scheduling.plan import NewNodeClaim
from tests.aws.launchsupport import CLUSTER_INFO, converted_nodepool, ec2nodeclass, nodeclaim

KUBELET = {"clusterDNS": ["10.0.1.100"], "maxPods": 20, "evictionHard": {"memory.available": "5%"}}
ANNOTATION = '{"clusterDNS":["10.0.1.100"],"evictionHard":{"memory.available":"5%"},"maxPods":20}'


def _planned() -> NewNodeClaim:
    it = make_instance_type(
        name="m5.large",
        requirements={},
        capacity={"cpu": 2000, "memory": 8 * 2**30, "pods": 29},
        offerings=[Offering(zone="us-west-2a", capacity_type="on-demand", price=0.096)],
    )
    return NewNodeClaim(
        node_pool="default",
        hostname="hostname-placeholder-0",
        instance_types=(it,),
        requirements=(),
        labels={},
        taints=(),
        startup_taints=(),
        pods=(),
        requests={},
        instance_type=it,
        offering=it.offerings[0],
    )


@pytest.mark.parametrize(
    ("kubelet", "extra"),
    [(None, {}), (KUBELET, {KUBELET_ANNOTATION: ANNOTATION})],
)
def test_the_nodeclaim_of_a_converted_pool_carries_its_kubelet(
    kubelet: dict[str, Any] | None, extra: dict[str, str]
) -> None:
    pool = converted_nodepool(kubelet)
    body = nodeclaim_body(_planned(), pool)
    metadata = body["metadata"]
    assert isinstance(metadata, dict)
    assert metadata["annotations"] == {
        ANNOTATION_NODEPOOL_HASH: nodepool_hash(pool),
        ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION,
        **extra,
    }


def _claim(annotations: dict[str, str]) -> NodeClaim:
    claim = nodeclaim()
    claim.metadata.annotations.update(annotations)
    return claim


@pytest.mark.parametrize(
    ("claim_annotations", "class_kubelet", "kubelet"),
    [
        ({}, None, {}),
        ({KUBELET_ANNOTATION: ANNOTATION}, None, KUBELET),
        ({}, {"maxPods": 110}, {"maxPods": 110}),
        # The claim's annotation wins over the EC2NodeClass's spec.kubelet (upstream v1.0).
        ({KUBELET_ANNOTATION: ANNOTATION}, {"maxPods": 110}, KUBELET),
    ],
)
def test_bootstrap_kubelet_in_effect(
    claim_annotations: dict[str, str],
    class_kubelet: dict[str, Any] | None,
    kubelet: dict[str, Any],
) -> None:
    nc = ec2nodeclass(kubelet=class_kubelet)
    opts = launchtemplates.bootstrap_options(
        CLUSTER_INFO, nc, _claim(claim_annotations), "on-demand"
    )
    assert dict(opts.kubelet) == kubelet


def test_al2023_nodeconfig_from_the_annotation() -> None:
    opts = launchtemplates.bootstrap_options(
        CLUSTER_INFO, ec2nodeclass(), _claim({KUBELET_ANNOTATION: ANNOTATION}), "on-demand"
    )
    assert userdata.nodeconfig(opts)["spec"]["kubelet"]["config"] == {
        "maxPods": 20,
        "clusterDNS": ["10.0.1.100"],
        "evictionHard": {"memory.available": "5%"},
    }


def test_al2_bootstrap_from_the_annotation() -> None:
    opts = launchtemplates.bootstrap_options(
        CLUSTER_INFO,
        ec2nodeclass(family="AL2"),
        _claim({KUBELET_ANNOTATION: ANNOTATION}),
        "on-demand",
    )
    assert userdata.al2_script(opts).splitlines()[2] == (
        "/etc/eks/bootstrap.sh 'test-cluster' --apiserver-endpoint "
        "'https://ABC.gr7.us-west-2.eks.amazonaws.com' --b64-cluster-ca 'Q0EtREFUQQ==' "
        "--dns-cluster-ip '10.0.1.100' --use-max-pods false --kubelet-extra-args "
        "'--node-labels=karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=default "
        "--register-with-taints=karpenter.sh/unregistered:NoExecute --max-pods=20'"
    )


def test_bottlerocket_settings_from_the_annotation() -> None:
    opts = launchtemplates.bootstrap_options(
        CLUSTER_INFO,
        ec2nodeclass(family="Bottlerocket"),
        _claim({KUBELET_ANNOTATION: ANNOTATION}),
        "on-demand",
    )
    settings = userdata.bottlerocket_settings(opts)
    assert (settings["cluster-dns-ip"], settings["max-pods"], settings["eviction-hard"]) == (
        "10.0.1.100",
        20,
        {"memory.available": "5%"},
    )
