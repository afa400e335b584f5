"""A stand-in Pricing API endpoint for the tests: moto 5.2.5 does not implement GetProducts.

:class:`PriceListServer` is a small HTTP server (in this process, on a free loopback port) that
answers ``AWSPriceListService.GetProducts`` JSON requests with seeded price-list documents shaped
as AWS returns them, paginated with NextToken, and records every request's filters.
:func:`with_pricing_endpoint` opens an aiobotocore pricing client against it and returns the
moto clients with that client swapped in, so the product's GetProducts call still goes over HTTP
through botocore (signing, JSON protocol, pagination) while EC2 stays on moto.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from karpenter_py.cloudprovider.aws.clients import AwsClients

TARGET = "AWSPriceListService.GetProducts"


def price_list_document(
    instance_type: str,
    usd_per_hour: float,
    *,
    region: str = "us-west-2",
    product_family: str = "Compute Instance",
    tenancy: str = "Shared",
) -> str:
    """One GetProducts PriceList entry (a JSON string, as AWS sends it)."""
    sku = f"SKU{abs(hash((instance_type, tenancy))) % 10**8:08d}"
    return json.dumps(
        {
            "product": {
                "productFamily": product_family,
                "sku": sku,
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": region,
                    "tenancy": tenancy,
                    "operatingSystem": "Linux",
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                },
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    f"{sku}.JRTCKXETXF": {
                        "offerTermCode": "JRTCKXETXF",
                        "sku": sku,
                        "priceDimensions": {
                            f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": f"{usd_per_hour:.10f}"},
                            }
                        },
                    }
                }
            },
        }
    )


@dataclasses.dataclass(slots=True)
class PriceListServer:
    endpoint: str
    # (productFamily, tenancy) -> documents answered for queries with those filter values
    documents: dict[tuple[str, str], list[str]] = dataclasses.field(default_factory=dict)
    requests: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    page_size: int = 2
    status: int = 200

    def seed(
        self,
        prices: dict[str, float],
        *,
        product_family: str = "Compute Instance",
        tenancy: str = "Shared",
        region: str = "us-west-2",
    ) -> None:
        docs = self.documents.setdefault((product_family, tenancy), [])
        docs.extend(
            price_list_document(
                name, price, region=region, product_family=product_family, tenancy=tenancy
            )
            for name, price in prices.items()
        )

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        terms = {f.get("Field"): f.get("Value") for f in body.get("Filters", [])}
        docs = self.documents.get((terms.get("productFamily", ""), terms.get("tenancy", "")), [])
        start = int(body.get("NextToken") or 0)
        page: dict[str, Any] = {
            "FormatVersion": "aws_v1",
            "PriceList": docs[start : start + self.page_size],
        }
        if start + self.page_size < len(docs):
            page["NextToken"] = str(start + self.page_size)
        return page


def _handler(server: PriceListServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.headers.get("X-Amz-Target") != TARGET or server.status != 200:
                status = server.status if server.status != 200 else 400
                payload = {"__type": "InternalErrorException", "message": "seeded failure"}
            else:
                status, payload = 200, server.answer(body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextlib.contextmanager
def price_list_server() -> Iterator[PriceListServer]:
    """Serve GetProducts on 127.0.0.1 until the block ends."""
    state = PriceListServer(endpoint="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.endpoint = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, name="price-list-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@contextlib.asynccontextmanager
async def with_pricing_endpoint(clients: AwsClients, endpoint: str) -> AsyncIterator[AwsClients]:
    """``clients`` with the pricing client pointed at ``endpoint`` (EC2 etc. unchanged)."""
    async with AwsClients.open(clients.region, endpoint_url=endpoint, max_attempts=1) as other:
        yield dataclasses.replace(clients, pricing=other.pricing)
