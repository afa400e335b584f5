"""The health-probe server (``/healthz``, ``/readyz``) and the metrics server (``/metrics``).

Two aiohttp sites, as upstream runs two listeners: HEALTH_PROBE_PORT (8081) and METRICS_PORT
(8080). Both belong to whoever enters :class:`ProbeServers` (or awaits :func:`serve` inside a
TaskGroup); leaving the block, or cancelling the task, closes the listeners.

* ``/healthz`` answers 200 while the process is alive: the handler runs on the event loop, so an
  answer at all proves the loop is responsive (a blocked loop times the kubelet probe out).
  Optional named liveness checks can turn it into 500.
* ``/readyz`` answers 200 only when every readiness check passes (caches synced, ...), else 503
  with a short text body naming what is not ready. ``?verbose`` lists every check, as the
  apiserver's own probes do.

* ``/debug/<name>`` on the metrics listener answers the named report as JSON (the manager
  serves ``/debug/disruption``: the last decision and why every other node stays).

Port 0 binds an ephemeral port (tests); :attr:`ProbeServers.health_port` and
:attr:`ProbeServers.metrics_port` report what was bound.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import orjson
from aiohttp import web

from karpenter_py.aio.resource import AsyncResource
from karpenter_py.aio.tasks import bounded
from karpenter_py.manager.listener import listening_socket
from karpenter_py.obs.metrics import Metrics

log = logging.getLogger(__name__)

Check = Callable[[], bool]
Checks = Mapping[str, Check]
DEFAULT_READINESS_NAME: Final = "caches-synced"


def _as_checks(checks: Check | Checks | None, default_name: str) -> dict[str, Check]:
    if checks is None:
        return {}
    if callable(checks):
        return {default_name: checks}
    return dict(checks)


def _run_checks(checks: Mapping[str, Check]) -> list[tuple[str, bool, str]]:
    """(name, ok, reason) per check; a check that raises counts as failed."""
    out: list[tuple[str, bool, str]] = []
    for name, check in checks.items():
        try:
            ok = bool(check())
            reason = "" if ok else "not ready"
        except Exception as e:  # a broken probe must answer, not 500 the whole server
            ok, reason = False, f"check failed: {type(e).__name__}: {e}"
        out.append((name, ok, reason))
    return out


def _answer(
    request: web.Request, results: list[tuple[str, bool, str]], *, failure_status: int
) -> web.Response:
    failed = [(name, reason) for name, ok, reason in results if not ok]
    if "verbose" in request.query:
        lines = [
            f"[+]{name} ok" if ok else f"[-]{name} failed: {reason}" for name, ok, reason in results
        ]
        lines.append("check passed" if not failed else "check failed")
        body = "\n".join(lines) + "\n"
    elif failed:
        body = "not ready: " + ", ".join(f"{name} ({reason})" for name, reason in failed) + "\n"
    else:
        body = "ok"
    return web.Response(
        status=failure_status if failed else 200,
        text=body,
        headers={"Cache-Control": "no-store"},
    )


@dataclass(frozen=True, slots=True)
class BoundPorts:
    health: int
    metrics: int


class ProbeServers(AsyncResource):
    """``async with ProbeServers(...) as servers:`` serves until the block exits.

    ``readiness``: a callable (reported as ``caches-synced``) or named callables; all must return
    True for ``/readyz`` to answer 200. ``liveness``: optional named callables for ``/healthz``.
    When ``metrics_port`` equals ``health_port`` (and is not 0) one listener serves all paths.
    """

    def __init__(
        self,
        *,
        readiness: Check | Checks,
        metrics: Metrics,
        host: str = "0.0.0.0",  # in-cluster probes come from the node
        health_port: int = 8081,
        metrics_port: int = 8080,
        liveness: Checks | None = None,
        shutdown_timeout: float = 5.0,
        debug: Mapping[str, Callable[[], object]] | None = None,
    ) -> None:
        self.host = host
        # /debug/<name> on the metrics listener answers JSON from these (e.g. "disruption").
        self._debug = dict(debug or {})
        self._readiness = _as_checks(readiness, DEFAULT_READINESS_NAME)
        self._liveness = _as_checks(liveness, "")
        self._metrics = metrics
        self._requested = (health_port, metrics_port)
        self._shutdown_timeout = shutdown_timeout
        self._runners: list[web.AppRunner] = []
        self._sockets: list[socket.socket] = []
        self._ports: BoundPorts | None = None

    # ------------------------------------------------------------------ handlers

    async def _healthz(self, request: web.Request) -> web.Response:
        return _answer(request, _run_checks(self._liveness), failure_status=500)

    async def _readyz(self, request: web.Request) -> web.Response:
        return _answer(request, _run_checks(self._readiness), failure_status=503)

    async def _debug_handler(self, request: web.Request) -> web.Response:
        report = self._debug.get(request.match_info["name"])
        if report is None:
            return web.json_response(
                {"error": "unknown report", "known": sorted(self._debug)}, status=404
            )
        return web.Response(
            body=orjson.dumps(report(), option=orjson.OPT_INDENT_2),
            content_type="application/json",
        )

    async def _metrics_handler(self, request: web.Request) -> web.Response:
        del request
        payload, content_type = self._metrics.render()
        return web.Response(body=payload, headers={"Content-Type": content_type})

    # ------------------------------------------------------------------ lifecycle

    @property
    def ports(self) -> BoundPorts:
        if self._ports is None:
            raise RuntimeError("ProbeServers is not started")
        return self._ports

    @property
    def health_port(self) -> int:
        return self.ports.health

    @property
    def metrics_port(self) -> int:
        return self.ports.metrics

    async def _start_site(self, routes: list[web.RouteDef], port: int) -> int:
        app = web.Application()
        app.add_routes(routes)
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=self._shutdown_timeout
        )
        await runner.setup()
        self._runners.append(runner)
        # We own the listening socket: if we are cancelled inside create_server (after it bound
        # but before aiohttp recorded the server), close() still closes it.
        sock = listening_socket(self.host, port)
        self._sockets.append(sock)
        await web.SockSite(runner, sock).start()
        return int(sock.getsockname()[1])

    async def open(self) -> BoundPorts:
        health_port, metrics_port = self._requested
        health_routes = [web.get("/healthz", self._healthz), web.get("/readyz", self._readyz)]
        metrics_routes = [
            web.get("/metrics", self._metrics_handler),
            web.get("/debug/{name}", self._debug_handler),
        ]
        try:
            if health_port == metrics_port and health_port != 0:
                port = await self._start_site(health_routes + metrics_routes, health_port)
                self._ports = BoundPorts(health=port, metrics=port)
            else:
                bound_health = await self._start_site(health_routes, health_port)
                bound_metrics = await self._start_site(metrics_routes, metrics_port)
                self._ports = BoundPorts(health=bound_health, metrics=bound_metrics)
        except BaseException:
            await self.close()
            raise
        log.info(
            "serving probes and metrics",
            extra={"health_port": self._ports.health, "metrics_port": self._ports.metrics},
        )
        return self._ports

    async def close(self) -> None:
        """Close the listeners; bounded, and safe to call while being cancelled."""
        runners, self._runners = self._runners, []
        sockets, self._sockets = self._sockets, []
        try:
            for runner in reversed(runners):
                await bounded(
                    runner.cleanup(),
                    within=self._shutdown_timeout + 1.0,
                    what="probe server cleanup",
                )
        finally:
            for sock in sockets:
                sock.close()


async def serve(
    *,
    readiness: Check | Checks,
    metrics: Metrics,
    host: str = "0.0.0.0",
    health_port: int = 8081,
    metrics_port: int = 8080,
    liveness: Checks | None = None,
    started: Callable[[BoundPorts], None] | None = None,
    debug: Mapping[str, Callable[[], object]] | None = None,
) -> None:
    """Serve until cancelled; meant for ``tg.create_task(serve(...))`` in the manager.

    ``started`` is called with the bound ports once both listeners accept connections.
    """
    async with ProbeServers(
        readiness=readiness,
        metrics=metrics,
        host=host,
        health_port=health_port,
        metrics_port=metrics_port,
        liveness=liveness,
        debug=debug,
    ) as servers:
        if started is not None:
            started(servers.ports)
        await asyncio.Event().wait()  # until cancelled
