"""The CRD conversion webhook: an HTTPS ``/convert`` endpoint and the controller of its certificate.

The API server calls ``POST /convert`` with a ConversionReview whenever a client reads or writes a
NodePool, NodeClaim or EC2NodeClass as ``v1beta1`` (the CRDs store ``v1``); the answer comes from
``karpenter_py.model.api.conversionreview``. v1 requests never reach the webhook. A v1beta1
NodeClaim converted to v1 takes its NodePool's ``expireAfter``: the server GETs the NodePools
the request names (a NodePool that does not exist leaves the default; any other error answers
the review with a Failure, as upstream's webhook fails the conversion).

:class:`CertController` owns the TLS material: it keeps a self-signed CA and a serving
certificate in a ``kubernetes.io/tls`` Secret in the controller's namespace (``ca.crt``,
``tls.crt``, ``tls.key``), creates them when missing or unreadable, replaces them once less than
``renew_before`` of their validity is left (``ca.crt`` then holds the new CA and the previous one,
so replicas still serving the previous certificate stay trusted until they re-read the Secret),
and after every change patches each converted CRD's
``spec.conversion.webhook.clientConfig`` with the CA bundle (and the Service or URL to call) so
the API server trusts the new certificate. :class:`WebhookServer` serves with whatever the
controller last handed it: new connections use the new certificate at once.

Every replica runs both (a standby must answer the API server too); replicas race only on
creating or replacing the Secret, and optimistic locking makes the loser read the winner's.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
import logging
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import orjson
from aiohttp import web

from karpenter_py.aio.resource import AsyncResource
from karpenter_py.kube import KubeClient
from karpenter_py.kube.errors import AlreadyExistsError, ConflictError, KubeError, NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import NODEPOOLS, Resource
from karpenter_py.manager.certs import CertBundle, check_bundle, make_bundle
from karpenter_py.manager.listener import listening_socket
from karpenter_py.model.api.conversionreview import (
    ReviewError,
    failure_response,
    nodepools_needed,
    review_response,
)

log = logging.getLogger(__name__)

SECRETS: Final = Resource("", "v1", "secrets", True, "Secret")
CRDS: Final = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
CONVERTED_CRDS: Final = (
    "nodepools.karpenter.sh",
    "nodeclaims.karpenter.sh",
    "ec2nodeclasses.karpenter.k8s.aws",
)
CONVERT_PATH: Final = "/convert"
DEFAULT_PORT: Final = 8443
DEFAULT_SECRET: Final = "karpenter-cert"
DEFAULT_SERVICE: Final = "karpenter"
FIELD_MANAGER: Final = "karpenter-py-webhook"


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Where the webhook is reached and how long its certificates live."""

    namespace: str
    service: str = DEFAULT_SERVICE
    secret: str = DEFAULT_SECRET
    port: int = DEFAULT_PORT
    url: str | None = None
    """Call this URL (``https://127.0.0.1:8443/convert``) instead of the Service (tests, or an
    API server outside the pod network)."""
    validity: dt.timedelta = dt.timedelta(days=365)
    renew_before: dt.timedelta = dt.timedelta(days=30)
    """Replace the certificate once less than this is left of it."""
    crds: tuple[str, ...] = CONVERTED_CRDS
    resync: float = 60.0
    """Longest sleep between checks: how soon a replica picks up a certificate another one
    rotated (the CA bundle trusts the previous CA as well until then)."""

    def hosts(self) -> list[str]:
        names = [
            f"{self.service}.{self.namespace}.svc",
            f"{self.service}.{self.namespace}.svc.cluster.local",
            f"{self.service}.{self.namespace}",
            self.service,
        ]
        if self.url is not None:
            host = self.url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
            names.insert(0, host)
        return names

    def client_config(self, ca_pem: bytes) -> KubeObject:
        """The CRD's ``spec.conversion.webhook.clientConfig`` (merge-patch form)."""
        out: KubeObject = {"caBundle": base64.b64encode(ca_pem).decode()}
        if self.url is not None:
            out["url"] = self.url
            out["service"] = None
        else:
            out["service"] = {
                "name": self.service,
                "namespace": self.namespace,
                "path": CONVERT_PATH,
                "port": self.port,
            }
            out["url"] = None
        return out


def _b64(data: KubeObject, key: str) -> bytes:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"no {key}")
    return base64.b64decode(value)


def bundle_of(secret: KubeObject) -> CertBundle | None:
    """The bundle a Secret holds, or None when it holds none the server could serve and the
    API server trust (see :func:`~karpenter_py.manager.certs.check_bundle`; the server's own
    TLS library must load it too)."""
    data = secret.get("data")
    if not isinstance(data, dict):
        return None
    try:
        bundle = CertBundle(
            ca_pem=_b64(data, "ca.crt"),
            cert_pem=_b64(data, "tls.crt"),
            key_pem=_b64(data, "tls.key"),
        )
        check_bundle(bundle)
        _load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), bundle)
    except (ValueError, ssl.SSLError) as err:
        log.warning("webhook certificate Secret is unusable: %s", err)
        return None
    return bundle


def _first_pem(pem: bytes) -> bytes:
    """The first certificate of a PEM bundle."""
    end = b"-----END CERTIFICATE-----\n"
    cut = pem.find(end)
    return pem if cut < 0 else pem[: cut + len(end)]


def _secret_data(bundle: CertBundle) -> dict[str, str]:
    return {
        "ca.crt": base64.b64encode(bundle.ca_pem).decode(),
        "tls.crt": base64.b64encode(bundle.cert_pem).decode(),
        "tls.key": base64.b64encode(bundle.key_pem).decode(),
    }


Now = Callable[[], dt.datetime]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class CertController:
    """Creates, rotates and publishes the webhook's certificate (see the module docstring)."""

    client: KubeClient
    config: WebhookConfig
    on_change: Callable[[CertBundle], None] = lambda _bundle: None
    now: Now = _utcnow
    current: CertBundle | None = field(default=None, init=False)

    def _fresh(self, bundle: CertBundle | None) -> bool:
        return bundle is not None and bundle.not_after - self.now() > self.config.renew_before

    async def _new_bundle(self) -> CertBundle:
        cfg = self.config
        return await asyncio.to_thread(
            make_bundle, cfg.hosts(), now=self.now(), validity=cfg.validity
        )

    async def _ensure_secret(self) -> CertBundle:
        cfg = self.config
        try:
            secret = await self.client.get(SECRETS, cfg.secret, namespace=cfg.namespace)
        except NotFoundError:
            bundle = await self._new_bundle()
            body: KubeObject = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": cfg.secret, "namespace": cfg.namespace},
                "type": "kubernetes.io/tls",
                "data": _secret_data(bundle),
            }
            try:
                await self.client.create(SECRETS, body, namespace=cfg.namespace)
            except AlreadyExistsError:
                return await self._ensure_secret()  # another replica was first
            log.info("webhook certificate created, valid until %s", bundle.not_after)
            return bundle
        held = bundle_of(secret)
        if held is not None and self._fresh(held):
            return held
        bundle = await self._new_bundle()
        if held is not None and held.not_after > self.now():
            # Replicas that have not re-read the Secret yet still serve the old certificate:
            # keep trusting its CA until they have (the old certificate is still valid).
            bundle = dataclasses.replace(bundle, ca_pem=bundle.ca_pem + _first_pem(held.ca_pem))
        secret["data"] = _secret_data(bundle)
        secret["type"] = secret.get("type") or "kubernetes.io/tls"
        try:
            await self.client.update(SECRETS, secret, namespace=cfg.namespace)
        except ConflictError:
            return await self._ensure_secret()  # another replica rotated it: use theirs
        log.info("webhook certificate rotated, valid until %s", bundle.not_after)
        return bundle

    async def _publish(self, bundle: CertBundle) -> None:
        """Point every converted CRD at the webhook with this CA (when it does not already)."""
        wanted = self.config.client_config(bundle.ca_pem)
        for name in self.config.crds:
            try:
                crd = await self.client.get(CRDS, name)
            except NotFoundError:
                log.warning("CRD %s is not installed: its conversion is not configured", name)
                continue
            conversion = (crd.get("spec") or {}).get("conversion") or {}
            current = (conversion.get("webhook") or {}).get("clientConfig") or {}
            if conversion.get("strategy") == "Webhook" and all(
                current.get(k) == v for k, v in wanted.items()
            ):
                continue
            patch: KubeObject = {
                "spec": {
                    "conversion": {
                        "strategy": "Webhook",
                        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": wanted},
                    }
                }
            }
            await self.client.patch(CRDS, name, patch, field_manager=FIELD_MANAGER)
            log.info("CRD %s: conversion webhook CA bundle published", name)

    async def reconcile(self) -> CertBundle:
        """One pass: the Secret holds a fresh bundle, the CRDs trust it, the server uses it.
        The bundle is ``current`` only once ``on_change`` took it: a server that failed to load
        it is handed it again on the next pass."""
        bundle = await self._ensure_secret()
        await self._publish(bundle)
        if bundle != self.current:
            self.on_change(bundle)
            self.current = bundle
        return bundle

    def next_check(self, bundle: CertBundle) -> float:
        """Seconds until the bundle needs renewing (at most ``resync``, at least 1)."""
        due = (bundle.not_after - self.config.renew_before - self.now()).total_seconds()
        return max(1.0, min(self.config.resync, due))

    async def run(self) -> None:
        while True:
            try:
                bundle = await self.reconcile()
                delay = self.next_check(bundle)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook certificate reconcile failed; retrying")
                delay = 5.0
            await asyncio.sleep(delay)


def _load(ctx: ssl.SSLContext, bundle: CertBundle) -> None:
    # load_cert_chain reads files only: write them to a private temporary directory.
    with tempfile.TemporaryDirectory(prefix="karpenter-webhook-") as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_bytes(bundle.cert_pem)
        key.write_bytes(bundle.key_pem)
        key.chmod(0o600)
        ctx.load_cert_chain(cert, key)


# A v1 NodePool by name, None when there is none.
NodePoolLookup = Callable[[str], Awaitable[KubeObject | None]]


def nodepool_lookup(client: KubeClient) -> NodePoolLookup:
    """NodePools read from the API server (storage is v1, so no conversion call back here)."""

    async def get(name: str) -> KubeObject | None:
        try:
            return await client.get(NODEPOOLS, name)
        except NotFoundError:
            return None

    return get


async def _no_nodepool(name: str) -> KubeObject | None:
    return None


class WebhookServer(AsyncResource):
    """HTTPS ``/convert`` on ``host:port``; :meth:`use` swaps the certificate for new
    connections. Enter with ``async with`` after the first :meth:`use`. ``nodepool`` looks up
    the NodePools converting v1beta1 NodeClaims reads (none: every NodeClaim keeps the default
    expireAfter)."""

    def __init__(
        self,
        *,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        nodepool: NodePoolLookup = _no_nodepool,
    ) -> None:
        self.host = host
        self.port = port
        self._nodepool = nodepool
        self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._loaded = False
        self._runner: web.AppRunner | None = None
        self._socket: socket.socket | None = None

    def use(self, bundle: CertBundle) -> None:
        _load(self._ssl, bundle)
        self._loaded = True

    async def _convert(self, request: web.Request) -> web.Response:
        try:
            review = orjson.loads(await request.read())
            names = nodepools_needed(review)
        except (orjson.JSONDecodeError, ReviewError) as err:
            return web.Response(status=400, text=f"bad ConversionReview: {err}\n")
        nodepools: dict[str, KubeObject] = {}
        for name in names:
            try:
                found = await self._nodepool(name)
            except KubeError as err:
                answer = failure_response(review, f"getting NodePool {name}: {err}")
                return web.Response(body=orjson.dumps(answer), content_type="application/json")
            if found is not None:
                nodepools[name] = found
        answer = review_response(review, nodepools)
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    def application(self) -> web.Application:
        """The ``POST /convert`` application :meth:`open` serves over TLS."""
        app = web.Application()
        app.router.add_post(CONVERT_PATH, self._convert)
        return app

    async def open(self) -> None:
        if not self._loaded:
            raise RuntimeError("WebhookServer needs a certificate (use()) before it starts")
        runner = web.AppRunner(self.application(), access_log=None)
        await runner.setup()
        self._runner = runner
        sock = listening_socket(self.host, self.port)
        self._socket = sock
        await web.SockSite(runner, sock, ssl_context=self._ssl).start()
        self.port = int(sock.getsockname()[1])
        log.info("conversion webhook listening on %s:%d", self.host, self.port)

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close()


async def serve(
    client: KubeClient, config: WebhookConfig, *, host: str = "0.0.0.0", now: Now = _utcnow
) -> None:
    """Run the certificate controller and the HTTPS server until cancelled."""
    server = WebhookServer(host=host, port=config.port, nodepool=nodepool_lookup(client))
    controller = CertController(client, config, on_change=server.use, now=now)
    while True:  # no certificate yet (no RBAC, API server away, ...): keep trying, never crash
        try:
            await controller.reconcile()
            break
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("webhook certificate setup failed; retrying in 5s")
            await asyncio.sleep(5.0)
    async with server:
        await controller.run()
