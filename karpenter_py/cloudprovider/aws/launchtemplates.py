"""Launch templates: one per distinct set of resolved launch options, named by their hash.

A template's name is ``karpenter.k8s.aws/<hash>`` of everything that goes into it (AMI, user
data, block devices, security groups, profile, IMDS, monitoring, tags), so NodeClaims with equal
options share a template and a changed EC2NodeClass field yields a new one. Creating a template
that already exists is success. Templates ensured in the last ``cache_ttl`` seconds are not
re-created; a template CreateFleet reports missing is dropped from the cache (``invalidate``).

Gap vs upstream: cache eviction does not delete the template in EC2 (the EC2NodeClass finalizer
does, via :func:`delete_launch_templates`), and maxPods/reserved resources are not resolved per
instance type (only the kubelet values in effect are used: the EC2NodeClass's, or the
NodeClaim's kubelet compatibility annotation), so one template serves every instance type of an
AMI.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from karpenter_py.aio.singleflight import SingleFlight
from karpenter_py.cloudprovider.aws import userdata
from karpenter_py.cloudprovider.aws.capacityreservations import (
    OPT_OUT_OF_OPEN_RESERVATIONS,
    ReservationTarget,
)
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, paginate
from karpenter_py.cloudprovider.aws.cluster import ClusterInfo
from karpenter_py.model.api.common import NodeSelectorRequirement
from karpenter_py.model.api.convert import kubelet_in_effect
from karpenter_py.model.api.ec2nodeclass import AMI, BlockDeviceMapping, EC2NodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    AWS_LABEL_EC2NODECLASS,
    AWS_TAG_CLUSTER,
    LABEL_CAPACITY_TYPE,
    TAG_EKS_CLUSTER_NAME,
    TAINT_UNREGISTERED_KEY,
)

log = logging.getLogger("karpenter.aws.launchtemplates")

NAME_PREFIX: Final = "karpenter.k8s.aws/"
ALREADY_EXISTS: Final = "InvalidLaunchTemplateName.AlreadyExistsException"
NOT_FOUND_CODES: Final = frozenset(
    {
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateId.VersionNotFound",
    }
)

_GIB: Final = Decimal(2**30)
_SIZE: Final = re.compile(r"^(\d+)(Gi|G|Ti|T)$")
_SIZE_BYTES: Final = {
    "Gi": Decimal(2**30),
    "G": Decimal(10**9),
    "Ti": Decimal(2**40),
    "T": Decimal(10**12),
}


@dataclass(frozen=True, slots=True)
class ResolvedLaunchTemplate:
    name: str
    image_id: str
    instance_types: tuple[str, ...]


# ---------------------------------------------------------------- pure resolution


def volume_size_gib(size: str) -> int:
    """EC2's VolumeSize (GiB, rounded up) for an EC2NodeClass size such as 20Gi or 100G."""
    match = _SIZE.match(size)
    if match is None:
        raise ValueError(f"unsupported volume size {size!r}")
    return math.ceil(Decimal(match.group(1)) * _SIZE_BYTES[match.group(2)] / _GIB)


def _ebs(size_gib: int) -> dict[str, Any]:
    return {"Encrypted": True, "VolumeSize": size_gib, "VolumeType": "gp3"}


def default_block_devices(family: str) -> list[dict[str, Any]]:
    """The root (and data) volumes a family gets when the EC2NodeClass names none."""
    if family in ("AL2", "AL2023"):
        return [{"DeviceName": "/dev/xvda", "Ebs": _ebs(20)}]
    if family == "Bottlerocket":
        return [
            {"DeviceName": "/dev/xvda", "Ebs": _ebs(4)},
            {"DeviceName": "/dev/xvdb", "Ebs": _ebs(20)},
        ]
    if family.startswith("Windows"):
        return [{"DeviceName": "/dev/sda1", "Ebs": _ebs(50)}]
    return []


def block_device(mapping: BlockDeviceMapping) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if mapping.device_name:
        out["DeviceName"] = mapping.device_name
    if mapping.ebs is not None:
        e = mapping.ebs
        fields: tuple[tuple[str, object], ...] = (
            ("DeleteOnTermination", e.delete_on_termination),
            ("Encrypted", e.encrypted),
            ("Iops", e.iops),
            ("KmsKeyId", e.kms_key_id),
            ("SnapshotId", e.snapshot_id),
            ("Throughput", e.throughput),
            ("VolumeInitializationRate", e.volume_initialization_rate),
            ("VolumeType", e.volume_type),
        )
        ebs: dict[str, Any] = {k: v for k, v in fields if v is not None}
        if e.volume_size is not None:
            ebs["VolumeSize"] = volume_size_gib(e.volume_size)
        out["Ebs"] = ebs
    return out


def block_devices(nodeclass: EC2NodeClass) -> list[dict[str, Any]]:
    mappings = nodeclass.spec.block_device_mappings
    if mappings:
        return [block_device(m) for m in mappings]
    return default_block_devices(nodeclass.spec.resolved_ami_family())


def metadata_options(nodeclass: EC2NodeClass) -> dict[str, Any]:
    m = nodeclass.spec.metadata_options
    return {
        "HttpEndpoint": m.http_endpoint,
        "HttpProtocolIpv6": m.http_protocol_ipv6,
        "HttpPutResponseHopLimit": m.http_put_response_hop_limit,
        "HttpTokens": m.http_tokens,
    }


def template_tags(cluster_name: str, nodeclass: EC2NodeClass) -> dict[str, str]:
    tags = dict(nodeclass.spec.tags or {})
    tags.update(
        {
            AWS_TAG_CLUSTER: cluster_name,
            AWS_LABEL_EC2NODECLASS: nodeclass.metadata.name,
            TAG_EKS_CLUSTER_NAME: cluster_name,
        }
    )
    return tags


def bootstrap_options(
    cluster: ClusterInfo, nodeclass: EC2NodeClass, nodeclaim: NodeClaim, capacity_type: str
) -> userdata.BootstrapOptions:
    """What the node's user data says: cluster identity, labels, taints, kubelet settings."""
    labels = dict(nodeclaim.metadata.labels)
    labels[LABEL_CAPACITY_TYPE] = capacity_type
    taints = [(t.key, t.value, t.effect) for t in nodeclaim.spec.taints]
    taints += [(t.key, t.value, t.effect) for t in nodeclaim.spec.startup_taints]
    # The node registers with the unregistered taint; Karpenter lifts it once it syncs the node.
    if not any(k == TAINT_UNREGISTERED_KEY for k, _, _ in taints):
        taints.append((TAINT_UNREGISTERED_KEY, "", "NoExecute"))
    return userdata.BootstrapOptions(
        cluster_name=cluster.name,
        endpoint=cluster.endpoint,
        ca_bundle=cluster.ca_bundle,
        service_cidr=cluster.service_cidr,
        labels=labels,
        taints=tuple(taints),
        # A NodeClaim of a NodePool converted from v1beta1 carries that pool's kubelet block.
        kubelet=dict(
            kubelet_in_effect(nodeclaim.metadata.annotations, nodeclass.spec.kubelet) or {}
        ),
        user_data=nodeclass.spec.user_data,
    )


def template_data(
    nodeclass: EC2NodeClass,
    image_id: str,
    user_data_text: str,
    reservation: ReservationTarget | None = None,
    *,
    opt_out_of_open_reservations: bool = False,
) -> dict[str, Any]:
    """The LaunchTemplateData for one AMI (and the capacity reservation a reserved launch
    targets: one template per reservation, as CreateFleet cannot name it per override; or, for
    an on-demand launch of a class that selects reservations, no open reservation at all)."""
    sgs = sorted(sg.id for sg in nodeclass.status.security_groups)
    data: dict[str, Any] = {
        "ImageId": image_id,
        "UserData": userdata.encode(user_data_text),
        "IamInstanceProfile": {"Name": nodeclass.status.instance_profile},
        "MetadataOptions": metadata_options(nodeclass),
        "BlockDeviceMappings": block_devices(nodeclass),
        "Monitoring": {"Enabled": bool(nodeclass.spec.detailed_monitoring)},
    }
    if nodeclass.spec.associate_public_ip_address is not None:
        # Public IP association is an interface property, so the groups move onto it.
        data["NetworkInterfaces"] = [
            {
                "DeviceIndex": 0,
                "AssociatePublicIpAddress": nodeclass.spec.associate_public_ip_address,
                "Groups": sgs,
            }
        ]
    else:
        data["SecurityGroupIds"] = sgs
    if reservation is not None:
        data.update(reservation.template_data())
    elif opt_out_of_open_reservations:
        data.update(OPT_OUT_OF_OPEN_RESERVATIONS)
    return data


def template_name(data: Mapping[str, Any], tags: Mapping[str, str]) -> str:
    """``karpenter.k8s.aws/<hash>``: equal options give equal names."""
    blob = json.dumps({"data": data, "tags": dict(tags)}, sort_keys=True, separators=(",", ":"))
    return NAME_PREFIX + hashlib.sha256(blob.encode()).hexdigest()[:20]


def requirement_allows(req: NodeSelectorRequirement, values: frozenset[str] | None) -> bool:
    """Whether an instance type with label ``values`` (None: label absent) meets ``req``."""
    op = req.operator
    if op == "Exists":
        return values is not None
    if op == "DoesNotExist":
        return values is None
    if op == "In":
        return values is not None and bool(values & set(req.values))
    if op == "NotIn":
        return values is None or bool(values - set(req.values))
    if op in ("Gt", "Lt") and values is not None and req.values:
        bound = int(req.values[0])
        nums = [int(v) for v in values if v.lstrip("-").isdigit()]
        return any(n > bound if op == "Gt" else n < bound for n in nums)
    return False


def ami_compatible(ami: AMI, instance_type: InstanceType) -> bool:
    return all(
        requirement_allows(r, instance_type.requirements.get(r.key)) for r in ami.requirements
    )


def map_amis(
    amis: Sequence[AMI], instance_types: Sequence[InstanceType]
) -> list[tuple[str, tuple[str, ...]]]:
    """(AMI id, instance type names) pairs: each type goes to the first AMI it is compatible
    with (status lists the newest first); types no AMI serves are left out."""
    grouped: dict[str, list[str]] = {}
    for it in instance_types:
        for ami in amis:
            if ami_compatible(ami, it):
                grouped.setdefault(ami.id, []).append(it.name)
                break
    return [(ami_id, tuple(names)) for ami_id, names in grouped.items()]


# ---------------------------------------------------------------- the provider


class LaunchTemplateProvider:
    def __init__(
        self,
        clients: AwsClients,
        cluster: ClusterInfo,
        *,
        cache_ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clients = clients
        self._cluster = cluster
        self._ttl = cache_ttl
        self._clock = clock
        self._ensured: dict[str, float] = {}  # template name -> cache expiry
        # Concurrent launches needing the same template share one CreateLaunchTemplate.
        self._creates = SingleFlight[str, None]()
        self.create_calls = 0

    async def ensure(
        self,
        nodeclass: EC2NodeClass,
        nodeclaim: NodeClaim,
        instance_types: Sequence[InstanceType],
        capacity_type: str,
        reservation: ReservationTarget | None = None,
        *,
        opt_out_of_open_reservations: bool = False,
    ) -> list[ResolvedLaunchTemplate]:
        """One template per AMI that serves some of ``instance_types``, created if missing;
        with ``reservation``, templates that launch into it."""
        opts = bootstrap_options(self._cluster, nodeclass, nodeclaim, capacity_type)
        text = userdata.render(nodeclass.spec.resolved_ami_family(), opts)
        tags = template_tags(self._cluster.name, nodeclass)
        out: list[ResolvedLaunchTemplate] = []
        for image_id, names in map_amis(nodeclass.status.amis, instance_types):
            data = template_data(
                nodeclass,
                image_id,
                text,
                reservation,
                opt_out_of_open_reservations=opt_out_of_open_reservations,
            )
            name = template_name(data, tags)
            await self._ensure_one(name, data, tags)
            out.append(ResolvedLaunchTemplate(name=name, image_id=image_id, instance_types=names))
        return out

    def invalidate(self, name: str) -> None:
        self._ensured.pop(name, None)

    async def _ensure_one(
        self, name: str, data: Mapping[str, Any], tags: Mapping[str, str]
    ) -> None:
        if self._fresh(name):
            return
        await self._creates.do(name, lambda: self._create(name, data, tags))

    def _fresh(self, name: str) -> bool:
        expiry = self._ensured.get(name)
        return expiry is not None and expiry > self._clock()

    async def _create(self, name: str, data: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        now = self._clock()
        self.create_calls += 1
        try:
            await self._clients.ec2.create_launch_template(
                LaunchTemplateName=name,
                LaunchTemplateData=dict(data),
                TagSpecifications=[
                    {
                        "ResourceType": "launch-template",
                        "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())],
                    }
                ],
            )
            log.info("created launch template", extra={"launch_template": name})
        except Exception as exc:
            if error_code(exc) != ALREADY_EXISTS:
                raise
        self._ensured[name] = now + self._ttl


async def delete_launch_templates(
    clients: AwsClients, cluster_name: str, nodeclass_name: str
) -> int:
    """Delete every template tagged for this cluster and EC2NodeClass; how many were deleted."""
    templates = await paginate(
        clients.ec2,
        "describe_launch_templates",
        "LaunchTemplates",
        Filters=[
            {"Name": f"tag:{AWS_TAG_CLUSTER}", "Values": [cluster_name]},
            {"Name": f"tag:{AWS_LABEL_EC2NODECLASS}", "Values": [nodeclass_name]},
        ],
    )
    deleted = 0
    for template in templates:
        try:
            await clients.ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])
            deleted += 1
        except Exception as exc:
            if error_code(exc) not in NOT_FOUND_CODES:
                raise
    log.info(
        "deleted launch templates",
        extra={"ec2nodeclass": nodeclass_name, "count": deleted},
    )
    return deleted
