"""scripts/gen_aws_catalog.py: deterministic, matches the checked-in facts, honest about sources."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "scripts" / "gen_aws_catalog.py"
CHECKED_IN = REPO_ROOT / "karpenter_py" / "data" / "aws-instance-types.json"
SHARED_PRICES = (REPO_ROOT / ".." / "shared" / "data" / "aws-on-demand-prices.json").resolve()


@pytest.fixture(scope="module")
def prices_path() -> Path:
    if not SHARED_PRICES.is_file():
        pytest.fail(
            f"the on-demand price list {SHARED_PRICES} is missing; the AWS catalog generator needs "
            "../shared/data/aws-on-demand-prices.json next to the repository checkout"
        )
    return SHARED_PRICES


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_aws_catalog", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def checked_in() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(CHECKED_IN.read_text())
    return document


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        timeout=120,
    )


def test_generator_is_deterministic_and_matches_checked_in_file(tmp_path, prices_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for out in (first, second):
        result = run(str(prices_path), "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert "instance types" in result.stdout
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() == CHECKED_IN.read_bytes(), (
        "karpenter_py/data/aws-instance-types.json is stale: run .venv/bin/python scripts/gen_aws_catalog.py"
    )


def test_default_price_path_and_check_mode(tmp_path, prices_path):
    assert run("--check").returncode == 0  # default prices path, default output
    stale = tmp_path / "stale.json"
    stale.write_text("{}")
    result = run("--check", "--out", str(stale))
    assert result.returncode == 1
    assert "out of date" in result.stderr


def test_missing_price_file_is_a_clear_error(tmp_path):
    result = run(str(tmp_path / "nope.json"), "--out", str(tmp_path / "out.json"))
    assert result.returncode != 0
    assert "price list not found" in result.stderr
    assert not (tmp_path / "out.json").exists()


def test_layout_one_line_per_type_sorted(checked_in):
    lines = CHECKED_IN.read_text().splitlines()
    records = checked_in["instanceTypes"]
    assert len(lines) == len(records) + 3  # header, "instanceTypes":[, one per type, ]}
    names = [r["name"] for r in records]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert checked_in["region"] == "us-east-1"
    assert checked_in["sources"]["moto_version"]
    for line in lines[2:-1]:
        record = json.loads(line.rstrip(","))
        assert list(record) == sorted(record)


def test_prices_come_from_the_shared_price_list(checked_in, prices_path):
    prices = json.loads(prices_path.read_text())["regions"]["us-east-1"]
    for record in checked_in["instanceTypes"]:
        assert record["on_demand_price"] == prices.get(record["name"]), record["name"]
    assert (
        checked_in["sources"]["prices_snapshot"] == json.loads(prices_path.read_text())["snapshot"]
    )


def test_selection_matches_upstream_discovery_filters(checked_in):
    archs = {a for r in checked_in["instanceTypes"] for a in r["architectures"]}
    assert archs <= {"x86_64", "arm64", "i386"}
    assert not any(r["name"].startswith("mac") for r in checked_in["instanceTypes"])
    assert all(r["zones"] for r in checked_in["instanceTypes"])


SAMPLE = [
    "m5.large",
    "c6g.large",
    "g4dn.xlarge",
    "inf1.xlarge",
    "p5.48xlarge",
    "m5.metal",
    "t3.micro",
]


def test_facts_equal_what_describe_instance_types_returns_through_botocore(script, checked_in):
    """The file moto bundles is what its EC2 API serves: cross-check a sample over boto3."""
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    by_name = {r["name"]: r for r in checked_in["instanceTypes"]}
    with moto.mock_aws():
        ec2 = boto3.client(
            "ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
        )
        described = ec2.describe_instance_types(InstanceTypes=SAMPLE)["InstanceTypes"]
        offerings = ec2.describe_instance_type_offerings(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": SAMPLE}]
        )["InstanceTypeOfferings"]
    assert sorted(i["InstanceType"] for i in described) == sorted(SAMPLE)
    for info in described:
        name = info["InstanceType"]
        zones = sorted(o["Location"] for o in offerings if o["InstanceType"] == name)
        expected = by_name[name]
        assert script.describe(info, zones, expected["on_demand_price"]) == expected, name
