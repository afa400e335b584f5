"""The conversion webhook's HTTPS server, certificates and CRD client config (no cluster)."""

from __future__ import annotations

import base64
import datetime as dt
import operator
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from karpenter_py.kube.errors import TransportError
from karpenter_py.manager.certs import CertBundle, make_bundle, not_after
from karpenter_py.manager.settings import load_settings
from karpenter_py.manager.webhook import (
    SECRETS,
    CertController,
    WebhookConfig,
    WebhookServer,
    bundle_of,
)
from tests.unit.fakes import FakeKube

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("config", "hosts"),
    [
        (
            WebhookConfig(namespace="karpenter"),
            [
                "karpenter.karpenter.svc",
                "karpenter.karpenter.svc.cluster.local",
                "karpenter.karpenter",
                "karpenter",
            ],
        ),
        (
            WebhookConfig(namespace="kp", service="hook", url="https://127.0.0.1:9443/convert"),
            ["127.0.0.1", "hook.kp.svc", "hook.kp.svc.cluster.local", "hook.kp", "hook"],
        ),
    ],
)
def test_hosts(config: WebhookConfig, hosts: list[str]) -> None:
    assert config.hosts() == hosts


@pytest.mark.parametrize(
    ("config", "client_config"),
    [
        (
            WebhookConfig(namespace="kp", port=9443),
            {
                "caBundle": "Q0E=",
                "service": {
                    "name": "karpenter",
                    "namespace": "kp",
                    "path": "/convert",
                    "port": 9443,
                },
                "url": None,
            },
        ),
        (
            WebhookConfig(namespace="kp", url="https://127.0.0.1:1/convert"),
            {"caBundle": "Q0E=", "url": "https://127.0.0.1:1/convert", "service": None},
        ),
    ],
)
def test_client_config(config: WebhookConfig, client_config: dict[str, Any]) -> None:
    assert config.client_config(b"CA") == client_config


def test_bundle_validity_and_secret_round_trip() -> None:
    bundle = make_bundle(["127.0.0.1", "karpenter.kp.svc"], now=NOW, validity=dt.timedelta(hours=2))
    assert not_after(bundle.cert_pem) == NOW + dt.timedelta(hours=2)
    assert bundle.not_after == NOW + dt.timedelta(hours=2)
    data = {
        "ca.crt": base64.b64encode(bundle.ca_pem).decode(),
        "tls.crt": base64.b64encode(bundle.cert_pem).decode(),
        "tls.key": base64.b64encode(bundle.key_pem).decode(),
    }
    assert bundle_of({"data": data}) == bundle
    assert bundle_of({"data": {**data, "tls.crt": base64.b64encode(b"junk").decode()}}) is None
    assert bundle_of({}) is None


@pytest.mark.parametrize(
    ("env", "port", "service"),
    [({}, 0, "karpenter"), ({"WEBHOOK_PORT": "8443", "WEBHOOK_SERVICE_NAME": "kp"}, 8443, "kp")],
)
def test_settings(env: dict[str, str], port: int, service: str) -> None:
    s = load_settings([], env)
    assert (s.webhook_port, s.webhook_service_name) == (port, service)


@pytest.fixture
async def server() -> AsyncIterator[tuple[WebhookServer, CertBundle]]:
    bundle = make_bundle(["127.0.0.1"], now=dt.datetime.now(dt.UTC), validity=dt.timedelta(hours=1))
    srv = WebhookServer(host="127.0.0.1", port=0)
    srv.use(bundle)
    async with srv:
        yield srv, bundle


def _client_ssl(bundle: CertBundle) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=bundle.ca_pem.decode())
    return ctx


async def test_server_answers_reviews_over_tls(server: tuple[WebhookServer, CertBundle]) -> None:
    srv, bundle = server
    review = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "u", "desiredAPIVersion": "karpenter.sh/v9", "objects": []},
    }
    url = f"https://127.0.0.1:{srv.port}/convert"
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json=review, ssl=_client_ssl(bundle)) as resp:
            assert resp.status == 200
            assert await resp.json() == {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "response": {"uid": "u", "convertedObjects": [], "result": {"status": "Success"}},
            }
        async with session.post(url, data=b"{", ssl=_client_ssl(bundle)) as resp:
            assert resp.status == 400
            assert (await resp.text()).startswith("bad ConversionReview:")
        # A rotated certificate is served to new connections; the old CA no longer verifies it.
        fresh = make_bundle(
            ["127.0.0.1"], now=dt.datetime.now(dt.UTC), validity=dt.timedelta(hours=1)
        )
        srv.use(fresh)
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json=review, ssl=_client_ssl(fresh)) as resp:
            assert resp.status == 200
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with session.post(url, json=review, ssl=_client_ssl(bundle)):
                pass


def _beta_claim(pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": {"name": f"{pool}-abcde", "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {"requirements": [], "nodeClassRef": {"name": "default"}},
    }


async def test_server_gives_v1beta1_nodeclaims_their_nodepool_expiry() -> None:
    pools = {
        "default": {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"expireAfter": "48h"}}},
        }
    }
    asked: list[str] = []

    async def lookup(name: str) -> dict[str, Any] | None:
        asked.append(name)
        if name == "unreachable":
            raise TransportError("connection refused")
        return pools.get(name)

    bundle = make_bundle(["127.0.0.1"], now=dt.datetime.now(dt.UTC), validity=dt.timedelta(hours=1))
    srv = WebhookServer(host="127.0.0.1", port=0, nodepool=lookup)
    srv.use(bundle)

    def review(*pools: str) -> dict[str, Any]:
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": "u",
                "desiredAPIVersion": "karpenter.sh/v1",
                "objects": [_beta_claim(p) for p in pools],
            },
        }

    async with srv, aiohttp.ClientSession() as session:
        url = f"https://127.0.0.1:{srv.port}/convert"
        async with session.post(url, json=review("default", "gone"), ssl=_client_ssl(bundle)) as r:
            answer = await r.json()
        assert [o["spec"].get("expireAfter") for o in answer["response"]["convertedObjects"]] == [
            "48h",
            None,
        ]
        async with session.post(url, json=review("unreachable"), ssl=_client_ssl(bundle)) as r:
            assert (await r.json())["response"] == {
                "uid": "u",
                "convertedObjects": [],
                "result": {
                    "status": "Failure",
                    "message": "getting NodePool unreachable: connection refused",
                },
            }
    assert asked == ["default", "gone", "unreachable"]


# ----------------------------------------------------------------------------- an unusable Secret

# Valid for a year from now: nothing here is due for rotation, only unusable.
STALE = make_bundle(["127.0.0.1"], now=dt.datetime.now(dt.UTC), validity=dt.timedelta(days=365))
OTHER = make_bundle(["127.0.0.1"], now=dt.datetime.now(dt.UTC), validity=dt.timedelta(days=365))
REVIEW = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "ConversionReview",
    "request": {"uid": "u", "desiredAPIVersion": "karpenter.sh/v1", "objects": []},
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _secret(ca: bytes, cert: bytes, key: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "karpenter-cert", "namespace": "kp"},
        "type": "kubernetes.io/tls",
        "data": {"ca.crt": _b64(ca), "tls.crt": _b64(cert), "tls.key": _b64(key)},
    }


@pytest.mark.parametrize(
    "secret",
    [
        _secret(STALE.ca_pem, STALE.cert_pem, b"\x00garbage key bytes\xff"),
        _secret(STALE.ca_pem, STALE.cert_pem, b"-----BEGIN PRIVATE KEY-----\nAAAA\n"),
        _secret(STALE.ca_pem, STALE.cert_pem, OTHER.key_pem),  # not the certificate's key
        _secret(b"not a certificate", STALE.cert_pem, STALE.key_pem),
        _secret(OTHER.ca_pem, STALE.cert_pem, STALE.key_pem),  # a CA that did not sign it
    ],
    ids=["garbage-key", "truncated-key", "other-key", "garbage-ca", "other-ca"],
)
async def test_an_unusable_secret_is_regenerated_and_served(secret: dict[str, Any]) -> None:
    assert bundle_of(secret) is None
    client = FakeKube((SECRETS, secret))
    server = WebhookServer(host="127.0.0.1", port=0)
    controller = CertController(
        client,
        WebhookConfig(namespace="kp", url="https://127.0.0.1:8443/convert", crds=()),
        on_change=server.use,
        now=lambda: dt.datetime.now(dt.UTC),
    )

    bundle = await controller.reconcile()

    assert bundle not in (STALE, OTHER)
    assert controller.current == bundle
    assert bundle_of(client.stored(SECRETS, "karpenter-cert", "kp")) == bundle
    assert [c.verb for c in client.calls] == ["get", "update"]
    async with server, aiohttp.ClientSession() as session:
        url = f"https://127.0.0.1:{server.port}/convert"
        async with session.post(url, json=REVIEW, ssl=_client_ssl(bundle)) as resp:
            assert resp.status == 200


async def test_a_bundle_is_current_only_once_the_server_has_loaded_it() -> None:
    client = FakeKube((SECRETS, _secret(STALE.ca_pem, STALE.cert_pem, STALE.key_pem)))
    loaded: list[CertBundle] = []
    failures = [ssl.SSLError("the server could not load it")]

    def use(bundle: CertBundle) -> None:
        if failures:
            raise failures.pop()
        loaded.append(bundle)

    controller = CertController(
        client,
        WebhookConfig(namespace="kp", crds=()),
        on_change=use,
        now=lambda: dt.datetime.now(dt.UTC),
    )
    current = operator.attrgetter("current")
    with pytest.raises(ssl.SSLError):
        await controller.reconcile()
    assert current(controller) is None
    # The next pass hands it to the server again rather than taking it as served.
    assert await controller.reconcile() == STALE
    assert (current(controller), loaded) == (STALE, [STALE])
