"""Live instance types: DescribeInstanceTypes records + EC2NodeClass knobs -> InstanceType (pure).

Records are moto's bundled DescribeInstanceTypes data (what EC2 answers for these types).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.cloudprovider.aws.instancetype_math import (
    NodeKnobs,
    builtin_aws_instance_types,
    eviction_signal_amount,
    load_builtin_facts,
    parse_facts,
)
from karpenter_py.cloudprovider.aws.instancetypes import (
    discovered,
    facts_from_ec2,
    offerings_for,
    resolve_instance_types,
)
from karpenter_py.cloudprovider.aws.knobs import ephemeral_storage_for, knobs_for
from karpenter_py.model.api import convert
from karpenter_py.model.api.ec2nodeclass import BlockDeviceMapping, EC2NodeClass
from karpenter_py.model.labels import AWS_LABEL_TOPOLOGY_ZONE_ID, LABEL_OS, LABEL_TOPOLOGY_ZONE
from tests import factories
from tests.aws.launchsupport import converted_nodepool

MI = 2**20
GI = 2**30
ZONES = {"us-west-2a": "usw2-az2", "us-west-2b": ""}


@pytest.fixture(scope="module")
def records() -> dict[str, Any]:
    spec = importlib.util.find_spec("moto")
    assert spec is not None
    assert spec.submodule_search_locations
    path = (
        Path(next(iter(spec.submodule_search_locations))) / "ec2/resources/instance_types.json.gz"
    )
    with gzip.open(path, "rt") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


class Prices:
    def __init__(self, on_demand: dict[str, float], spot: dict[tuple[str, str], float]) -> None:
        self._od, self._spot = on_demand, spot

    def on_demand(self, instance_type: str) -> float | None:
        return self._od.get(instance_type)

    def spot(self, instance_type: str, zone: str) -> float | None:
        return self._spot.get((instance_type, zone))


def build(records: dict[str, Any], name: str, knobs: NodeKnobs, prices: Prices | None = None):
    facts = facts_from_ec2(records[name], ["us-west-2a", "us-west-2b", "us-west-2c"])
    [it] = resolve_instance_types(
        [facts], ZONES, region="us-west-2", knobs=knobs, pricing=prices or Prices({}, {})
    )
    return it


def nodeclass(**spec: Any) -> EC2NodeClass:
    return factories.ec2nodeclass(selector={"karpenter.sh/discovery": "c"}, **spec)


# (type, knobs, capacity, kube-reserved, eviction threshold, allocatable) - exact values
CASES = [
    (
        "m5.large",
        NodeKnobs(),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 29},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 29},
    ),
    (  # maxPods raises pods; AL2023 still sizes kube-reserved memory from the 29 ENI pods
        "m5.large",
        NodeKnobs(max_pods=110),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 110},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 110},
    ),
    (  # Bottlerocket sizes kube-reserved memory from the pods it allows: 11 x 110 + 255
        "m5.large",
        NodeKnobs(ami_family="Bottlerocket", max_pods=110),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 110},
        {"cpu": 70, "memory": 1465 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 6012 * MI, "ephemeral-storage": 17 * GI, "pods": 110},
    ),
    (  # podsPerCore caps pods at 4 x 2 vCPU
        "m5.large",
        NodeKnobs(pods_per_core=4),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 8},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 8},
    ),
    (  # Bottlerocket ignores podsPerCore
        "m5.large",
        NodeKnobs(ami_family="Bottlerocket", pods_per_core=4),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 29},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 29},
    ),
    (  # RESERVED_ENIS=1: 2 x 9 + 2 pods; kube-reserved memory still from 3 ENIs
        "m5.large",
        NodeKnobs(reserved_enis=1),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 20},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 20},
    ),
    (  # user kubeReserved / systemReserved / evictionHard, a 100Gi root volume, no VM overhead
        "m5.large",
        NodeKnobs(
            kube_reserved={"cpu": 200, "memory": GI},
            system_reserved={"cpu": 100, "memory": 512 * MI},
            eviction_hard={"memory.available": "5%", "nodefs.available": "100%"},
            ephemeral_storage=100 * GI,
            vm_memory_overhead_percent=0.0,
        ),
        {"cpu": 2000, "memory": 8192 * MI, "ephemeral-storage": 100 * GI, "pods": 29},
        {"cpu": 200, "memory": GI, "ephemeral-storage": GI},
        {"memory": 429496730, "ephemeral-storage": 0},
        {"cpu": 1700, "memory": 6656 * MI - 429496730, "ephemeral-storage": 99 * GI, "pods": 29},
    ),
    (  # evictionSoft above evictionHard: the larger reserves (10 % = ceil(794506035.2))
        "m5.large",
        NodeKnobs(
            eviction_hard={"memory.available": "5%"},
            eviction_soft={"memory.available": "10%", "nodefs.available": "15%"},
        ),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 29},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 794506036, "ephemeral-storage": 3 * GI},
        {"cpu": 1930, "memory": 7003 * MI - 794506036, "ephemeral-storage": 16 * GI, "pods": 29},
    ),
    (  # evictionSoft below evictionHard: the hard one stays
        "m5.large",
        NodeKnobs(
            eviction_hard={"memory.available": "5%"}, eviction_soft={"memory.available": "200Mi"}
        ),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 29},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 397253018, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 7003 * MI - 397253018, "ephemeral-storage": 17 * GI, "pods": 29},
    ),
    (  # evictionSoft alone replaces the 100Mi default
        "m5.large",
        NodeKnobs(eviction_soft={"memory.available": "500Mi"}),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 29},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 500 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 6503 * MI, "ephemeral-storage": 17 * GI, "pods": 29},
    ),
    (  # Bottlerocket cannot set evictionSoft: it does not count
        "m5.large",
        NodeKnobs(ami_family="Bottlerocket", eviction_soft={"memory.available": "500Mi"}),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 29},
        {"cpu": 70, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 29},
    ),
    (  # Windows: 110 pods, 50Gi C: drive, kube-reserved memory from the 110 pods
        "m5.large",
        NodeKnobs(ami_family="Windows2022", ephemeral_storage=50 * GI),
        {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 50 * GI, "pods": 110},
        {"cpu": 70, "memory": 1465 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 5 * GI},
        {"cpu": 1930, "memory": 6012 * MI, "ephemeral-storage": 44 * GI, "pods": 110},
    ),
    (  # Graviton: 64 MiB CMA, then 7.5 % of 8128 MiB (610); 4 x 14 + 2 pods
        "c6g.xlarge",
        NodeKnobs(),
        {"cpu": 4000, "memory": 7518 * MI, "ephemeral-storage": 20 * GI, "pods": 58},
        {"cpu": 80, "memory": 893 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {"cpu": 3920, "memory": 6525 * MI, "ephemeral-storage": 17 * GI, "pods": 58},
    ),
    (  # one NVIDIA T4; RAID0 makes the 125 GB NVMe disk the ephemeral storage
        "g4dn.xlarge",
        NodeKnobs(instance_store_raid0=True),
        {
            "cpu": 4000,
            "memory": 15155 * MI,
            "ephemeral-storage": 125 * 10**9,
            "pods": 29,
            "nvidia.com/gpu": 1,
        },
        {"cpu": 80, "memory": 574 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 125 * 10**8},
        {
            "cpu": 3920,
            "memory": 14481 * MI,
            "ephemeral-storage": 125 * 10**9 - GI - 125 * 10**8,
            "pods": 29,
            "nvidia.com/gpu": 1,
        },
    ),
    (  # 8 A100s, 4 EFA interfaces; 1179648 MiB - 88474 MiB VM overhead;, 15 ENIs x 49 + 2 pods on the default card
        "p4d.24xlarge",
        NodeKnobs(),
        {
            "cpu": 96000,
            "memory": 1091174 * MI,
            "ephemeral-storage": 20 * GI,
            "pods": 737,
            "nvidia.com/gpu": 8,
            "vpc.amazonaws.com/efa": 4,
        },
        {"cpu": 310, "memory": 8362 * MI, "ephemeral-storage": GI},
        {"memory": 100 * MI, "ephemeral-storage": 2 * GI},
        {
            "cpu": 95690,
            "memory": 1082712 * MI,
            "ephemeral-storage": 17 * GI,
            "pods": 737,
            "nvidia.com/gpu": 8,
            "vpc.amazonaws.com/efa": 4,
        },
    ),
]


@pytest.mark.parametrize(
    ("name", "knobs", "capacity", "kube_reserved", "eviction", "allocatable"), CASES
)
def test_exact_capacity_and_allocatable(
    records, name, knobs, capacity, kube_reserved, eviction, allocatable
):
    it = build(records, name, knobs)
    assert dict(it.capacity) == capacity
    assert dict(it.overhead.kube_reserved) == kube_reserved
    assert dict(it.overhead.eviction_threshold) == eviction
    assert dict(it.allocatable) == allocatable


def test_default_knobs_match_the_builtin_catalog(records):
    """Same arithmetic as the built-in catalog for every type both know (only zones differ)."""
    builtin = {it.name: it for it in builtin_aws_instance_types()}
    names = sorted(set(builtin) & set(records))
    assert len(names) > 1000
    for name in names:
        it = build(records, name, NodeKnobs())
        assert it.capacity == builtin[name].capacity, name
        assert it.allocatable == builtin[name].allocatable, name
        assert it.overhead == builtin[name].overhead, name


def test_facts_from_ec2_match_the_bundled_facts(records):
    """facts_from_ec2 reads a DescribeInstanceTypes record as the catalog generator does."""
    bundled = parse_facts(load_builtin_facts())
    for facts in bundled:
        live = facts_from_ec2(records[facts.name], facts.zones)
        assert live == facts.__class__(**{**_as_dict(facts), "on_demand_price": None}), facts.name


def _as_dict(facts: Any) -> dict[str, Any]:
    return {name: getattr(facts, name) for name in facts.__slots__}


@pytest.mark.parametrize(
    ("info", "kept"),
    [
        ({"SupportedVirtualizationTypes": ["hvm"], "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}}, True),
        ({"SupportedVirtualizationTypes": ["hvm"], "ProcessorInfo": {"SupportedArchitectures": ["i386", "x86_64"]}}, True),
        ({"SupportedVirtualizationTypes": ["hvm"], "ProcessorInfo": {"SupportedArchitectures": ["arm64"]}}, True),
        ({"SupportedVirtualizationTypes": ["hvm"], "ProcessorInfo": {"SupportedArchitectures": ["x86_64_mac"]}}, False),
        ({"SupportedVirtualizationTypes": ["paravirtual"], "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}}, False),
        ({}, False),
    ],
)  # fmt: skip
def test_discovery_filter(info, kept):
    assert discovered(info) is kept


def test_offerings_prices_zone_ids_and_spot_fallback(records):
    prices = Prices({"m5.large": 0.096}, {("m5.large", "us-west-2a"): 0.035})
    it = build(records, "m5.large", NodeKnobs(), prices)
    got = [
        (o.zone, o.capacity_type, o.price, o.available, o.price_estimated, dict(o.labels))
        for o in it.offerings
    ]
    assert got == [
        ("us-west-2a", "on-demand", 0.096, True, False, {AWS_LABEL_TOPOLOGY_ZONE_ID: "usw2-az2"}),
        ("us-west-2a", "spot", 0.035, True, False, {AWS_LABEL_TOPOLOGY_ZONE_ID: "usw2-az2"}),
        # no spot price known in us-west-2b yet: priced at on-demand, flagged as an estimate
        ("us-west-2b", "on-demand", 0.096, True, False, {}),
        ("us-west-2b", "spot", 0.096, True, True, {}),
    ]
    assert it.requirements[LABEL_TOPOLOGY_ZONE] == {"us-west-2a", "us-west-2b"}
    assert it.requirements[AWS_LABEL_TOPOLOGY_ZONE_ID] == {"usw2-az2"}


def test_unpriced_type_keeps_unavailable_offerings(records):
    facts = facts_from_ec2(records["m5.large"], ["us-west-2a"])
    offerings = offerings_for(facts, [("us-west-2a", "")], Prices({}, {}))
    assert [(o.capacity_type, o.available, o.price) for o in offerings] == [
        ("on-demand", False, 0.0),
        ("spot", False, 0.0),
    ]
    # a known spot price makes the spot offering available on its own
    offerings = offerings_for(
        facts, [("us-west-2a", "")], Prices({}, {("m5.large", "us-west-2a"): 0.03})
    )
    assert [(o.capacity_type, o.available, o.price) for o in offerings] == [
        ("on-demand", False, 0.0),
        ("spot", True, 0.03),
    ]


def test_type_outside_the_class_zones_has_no_offerings(records):
    facts = facts_from_ec2(records["m5.large"], ["us-west-2c"])
    [it] = resolve_instance_types(
        [facts], ZONES, region="us-west-2", knobs=NodeKnobs(), pricing=Prices({}, {})
    )
    assert it.offerings == ()
    assert it.requirements[LABEL_TOPOLOGY_ZONE] == frozenset()


def test_windows_os_label_only_on_amd64(records):
    windows = NodeKnobs(ami_family="Windows2022")
    assert build(records, "m5.large", windows).requirements[LABEL_OS] == {"windows"}
    assert build(records, "c6g.xlarge", windows).requirements[LABEL_OS] == frozenset()
    assert build(records, "c6g.xlarge", NodeKnobs()).requirements[LABEL_OS] == {"linux"}


def _bdm(device: str, size: str | None, root: bool = False) -> BlockDeviceMapping:
    ebs = {"volumeSize": size} if size else {"snapshotID": "snap-1"}
    return BlockDeviceMapping.model_validate({"deviceName": device, "ebs": ebs, "rootVolume": root})


@pytest.mark.parametrize(
    ("family", "mappings", "expected"),
    [
        ("AL2023", None, 20 * GI),
        ("AL2", None, 20 * GI),
        ("Bottlerocket", None, 20 * GI),
        ("Windows2022", None, 50 * GI),
        ("Custom", None, 20 * GI),
        ("AL2023", [_bdm("/dev/xvda", "100Gi", root=True)], 100 * GI),
        ("AL2023", [_bdm("/dev/xvdz", "80Gi", root=True), _bdm("/dev/xvda", "30Gi")], 80 * GI),
        ("AL2023", [_bdm("/dev/xvda", "50Gi")], 50 * GI),
        ("AL2023", [_bdm("/dev/xvdc", "50Gi")], 20 * GI),
        ("Bottlerocket", [_bdm("/dev/xvda", "4Gi"), _bdm("/dev/xvdb", "60Gi")], 60 * GI),
        ("Bottlerocket", [_bdm("/dev/xvda", "40Gi")], 20 * GI),
        ("Custom", [_bdm("/dev/xvda", "30Gi"), _bdm("/dev/xvdb", "40Gi")], 40 * GI),
        ("Custom", [_bdm("/dev/xvda", "30Gi"), _bdm("/dev/xvdb", None)], 20 * GI),
        ("AL2023", [_bdm("/dev/xvda", "100G", root=True)], 100 * 10**9),
        ("AL2023", [_bdm("/dev/xvda", None, root=True)], 20 * GI),
    ],
)
def test_ephemeral_storage(family, mappings, expected):
    assert ephemeral_storage_for(family, mappings) == expected


@pytest.mark.parametrize(
    ("resource", "capacity", "value", "expected"),
    [
        ("memory", 8 * GI, "100Mi", 100 * MI),
        ("memory", 1000, "5%", 50),
        ("memory", 1001, "5%", 51),
        ("memory", 1000, "100%", 0),
        ("ephemeral-storage", 20 * GI, "10%", 2 * GI),
        ("ephemeral-storage", 20 * GI, "1Gi", GI),
    ],
)
def test_eviction_signal_amount(resource, capacity, value, expected):
    assert eviction_signal_amount(resource, capacity, value) == expected


def test_knobs_from_nodeclass():
    nc = nodeclass(
        amiSelectorTerms=[{"alias": "bottlerocket@latest"}],
        kubelet={
            "maxPods": 50,
            "podsPerCore": 10,
            "kubeReserved": {"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "2Gi"},
            "systemReserved": {"memory": "300Mi"},
            "evictionHard": {"memory.available": "5%", "nodefs.available": "15%"},
            "evictionSoft": {"memory.available": "10%"},
        },
        blockDeviceMappings=[
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi"}},
            {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "80Gi"}},
        ],
        instanceStorePolicy="RAID0",
    )
    assert knobs_for(nc, vm_memory_overhead_percent=0.05, reserved_enis=1) == NodeKnobs(
        ami_family="Bottlerocket",
        max_pods=50,
        pods_per_core=10,
        kube_reserved={"cpu": 250, "memory": GI, "ephemeral-storage": 2 * GI},
        system_reserved={"memory": 300 * MI},
        eviction_hard={"memory.available": "5%", "nodefs.available": "15%"},
        eviction_soft={"memory.available": "10%"},
        ephemeral_storage=80 * GI,
        instance_store_raid0=True,
        vm_memory_overhead_percent=0.05,
        reserved_enis=1,
    )


def test_knobs_ignore_unparsable_kubelet_values():
    nc = nodeclass(
        kubelet={"maxPods": "self.vcpu * 8", "kubeReserved": {"memory": "vcpu * 10", "cpu": "1"}}
    )
    knobs = knobs_for(nc, vm_memory_overhead_percent=0.075, reserved_enis=0)
    assert knobs.max_pods is None
    assert dict(knobs.kube_reserved) == {"cpu": 1000}
    assert knobs.ami_family == "AL2023"
    assert knobs.ephemeral_storage == 20 * GI


# ------------------------------------------- the kubelet compatibility annotation (v1beta1 pools)

V1BETA1_KUBELET = {
    "maxPods": 20,
    "kubeReserved": {"cpu": "200m", "memory": "1Gi"},
    "systemReserved": {"cpu": "100m", "memory": "100Mi"},
    "evictionHard": {"memory.available": "5%"},
}
# 5 % of m5.large's 7577Mi after the 7.5 % VM overhead: ceil(7945060352 / 100 * 5)
FIVE_PERCENT_OF_M5_LARGE = 397253018


@pytest.mark.parametrize(
    ("pool_kubelet", "class_kubelet", "capacity", "allocatable"),
    [
        (  # no kubelet anywhere: the defaults
            None,
            None,
            {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 29},
            {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 29},
        ),
        (  # the converted pool's kubelet block, the class has none
            V1BETA1_KUBELET,
            None,
            {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 20},
            {
                "cpu": 2000 - 200 - 100,
                "memory": (7577 - 1024 - 100) * MI - FIVE_PERCENT_OF_M5_LARGE,
                "ephemeral-storage": 17 * GI,
                "pods": 20,
            },
        ),
        (  # the class's own kubelet when the pool has no annotation
            None,
            {"maxPods": 110},
            {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 110},
            {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 110},
        ),
        (  # both: the annotation wins, whole (upstream v1.0), so no trace of maxPods 110
            {"maxPods": 20},
            {"maxPods": 110, "systemReserved": {"cpu": "500m"}},
            {"cpu": 2000, "memory": 7577 * MI, "ephemeral-storage": 20 * GI, "pods": 20},
            {"cpu": 1930, "memory": 6903 * MI, "ephemeral-storage": 17 * GI, "pods": 20},
        ),
    ],
)
def test_kubelet_annotation_sets_capacity_and_allocatable(
    records, pool_kubelet, class_kubelet, capacity, allocatable
):
    nc = nodeclass(**({"kubelet": class_kubelet} if class_kubelet is not None else {}))
    kubelet = convert.kubelet_in_effect(
        converted_nodepool(pool_kubelet).metadata.annotations, nc.spec.kubelet
    )
    knobs = knobs_for(nc, vm_memory_overhead_percent=0.075, reserved_enis=0, kubelet=kubelet)
    it = build(records, "m5.large", knobs)
    assert dict(it.capacity) == capacity
    assert dict(it.allocatable) == allocatable


def test_knobs_from_the_annotation_kubelet():
    kubelet = convert.kubelet_in_effect(
        converted_nodepool(V1BETA1_KUBELET).metadata.annotations, None
    )
    assert knobs_for(
        nodeclass(), vm_memory_overhead_percent=0.075, reserved_enis=0, kubelet=kubelet
    ) == NodeKnobs(
        max_pods=20,
        kube_reserved={"cpu": 200, "memory": GI},
        system_reserved={"cpu": 100, "memory": 100 * MI},
        eviction_hard={"memory.available": "5%"},
    )
