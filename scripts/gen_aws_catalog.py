#!/usr/bin/env python3
"""Generate karpenter_py/data/aws-instance-types.json, the facts behind the built-in AWS catalog.

Source of the instance facts: the DescribeInstanceTypes and DescribeInstanceTypeOfferings data
that moto bundles (``moto/ec2/resources/instance_types.json[.gz]`` and
``moto/ec2/resources/instance_type_offerings/availability-zone/<region>.json[.gz]``), read
directly from the installed moto package. These files are what moto's EC2 API serves, so the
result is the same as calling DescribeInstanceTypes through botocore against moto
(tests/unit/catalog checks a sample that way), without starting a server.

Instance types are selected as upstream's AWS provider discovers them: virtualization type hvm
and an x86_64 or arm64 processor (mac instances report x86_64_mac/arm64_mac and drop out).
Every selected type is written; ``on_demand_price`` is null when the price list has no Linux
on-demand price for it (the catalog leaves those types out, since upstream marks offerings
without a price unavailable).

On-demand prices come from a public price-list snapshot (default
../shared/data/aws-on-demand-prices.json relative to the repository root, key
``regions.<region>``). Output is deterministic: records sorted by name, keys sorted, one line
per instance type.

    .venv/bin/python scripts/gen_aws_catalog.py [PRICES_JSON] [--out PATH] [--region us-east-1] [--check]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PRICES = REPO_ROOT / ".." / "shared" / "data" / "aws-on-demand-prices.json"
DEFAULT_OUT = REPO_ROOT / "karpenter_py" / "data" / "aws-instance-types.json"
FORMAT_VERSION = 1
DISCOVERED_ARCHITECTURES = ("x86_64", "arm64")


def moto_resources() -> Path:
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("moto is not installed; install the dev extras (pip install -e '.[dev]')")
    return Path(next(iter(spec.submodule_search_locations))) / "ec2" / "resources"


def read_json(path: Path) -> object:
    """Read ``path`` or, when only a gzipped copy exists, ``path.gz``."""
    if path.exists():
        return json.loads(path.read_text())
    gz = path.with_name(path.name + ".gz")
    if gz.exists():
        with gzip.open(gz, "rt") as fh:
            return json.load(fh)
    raise SystemExit(f"{path} (or {gz.name}) not found in the installed moto package")


def mbps_from_gbps(gbps: float) -> int:
    return math.floor(gbps * 1000 + 0.5)


def describe(info: dict[str, Any], zones: list[str], price: float | None) -> dict[str, Any]:
    """The raw facts of one DescribeInstanceTypes entry that the catalog needs."""
    processor = info["ProcessorInfo"]
    network = info["NetworkInfo"]
    cards = network["NetworkCards"]
    default_index = network.get("DefaultNetworkCardIndex", 0)
    default_card = next(c for c in cards if c.get("NetworkCardIndex", 0) == default_index)
    record: dict[str, Any] = {
        "name": info["InstanceType"],
        "vcpu": info["VCpuInfo"]["DefaultVCpus"],
        "memory_mib": info["MemoryInfo"]["SizeInMiB"],
        "architectures": list(processor["SupportedArchitectures"]),
        "bare_metal": bool(info.get("BareMetal", False)),
        "max_enis": default_card["MaximumNetworkInterfaces"],
        "ipv4_per_eni": network["Ipv4AddressesPerInterface"],
        "efa_supported": bool(network.get("EfaSupported", False)),
        "encryption_in_transit": bool(network.get("EncryptionInTransitSupported", False)),
        "network_performance": network.get("NetworkPerformance", ""),
        "usage_classes": sorted(info.get("SupportedUsageClasses", [])),
        "zones": zones,
        "on_demand_price": price,
    }
    if "Hypervisor" in info:
        record["hypervisor"] = info["Hypervisor"]
    if "Manufacturer" in processor:
        record["cpu_manufacturer"] = processor["Manufacturer"]
    if "SustainedClockSpeedInGhz" in processor:
        record["sustained_clock_ghz"] = processor["SustainedClockSpeedInGhz"]
    efa = network.get("EfaInfo") or {}
    if efa.get("MaximumEfaInterfaces"):
        record["max_efa_interfaces"] = efa["MaximumEfaInterfaces"]
    if all("BaselineBandwidthInGbps" in c for c in cards):
        record["network_bandwidth_mbps"] = mbps_from_gbps(
            sum(c["BaselineBandwidthInGbps"] for c in cards)
        )
    ebs = info.get("EbsInfo") or {}
    record["ebs_optimized_support"] = ebs.get("EbsOptimizedSupport", "unsupported")
    ebs_optimized = ebs.get("EbsOptimizedInfo") or {}
    if "MaximumBandwidthInMbps" in ebs_optimized:
        record["ebs_bandwidth_mbps"] = ebs_optimized["MaximumBandwidthInMbps"]
    storage = info.get("InstanceStorageInfo") or {}
    if "TotalSizeInGB" in storage:
        record["instance_storage_gb"] = storage["TotalSizeInGB"]
        record["instance_storage_nvme"] = storage.get("NvmeSupport", "unsupported")
    gpus = [
        {
            "name": g.get("Name", ""),
            "manufacturer": g.get("Manufacturer", ""),
            "count": g.get("Count", 0),
            "memory_mib": (g.get("MemoryInfo") or {}).get("SizeInMiB", 0),
        }
        for g in (info.get("GpuInfo") or {}).get("Gpus", [])
    ]
    if gpus:
        record["gpus"] = gpus
    accelerators = [
        {
            "name": a.get("Name", ""),
            "manufacturer": a.get("Manufacturer", ""),
            "count": a.get("Count", 0),
            "memory_mib": (a.get("MemoryInfo") or {}).get("SizeInMiB", 0),
        }
        for a in (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators", [])
    ]
    if accelerators:
        record["inference_accelerators"] = accelerators
    neuron = [
        {
            "name": d.get("Name", ""),
            "count": d.get("Count", 0),
            "cores": (d.get("CoreInfo") or {}).get("Count", 0),
            "memory_mib": (d.get("MemoryInfo") or {}).get("SizeInMiB", 0),
        }
        for d in (info.get("NeuronInfo") or {}).get("NeuronDevices", [])
    ]
    if neuron:
        record["neuron_devices"] = neuron
    return record


def discovered(info: dict[str, Any]) -> bool:
    """Upstream's DescribeInstanceTypes filters: hvm, and an x86_64 or arm64 processor."""
    return "hvm" in info.get("SupportedVirtualizationTypes", []) and any(
        arch in DISCOVERED_ARCHITECTURES for arch in info["ProcessorInfo"]["SupportedArchitectures"]
    )


def build(prices_path: Path, region: str) -> tuple[str, int]:
    resources = moto_resources()
    types = read_json(resources / "instance_types.json")
    offerings = read_json(
        resources / "instance_type_offerings" / "availability-zone" / f"{region}.json"
    )
    if not isinstance(types, dict) or not isinstance(offerings, list):
        raise SystemExit("unexpected layout of moto's EC2 resource files")
    try:
        prices_doc = json.loads(prices_path.read_text())
    except FileNotFoundError:
        raise SystemExit(f"price list not found: {prices_path}") from None
    prices = prices_doc.get("regions", {}).get(region)
    if not isinstance(prices, dict) or not prices:
        raise SystemExit(
            f"{prices_path}: no on-demand prices for region {region!r} under regions.{region}"
        )

    zones: dict[str, set[str]] = {}
    for offering in offerings:
        zones.setdefault(offering["InstanceType"], set()).add(offering["Location"])

    records = []
    for name in sorted(types):
        info = types[name]
        if not discovered(info) or name not in zones:
            continue
        price = prices.get(name)
        records.append(
            describe(info, sorted(zones[name]), float(price) if price is not None else None)
        )

    sources = {
        "instance_facts": "moto/ec2/resources/instance_types.json (DescribeInstanceTypes)",
        "zones": f"moto/ec2/resources/instance_type_offerings/availability-zone/{region}.json",
        "moto_version": importlib.metadata.version("moto"),
        "prices": str(prices_doc.get("source", "")),
        "prices_snapshot": str(prices_doc.get("snapshot", "")),
        "prices_unit": str(prices_doc.get("unit", "")),
    }
    head = json.dumps(
        {"format": FORMAT_VERSION, "region": region, "sources": sources},
        sort_keys=True,
        separators=(",", ":"),
    )
    lines = [json.dumps(r, sort_keys=True, separators=(",", ":")) for r in records]
    return head[:-1] + ',\n"instanceTypes":[\n' + ",\n".join(lines) + "\n]}\n", len(records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "prices", nargs="?", type=Path, default=DEFAULT_PRICES, help="on-demand price list JSON"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the facts")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument(
        "--check", action="store_true", help="fail if --out differs from what would be generated"
    )
    args = parser.parse_args(argv)
    text, count = build(args.prices, args.region)
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date; run scripts/gen_aws_catalog.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {count} instance types to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
