"""An HTTP proxy between the controller and the apiserver that injects faults (issue 17).

The controller talks plain HTTP to the proxy (its kubeconfig names ``http://127.0.0.1:<port>``
and the same bearer token); the proxy forwards every request over TLS to the apiserver and
streams the answer back unchanged (watches included, compressed bodies left compressed). A
:data:`Policy` looks at each request and returns the :class:`Fault` to inject, or None:

* ``status``: answer 429 (with ``Retry-After``) or a 5xx itself, as a Kubernetes Status;
* ``reset``: abort the client's connection without an answer;
* ``delay``: forward after a pause (a slow apiserver, or one slow kind of write);
* ``gone``: answer a watch with the one ERROR event (a 410 ``Expired`` Status) an apiserver sends
  when the requested resourceVersion is older than its history.

:class:`Flaky`, :class:`SlowRegistration` and :class:`ExpiringWatches` are the policies the chaos
scenarios use; all are pure (seeded), so their choices are unit-tested. Two faults need the
proxy's own state rather than a policy: :meth:`FaultProxy.cut_watches` resets every watch stream
open at that moment, and :attr:`FaultProxy.max_inflight` answers 429 to a request beyond that
many in flight, as an apiserver's ``--max-requests-inflight`` does for a throttled client.
:attr:`FaultProxy.received` keeps the arrival time of every request, for the call-rate invariant.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import web

from karpenter_py.model.labels import LABEL_NODE_REGISTERED

HOP_BY_HOP = frozenset({"host", "connection", "content-length", "transfer-encoding", "keep-alive"})
REASONS = {
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


@dataclass(frozen=True)
class Fault:
    kind: Literal["status", "reset", "delay", "gone"]
    status: int = 0
    seconds: float = 0.0


Policy = Callable[[str, str, bytes], Fault | None]  # (method, path with query, body)


def passthrough(method: str, path: str, body: bytes) -> Fault | None:
    """No fault of its own: for scenarios that use only the proxy's state (cuts, limits)."""
    return None


@dataclass
class Flaky:
    """While :attr:`active`, each request fails with probability ``rate``: a 429, a 500, a 503 or
    a connection reset, drawn from ``rng``."""

    rng: random.Random
    rate: float
    active: bool = False

    def __call__(self, method: str, path: str, body: bytes) -> Fault | None:
        if not self.active or self.rng.random() >= self.rate:
            return None
        choice = self.rng.choice((429, 500, 503, 0))
        return Fault("reset") if choice == 0 else Fault("status", status=choice)


@dataclass(frozen=True)
class SlowRegistration:
    """Every Node write that registers a node (sets ``karpenter.sh/registered``) waits
    ``seconds``: a control plane slow to sync a bare Node's labels, the window in which issue
    17's fault 1 bought a node again."""

    seconds: float

    def __call__(self, method: str, path: str, body: bytes) -> Fault | None:
        if method != "PATCH" or not path.startswith("/api/v1/nodes/"):
            return None
        return (
            Fault("delay", seconds=self.seconds) if LABEL_NODE_REGISTERED.encode() in body else None
        )


@dataclass
class ExpiringWatches:
    """While :attr:`active`, each watch request is answered 410 ``Expired`` with probability
    ``rate``, drawn from ``rng``: the reflector must relist, as after a compaction."""

    rng: random.Random
    rate: float
    active: bool = False

    def __call__(self, method: str, path: str, body: bytes) -> Fault | None:
        if not self.active or method != "GET" or not is_watch(path):
            return None
        return Fault("gone") if self.rng.random() < self.rate else None


def is_watch(path: str) -> bool:
    """Whether a request path (with its query) opens a watch."""
    values = parse_qs(urlsplit(path).query).get("watch", [""])
    return values[-1].lower() in ("true", "1")


def _status(code: int) -> dict[str, object]:
    reason = REASONS.get(code, "InternalError")
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f"fault injected by the chaos proxy: {reason}",
        "reason": reason,
        "code": code,
    }


def status_body(code: int) -> bytes:
    """The Kubernetes Status an apiserver answers with ``code``."""
    return json.dumps(_status(code)).encode()


def gone_event() -> bytes:
    """The watch event of a resourceVersion too old for the apiserver's history."""
    status = {**_status(410), "message": "too old resource version (injected by the chaos proxy)"}
    return json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"


class FaultProxy:
    """The proxy on a free loopback port; :attr:`faults` counts the faults injected."""

    def __init__(self, upstream: str, ssl_context: ssl.SSLContext, policy: Policy) -> None:
        self.upstream = upstream.rstrip("/")
        self.ssl_context = ssl_context
        self.policy = policy
        self.faults = 0
        self.max_inflight: int | None = None  # None: no limit
        self.received: list[float] = []  # time.monotonic() of each request's arrival
        self.port = 0
        self._inflight = 0  # forwarded requests not yet answered, watches excepted
        self._watches: dict[asyncio.Task[object], web.Request] = {}  # open watch streams
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._handlers: set[asyncio.Task[object]] = set()
        self._site: web.SockSite | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.ssl_context, limit=0),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
        )
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = int(sock.getsockname()[1])
        self._site = web.SockSite(self._runner, sock)
        await self._site.start()

    async def stop(self) -> None:
        # No new request, then the handlers: aiohttp does not cancel a handler whose client hung
        # up, so a watch the killed controller had open would still wait on the apiserver.
        if self._site is not None:
            await self._site.stop()
        for task in self._handlers:
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            return await self._answer(request)
        finally:
            self._handlers.discard(task)

    def cut_watches(self) -> int:
        """Reset every watch stream open now, mid-stream; returns how many were cut."""
        cut = list(self._watches.items())
        for task, request in cut:
            if request.transport is not None:
                request.transport.abort()
            task.cancel()  # its upstream watch would otherwise stay open until the next event
        self.faults += len(cut)
        return len(cut)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.received.append(time.monotonic())
        body = await request.read()
        watch = request.method == "GET" and is_watch(request.raw_path)
        fault = self.policy(request.method, request.raw_path, body)
        if fault is None and not watch and self._throttled():
            fault = Fault("status", status=429)
        if fault is not None:
            self.faults += 1
            if fault.kind == "reset":
                return _hang_up(request)
            if fault.kind == "status":
                return _status_response(fault.status)
            if fault.kind == "gone":
                return web.Response(status=200, body=gone_event(), content_type="application/json")
            await asyncio.sleep(fault.seconds)
        if watch:
            return await self._watch(request, body)
        self._inflight += 1
        try:
            return await self._forward(request, body)
        finally:
            self._inflight -= 1

    def _throttled(self) -> bool:
        return self.max_inflight is not None and self._inflight >= self.max_inflight

    async def _watch(self, request: web.Request, body: bytes) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._watches[task] = request
        try:
            return await self._forward(request, body)
        finally:
            self._watches.pop(task, None)

    async def _forward(self, request: web.Request, body: bytes) -> web.StreamResponse:
        try:
            return await self._relay(request, body)
        except aiohttp.ClientError:
            # The apiserver hung up (a keep-alive connection it closed, a restart): the
            # controller loses its connection as it would without the proxy, no invented 500.
            return _hang_up(request)

    async def _relay(self, request: web.Request, body: bytes) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self._session.request(
            request.method, self.upstream + request.raw_path, headers=headers, data=body or None
        ) as upstream:
            answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    answer.headers.add(key, value)
            # The controller may hang up first (a watch it no longer wants, a process killed).
            with contextlib.suppress(ConnectionError):
                await answer.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await answer.write(chunk)
                await answer.write_eof()
            return answer


def _status_response(code: int) -> web.Response:
    return web.Response(
        status=code,
        body=status_body(code),
        content_type="application/json",
        headers={"Retry-After": "1"} if code == 429 else {},
    )


def _hang_up(request: web.Request) -> web.Response:
    """Abort the client's connection without an answer."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=502)  # never reaches the aborted client
