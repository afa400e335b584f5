"""The EC2NodeClass settings that change an instance type's capacity and overhead (pure).

``knobs_for`` reads a class (and the kubelet settings in effect, see
``karpenter_py.model.api.convert.kubelet_in_effect``) into the ``instancetype_math.NodeKnobs``
the instance-type arithmetic (``instancetype_math.build_instance_type``) takes: AMI family, kubelet maxPods / podsPerCore /
kubeReserved / systemReserved / evictionHard / evictionSoft, the ephemeral storage the block
device mappings give, RAID0 instance store. Both the live provider
(``cloudprovider.aws.instancetypes``) and ``karpenter-py plan`` (over the built-in catalog) use it,
so a plan sizes nodes as the controller does. No I/O: unusable kubelet values are logged and
ignored, as the controller ignores them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Final

from karpenter_py.cloudprovider.aws.instancetype_math import DEFAULT_EPHEMERAL_STORAGE, NodeKnobs
from karpenter_py.model.api.ec2nodeclass import BlockDeviceMapping, EC2NodeClass
from karpenter_py.model.labels import RESOURCE_EPHEMERAL_STORAGE
from karpenter_py.model.quantity import QuantityError, parse_resource, parse_resources

__all__ = ["ephemeral_storage_for", "knobs_for"]

# The logger the live provider has always logged these warnings under.
log = logging.getLogger("karpenter.aws.instancetypes")

GI: Final = 2**30
# (device holding the kubelet's ephemeral storage, its default size) per AMI family.
_FAMILY_EPHEMERAL_DEVICE: Final[Mapping[str, tuple[str, int]]] = {
    "AL2": ("/dev/xvda", 20 * GI),
    "AL2023": ("/dev/xvda", 20 * GI),
    "Bottlerocket": ("/dev/xvdb", 20 * GI),
    "Windows2019": ("/dev/sda1", 50 * GI),
    "Windows2022": ("/dev/sda1", 50 * GI),
    "Windows2025": ("/dev/sda1", 50 * GI),
}


def _volume_size(mapping: BlockDeviceMapping) -> int | None:
    if mapping.ebs is None or mapping.ebs.volume_size is None:
        return None
    return parse_resource(RESOURCE_EPHEMERAL_STORAGE, mapping.ebs.volume_size)


def ephemeral_storage_for(ami_family: str, mappings: Sequence[BlockDeviceMapping] | None) -> int:
    """Bytes of ephemeral storage: the rootVolume mapping's size, else (Custom) the last
    mapping's, else the family's ephemeral device in the mappings, else the family default."""
    device, default = _FAMILY_EPHEMERAL_DEVICE.get(ami_family, ("", DEFAULT_EPHEMERAL_STORAGE))
    if mappings:
        root = next((m for m in mappings if m.root_volume), None)
        if root is not None and (size := _volume_size(root)) is not None:
            return size
        if ami_family == "Custom":
            # A custom AMI's layout is unknown; upstream takes the last mapping.
            return _volume_size(mappings[-1]) or DEFAULT_EPHEMERAL_STORAGE
        for mapping in mappings:
            if mapping.device_name == device and (size := _volume_size(mapping)) is not None:
                return size
    return default


def _int_setting(kubelet: Mapping[str, object], key: str, nodeclass: str) -> int | None:
    value = kubelet.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    # CEL expressions (the NodeClassCEL gate) are not evaluated here.
    log.warning(
        "kubelet setting ignored: not an integer",
        extra={"nodeclass": nodeclass, "key": key, "value": str(value)},
    )
    return None


def _resource_setting(kubelet: Mapping[str, object], key: str, nodeclass: str) -> dict[str, int]:
    value = kubelet.get(key)
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, int] = {}
    for name, quantity in value.items():
        try:
            out.update(parse_resources({str(name): str(quantity)}))
        except QuantityError:
            log.warning(
                "kubelet reservation ignored: not a quantity",
                extra={"nodeclass": nodeclass, "key": f"{key}.{name}", "value": str(quantity)},
            )
    return out


def knobs_for(
    nodeclass: EC2NodeClass,
    *,
    vm_memory_overhead_percent: float,
    reserved_enis: int,
    kubelet: Mapping[str, object] | None = None,
) -> NodeKnobs:
    """The settings of ``nodeclass`` that change capacity and overhead. ``kubelet``: the
    kubelet settings in effect (``convert.kubelet_in_effect``), None for the class's own."""
    spec = nodeclass.spec
    family = spec.resolved_ami_family()
    if kubelet is None:
        kubelet = spec.kubelet or {}
    name = nodeclass.metadata.name or ""
    eviction = kubelet.get("evictionHard")
    soft = kubelet.get("evictionSoft")
    return NodeKnobs(
        ami_family=family,
        max_pods=_int_setting(kubelet, "maxPods", name),
        pods_per_core=_int_setting(kubelet, "podsPerCore", name),
        kube_reserved=_resource_setting(kubelet, "kubeReserved", name),
        system_reserved=_resource_setting(kubelet, "systemReserved", name),
        eviction_hard=(
            {str(k): str(v) for k, v in eviction.items()} if isinstance(eviction, Mapping) else {}
        ),
        eviction_soft=(
            {str(k): str(v) for k, v in soft.items()} if isinstance(soft, Mapping) else {}
        ),
        ephemeral_storage=ephemeral_storage_for(family, spec.block_device_mappings),
        instance_store_raid0=spec.instance_store_policy == "RAID0",
        vm_memory_overhead_percent=vm_memory_overhead_percent,
        reserved_enis=reserved_enis,
    )
