"""The built-in AWS catalog: upstream's capacity, overhead and label formulas over EC2 facts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from karpenter_py.cloudprovider.aws.instancetype_math import (
    DEFAULT_SPOT_DISCOUNT,
    DEFAULT_ZONES,
    Accelerator,
    InstanceTypeFacts,
    NeuronDevice,
    NodeKnobs,
    aws_instance_type,
    aws_instance_types,
    builtin_aws_catalog,
    builtin_aws_instance_types,
    eni_limited_pods,
    kube_reserved_cpu_millis,
    load_builtin_facts,
    memory_capacity_bytes,
    parse_facts,
)
from karpenter_py.model.fields import ParseError
from karpenter_py.model.labels import (
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
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
)

MI = 2**20
GI = 2**30


@pytest.fixture(scope="module")
def builtin():
    return {it.name: it for it in builtin_aws_instance_types()}


def facts(**overrides) -> InstanceTypeFacts:
    """An m5.large-shaped fact record, overridable field by field."""
    base = InstanceTypeFacts(
        name="m5.large",
        vcpu=2,
        memory_mib=8192,
        architectures=("x86_64",),
        max_enis=3,
        ipv4_per_eni=10,
        on_demand_price=0.096,
        usage_classes=("on-demand", "spot"),
        zones=("us-east-1a", "us-east-1b"),
        hypervisor="nitro",
        cpu_manufacturer="Intel",
        sustained_clock_ghz=3.1,
        network_bandwidth_mbps=750,
        network_performance="Up to 10 Gigabit",
        ebs_bandwidth_mbps=4750,
        ebs_optimized_support="default",
    )
    return replace(base, **overrides)


# --------------------------------------------------------------------------- formulas


@pytest.mark.parametrize(
    ("vcpu", "millis"),
    # 6 % of core 1 (60m) + 1 % of core 2 (10m) + 0.5 % of cores 3-4 (5m each) + 0.25 % beyond.
    [
        (1, 60),
        (2, 70),
        (3, 75),
        (4, 80),
        (8, 90),
        (16, 110),
        (48, 190),
        (96, 310),
        (192, 550),
        (448, 1190),
    ],
)
def test_kube_reserved_cpu(vcpu, millis):
    assert kube_reserved_cpu_millis(vcpu) == millis


@pytest.mark.parametrize(
    ("mib", "arch", "percent", "expected_bytes"),
    # The table of upstream's pkg/providers/instancetype/memory_test.go.
    [
        (8192, ["x86_64"], 0.075, 7945060352),
        (8192, ["arm64"], 0.075, 7883194368),
        (4096, ["arm64"], 0.0, 4227858432),
        (4096, ["x86_64"], 0.0, 4294967296),
        (16384, ["arm64"], 0.15, 14545846272),
        (16384, ["x86_64"], 0.15, 14602469376),
        (512, ["arm64"], 0.075, 434110464),
        (2048, [], 0.075, 1986002944),
        (1000, ["x86_64"], 0.10, 943718400),
    ],
)
def test_memory_capacity(mib, arch, percent, expected_bytes):
    assert memory_capacity_bytes(mib, arch, percent) == expected_bytes


@pytest.mark.parametrize(
    ("enis", "ips", "reserved", "pods"),
    [
        (3, 10, 0, 29),
        (2, 2, 0, 4),
        (15, 50, 0, 737),
        (3, 10, 1, 20),
        (3, 10, 3, 0),
        (3, 10, 5, 0),
        (4, 15, 0, 58),
    ],
)
def test_eni_limited_pods(enis, ips, reserved, pods):
    assert eni_limited_pods(enis, ips, reserved) == pods


# --------------------------------------------------------------------------- one type by hand

EXPECTED = {
    # name: (capacity, allocatable) in canonical units, worked out by hand from the formulas:
    # memory = MiB (-64 on arm64) - ceil(7.5 %); kube-reserved memory = 11Mi x pods + 255Mi;
    # eviction 100Mi; ephemeral 20Gi - 1Gi kube-reserved - 2Gi (10 %) eviction.
    "m5.large": (  # 2 vCPU, 8192 MiB, 3 ENIs x 10 IPv4 -> 29 pods; 8192 - 615 = 7577Mi
        {"cpu": 2000, "memory": 7577 * MI, "pods": 29, "ephemeral-storage": 20 * GI},
        {"cpu": 1930, "memory": (7577 - 574 - 100) * MI, "pods": 29, "ephemeral-storage": 17 * GI},
    ),
    "c6g.large": (  # arm64: 4096 - 64 = 4032; 4032 - ceil(302.4) = 3729Mi
        {"cpu": 2000, "memory": 3729 * MI, "pods": 29, "ephemeral-storage": 20 * GI},
        {"cpu": 1930, "memory": (3729 - 574 - 100) * MI, "pods": 29, "ephemeral-storage": 17 * GI},
    ),
    "t3.micro": (  # 2 ENIs x 2 IPv4 -> 4 pods; 1024 - 77 = 947Mi; kube-reserved 299Mi
        {"cpu": 2000, "memory": 947 * MI, "pods": 4, "ephemeral-storage": 20 * GI},
        {"cpu": 1930, "memory": (947 - 299 - 100) * MI, "pods": 4, "ephemeral-storage": 17 * GI},
    ),
    "g4dn.xlarge": (  # 4 vCPU (80m reserved), 16384 - 1229 = 15155Mi, one NVIDIA T4
        {
            "cpu": 4000,
            "memory": 15155 * MI,
            "pods": 29,
            "ephemeral-storage": 20 * GI,
            "nvidia.com/gpu": 1,
        },
        {
            "cpu": 3920,
            "memory": (15155 - 574 - 100) * MI,
            "pods": 29,
            "ephemeral-storage": 17 * GI,
            "nvidia.com/gpu": 1,
        },
    ),
    "inf1.xlarge": (  # 4 ENIs x 10 -> 38 pods (673Mi reserved); 1 Inferentia with 4 cores
        {
            "cpu": 4000,
            "memory": 7577 * MI,
            "pods": 38,
            "ephemeral-storage": 20 * GI,
            "aws.amazon.com/neuron": 1,
            "aws.amazon.com/neuroncore": 4,
        },
        {
            "cpu": 3920,
            "memory": (7577 - 673 - 100) * MI,
            "pods": 38,
            "ephemeral-storage": 17 * GI,
            "aws.amazon.com/neuron": 1,
            "aws.amazon.com/neuroncore": 4,
        },
    ),
    "p5.48xlarge": (  # 192 vCPU (550m); default card has 2 ENIs x 50 -> 100 pods; 8 H100, 32 EFA
        {
            "cpu": 192000,
            "memory": (2097152 - 157287) * MI,
            "pods": 100,
            "ephemeral-storage": 20 * GI,
            "nvidia.com/gpu": 8,
            "vpc.amazonaws.com/efa": 32,
        },
        {
            "cpu": 191450,
            "memory": (2097152 - 157287 - 1355 - 100) * MI,
            "pods": 100,
            "ephemeral-storage": 17 * GI,
            "nvidia.com/gpu": 8,
            "vpc.amazonaws.com/efa": 32,
        },
    ),
    "m5.metal": (  # 96 vCPU (310m), 15 ENIs x 50 -> 737 pods (8362Mi reserved)
        {"cpu": 96000, "memory": (393216 - 29492) * MI, "pods": 737, "ephemeral-storage": 20 * GI},
        {
            "cpu": 95690,
            "memory": (393216 - 29492 - 8362 - 100) * MI,
            "pods": 737,
            "ephemeral-storage": 17 * GI,
        },
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_known_types_have_exact_capacity_and_allocatable(builtin, name):
    capacity, allocatable = EXPECTED[name]
    it = builtin[name]
    assert dict(it.capacity) == capacity
    assert dict(it.allocatable) == allocatable


def test_m5_large_overhead_and_offerings(builtin):
    it = builtin["m5.large"]
    assert dict(it.overhead.kube_reserved) == {
        "cpu": 70,
        "memory": 574 * MI,
        "ephemeral-storage": GI,
    }
    assert dict(it.overhead.eviction_threshold) == {"memory": 100 * MI, "ephemeral-storage": 2 * GI}
    assert dict(it.overhead.system_reserved) == {}
    # EC2 offers m5.large in five of the six us-east-1 zones (not us-east-1e).
    zones = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"]
    assert [(o.zone, o.capacity_type) for o in it.offerings] == [
        (z, ct) for z in zones for ct in ("on-demand", "spot")
    ]
    od = [o for o in it.offerings if o.capacity_type == "on-demand"]
    spot = [o for o in it.offerings if o.capacity_type == "spot"]
    assert {o.price for o in od} == {0.096}
    assert not any(o.price_estimated for o in od)
    assert {o.price for o in spot} == {round(0.096 * (1 - DEFAULT_SPOT_DISCOUNT), 6)} == {0.0384}
    assert all(o.price_estimated for o in spot)
    assert it.cheapest_price() == 0.0384


EXPECTED_LABELS: dict[str, dict[str, str | None]] = {
    "m5.large": {
        LABEL_INSTANCE_TYPE: "m5.large",
        LABEL_ARCH: "amd64",
        LABEL_OS: "linux",
        LABEL_TOPOLOGY_REGION: "us-east-1",
        AWS_LABEL_INSTANCE_CATEGORY: "m",
        AWS_LABEL_INSTANCE_FAMILY: "m5",
        AWS_LABEL_INSTANCE_GENERATION: "5",
        AWS_LABEL_INSTANCE_SIZE: "large",
        AWS_LABEL_INSTANCE_CPU: "2",
        AWS_LABEL_INSTANCE_MEMORY: "8192",
        AWS_LABEL_INSTANCE_CPU_MANUFACTURER: "intel",
        AWS_LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: "3100",
        AWS_LABEL_INSTANCE_HYPERVISOR: "nitro",
        AWS_LABEL_INSTANCE_NETWORK_BANDWIDTH: "750",
        AWS_LABEL_INSTANCE_EBS_BANDWIDTH: "4750",
        AWS_LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT: "false",
        AWS_LABEL_INSTANCE_CAPABILITY_FLEX: "false",
    },
    "c6g.large": {
        LABEL_ARCH: "arm64",
        AWS_LABEL_INSTANCE_CATEGORY: "c",
        AWS_LABEL_INSTANCE_FAMILY: "c6g",
        AWS_LABEL_INSTANCE_GENERATION: "6",
        AWS_LABEL_INSTANCE_SIZE: "large",
        AWS_LABEL_INSTANCE_CPU_MANUFACTURER: "aws",
        AWS_LABEL_INSTANCE_MEMORY: "4096",
    },
    "g4dn.xlarge": {
        AWS_LABEL_INSTANCE_GPU_NAME: "t4",
        AWS_LABEL_INSTANCE_GPU_MANUFACTURER: "nvidia",
        AWS_LABEL_INSTANCE_GPU_COUNT: "1",
        AWS_LABEL_INSTANCE_GPU_MEMORY: "16384",
        AWS_LABEL_INSTANCE_LOCAL_NVME: "125",
        AWS_LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT: "true",
    },
    "inf1.xlarge": {
        AWS_LABEL_INSTANCE_CATEGORY: "inf",
        AWS_LABEL_INSTANCE_GENERATION: "1",
        AWS_LABEL_INSTANCE_ACCELERATOR_NAME: "inferentia",
        AWS_LABEL_INSTANCE_ACCELERATOR_MANUFACTURER: "aws",
        AWS_LABEL_INSTANCE_ACCELERATOR_COUNT: "1",
    },
    "c7i-flex.large": {
        AWS_LABEL_INSTANCE_FAMILY: "c7i-flex",
        AWS_LABEL_INSTANCE_CATEGORY: "c",
        AWS_LABEL_INSTANCE_GENERATION: "7",
        AWS_LABEL_INSTANCE_CAPABILITY_FLEX: "true",
    },
    "u-6tb1.112xlarge": {
        AWS_LABEL_INSTANCE_CATEGORY: "u",
        AWS_LABEL_INSTANCE_GENERATION: "1",
        AWS_LABEL_INSTANCE_FAMILY: "u-6tb1",
        AWS_LABEL_INSTANCE_SIZE: "112xlarge",
    },
    "m5.metal": {AWS_LABEL_INSTANCE_HYPERVISOR: "", AWS_LABEL_INSTANCE_SIZE: "metal"},
    # EC2 states m4.large's bandwidth only as "Moderate"; upstream's table has no number for it.
    "m4.large": {AWS_LABEL_INSTANCE_HYPERVISOR: "xen", AWS_LABEL_INSTANCE_NETWORK_BANDWIDTH: None},
    # m1 types report no sustained clock speed; upstream prints 0.
    "m1.small": {AWS_LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: "0"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_LABELS))
def test_known_type_labels(builtin, name):
    it = builtin[name]
    for key, value in EXPECTED_LABELS[name].items():
        if value is None:
            assert key not in it.requirements, key
        else:
            assert it.requirements.get(key) == {value}, key
    assert it.requirements[AWS_LABEL_INSTANCE_TENANCY] == {"default", "dedicated"}


def test_gpu_labels_absent_without_a_gpu(builtin):
    it = builtin["m5.large"]
    for key in (
        AWS_LABEL_INSTANCE_GPU_NAME,
        AWS_LABEL_INSTANCE_ACCELERATOR_NAME,
        AWS_LABEL_INSTANCE_LOCAL_NVME,
    ):
        assert key not in it.requirements
    assert "nvidia.com/gpu" not in it.capacity


# --------------------------------------------------------------------------- every built-in type


def test_builtin_catalog_invariants(builtin):
    document = load_builtin_facts()
    records = parse_facts(document)
    priced = {r.name for r in records if r.on_demand_price}
    assert set(builtin) == priced
    assert len(builtin) > 1000
    for name, it in builtin.items():
        assert it.offerings, name
        assert all(o.price > 0 and o.available for o in it.offerings), name
        assert it.requirements[LABEL_TOPOLOGY_ZONE] == {o.zone for o in it.offerings}, name
        assert it.requirements[LABEL_CAPACITY_TYPE] == {o.capacity_type for o in it.offerings}, name
        assert {o.zone for o in it.offerings} <= set(DEFAULT_ZONES), name
        od = {o.price for o in it.offerings if o.capacity_type == "on-demand"}
        spot = {o.price for o in it.offerings if o.capacity_type == "spot"}
        assert len(od) == 1, name
        assert all(p < min(od) for p in spot), name
        assert all(o.price_estimated == (o.capacity_type == "spot") for o in it.offerings), name
        assert it.requirements[LABEL_ARCH] <= {"amd64", "arm64"}, name
        assert it.requirements[LABEL_OS] == {"linux"}, name
        assert set(it.allocatable) == set(it.capacity), name
        for resource, amount in it.allocatable.items():
            assert 0 <= amount <= it.capacity[resource], (name, resource)
        assert it.allocatable["cpu"] > 0, name
        assert it.allocatable["memory"] > 0, name


def test_builtin_is_cached_but_returns_a_fresh_list():
    first = builtin_aws_instance_types()
    second = builtin_aws_instance_types()
    assert first == second
    assert first is not second
    first.clear()
    assert builtin_aws_instance_types() == second


# m5.large / m5d.large (2 vCPU, 8 GiB, 29 ENI-limited pods; m5d has 75 GB of local NVMe) under the
# default class: 29 pods, the 20Gi root volume, 1930m / 6903Mi allocatable.
M5_DEFAULT = {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 29}


@pytest.mark.parametrize(
    ("knobs", "name", "capacity", "allocatable_pods", "allocatable_storage"),
    [
        (NodeKnobs(), "m5.large", M5_DEFAULT, 29, 17 * GI),
        (NodeKnobs(max_pods=8), "m5.large", {**M5_DEFAULT, "pods": 8}, 8, 17 * GI),
        (NodeKnobs(pods_per_core=3), "m5.large", {**M5_DEFAULT, "pods": 6}, 6, 17 * GI),
        # 100Gi less 1Gi kube-reserved less the 10 % nodefs eviction threshold
        (
            NodeKnobs(ephemeral_storage=100 * GI),
            "m5.large",
            {**M5_DEFAULT, "ephemeral-storage": 100 * GI},
            29,
            89 * GI,
        ),
        # RAID0: the 75 GB of instance store; a type without one keeps the root volume
        (
            NodeKnobs(instance_store_raid0=True),
            "m5d.large",
            {**M5_DEFAULT, "ephemeral-storage": 75 * 10**9},
            29,
            75 * 10**9 - GI - 75 * 10**8,
        ),
        (NodeKnobs(instance_store_raid0=True), "m5.large", M5_DEFAULT, 29, 17 * GI),
        # Windows does not size pods by ENIs
        (
            NodeKnobs(ami_family="Windows2022"),
            "m5.large",
            {**M5_DEFAULT, "pods": 110},
            110,
            17 * GI,
        ),
    ],
)
def test_builtin_under_knobs(knobs, name, capacity, allocatable_pods, allocatable_storage):
    types = {it.name: it for it in builtin_aws_instance_types(knobs)}
    it = types[name]
    assert dict(it.capacity) == capacity
    assert it.allocatable["pods"] == allocatable_pods
    assert it.allocatable["ephemeral-storage"] == allocatable_storage
    # The offerings and labels do not depend on the knobs (Windows aside: its os label).
    default = {i.name: i for i in builtin_aws_instance_types()}[name]
    assert it.offerings == default.offerings
    assert len(types) == len(builtin_aws_instance_types())


def test_builtin_under_knobs_is_built_once_per_distinct_knobs():
    default = builtin_aws_catalog()
    assert builtin_aws_catalog(NodeKnobs()) is default
    eight = builtin_aws_catalog(NodeKnobs(max_pods=8, kube_reserved={"cpu": 100}))
    assert builtin_aws_catalog(NodeKnobs(max_pods=8, kube_reserved={"cpu": 100})) is eight
    assert eight is not default
    assert builtin_aws_catalog(NodeKnobs(max_pods=9, kube_reserved={"cpu": 100})) is not eight


# --------------------------------------------------------------------------- options


def test_zones_restrict_offerings_and_unoffered_types_drop_out():
    it = aws_instance_type(facts(), zones=["us-east-1b", "us-east-1c"])
    assert it is not None
    assert [(o.zone, o.capacity_type) for o in it.offerings] == [
        ("us-east-1b", "on-demand"),
        ("us-east-1b", "spot"),
    ]
    assert aws_instance_type(facts(), zones=["us-east-1e"]) is None
    # Facts without zone data are offered in every requested zone.
    anywhere = aws_instance_type(facts(zones=()), zones=["eu-west-1a"], region="eu-west-1")
    assert anywhere is not None
    assert anywhere.requirements[LABEL_TOPOLOGY_REGION] == {"eu-west-1"}
    assert {o.zone for o in anywhere.offerings} == {"eu-west-1a"}


def test_unpriced_and_on_demand_only_types():
    assert aws_instance_type(facts(on_demand_price=None)) is None
    od_only = aws_instance_type(facts(usage_classes=("capacity-block", "on-demand")))
    assert od_only is not None
    assert {o.capacity_type for o in od_only.offerings} == {"on-demand"}
    assert od_only.requirements[LABEL_CAPACITY_TYPE] == {"on-demand"}


def test_reserved_enis_shrink_pods_but_not_kube_reserved_memory():
    it = aws_instance_type(facts(), knobs=NodeKnobs(reserved_enis=1))
    assert it is not None
    assert it.capacity["pods"] == 20
    assert it.overhead.kube_reserved["memory"] == 574 * MI  # still 29 ENI-limited pods


def test_spot_discount_and_vm_overhead_options():
    it = aws_instance_type(
        facts(), spot_discount=0.0, knobs=NodeKnobs(vm_memory_overhead_percent=0.0)
    )
    assert it is not None
    assert {o.price for o in it.offerings} == {0.096}
    assert it.capacity["memory"] == 8192 * MI
    for bad in (
        {"spot_discount": 1.0},
        {"spot_discount": -0.1},
        {"knobs": NodeKnobs(vm_memory_overhead_percent=1.5)},
        {"knobs": NodeKnobs(reserved_enis=-1)},
    ):
        with pytest.raises(ValueError):
            aws_instance_types([facts()], **bad)


def test_accelerator_variants():
    two_gpu_models = facts(
        name="x1.big",
        gpus=(Accelerator("A10G", "NVIDIA", 2, 24576), Accelerator("MI25", "AMD", 1, 16384)),
    )
    it = aws_instance_type(two_gpu_models)
    assert it is not None
    assert it.capacity["nvidia.com/gpu"] == 2
    assert it.capacity["amd.com/gpu"] == 1
    assert AWS_LABEL_INSTANCE_GPU_NAME not in it.requirements  # labels only for one model
    gaudi = aws_instance_type(
        facts(name="dl1.24xlarge", gpus=(Accelerator("Gaudi HL-205", "Habana", 8, 32768),))
    )
    assert gaudi is not None
    assert gaudi.capacity["habana.ai/gaudi"] == 8
    assert gaudi.requirements[AWS_LABEL_INSTANCE_GPU_NAME] == {"gaudi-hl-205"}
    inference = aws_instance_type(
        facts(inference_accelerators=(Accelerator("Radeon Pro V520", "AMD", 1, 8192),))
    )
    assert inference is not None
    assert inference.requirements[AWS_LABEL_INSTANCE_ACCELERATOR_NAME] == {"radeon-pro-v520"}
    assert inference.requirements[AWS_LABEL_INSTANCE_ACCELERATOR_MANUFACTURER] == {"amd"}
    trainium = aws_instance_type(
        facts(neuron_devices=(NeuronDevice("Trainium", 16, 2, 32768),), max_efa_interfaces=8)
    )
    assert trainium is not None
    assert trainium.capacity["aws.amazon.com/neuron"] == 16
    assert trainium.capacity["aws.amazon.com/neuroncore"] == 32
    assert trainium.capacity["vpc.amazonaws.com/efa"] == 8
    assert trainium.requirements[AWS_LABEL_INSTANCE_ACCELERATOR_COUNT] == {"16"}


def test_ebs_and_nvme_labels_follow_upstream_conditions():
    not_default = aws_instance_type(facts(ebs_optimized_support="supported"))
    assert not_default is not None
    assert AWS_LABEL_INSTANCE_EBS_BANDWIDTH not in not_default.requirements
    nvme = aws_instance_type(facts(instance_storage_gb=474, instance_storage_nvme="required"))
    assert nvme is not None
    assert nvme.requirements[AWS_LABEL_INSTANCE_LOCAL_NVME] == {"474"}
    hdd = aws_instance_type(facts(instance_storage_gb=1680, instance_storage_nvme="unsupported"))
    assert hdd is not None
    assert AWS_LABEL_INSTANCE_LOCAL_NVME not in hdd.requirements


# --------------------------------------------------------------------------- facts parsing


def test_parse_facts_accepts_document_or_list():
    record = {
        "name": "m5.large",
        "vcpu": 2,
        "memory_mib": 8192,
        "architectures": ["x86_64"],
        "max_enis": 3,
        "ipv4_per_eni": 10,
        "on_demand_price": 0.096,
        "usage_classes": ["on-demand", "spot"],
        "gpus": [{"name": "T4", "manufacturer": "NVIDIA", "count": 1, "memory_mib": 16384}],
    }
    (from_doc,) = parse_facts({"instanceTypes": [record]})
    (from_list,) = parse_facts([record])
    assert from_doc == from_list
    assert from_doc.gpus == (Accelerator("T4", "NVIDIA", 1, 16384),)
    assert from_doc.zones == ()
    (it,) = aws_instance_types({"instanceTypes": [record]})
    assert it.capacity["pods"] == 29
    assert [i.name for i in aws_instance_types([record])] == ["m5.large"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"types": []}, "instanceTypes: expected a list"),
        ([3], r"instanceTypes\[0\]: expected an object"),
        ([{"name": "x"}], r"instanceTypes\[0\]\.vcpu: required field is missing"),
        # One rule for every document (model.fields): a required field that is null is a wrong
        # type, not a missing one.
        (
            [{"name": "x", "vcpu": None}],
            r"instanceTypes\[0\]\.vcpu: expected an integer, got null$",
        ),
        ([{"name": "x", "vcpu": "2"}], r"instanceTypes\[0\]\.vcpu: expected"),
        ([{"name": "x", "vcpu": True}], r"instanceTypes\[0\]\.vcpu: expected"),
        (
            [
                {
                    "name": "x",
                    "vcpu": 2,
                    "memory_mib": 1,
                    "architectures": [1],
                    "max_enis": 1,
                    "ipv4_per_eni": 1,
                }
            ],
            # A list of strings names the element that is not one (model.fields' rule).
            r"instanceTypes\[0\]\.architectures\[0\]: expected a string, got the number 1$",
        ),
    ],
)
def test_parse_facts_errors(document, message):
    with pytest.raises(ParseError, match=message):
        parse_facts(document)
