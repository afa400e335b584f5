"""Builders for the launch-path tests: a Ready EC2NodeClass, a NodeClaim, candidate types, a
NodePool converted from v1beta1."""

from __future__ import annotations

from typing import Any

from karpenter_py.cloudprovider.aws.cluster import ClusterInfo
from karpenter_py.model.api.convert import to_v1
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.instancetype import InstanceType, Offering, make_instance_type
from karpenter_py.model.labels import LABEL_ARCH
from tests import factories

CLUSTER_INFO = ClusterInfo(
    name="test-cluster",
    region="us-west-2",
    endpoint="https://ABC.gr7.us-west-2.eks.amazonaws.com",
    ca_bundle="Q0EtREFUQQ==",
    service_cidr="10.100.0.0/16",
)
ALIASES = {"AL2023": "al2023@latest", "AL2": "al2@latest", "Bottlerocket": "bottlerocket@latest"}


def ec2nodeclass(
    name: str = "default",
    *,
    subnets: list[tuple[str, str]] | None = None,  # (zone, subnet id), in status order
    security_groups: tuple[str, ...] = ("sg-0123",),
    amis: list[tuple[str, str]] | None = None,  # (AMI id, arch), newest first
    instance_profile: str = "test-cluster_profile",
    family: str = "AL2023",
    **spec: Any,
) -> EC2NodeClass:
    amis = amis if amis is not None else [("ami-0amd64", "amd64")]
    base = factories.ec2nodeclass_spec()
    if family not in ALIASES:
        base["amiSelectorTerms"] = [{"tags": {"karpenter.sh/discovery": "test-cluster"}}]
        base["amiFamily"] = family
    else:
        base["amiSelectorTerms"] = [{"alias": ALIASES[family]}]
    return factories.ec2nodeclass(
        name,
        uid=f"uid-{name}",
        base_spec=base,
        status={
            "subnets": [
                {"id": sid, "zone": zone} for zone, sid in (subnets or [("us-west-2a", "subnet-a")])
            ],
            "securityGroups": [{"id": sg} for sg in security_groups],
            "amis": [
                {
                    "id": ami_id,
                    "requirements": [{"key": LABEL_ARCH, "operator": "In", "values": [arch]}],
                }
                for ami_id, arch in amis
            ],
            "instanceProfile": instance_profile,
        },
        **spec,
    )


def nodeclaim(
    name: str = "default-abcde",
    *,
    pool: str = "default",
    requirements: list[dict[str, Any]] | None = None,
    taints: list[dict[str, str]] | None = None,
    startup_taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    nodeclass: str = "default",
) -> NodeClaim:
    """A NodeClaim of EC2NodeClass ``nodeclass`` as the provisioner writes it (not launched)."""
    return factories.nodeclaim(
        name,
        pool=pool,
        labels=labels,
        uid="",
        finalizers=[],
        created=None,
        expire_after=None,
        launched=False,
        node_class_ref={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
        requirements=requirements,
        taints=taints or [],
        startup_taints=startup_taints or [],
    )


def instance_type(
    name: str, offerings: list[tuple[str, str, float]], *, arch: str = "amd64"
) -> InstanceType:
    """``offerings`` as (zone, capacity type, price), all available."""
    return make_instance_type(
        name=name,
        requirements={LABEL_ARCH: arch},
        capacity={"cpu": 2000, "memory": 4 * 2**30, "pods": 29},
        offerings=[Offering(zone=z, capacity_type=ct, price=p) for z, ct, p in offerings],
    )


def launch_tags(claim: str, pool: str = "default", nodeclass: str = "default") -> dict[str, str]:
    """The tags the caller (provider.py) passes to InstanceProvider.create."""
    return {
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/nodeclaim": claim,
        "karpenter.k8s.aws/ec2nodeclass": nodeclass,
        "eks:eks-cluster-name": "test-cluster",
        "kubernetes.io/cluster/test-cluster": "owned",
        "Name": f"{pool}/{claim}",
    }


def converted_nodepool(kubelet: dict[str, Any] | None = None) -> NodePool:
    """A v1beta1 NodePool ``default`` (with this kubelet block, if any) as the conversion webhook
    hands it over in v1: the block is in the kubelet compatibility annotation."""
    tspec: dict[str, Any] = {"nodeClassRef": {"name": "default"}, "requirements": []}
    if kubelet is not None:
        tspec["kubelet"] = kubelet
    doc = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "default", "uid": "np-default"},
        "spec": {"template": {"spec": tspec}},
    }
    return NodePool.model_validate(to_v1(doc).object)
