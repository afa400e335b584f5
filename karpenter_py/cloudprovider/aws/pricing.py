"""EC2 prices: on-demand from the Pricing API, spot from the spot price history.

On-demand prices come from ``pricing:GetProducts`` (AmazonEC2, Linux, no pre-installed software,
capacity status Used) in two queries as upstream makes them: shared-tenancy "Compute Instance"
products, then dedicated "Compute Instance (bare metal)" products for the metal types. Until the
first successful query, and always in an isolated VPC (no route to the Pricing API), the
bundled list prices are used (us-east-1, the same data the built-in catalog uses).

Spot prices come from ``ec2:DescribeSpotPriceHistory`` (Linux/UNIX, StartTime now: the current
price of every type in every zone), keeping the newest entry per (type, zone). Before the first
successful spot refresh ``spot()`` answers None; callers price spot at the on-demand price then,
as upstream does.

A refresh that fails keeps the prices it had and logs why; ``seq_num`` goes up whenever any price
changes so callers can cache what they computed from prices. Concurrent refreshes share one
(``aio.SingleFlight``).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from karpenter_py.aio.singleflight import SingleFlight
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, is_aws_error, paginate
from karpenter_py.cloudprovider.aws.instancetype_math import load_builtin_facts, parse_facts

__all__ = [
    "REFRESH_INTERVAL",
    "PricingProvider",
    "bundled_on_demand_prices",
    "latest_spot_prices",
    "parse_price_list",
    "parse_product",
    "product_filters",
]

log = logging.getLogger("karpenter.aws.pricing")

REFRESH_INTERVAL: Final = datetime.timedelta(hours=12)
# Bound on one refresh phase: a hung endpoint must not stall the refresh loop forever.
CALL_TIMEOUT: Final = datetime.timedelta(minutes=5)
SPOT_PRODUCT_DESCRIPTIONS: Final = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
# (productFamily, tenancy): metal types are listed as dedicated bare-metal products only.
_PRODUCT_QUERIES: Final = (
    ("Compute Instance", "Shared"),
    ("Compute Instance (bare metal)", "Dedicated"),
)


def bundled_on_demand_prices() -> dict[str, float]:
    """The on-demand prices bundled with the package (us-east-1 list prices, $/h)."""
    return {
        facts.name: facts.on_demand_price
        for facts in parse_facts(load_builtin_facts())
        if facts.on_demand_price is not None and facts.on_demand_price > 0
    }


def currency_for(region: str) -> str:
    """China regions are priced in CNY, every other region in USD."""
    return "CNY" if region.startswith("cn-") else "USD"


def product_filters(region: str, product_family: str, tenancy: str) -> list[dict[str, str]]:
    """GetProducts filters for Linux on-demand instance prices in ``region``."""
    terms = {
        "regionCode": region,
        "productFamily": product_family,
        "tenancy": tenancy,
        "operatingSystem": "Linux",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _hourly_price(term: Mapping[str, Any], currency: str) -> float | None:
    for dimension in _mapping(term.get("priceDimensions")).values():
        raw = _mapping(_mapping(dimension).get("pricePerUnit")).get(currency)
        try:
            price = float(raw) if raw is not None else 0.0
        except (TypeError, ValueError):
            continue
        # Zero-priced dimensions belong to products that are not really sold on demand.
        if price > 0:
            return price
    return None


def parse_product(
    document: str | Mapping[str, Any], currency: str = "USD"
) -> tuple[str, float] | None:
    """(instance type, on-demand price per hour) from one GetProducts PriceList entry.

    Entries are JSON strings (``{"product": {"attributes": {"instanceType": ...}}, "terms":
    {"OnDemand": {<term>: {"priceDimensions": {<dim>: {"pricePerUnit": {"USD": "0.096"}}}}}}}``);
    anything without an instance type or a positive price in ``currency`` gives None.
    """
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return None
    doc = _mapping(document)
    name = _mapping(_mapping(doc.get("product")).get("attributes")).get("instanceType")
    if not isinstance(name, str) or not name:
        return None
    for term in _mapping(_mapping(doc.get("terms")).get("OnDemand")).values():
        if (price := _hourly_price(_mapping(term), currency)) is not None:
            return name, price
    return None


def parse_price_list(
    documents: Iterable[str | Mapping[str, Any]], currency: str = "USD"
) -> dict[str, float]:
    """Instance type -> on-demand $/h over GetProducts PriceList entries (first price wins)."""
    prices: dict[str, float] = {}
    for document in documents:
        if (parsed := parse_product(document, currency)) is not None:
            prices.setdefault(parsed[0], parsed[1])
    return prices


def _timestamp(entry: Mapping[str, Any]) -> float:
    stamp = entry.get("Timestamp")
    if isinstance(stamp, datetime.datetime):
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=datetime.UTC)
        return stamp.timestamp()
    return 0.0


def latest_spot_prices(history: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(instance type, zone) -> the newest spot price in a DescribeSpotPriceHistory answer."""
    newest: dict[tuple[str, str], tuple[float, float]] = {}
    for entry in history:
        name, zone = entry.get("InstanceType"), entry.get("AvailabilityZone")
        try:
            price = float(entry.get("SpotPrice", ""))
        except (TypeError, ValueError):
            continue
        if not isinstance(name, str) or not isinstance(zone, str) or price <= 0:
            continue
        stamp = _timestamp(entry)
        current = newest.get((name, zone))
        if current is None or stamp >= current[0]:
            newest[(name, zone)] = (stamp, price)
    return {key: price for key, (_, price) in newest.items()}


class PricingProvider:
    """On-demand and spot prices for the region of ``clients``, refreshed in the background."""

    def __init__(
        self,
        clients: AwsClients,
        *,
        isolated_vpc: bool,
        fallback: Mapping[str, float] | None = None,
        refresh_interval: datetime.timedelta = REFRESH_INTERVAL,
        call_timeout: datetime.timedelta = CALL_TIMEOUT,
    ) -> None:
        self._clients = clients
        self._isolated_vpc = isolated_vpc
        self._interval = refresh_interval.total_seconds()
        self._timeout = call_timeout.total_seconds()
        self._on_demand: dict[str, float] = dict(
            bundled_on_demand_prices() if fallback is None else fallback
        )
        self._spot: dict[tuple[str, str], float] = {}
        self.seq_num = 0
        # True once GetProducts answered for this region (False: fallback prices in use).
        self.on_demand_live = False
        self.spot_live = False
        self._refreshes = SingleFlight[str, None]()

    def on_demand(self, instance_type: str) -> float | None:
        return self._on_demand.get(instance_type)

    def spot(self, instance_type: str, zone: str) -> float | None:
        return self._spot.get((instance_type, zone))

    async def refresh(self) -> None:
        """Refresh on-demand (not in an isolated VPC) and spot prices; never raises AWS errors.
        A call that comes while a refresh runs waits for that one."""
        await self._refreshes.do("prices", self._refresh)

    async def _refresh(self) -> None:
        if not self._isolated_vpc:
            await self._guarded("on-demand", self._refresh_on_demand)
        await self._guarded("spot", self._refresh_spot)

    async def run(self) -> None:
        """Refresh now and then every refresh interval, forever."""
        while True:
            await self.refresh()
            await asyncio.sleep(self._interval)

    async def _guarded(self, kind: str, refresh: Callable[[], Awaitable[None]]) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                await refresh()
        except TimeoutError:
            log.warning(
                "price refresh timed out; keeping previous prices",
                extra={"kind": kind, "timeout_s": self._timeout},
            )
        except Exception as exc:
            if not is_aws_error(exc) and not isinstance(exc, ValueError):
                raise
            log.warning(
                "price refresh failed; keeping previous prices",
                extra={"kind": kind, "error": str(exc), "code": error_code(exc)},
            )

    async def _refresh_on_demand(self) -> None:
        region = self._clients.region
        prices: dict[str, float] = {}
        for product_family, tenancy in _PRODUCT_QUERIES:
            documents = await paginate(
                self._clients.pricing,
                "get_products",
                "PriceList",
                ServiceCode="AmazonEC2",
                Filters=product_filters(region, product_family, tenancy),
            )
            for name, price in parse_price_list(documents, currency_for(region)).items():
                prices.setdefault(name, price)
        if not prices:
            raise ValueError(f"GetProducts returned no on-demand prices for {region}")
        self.on_demand_live = True
        self._replace_on_demand(prices)
        log.info("on-demand prices updated", extra={"region": region, "types": len(prices)})

    async def _refresh_spot(self) -> None:
        history = await paginate(
            self._clients.ec2,
            "describe_spot_price_history",
            "SpotPriceHistory",
            ProductDescriptions=list(SPOT_PRODUCT_DESCRIPTIONS),
            StartTime=datetime.datetime.now(datetime.UTC),
        )
        prices = latest_spot_prices(history)
        if not prices:
            raise ValueError("DescribeSpotPriceHistory returned no spot prices")
        self.spot_live = True
        if prices != self._spot:
            self._spot = prices
            self.seq_num += 1
        log.info("spot prices updated", extra={"offerings": len(prices)})

    def _replace_on_demand(self, prices: dict[str, float]) -> None:
        if prices != self._on_demand:
            self._on_demand = prices
            self.seq_num += 1
