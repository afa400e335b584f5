"""The fault proxy's policies (which request gets which fault) and the Status it answers with."""

from __future__ import annotations

import asyncio
import json
import random
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from benchmarks.faultproxy import (
    FAILED,
    THROTTLED,
    AwsCall,
    AwsFaultProxy,
    AwsFlaky,
    AwsPolicy,
    ExpiringWatches,
    Fault,
    FaultProxy,
    Flaky,
    Outage,
    Policy,
    SlowRegistration,
    aws_call,
    is_watch,
    passthrough,
    status_body,
)
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code
from karpenter_py.kube import CONFIGMAPS, KubeClient, KubeConfig
from karpenter_py.kube.errors import (
    GoneError,
    KubeError,
    ServerError,
    TooManyRequestsError,
    TransportError,
)
from tests.motofixture import REGION, MotoServer
from tests.unit.kube.fakeapiserver import NS, Recorder, serve

REGISTER = json.dumps({"metadata": {"labels": {"karpenter.sh/registered": "true"}}}).encode()
OTHER_PATCH = json.dumps({"metadata": {"labels": {"team": "a"}}}).encode()


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("PATCH", "/api/v1/nodes/n1", REGISTER, Fault("delay", seconds=3.0)),
        ("PATCH", "/api/v1/nodes/n1", OTHER_PATCH, None),
        ("PATCH", "/apis/karpenter.sh/v1/nodeclaims/n1", REGISTER, None),
        ("GET", "/api/v1/nodes/n1", b"", None),
    ],
)
def test_slow_registration_holds_only_the_registering_node_write(
    method: str, path: str, body: bytes, expected: Fault | None
) -> None:
    assert SlowRegistration(3.0)(method, path, body) == expected


def test_flaky_fails_nothing_while_inactive() -> None:
    flaky = Flaky(random.Random(0), rate=1.0)
    assert [flaky("GET", "/api/v1/pods", b"") for _ in range(3)] == [None, None, None]


def test_flaky_draws_its_faults_from_the_seed() -> None:
    flaky = Flaky(random.Random("api-faults/0"), rate=0.5, active=True)
    drawn = [flaky("GET", "/api/v1/pods", b"") for _ in range(8)]
    again = Flaky(random.Random("api-faults/0"), rate=0.5, active=True)
    assert drawn == [again("GET", "/api/v1/pods", b"") for _ in range(8)]
    assert drawn == [
        None,
        None,
        Fault("reset"),
        None,
        None,
        Fault("status", status=429),
        Fault("status", status=429),
        Fault("reset"),
    ]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/pods?watch=true&resourceVersion=5", True),
        ("/api/v1/pods?resourceVersion=5&watch=1", True),
        ("/api/v1/pods?watch=True", True),
        ("/api/v1/pods?watch=false", False),
        ("/api/v1/pods?resourceVersion=5", False),
        ("/api/v1/namespaces/watch/pods", False),
    ],
)
def test_is_watch_reads_the_query(path: str, expected: bool) -> None:
    assert is_watch(path) is expected


def test_expiring_watches_expires_only_watches_while_active() -> None:
    policy = ExpiringWatches(random.Random(0), rate=1.0)
    watch = "/api/v1/pods?watch=true"
    assert policy("GET", watch, b"") is None
    policy.active = True
    assert [
        policy("GET", watch, b""),
        policy("GET", "/api/v1/pods", b""),
        policy("POST", "/api/v1/pods", b""),
    ] == [Fault("gone"), None, None]


def test_expiring_watches_draws_from_the_seed() -> None:
    policy = ExpiringWatches(random.Random("watch-cuts/0"), rate=0.5, active=True)
    drawn = [policy("GET", "/api/v1/pods?watch=1", b"") for _ in range(6)]
    assert drawn == [None, None, None, Fault("gone"), None, None]  # draws .74 .91 .54 .13 .65 .97


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (410, "Expired"),
        (429, "TooManyRequests"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
    ],
)
def test_status_body_is_a_kubernetes_status(code: int, reason: str) -> None:
    assert json.loads(status_body(code)) == {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f"fault injected by the chaos proxy: {reason}",
        "reason": reason,
        "code": code,
    }


# ----------------------------------------------------------------------------- on the wire
@asynccontextmanager
async def proxied(policy: Policy) -> AsyncIterator[tuple[KubeClient, FaultProxy]]:
    """A KubeClient that talks to the fake apiserver through a FaultProxy with ``policy``."""
    async with serve(Recorder()) as url:
        proxy = FaultProxy(url, ssl.create_default_context(), policy)
        await proxy.start()
        try:
            async with KubeClient(KubeConfig(server=proxy.url, token="t"), qps=0, burst=0) as c:
                yield c, proxy
        finally:
            await proxy.stop()


async def test_the_proxy_forwards_reads_and_streams_watches_unchanged() -> None:
    async with proxied(passthrough) as (client, proxy):
        got = await client.get(CONFIGMAPS, "present", namespace=NS)
        seen = []
        async with client.watch(CONFIGMAPS, namespace=NS, resource_version="big") as stream:
            async for event in stream:
                seen.append((event.type, event.object["metadata"]["name"]))
    assert got["metadata"]["name"] == "present"
    assert seen == [("ADDED", "big"), ("MODIFIED", "b"), ("DELETED", "b")]
    assert proxy.faults == 0


@pytest.mark.parametrize(
    ("fault", "error", "status", "attempts"),
    [
        (Fault("status", status=429), TooManyRequestsError, 429, 1),
        (Fault("status", status=503), ServerError, 503, 1),
        # aiohttp's client sends an idempotent request once more when the server hangs up
        # without an answer; the second reset reaches the caller.
        (Fault("reset"), TransportError, None, 2),
    ],
)
async def test_an_injected_fault_reaches_the_client_as_the_apiserver_s_would(
    fault: Fault, error: type[KubeError], status: int | None, attempts: int
) -> None:
    async with proxied(lambda method, path, body: fault) as (client, proxy):
        with pytest.raises(error) as raised:
            await client.get(CONFIGMAPS, "present", namespace=NS)
    assert getattr(raised.value, "status", None) == status
    assert raised.value.transient is True
    assert proxy.faults == attempts


async def read_watch(
    client: KubeClient, resource_version: str, on_event: Callable[[str], None] = lambda _: None
) -> list[str]:
    """The names a ConfigMap watch from ``resource_version`` delivers until it ends."""
    names = []
    async with client.watch(CONFIGMAPS, namespace=NS, resource_version=resource_version) as stream:
        async for event in stream:
            names.append(event.object["metadata"]["name"])
            on_event(names[-1])
    return names


async def test_a_gone_fault_answers_the_watch_with_a_410_event() -> None:
    async with proxied(lambda method, path, body: Fault("gone")) as (client, proxy):
        with pytest.raises(GoneError):
            await read_watch(client, "big")
    assert proxy.faults == 1


async def test_beyond_max_inflight_a_request_is_answered_429_and_watches_are_not_counted() -> None:
    async with proxied(passthrough) as (client, proxy):
        proxy.max_inflight = 0
        with pytest.raises(TooManyRequestsError):
            await client.get(CONFIGMAPS, "present", namespace=NS)
        names = await read_watch(client, "big")
        proxy.max_inflight = 1
        got = await client.get(CONFIGMAPS, "present", namespace=NS)
    assert (names, got["metadata"]["name"], proxy.faults) == (["big", "b", "b"], "present", 1)
    assert len(proxy.received) == 3


async def test_cut_watches_resets_an_open_stream_and_its_upstream() -> None:
    rec = Recorder()
    cuts: list[int] = []
    async with serve(rec) as url:
        proxy = FaultProxy(url, ssl.create_default_context(), passthrough)
        await proxy.start()
        try:
            async with KubeClient(KubeConfig(server=proxy.url, token="t"), qps=0, burst=0) as c:
                with pytest.raises(TransportError):
                    await read_watch(c, "hang", lambda name: cuts.append(proxy.cut_watches()))
                async with asyncio.timeout(5):
                    await rec.watch_disconnected.wait()
        finally:
            await proxy.stop()
    assert (cuts, proxy.faults, proxy.cut_watches()) == ([1], 1, 0)


# ----------------------------------------------------------------------------- AWS
SIGNED = {
    "Authorization": "AWS4-HMAC-SHA256 Credential=bench/20260101/us-west-2/ec2/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=0"
}


@pytest.mark.parametrize(
    ("headers", "query", "body", "expected"),
    [
        (SIGNED, "", b"Action=CreateFleet&Version=2016-11-15", AwsCall("ec2", "CreateFleet")),
        (
            SIGNED,
            "Action=DescribeInstances&Version=2016-11-15",
            b"",
            AwsCall("ec2", "DescribeInstances"),
        ),
        (
            {
                "Authorization": "AWS4-HMAC-SHA256 Credential=k/20260101/us-west-2/sqs/aws4_request",
                "X-Amz-Target": "AmazonSQS.ReceiveMessage",
            },
            "",
            b"{}",
            AwsCall("sqs", "ReceiveMessage"),
        ),
        ({}, "", b"", AwsCall("", "")),
    ],
)
def test_aws_call_names_the_service_and_action(
    headers: dict[str, str], query: str, body: bytes, expected: AwsCall
) -> None:
    assert aws_call(headers, query, body) == expected


def test_aws_flaky_fails_nothing_while_inactive_and_loses_only_losable_answers() -> None:
    idle = AwsFlaky(random.Random(0), rate=1.0)
    assert idle(AwsCall("ec2", "CreateFleet")) is None
    flaky = AwsFlaky(random.Random("aws-faults/0"), rate=1.0, active=True)
    kinds = {flaky(AwsCall("ec2", "DescribeInstances")) for _ in range(50)}
    assert kinds == {THROTTLED, *FAILED}
    kinds = {flaky(AwsCall("ec2", "CreateFleet")) for _ in range(50)}
    assert kinds == {THROTTLED, *FAILED, Fault("lost")}


def test_an_outage_resets_every_call_while_active() -> None:
    outage = Outage()
    assert outage(AwsCall("ec2", "CreateFleet")) is None
    outage.active = True
    assert outage(AwsCall("iam", "GetInstanceProfile")) == Fault("reset")


@asynccontextmanager
async def aws_proxied(
    server: MotoServer, policy: AwsPolicy
) -> AsyncIterator[tuple[AwsClients, AwsFaultProxy]]:
    """AWS clients that reach moto through an AwsFaultProxy with ``policy``; botocore's
    ``max_attempts`` counts retries, so each failing call is made twice."""
    proxy = AwsFaultProxy(server.endpoint, policy)
    await proxy.start()
    try:
        async with AwsClients.open(REGION, endpoint_url=proxy.url, max_attempts=1) as clients:
            yield clients, proxy
    finally:
        await proxy.stop()


def only(action: str, fault: Fault) -> AwsPolicy:
    return lambda call: fault if call.action == action else None


@pytest.mark.parametrize("fault", [THROTTLED, *FAILED])
async def test_an_ec2_refusal_reaches_the_client_with_its_code(
    aws_env: MotoServer, fault: Fault
) -> None:
    async with aws_proxied(aws_env, only("DescribeVpcs", fault)) as (clients, proxy):
        with pytest.raises(Exception) as raised:
            await clients.ec2.describe_vpcs()
    assert error_code(raised.value) == fault.code
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == fault.status  # type: ignore[attr-defined]
    assert [call for _, call in proxy.calls] == [AwsCall("ec2", "DescribeVpcs")] * 2
    assert proxy.faults == 2


async def test_a_json_refusal_reaches_the_client_with_its_code(aws_env: MotoServer) -> None:
    async with aws_proxied(aws_env, only("ListQueues", THROTTLED)) as (clients, proxy):
        with pytest.raises(Exception) as raised:
            await clients.sqs.list_queues()
    assert error_code(raised.value) == "RequestLimitExceeded"
    assert [call for _, call in proxy.calls] == [AwsCall("sqs", "ListQueues")] * 2


async def test_a_lost_answer_took_effect(aws_env: MotoServer) -> None:
    async with aws_proxied(aws_env, only("CreateTags", Fault("lost"))) as (clients, proxy):
        vpc = (await clients.ec2.create_vpc(CidrBlock="10.0.0.0/16"))["Vpc"]["VpcId"]
        with pytest.raises(Exception) as raised:
            await clients.ec2.create_tags(Resources=[vpc], Tags=[{"Key": "k", "Value": "v"}])
        tags = (await clients.ec2.describe_vpcs(VpcIds=[vpc]))["Vpcs"][0].get("Tags")
    assert error_code(raised.value) == ""  # no answer: a connection error, not an AWS error
    assert tags == [{"Key": "k", "Value": "v"}]
    assert proxy.faults == 2
