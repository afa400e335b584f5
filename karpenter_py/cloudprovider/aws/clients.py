"""The AWS API clients the provider uses, opened once and shared (aiobotocore over HTTP).

Region and credentials come the standard AWS way (``AWS_REGION`` / ``AWS_DEFAULT_REGION``, the
credential chain incl. IRSA web identity); ``AWS_ENDPOINT_URL`` (or an explicit ``endpoint_url``)
points every client at one endpoint, which is how the tests talk to moto's server. Retries use
botocore's ``standard`` mode, which backs off on throttling (``RequestLimitExceeded``,
``Throttling``) before an error reaches the caller.

This module and the rest of ``cloudprovider.aws`` are the only importers of aiobotocore.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

# The Pricing API is served from a few regions only; upstream picks the one nearest.
PRICING_REGIONS: Mapping[str, str] = {
    "ap": "ap-south-1",
    "eu": "eu-central-1",
    "cn": "cn-northwest-1",
}
USER_AGENT = "karpenter-py"
# The codes botocore's standard retry mode treats as throttling or as a transient failure: an
# error with one of them still left after its retries is load or an outage, not a bad request.
THROTTLING_CODES: frozenset[str] = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "RequestThrottled",
        "SlowDown",
        "EC2ThrottledException",
        "PriorRequestNotComplete",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)


class AwsConfigError(ValueError):
    """The AWS environment is unusable (no region); a settings error (exit 2)."""


def resolve_region(environ: Mapping[str, str] | None = None) -> str:
    """The region from ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else the shared config file."""
    env = os.environ if environ is None else environ
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""
    if not region:
        region = get_session().get_config_variable("region") or ""
    if not region:
        raise AwsConfigError(
            "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, or region in ~/.aws/config)"
        )
    return str(region)


def pricing_region(region: str) -> str:
    """The Pricing API endpoint region for ``region`` (us-east-1 unless ap/eu/cn is nearer)."""
    if region.startswith("cn-"):
        return PRICING_REGIONS["cn"]
    return PRICING_REGIONS.get(region.split("-", 1)[0], "us-east-1")


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` ("" for anything else)."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def is_aws_error(exc: BaseException) -> bool:
    """Errors a cloud call can raise that callers turn into a logged, retried failure."""
    return isinstance(exc, ClientError | BotoCoreError)


def is_transient_aws_error(exc: BaseException) -> bool:
    """An AWS failure that a later retry is expected to fix: throttling, a 5xx answer, or no
    answer at all (connection refused or reset, a read timeout)."""
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return error_code(exc) in THROTTLING_CODES or status == 429 or status >= 500
    return isinstance(exc, BotoConnectionError | HTTPClientError)


@dataclass(slots=True)
class AwsClients:
    """One open client per service. Untyped (aiobotocore has no stubs): callers read responses
    as plain dicts, defensively."""

    region: str
    endpoint_url: str | None
    ec2: Any
    ssm: Any
    iam: Any
    sqs: Any
    eks: Any
    pricing: Any

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        region: str,
        *,
        endpoint_url: str | None = None,
        max_attempts: int = 5,
    ) -> AsyncIterator[AwsClients]:
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        session = get_session()
        config = Config(
            retries={"mode": "standard", "max_attempts": max_attempts},
            user_agent_extra=USER_AGENT,
            max_pool_connections=50,
        )
        async with contextlib.AsyncExitStack() as stack:

            async def client(service: str, client_region: str = region) -> Any:
                return await stack.enter_async_context(
                    session.create_client(
                        service, region_name=client_region, endpoint_url=endpoint, config=config
                    )
                )

            yield cls(
                region=region,
                endpoint_url=endpoint,
                ec2=await client("ec2"),
                ssm=await client("ssm"),
                iam=await client("iam"),
                sqs=await client("sqs"),
                eks=await client("eks"),
                pricing=await client("pricing", pricing_region(region)),
            )


async def paginate(client: Any, operation: str, key: str, **params: Any) -> list[Any]:
    """Every item under ``key`` across the pages of ``operation``."""
    out: list[Any] = []
    async for page in client.get_paginator(operation).paginate(**params):
        out.extend(page.get(key) or [])
    return out
