"""GetProducts price-list documents and spot price history -> prices (pure, table-driven)."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from karpenter_py.cloudprovider.aws.pricing import (
    bundled_on_demand_prices,
    currency_for,
    latest_spot_prices,
    parse_price_list,
    parse_product,
    product_filters,
)


def price_doc(
    instance_type: str | None,
    dimensions: dict[str, dict[str, Any]] | None = None,
    *,
    usd: str | None = "0.0960000000",
    unit: str = "Hrs",
) -> str:
    """A price-list entry shaped like GetProducts' (AmazonEC2, one OnDemand term)."""
    attributes: dict[str, str] = {
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "regionCode": "us-west-2",
        "capacitystatus": "Used",
        "preInstalledSw": "NA",
        "vcpu": "2",
        "memory": "8 GiB",
    }
    if instance_type is not None:
        attributes["instanceType"] = instance_type
    if dimensions is None:
        per_unit = {"USD": usd} if usd is not None else {}
        dimensions = {
            "SKU1.JRTCKXETXF.6YS6EN2CT7": {
                "unit": unit,
                "description": "$0.096 per On Demand Linux m5.large Instance Hour",
                "pricePerUnit": per_unit,
            }
        }
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "sku": "SKU1",
                "attributes": attributes,
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    "SKU1.JRTCKXETXF": {
                        "offerTermCode": "JRTCKXETXF",
                        "sku": "SKU1",
                        "effectiveDate": "2026-07-01T00:00:00Z",
                        "priceDimensions": dimensions,
                        "termAttributes": {},
                    }
                },
                "Reserved": {
                    "SKU1.X": {"priceDimensions": {"d": {"pricePerUnit": {"USD": "0.0010000000"}}}}
                },
            },
            "version": "20260701000000",
            "publicationDate": "2026-07-01T00:00:00Z",
        }
    )


@pytest.mark.parametrize(
    ("document", "currency", "expected"),
    [
        (price_doc("m5.large"), "USD", ("m5.large", 0.096)),
        (price_doc("c6g.xlarge", usd="0.1360000000"), "USD", ("c6g.xlarge", 0.136)),
        (json.loads(price_doc("m5.large")), "USD", ("m5.large", 0.096)),  # already parsed
        (price_doc("m5.large"), "CNY", None),  # no price in that currency
        (price_doc("m5.large", usd="0.0000000000"), "USD", None),  # not sold on demand
        (price_doc("m5.large", usd="n/a"), "USD", None),
        (price_doc("m5.large", usd=None), "USD", None),
        (price_doc(None), "USD", None),  # no instanceType attribute
        (price_doc(""), "USD", None),
        (
            price_doc(
                "m5.metal",
                {
                    "a": {"pricePerUnit": {"USD": "0"}},
                    "b": {"pricePerUnit": {"USD": "4.6080000000"}},
                },
            ),
            "USD",
            ("m5.metal", 4.608),
        ),
        ("not json", "USD", None),
        ("[]", "USD", None),
        (json.dumps({"product": {"attributes": {"instanceType": "m5.large"}}}), "USD", None),
        (
            json.dumps(
                {
                    "product": {"attributes": {"instanceType": "m5.large"}},
                    "terms": {"OnDemand": {"t": {"priceDimensions": {"d": {"pricePerUnit": 1}}}}},
                }
            ),
            "USD",
            None,
        ),
    ],
)
def test_parse_product(document: Any, currency: str, expected: tuple[str, float] | None) -> None:
    assert parse_product(document, currency) == expected


def test_parse_price_list_skips_junk_and_keeps_the_first_price() -> None:
    documents = [
        price_doc("m5.large"),
        price_doc("m5.large", usd="9.9"),
        "garbage",
        price_doc(None),
        price_doc("c6g.xlarge", usd="0.136"),
    ]
    assert parse_price_list(documents) == {"m5.large": 0.096, "c6g.xlarge": 0.136}
    assert parse_price_list([]) == {}


def test_product_filters() -> None:
    assert product_filters("eu-west-1", "Compute Instance", "Shared") == [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "eu-west-1"},
        {"Type": "TERM_MATCH", "Field": "productFamily", "Value": "Compute Instance"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]


@pytest.mark.parametrize(
    ("region", "currency"),
    [
        ("us-east-1", "USD"),
        ("eu-central-1", "USD"),
        ("cn-north-1", "CNY"),
        ("cn-northwest-1", "CNY"),
    ],
)
def test_currency(region: str, currency: str) -> None:
    assert currency_for(region) == currency


T0 = datetime.datetime(2026, 7, 1, 12, 0, tzinfo=datetime.UTC)


def spot(
    name: str, zone: str, price: str, minutes: int, description: str = "Linux/UNIX"
) -> dict[str, Any]:
    return {
        "AvailabilityZone": zone,
        "InstanceType": name,
        "ProductDescription": description,
        "SpotPrice": price,
        "Timestamp": T0 + datetime.timedelta(minutes=minutes),
    }


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], {}),
        ([spot("m5.large", "us-west-2a", "0.0350", 0)], {("m5.large", "us-west-2a"): 0.035}),
        (  # newest wins, whatever the order of the answer
            [
                spot("m5.large", "us-west-2a", "0.0400", 10),
                spot("m5.large", "us-west-2a", "0.0350", 0),
                spot("m5.large", "us-west-2a", "0.0380", 5, "Linux/UNIX (Amazon VPC)"),
            ],
            {("m5.large", "us-west-2a"): 0.04},
        ),
        (  # per zone and per type
            [
                spot("m5.large", "us-west-2a", "0.035", 0),
                spot("m5.large", "us-west-2b", "0.036", 0),
                spot("c6g.xlarge", "us-west-2a", "0.050", 0),
            ],
            {
                ("m5.large", "us-west-2a"): 0.035,
                ("m5.large", "us-west-2b"): 0.036,
                ("c6g.xlarge", "us-west-2a"): 0.05,
            },
        ),
        (  # unusable entries are skipped
            [
                spot("m5.large", "us-west-2a", "bad", 0),
                spot("m5.large", "us-west-2b", "0", 0),
                {"InstanceType": "m5.large", "SpotPrice": "0.03"},
                {
                    "AvailabilityZone": "us-west-2c",
                    "InstanceType": "m5.large",
                    "SpotPrice": "0.031",
                },
            ],
            {("m5.large", "us-west-2c"): 0.031},
        ),
        (  # naive timestamps are taken as UTC
            [
                {**spot("m5.large", "us-west-2a", "0.02", 0), "Timestamp": T0.replace(tzinfo=None)},
                spot("m5.large", "us-west-2a", "0.03", 1),
            ],
            {("m5.large", "us-west-2a"): 0.03},
        ),
    ],
)
def test_latest_spot_prices(
    history: list[dict[str, Any]], expected: dict[tuple[str, str], float]
) -> None:
    assert latest_spot_prices(history) == expected


def test_bundled_prices_are_the_builtin_catalog_prices() -> None:
    prices = bundled_on_demand_prices()
    assert prices["m5.large"] == 0.096
    assert len(prices) > 1000
    assert all(p > 0 for p in prices.values())
