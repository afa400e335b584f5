"""AWS instance-type arithmetic: EC2 instance facts turned into ``InstanceType``s as upstream does.

The live provider (``instancetypes``), its pricing (``pricing``) and the EC2NodeClass knobs
(``knobs``) all build on this module; the built-in catalog ``karpenter-py plan`` uses is the
same arithmetic over the bundled facts (``builtin_aws_catalog``).

Facts come from ``karpenter_py/data/aws-instance-types.json`` (written by
``scripts/gen_aws_catalog.py`` from moto's DescribeInstanceTypes data and a public on-demand
price list). Reading that file is the only I/O here (``load_builtin_facts``); everything else is
pure computation reproducing aws/karpenter-provider-aws ``pkg/providers/instancetype/types.go``
for the default EC2NodeClass (AL2023, no kubelet overrides, no block device mappings):

- cpu = default vCPUs.
- memory = SizeInMiB (minus 64 MiB when the first listed architecture is arm64: Graviton CMA
  reservation) minus ceil(that x ``vm_memory_overhead_percent``) MiB.
- pods = ENI-limited: (ENIs on the default network card - reserved ENIs) x (IPv4 per ENI - 1) + 2.
- ephemeral-storage = 20Gi (the default root volume).
- extended resources: nvidia.com/gpu, amd.com/gpu, habana.ai/gaudi (GPU counts by manufacturer),
  aws.amazon.com/neuron and aws.amazon.com/neuroncore (Neuron devices and cores),
  vpc.amazonaws.com/efa (max EFA interfaces). Zero amounts are left out.
- kube-reserved: cpu 6 % of the first core + 1 % of the second + 0.5 % of cores 3-4 + 0.25 % of
  the rest; memory 11Mi x pods + 255Mi (pods ENI-limited with no reserved ENIs); ephemeral 1Gi.
- eviction threshold: memory 100Mi, ephemeral-storage 10 % of capacity.
- labels: instance type, arch, os=linux, zone, region, capacity type, and the
  ``karpenter.k8s.aws/instance-*`` labels (category/generation from the name pattern, family/size
  split on ".", GPU and accelerator labels only for a single device model, ...).
- offerings: each configured zone where EC2 offers the type (DescribeInstanceTypeOfferings),
  on-demand at the list price and, for types that support spot, spot at an ESTIMATED price
  (on-demand x (1 - ``spot_discount``), flagged ``price_estimated=True``): there is no spot price
  data here, and upstream's own fallback (spot = on-demand until the first spot price refresh)
  would make spot never look cheaper.

``build_instance_type`` is the same arithmetic with the EC2NodeClass knobs upstream honours
(``NodeKnobs``: AMI family, kubelet maxPods / podsPerCore / kubeReserved / systemReserved /
evictionHard / evictionSoft, root volume size, RAID0 instance store); the live provider
(``cloudprovider.aws.instancetypes``) builds its types with it from DescribeInstanceTypes, and
``builtin_aws_catalog(knobs)`` builds the bundled catalog under a class's knobs
(``cloudprovider.aws.knobs.knobs_for``) for ``karpenter-py plan``.

Not modelled (no data without AWS calls or upstream's generated tables): vpc.amazonaws.com/pod-eni
(trunk branch interfaces), ``topology.k8s.aws/zone-id``, and the DoesNotExist requirements upstream
adds for labels a type lacks (``InstanceType.requirements`` can only list values, so such keys are
absent). Types without an on-demand price are left out, as upstream marks all of their offerings
unavailable.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Final

from karpenter_py.model import fields
from karpenter_py.model.instancetype import InstanceType, Offering, Overhead, make_instance_type
from karpenter_py.model.labels import (
    ARCH_AMD64,
    ARCH_ARM64,
    AWS_LABEL_INSTANCE_ACCELERATOR_COUNT,
    AWS_LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
    AWS_LABEL_INSTANCE_ACCELERATOR_NAME,
    AWS_LABEL_INSTANCE_CAPABILITY_FLEX,
    AWS_LABEL_INSTANCE_CATEGORY,
    AWS_LABEL_INSTANCE_CPU,
    AWS_LABEL_INSTANCE_CPU_MANUFACTURER,
    AWS_LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    AWS_LABEL_INSTANCE_EBS_BANDWIDTH,
    AWS_LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT,
    AWS_LABEL_INSTANCE_FAMILY,
    AWS_LABEL_INSTANCE_GENERATION,
    AWS_LABEL_INSTANCE_GPU_COUNT,
    AWS_LABEL_INSTANCE_GPU_MANUFACTURER,
    AWS_LABEL_INSTANCE_GPU_MEMORY,
    AWS_LABEL_INSTANCE_GPU_NAME,
    AWS_LABEL_INSTANCE_HYPERVISOR,
    AWS_LABEL_INSTANCE_LOCAL_NVME,
    AWS_LABEL_INSTANCE_MEMORY,
    AWS_LABEL_INSTANCE_NETWORK_BANDWIDTH,
    AWS_LABEL_INSTANCE_SIZE,
    AWS_LABEL_INSTANCE_TENANCY,
    AWS_LABEL_TOPOLOGY_ZONE_ID,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    RESOURCE_AMD_GPU,
    RESOURCE_AWS_NEURON,
    RESOURCE_AWS_NEURON_CORE,
    RESOURCE_CPU,
    RESOURCE_EFA,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_HABANA_GAUDI,
    RESOURCE_MEMORY,
    RESOURCE_NVIDIA_GPU,
    RESOURCE_PODS,
)
from karpenter_py.model.quantity import parse_resource

__all__ = [
    "BUILTIN_FACTS_RESOURCE",
    "DEFAULT_REGION",
    "DEFAULT_SPOT_DISCOUNT",
    "DEFAULT_ZONES",
    "VM_MEMORY_OVERHEAD_PERCENT",
    "Accelerator",
    "InstanceTypeFacts",
    "NeuronDevice",
    "NodeKnobs",
    "aws_instance_type",
    "aws_instance_types",
    "build_instance_type",
    "builtin_aws_catalog",
    "builtin_aws_instance_types",
    "eni_limited_pods",
    "eviction_signal_amount",
    "kube_reserved_cpu_millis",
    "load_builtin_facts",
    "memory_capacity_bytes",
    "parse_facts",
    "pod_capacity",
]

MI: Final = 2**20
GI: Final = 2**30

DEFAULT_REGION: Final = "us-east-1"
DEFAULT_ZONES: Final = tuple(f"us-east-1{z}" for z in "abcdef")
# VM_MEMORY_OVERHEAD_PERCENT setting default.
VM_MEMORY_OVERHEAD_PERCENT: Final = 0.075
# ESTIMATE, not data: spot price = on-demand x (1 - 0.6). A round figure in the range of the
# savings AWS advertises for spot; every spot offering built with it says price_estimated=True.
DEFAULT_SPOT_DISCOUNT: Final = 0.6
# Default root volume (amifamily.DefaultEBS, 20Gi gp3).
DEFAULT_EPHEMERAL_STORAGE: Final = 20 * GI
# Graviton instances keep 64 MiB of CMA memory the OS cannot use.
ARM64_CMA_RESERVED_MIB: Final = 64
KUBE_RESERVED_EPHEMERAL: Final = 1 * GI
EVICTION_MEMORY: Final = 100 * MI
EVICTION_NODEFS_PERCENT: Final = 10.0
# (start, end, share) of millicores reserved for the kubelet, as in kubeReservedResources.
_CPU_RESERVED_RANGES: Final = (
    (0, 1000, 0.06),
    (1000, 2000, 0.01),
    (2000, 4000, 0.005),
    (4000, 1 << 31, 0.0025),
)
_KUBE_ARCH: Final = {"x86_64": ARCH_AMD64, "arm64": ARCH_ARM64}
# instanceTypeScheme: category letters, optional "-<n>tb", generation digits, anything, ".".
_INSTANCE_TYPE_SCHEME: Final = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
_TENANCIES: Final = frozenset({"default", "dedicated"})

BUILTIN_FACTS_RESOURCE: Final = "data/aws-instance-types.json"


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True, slots=True)
class Accelerator:
    """A GPU or inference accelerator model on an instance type (one DescribeInstanceTypes entry)."""

    name: str
    manufacturer: str
    count: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class NeuronDevice:
    name: str
    count: int
    cores: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class InstanceTypeFacts:
    """What EC2 says about one instance type, plus its on-demand price (None when unknown)."""

    name: str
    vcpu: int
    memory_mib: int
    architectures: tuple[str, ...]
    max_enis: int
    ipv4_per_eni: int
    on_demand_price: float | None
    usage_classes: tuple[str, ...] = (CAPACITY_TYPE_ON_DEMAND,)
    zones: tuple[str, ...] = ()
    hypervisor: str = ""
    bare_metal: bool = False
    cpu_manufacturer: str = ""
    sustained_clock_ghz: float | None = None
    gpus: tuple[Accelerator, ...] = ()
    inference_accelerators: tuple[Accelerator, ...] = ()
    neuron_devices: tuple[NeuronDevice, ...] = ()
    efa_supported: bool = False
    max_efa_interfaces: int = 0
    instance_storage_gb: int | None = None
    instance_storage_nvme: str = "unsupported"
    network_bandwidth_mbps: int | None = None
    network_performance: str = ""
    ebs_bandwidth_mbps: int | None = None
    ebs_optimized_support: str = "unsupported"
    encryption_in_transit: bool = False


# AMI family behaviour that changes the arithmetic (upstream's amifamily feature flags):
# (ENI-limited pod density, kube-reserved memory sized from ENI-limited pods, podsPerCore honoured,
# evictionSoft counted in the eviction threshold)
_FamilyFlags = tuple[bool, bool, bool, bool]
_FAMILY_FLAGS: Final[Mapping[str, _FamilyFlags]] = {
    "AL2": (True, True, True, True),
    "AL2023": (True, True, True, True),
    "Custom": (True, True, True, True),
    "Bottlerocket": (True, False, False, False),
    "Windows2019": (False, False, True, True),
    "Windows2022": (False, False, True, True),
    "Windows2025": (False, False, True, True),
}
# Pods a node allows when the family does not size pods by ENIs (the kubelet default).
DEFAULT_MAX_PODS: Final = 110


@dataclass(frozen=True, slots=True)
class NodeKnobs:
    """The node class settings that change capacity and overhead; defaults are the default class
    (AL2023, no kubelet overrides, the 20Gi root volume).

    ``kube_reserved`` / ``system_reserved`` are per-resource overrides in canonical units;
    ``eviction_hard`` / ``eviction_soft`` keep the raw kubelet signal values ("100Mi", "10%")
    because percentages are taken of each type's own capacity.
    """

    ami_family: str = "AL2023"
    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)
    eviction_soft: Mapping[str, str] = field(default_factory=dict)
    ephemeral_storage: int = DEFAULT_EPHEMERAL_STORAGE
    # instanceStorePolicy RAID0: local NVMe (TotalSizeInGB, decimal) is the ephemeral storage.
    instance_store_raid0: bool = False
    vm_memory_overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT
    reserved_enis: int = 0

    @property
    def windows(self) -> bool:
        return self.ami_family.startswith("Windows")


# Field readers over one facts record: ``where`` is the record's path. A missing required key is
# "required field is missing"; an optional one that is missing or null reads as its default.


def _int(record: Mapping[str, object], key: str, where: str, default: int | None = None) -> int:
    path = f"{where}.{key}"
    if default is None:
        return fields.json_int(fields.required_key(record, key, where), path, required=True)
    return fields.json_int(record.get(key), path, default)


def _opt_int(record: Mapping[str, object], key: str, where: str) -> int | None:
    value = record.get(key)
    return None if value is None else fields.json_int(value, f"{where}.{key}")


def _str(record: Mapping[str, object], key: str, where: str, default: str | None = None) -> str:
    path = f"{where}.{key}"
    if default is None:
        return fields.json_str(fields.required_key(record, key, where), path, required=True)
    return fields.json_str(record.get(key), path, default)


def _bool(record: Mapping[str, object], key: str, where: str) -> bool:
    return fields.json_bool(record.get(key), f"{where}.{key}")


def _opt_float(record: Mapping[str, object], key: str, where: str) -> float | None:
    value = record.get(key)
    return None if value is None else fields.json_number(value, f"{where}.{key}")


def _strs(
    record: Mapping[str, object], key: str, where: str, default: tuple[str, ...] = ()
) -> tuple[str, ...]:
    value = record.get(key)
    return (
        default
        if value is None
        else tuple(fields.json_str_list(value, f"{where}.{key}", required=True))
    )


def _records(
    record: Mapping[str, object], key: str, where: str
) -> list[tuple[Mapping[str, object], str]]:
    path = f"{where}.{key}"
    return [
        (fields.json_object(item, f"{path}[{index}]", required=True), f"{path}[{index}]")
        for index, item in enumerate(fields.json_list(record.get(key), path))
    ]


def _accelerators(record: Mapping[str, object], key: str, where: str) -> tuple[Accelerator, ...]:
    return tuple(
        Accelerator(
            name=_str(item, "name", at, ""),
            manufacturer=_str(item, "manufacturer", at, ""),
            count=_int(item, "count", at, 0),
            memory_mib=_int(item, "memory_mib", at, 0),
        )
        for item, at in _records(record, key, where)
    )


def _facts_from_record(record: Mapping[str, object], where: str) -> InstanceTypeFacts:
    return InstanceTypeFacts(
        name=_str(record, "name", where),
        vcpu=_int(record, "vcpu", where),
        memory_mib=_int(record, "memory_mib", where),
        architectures=_strs(record, "architectures", where),
        max_enis=_int(record, "max_enis", where),
        ipv4_per_eni=_int(record, "ipv4_per_eni", where),
        on_demand_price=_opt_float(record, "on_demand_price", where),
        usage_classes=_strs(record, "usage_classes", where, (CAPACITY_TYPE_ON_DEMAND,)),
        zones=_strs(record, "zones", where),
        hypervisor=_str(record, "hypervisor", where, ""),
        bare_metal=_bool(record, "bare_metal", where),
        cpu_manufacturer=_str(record, "cpu_manufacturer", where, ""),
        sustained_clock_ghz=_opt_float(record, "sustained_clock_ghz", where),
        gpus=_accelerators(record, "gpus", where),
        inference_accelerators=_accelerators(record, "inference_accelerators", where),
        neuron_devices=tuple(
            NeuronDevice(
                name=_str(item, "name", at, ""),
                count=_int(item, "count", at, 0),
                cores=_int(item, "cores", at, 0),
                memory_mib=_int(item, "memory_mib", at, 0),
            )
            for item, at in _records(record, "neuron_devices", where)
        ),
        efa_supported=_bool(record, "efa_supported", where),
        max_efa_interfaces=_int(record, "max_efa_interfaces", where, 0),
        instance_storage_gb=_opt_int(record, "instance_storage_gb", where),
        instance_storage_nvme=_str(record, "instance_storage_nvme", where, "unsupported"),
        network_bandwidth_mbps=_opt_int(record, "network_bandwidth_mbps", where),
        network_performance=_str(record, "network_performance", where, ""),
        ebs_bandwidth_mbps=_opt_int(record, "ebs_bandwidth_mbps", where),
        ebs_optimized_support=_str(record, "ebs_optimized_support", where, "unsupported"),
        encryption_in_transit=_bool(record, "encryption_in_transit", where),
    )


def parse_facts(document: object) -> list[InstanceTypeFacts]:
    """Facts from the parsed JSON document (``{"instanceTypes": [...]}``) or its bare list."""
    records = document.get("instanceTypes") if isinstance(document, Mapping) else document
    out: list[InstanceTypeFacts] = []
    for index, record in enumerate(fields.json_list(records, "instanceTypes", required=True)):
        where = f"instanceTypes[{index}]"
        out.append(_facts_from_record(fields.json_object(record, where, required=True), where))
    return out


def load_builtin_facts() -> object:
    """The parsed facts file bundled with the package (the one I/O in this module)."""
    resource = importlib.resources.files("karpenter_py").joinpath(BUILTIN_FACTS_RESOURCE)
    with resource.open("rb") as fh:
        document: object = json.load(fh)
    return document


# --------------------------------------------------------------------------- formulas


def eni_limited_pods(max_enis: int, ipv4_per_eni: int, reserved_enis: int = 0) -> int:
    """Max pods the VPC CNI allows: usable ENIs x (IPv4 per ENI - 1) + 2, or 0 with no usable ENI."""
    usable = max(max_enis - reserved_enis, 0)
    if usable == 0:
        return 0
    return usable * (ipv4_per_eni - 1) + 2


def kube_reserved_cpu_millis(vcpu: int) -> int:
    """6 % of the first core, 1 % of the second, 0.5 % of cores 3-4, 0.25 % of the rest (truncated)."""
    cpu = vcpu * 1000
    total = 0
    for start, end, share in _CPU_RESERVED_RANGES:
        if cpu >= start:
            span = float(end - start) if cpu >= end else float(cpu - start)
            total += int(span * share)
    return total


def memory_capacity_bytes(
    memory_mib: int, architectures: Sequence[str], vm_memory_overhead_percent: float
) -> int:
    """Reported memory less the Graviton CMA reservation and the VM overhead, in bytes."""
    mib = memory_mib
    if architectures and architectures[0] == "arm64":
        mib -= ARM64_CMA_RESERVED_MIB
    # Same float steps as upstream: ceil(bytes * percent / 1024 / 1024) MiB.
    overhead_mib = math.ceil(float(mib * MI) * vm_memory_overhead_percent / 1024 / 1024)
    return (mib - overhead_mib) * MI


def _kube_arch(architectures: Sequence[str]) -> str:
    for arch in architectures:
        if arch in _KUBE_ARCH:
            return _KUBE_ARCH[arch]
    return str(list(architectures))


def _lower_kebab(text: str) -> str:
    return text.replace(" ", "-").lower()


def _go_round(value: float) -> int:
    # Go's math.Round: half away from zero (inputs here are positive).
    return math.floor(value + 0.5)


def _requirements(
    facts: InstanceTypeFacts,
    zones: Sequence[str],
    capacity_types: Sequence[str],
    region: str,
    os_values: frozenset[str] = frozenset(["linux"]),
) -> dict[str, frozenset[str]]:
    reqs: dict[str, frozenset[str]] = {
        LABEL_INSTANCE_TYPE: frozenset([facts.name]),
        LABEL_ARCH: frozenset([_kube_arch(facts.architectures)]),
        LABEL_OS: os_values,
        LABEL_TOPOLOGY_ZONE: frozenset(zones),
        LABEL_TOPOLOGY_REGION: frozenset([region]),
        LABEL_CAPACITY_TYPE: frozenset(capacity_types),
        AWS_LABEL_INSTANCE_CPU: frozenset([str(facts.vcpu)]),
        AWS_LABEL_INSTANCE_MEMORY: frozenset([str(facts.memory_mib)]),
        AWS_LABEL_INSTANCE_HYPERVISOR: frozenset([facts.hypervisor]),
        AWS_LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT: frozenset(
            ["true" if facts.encryption_in_transit else "false"]
        ),
        AWS_LABEL_INSTANCE_TENANCY: _TENANCIES,
        AWS_LABEL_INSTANCE_CPU_MANUFACTURER: frozenset([_lower_kebab(facts.cpu_manufacturer)]),
        # Upstream prints 0 when EC2 reports no sustained clock speed.
        AWS_LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: frozenset(
            [str(_go_round((facts.sustained_clock_ghz or 0.0) * 1000))]
        ),
    }
    if match := _INSTANCE_TYPE_SCHEME.match(facts.name):
        reqs[AWS_LABEL_INSTANCE_CATEGORY] = frozenset([match.group(1)])
        reqs[AWS_LABEL_INSTANCE_GENERATION] = frozenset([match.group(3)])
    parts = facts.name.split(".")
    if len(parts) == 2:
        reqs[AWS_LABEL_INSTANCE_FAMILY] = frozenset([parts[0]])
        reqs[AWS_LABEL_INSTANCE_SIZE] = frozenset([parts[1]])
    reqs[AWS_LABEL_INSTANCE_CAPABILITY_FLEX] = frozenset(
        ["true" if "-flex" in parts[0] else "false"]
    )
    if facts.instance_storage_gb is not None and facts.instance_storage_nvme != "unsupported":
        reqs[AWS_LABEL_INSTANCE_LOCAL_NVME] = frozenset([str(facts.instance_storage_gb)])
    # Upstream's bandwidth table leaves out types EC2 describes only in words ("Moderate", "High").
    if facts.network_bandwidth_mbps is not None and any(
        c.isdigit() for c in facts.network_performance
    ):
        reqs[AWS_LABEL_INSTANCE_NETWORK_BANDWIDTH] = frozenset([str(facts.network_bandwidth_mbps)])
    if len(facts.gpus) == 1:
        gpu = facts.gpus[0]
        reqs[AWS_LABEL_INSTANCE_GPU_NAME] = frozenset([_lower_kebab(gpu.name)])
        reqs[AWS_LABEL_INSTANCE_GPU_MANUFACTURER] = frozenset([_lower_kebab(gpu.manufacturer)])
        reqs[AWS_LABEL_INSTANCE_GPU_COUNT] = frozenset([str(gpu.count)])
        reqs[AWS_LABEL_INSTANCE_GPU_MEMORY] = frozenset([str(gpu.memory_mib)])
    if len(facts.inference_accelerators) == 1 and not facts.neuron_devices:
        acc = facts.inference_accelerators[0]
        reqs[AWS_LABEL_INSTANCE_ACCELERATOR_NAME] = frozenset([_lower_kebab(acc.name)])
        reqs[AWS_LABEL_INSTANCE_ACCELERATOR_MANUFACTURER] = frozenset(
            [_lower_kebab(acc.manufacturer)]
        )
        reqs[AWS_LABEL_INSTANCE_ACCELERATOR_COUNT] = frozenset([str(acc.count)])
    if len(facts.neuron_devices) == 1:
        device = facts.neuron_devices[0]
        reqs[AWS_LABEL_INSTANCE_ACCELERATOR_NAME] = frozenset([_lower_kebab(device.name)])
        reqs[AWS_LABEL_INSTANCE_ACCELERATOR_MANUFACTURER] = frozenset(["aws"])
        reqs[AWS_LABEL_INSTANCE_ACCELERATOR_COUNT] = frozenset([str(device.count)])
    if facts.ebs_optimized_support == "default" and facts.ebs_bandwidth_mbps is not None:
        reqs[AWS_LABEL_INSTANCE_EBS_BANDWIDTH] = frozenset([str(facts.ebs_bandwidth_mbps)])
    return reqs


def _capacity(
    facts: InstanceTypeFacts, pods: int, vm_memory_overhead_percent: float, storage: int
) -> dict[str, int]:
    capacity = {
        RESOURCE_CPU: facts.vcpu * 1000,
        RESOURCE_MEMORY: memory_capacity_bytes(
            facts.memory_mib, facts.architectures, vm_memory_overhead_percent
        ),
        RESOURCE_EPHEMERAL_STORAGE: storage,
        RESOURCE_PODS: pods,
    }
    by_manufacturer = {
        "NVIDIA": RESOURCE_NVIDIA_GPU,
        "AMD": RESOURCE_AMD_GPU,
        "Habana": RESOURCE_HABANA_GAUDI,
    }
    extended: dict[str, int] = {}
    for gpu in facts.gpus:
        if (resource := by_manufacturer.get(gpu.manufacturer)) is not None:
            extended[resource] = extended.get(resource, 0) + gpu.count
    if facts.neuron_devices:
        extended[RESOURCE_AWS_NEURON] = sum(d.count for d in facts.neuron_devices)
        first = facts.neuron_devices[0]
        extended[RESOURCE_AWS_NEURON_CORE] = first.count * first.cores
    extended[RESOURCE_EFA] = facts.max_efa_interfaces
    capacity.update({name: amount for name, amount in extended.items() if amount > 0})
    return capacity


def _family_flags(ami_family: str) -> _FamilyFlags:
    # Unknown families behave as Custom (ENI-limited, like upstream's default family).
    return _FAMILY_FLAGS.get(ami_family, _FAMILY_FLAGS["Custom"])


def pod_capacity(facts: InstanceTypeFacts, knobs: NodeKnobs) -> int:
    """Pods: kubelet maxPods if set, else ENI-limited (110 for Windows), capped by podsPerCore."""
    eni_density, _, per_core, _ = _family_flags(knobs.ami_family)
    if knobs.max_pods is not None:
        count = knobs.max_pods
    elif eni_density:
        count = eni_limited_pods(facts.max_enis, facts.ipv4_per_eni, knobs.reserved_enis)
    else:
        count = DEFAULT_MAX_PODS
    if knobs.pods_per_core is not None and knobs.pods_per_core > 0 and per_core:
        count = min(count, knobs.pods_per_core * facts.vcpu)
    return count


def eviction_signal_amount(resource: str, capacity: int, value: str) -> int:
    """An evictionHard value as an amount: "10%" of ``capacity`` (100% disables it), or a quantity."""
    text = value.strip()
    if text.endswith("%"):
        percent = float(text[:-1])
        if percent == 100.0:
            percent = 0.0
        return math.ceil(float(capacity) / 100 * percent)
    return parse_resource(resource, text)


def _os_values(facts: InstanceTypeFacts, knobs: NodeKnobs) -> frozenset[str]:
    if not knobs.windows:
        return frozenset(["linux"])
    # Windows AMIs exist for amd64 only; other types get no OS value, so nothing selects them.
    return frozenset(["windows"]) if _kube_arch(facts.architectures) == ARCH_AMD64 else frozenset()


def _overhead(
    facts: InstanceTypeFacts, pods: int, capacity: Mapping[str, int], knobs: NodeKnobs
) -> Overhead:
    _, eni_memory_overhead, _, eviction_soft = _family_flags(knobs.ami_family)
    # AL2/AL2023/Custom size kube-reserved memory from the ENI-limited pod count (no reserved
    # ENIs, whatever maxPods says); Bottlerocket and Windows from the pods the node allows.
    overhead_pods = (
        eni_limited_pods(facts.max_enis, facts.ipv4_per_eni, 0) if eni_memory_overhead else pods
    )
    kube_reserved = {
        RESOURCE_CPU: kube_reserved_cpu_millis(facts.vcpu),
        RESOURCE_MEMORY: (11 * overhead_pods + 255) * MI,
        RESOURCE_EPHEMERAL_STORAGE: KUBE_RESERVED_EPHEMERAL,
    }
    kube_reserved.update(knobs.kube_reserved)
    storage = capacity[RESOURCE_EPHEMERAL_STORAGE]
    eviction = {
        RESOURCE_MEMORY: EVICTION_MEMORY,
        RESOURCE_EPHEMERAL_STORAGE: math.ceil(float(storage) / 100 * EVICTION_NODEFS_PERCENT),
    }
    # A kubelet threshold replaces the default; with both a hard and a soft one the larger
    # reserves (upstream; Bottlerocket cannot set evictionSoft, so it does not count there).
    thresholds = (
        [knobs.eviction_hard, knobs.eviction_soft] if eviction_soft else [knobs.eviction_hard]
    )
    override: dict[str, int] = {}
    for signals in thresholds:
        for signal, resource in (
            ("memory.available", RESOURCE_MEMORY),
            ("nodefs.available", RESOURCE_EPHEMERAL_STORAGE),
        ):
            if (value := signals.get(signal)) is not None:
                amount = eviction_signal_amount(resource, capacity[resource], value)
                override[resource] = max(override.get(resource, amount), amount)
    eviction.update(override)
    return Overhead(
        kube_reserved=kube_reserved,
        system_reserved=dict(knobs.system_reserved),
        eviction_threshold=eviction,
    )


def build_instance_type(
    facts: InstanceTypeFacts,
    offerings: Sequence[Offering],
    *,
    zones: Sequence[str],
    capacity_types: Sequence[str],
    region: str,
    knobs: NodeKnobs | None = None,
    zone_ids: Sequence[str] = (),
) -> InstanceType:
    """The ``InstanceType`` for ``facts`` under ``knobs`` (the default class when None).

    ``zones`` and ``capacity_types`` become the type's requirements; ``zone_ids`` (when known)
    adds ``topology.k8s.aws/zone-id``. Offerings are taken as given.
    """
    knobs = knobs or NodeKnobs()
    pods = pod_capacity(facts, knobs)
    storage = knobs.ephemeral_storage
    if knobs.instance_store_raid0 and facts.instance_storage_gb is not None:
        storage = facts.instance_storage_gb * 10**9
    capacity = _capacity(facts, pods, knobs.vm_memory_overhead_percent, storage)
    requirements = _requirements(facts, zones, capacity_types, region, _os_values(facts, knobs))
    if zone_ids:
        requirements[AWS_LABEL_TOPOLOGY_ZONE_ID] = frozenset(zone_ids)
    return make_instance_type(
        name=facts.name,
        requirements=requirements,
        capacity=capacity,
        offerings=tuple(offerings),
        overhead=_overhead(facts, pods, capacity, knobs),
    )


def aws_instance_type(
    facts: InstanceTypeFacts,
    *,
    zones: Sequence[str] = DEFAULT_ZONES,
    region: str = DEFAULT_REGION,
    knobs: NodeKnobs | None = None,
    spot_discount: float = DEFAULT_SPOT_DISCOUNT,
) -> InstanceType | None:
    """One ``InstanceType`` under ``knobs`` (the default class when None), or None when it has no
    price or no offering in ``zones``."""
    if facts.on_demand_price is None or facts.on_demand_price <= 0:
        return None
    offered = set(facts.zones)
    type_zones = [z for z in zones if not offered or z in offered]
    capacity_types = [
        ct for ct in (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT) if ct in facts.usage_classes
    ]
    if not type_zones or not capacity_types:
        return None
    # Rounded to a millionth of a dollar so estimates print cleanly (0.0384, not 0.038400000000000004).
    spot_price = round(facts.on_demand_price * (1.0 - spot_discount), 6)
    offerings = [
        Offering(
            zone=zone,
            capacity_type=ct,
            price=spot_price if ct == CAPACITY_TYPE_SPOT else facts.on_demand_price,
            price_estimated=ct == CAPACITY_TYPE_SPOT,
        )
        for zone in type_zones
        for ct in capacity_types
    ]
    return build_instance_type(
        facts,
        offerings,
        zones=type_zones,
        capacity_types=capacity_types,
        region=region,
        knobs=knobs,
    )


def aws_instance_types(
    facts: object,
    *,
    zones: Sequence[str] = DEFAULT_ZONES,
    region: str = DEFAULT_REGION,
    knobs: NodeKnobs | None = None,
    spot_discount: float = DEFAULT_SPOT_DISCOUNT,
) -> list[InstanceType]:
    """Instance types under ``knobs`` (the default class when None) for every priced fact
    offered in at least one of ``zones``, by name.

    ``facts`` is the parsed facts document (as ``load_builtin_facts`` returns it), its bare list
    of records, or already parsed ``InstanceTypeFacts``.
    """
    if not 0.0 <= spot_discount < 1.0:
        raise ValueError(f"spot_discount must be in [0, 1), got {spot_discount}")
    knobs = knobs or NodeKnobs()
    if not 0.0 <= knobs.vm_memory_overhead_percent < 1.0:
        raise ValueError(
            f"vm_memory_overhead_percent must be in [0, 1), got {knobs.vm_memory_overhead_percent}"
        )
    if knobs.reserved_enis < 0:
        raise ValueError(f"reserved_enis must be >= 0, got {knobs.reserved_enis}")
    parsed: list[InstanceTypeFacts]
    if isinstance(facts, Iterable) and not isinstance(facts, Mapping | str | bytes):
        items = list(facts)
        if all(isinstance(item, InstanceTypeFacts) for item in items):
            parsed = [item for item in items if isinstance(item, InstanceTypeFacts)]
        else:
            parsed = parse_facts(items)
    else:
        parsed = parse_facts(facts)
    out: list[InstanceType] = []
    for item in sorted(parsed, key=lambda f: f.name):
        instance_type = aws_instance_type(
            item,
            zones=zones,
            region=region,
            knobs=knobs,
            spot_discount=spot_discount,
        )
        if instance_type is not None:
            out.append(instance_type)
    return out


@functools.cache
def _builtin_facts() -> tuple[InstanceTypeFacts, ...]:
    document = load_builtin_facts()
    if not isinstance(document, Mapping):
        raise fields.ParseError(BUILTIN_FACTS_RESOURCE, "expected a JSON object")
    return tuple(parse_facts(document))


def _knobs_key(knobs: NodeKnobs) -> str:
    """``knobs`` as canonical JSON: NodeKnobs has dict fields, so it cannot key a cache itself."""
    return json.dumps(asdict(knobs), sort_keys=True)


# A few distinct classes per run (one per EC2NodeClass of a plan's input); bounded all the same.
@functools.lru_cache(maxsize=64)
def _builtin(key: str) -> tuple[InstanceType, ...]:
    return tuple(aws_instance_types(_builtin_facts(), knobs=NodeKnobs(**json.loads(key))))


def builtin_aws_catalog(knobs: NodeKnobs | None = None) -> tuple[InstanceType, ...]:
    """The bundled us-east-1 catalog under ``knobs`` (the default class when None), built once
    per distinct knobs: equal knobs get the same tuple, so the solver's per-list indexes are
    shared by every pool using it."""
    return _builtin(_knobs_key(knobs or NodeKnobs()))


def builtin_aws_instance_types(knobs: NodeKnobs | None = None) -> list[InstanceType]:
    """``builtin_aws_catalog(knobs)`` as a fresh list (the callers' own to change)."""
    return list(builtin_aws_catalog(knobs))
