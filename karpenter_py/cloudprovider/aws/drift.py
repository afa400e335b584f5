"""EC2NodeClass drift: has the class moved away from what an instance was launched with?

Two kinds, as upstream's AWS provider checks them:

- static: a hash of the spec fields that shape a launch but are not resolved through status
  (user data, tags, kubelet, block devices, metadata options, the resolved AMI family, ...),
  stamped on the NodeClaim at launch (``karpenter.k8s.aws/ec2nodeclass-hash`` + version). A
  different current hash, same version, is ``NodeClassDrift``. Selector terms, role, instance
  profile and ipPrefixCount are left out: their effect is checked through what they resolve to;
- dynamic: the instance's AMI is no longer among ``status.amis`` (``AMIDrift``), its subnet not
  among ``status.subnets`` (``SubnetDrift``), its security groups not exactly
  ``status.securityGroups`` (``SecurityGroupDrift``); with the ReservedCapacity gate on, the
  capacity reservation it runs in no longer among ``status.capacityReservations``
  (``CapacityReservationDrift``: the class stopped selecting it, or it ended).

Pure: the caller supplies the live instance.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from karpenter_py.cloudprovider.aws.instance import Instance
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.labels import (
    AWS_ANNOTATION_EC2NODECLASS_HASH,
    AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION,
)

EC2NODECLASS_HASH_VERSION: Final = "v4"
REASON_NODECLASS: Final = "NodeClassDrift"
REASON_AMI: Final = "AMIDrift"
REASON_SUBNET: Final = "SubnetDrift"
REASON_SECURITY_GROUP: Final = "SecurityGroupDrift"
REASON_CAPACITY_RESERVATION: Final = "CapacityReservationDrift"

# Resolved through status (checked dynamically) or not part of a launch. ``amiFamily`` is
# replaced by the resolved family (so alias al2023 and amiFamily AL2023 hash alike, and a
# switch of alias family is static drift); ``ipPrefixCount`` is left out as upstream does.
_DYNAMIC_FIELDS: Final = frozenset(
    {
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "amiSelectorTerms",
        "capacityReservationSelectorTerms",
        "role",
        "instanceProfile",
        "amiFamily",
        "ipPrefixCount",
    }
)


def ec2nodeclass_hash(nodeclass: EC2NodeClass) -> str:
    """A stable hash of the class's static launch fields."""
    spec = nodeclass.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    static = {k: v for k, v in spec.items() if k not in _DYNAMIC_FIELDS}
    static["amiFamily"] = nodeclass.spec.resolved_ami_family()
    digest = hashlib.sha256(json.dumps(static, sort_keys=True).encode()).hexdigest()
    return str(int(digest[:15], 16))


def drift_reason(
    nodeclaim: NodeClaim,
    nodeclass: EC2NodeClass,
    instance: Instance,
    *,
    reserved_capacity: bool = False,
) -> str:
    """The first drift found, or ""."""
    if nodeclass.ubuntu_incompatible():
        return ""  # its spec holds a placeholder, not what anything was launched with
    annotations = nodeclaim.metadata.annotations
    launched_with = annotations.get(AWS_ANNOTATION_EC2NODECLASS_HASH)
    if (
        launched_with
        and annotations.get(AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION) == EC2NODECLASS_HASH_VERSION
        and launched_with != ec2nodeclass_hash(nodeclass)
    ):
        return REASON_NODECLASS
    status = nodeclass.status
    # An empty status list means "not resolved yet", not "everything drifted".
    if status.amis and instance.image_id not in {a.id for a in status.amis}:
        return REASON_AMI
    if status.subnets and instance.subnet_id not in {s.id for s in status.subnets}:
        return REASON_SUBNET
    if status.security_groups and set(instance.security_group_ids) != {
        g.id for g in status.security_groups
    }:
        return REASON_SECURITY_GROUP
    # Unlike the lists above, an empty reservation list is an answer: nothing is selected now.
    if (
        reserved_capacity
        and instance.capacity_reservation_id
        and instance.capacity_reservation_id not in {r.id for r in status.capacity_reservations}
    ):
        return REASON_CAPACITY_RESERVATION
    return ""
