"""Probe and metrics servers on ephemeral ports: /healthz, /readyz flipping, /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json

import aiohttp
import pytest

from karpenter_py.manager.probes import BoundPorts, ProbeServers, serve
from karpenter_py.obs.metrics import Metrics

HOST = "127.0.0.1"


async def fetch(port: int, path: str) -> tuple[int, str, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{HOST}:{port}{path}") as resp,
    ):
        return resp.status, await resp.text(), resp.headers.get("Content-Type", "")


async def test_healthz_and_readyz_flip_when_synced():
    synced = False
    async with ProbeServers(
        readiness=lambda: synced, metrics=Metrics(), host=HOST, health_port=0, metrics_port=0
    ) as servers:
        assert servers.health_port > 0
        assert servers.metrics_port > 0
        assert servers.health_port != servers.metrics_port

        status, body, _ = await fetch(servers.health_port, "/healthz")
        assert (status, body) == (200, "ok")

        status, body, _ = await fetch(servers.health_port, "/readyz")
        assert status == 503
        assert "caches-synced" in body
        assert body.startswith("not ready")

        synced = True
        status, body, _ = await fetch(servers.health_port, "/readyz")
        assert (status, body) == (200, "ok")


async def test_named_checks_and_verbose():
    checks = {"informers": lambda: True, "crds": lambda: False}
    async with ProbeServers(
        readiness=checks, metrics=Metrics(), host=HOST, health_port=0, metrics_port=0
    ) as servers:
        status, body, _ = await fetch(servers.health_port, "/readyz")
        assert status == 503
        assert "crds" in body
        assert "informers" not in body  # only what is not ready
        status, body, _ = await fetch(servers.health_port, "/readyz?verbose")
        assert status == 503
        assert "[+]informers ok" in body
        assert "[-]crds failed" in body


async def test_a_raising_check_is_a_failed_check():
    def broken() -> bool:
        raise RuntimeError("cache gone")

    async with ProbeServers(
        readiness=lambda: True,
        liveness={"watchdog": broken},
        metrics=Metrics(),
        host=HOST,
        health_port=0,
        metrics_port=0,
    ) as servers:
        status, body, _ = await fetch(servers.health_port, "/healthz")
        assert status == 500
        assert "watchdog" in body
        assert "cache gone" in body


async def test_metrics_endpoint():
    metrics = Metrics(version="9.9.9")
    metrics.cluster_state_synced.set(1)
    async with ProbeServers(
        readiness=lambda: True, metrics=metrics, host=HOST, health_port=0, metrics_port=0
    ) as servers:
        status, body, content_type = await fetch(servers.metrics_port, "/metrics")
        assert status == 200
        assert content_type.startswith("text/plain")
        assert "karpenter_build_info{" in body
        assert "karpenter_cluster_state_synced 1.0" in body
        # the probe port does not serve metrics, and vice versa
        assert (await fetch(servers.health_port, "/metrics"))[0] == 404
        assert (await fetch(servers.metrics_port, "/healthz"))[0] == 404


async def test_serve_in_a_task_group_and_cancel_closes_the_ports():
    bound: asyncio.Future[BoundPorts] = asyncio.get_running_loop().create_future()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(
            serve(
                readiness=lambda: True,
                metrics=Metrics(),
                host=HOST,
                health_port=0,
                metrics_port=0,
                started=bound.set_result,
            )
        )
        async with asyncio.timeout(5):
            ports = await bound
        assert (await fetch(ports.health, "/healthz"))[0] == 200
        task.cancel()
    with pytest.raises(aiohttp.ClientConnectionError):
        await fetch(ports.health, "/healthz")


async def test_shared_port_serves_everything():
    async with ProbeServers(
        readiness=lambda: True, metrics=Metrics(), host=HOST, health_port=0, metrics_port=0
    ) as first:
        port = first.health_port
    # reuse the now-free port for a single combined listener
    async with ProbeServers(
        readiness=lambda: True, metrics=Metrics(), host=HOST, health_port=port, metrics_port=port
    ) as servers:
        assert servers.health_port == servers.metrics_port == port
        assert (await fetch(port, "/healthz"))[0] == 200
        assert (await fetch(port, "/metrics"))[0] == 200


async def test_port_in_use_fails_and_cleans_up():
    async with ProbeServers(
        readiness=lambda: True, metrics=Metrics(), host=HOST, health_port=0, metrics_port=0
    ) as first:
        clash = ProbeServers(
            readiness=lambda: True,
            metrics=Metrics(),
            host=HOST,
            health_port=0,
            metrics_port=first.metrics_port,
        )
        with pytest.raises(OSError):
            await clash.open()
        with pytest.raises(RuntimeError):
            _ = clash.ports


async def test_cancelling_at_any_point_of_startup_leaks_no_listening_socket() -> None:
    """Cancel serve() after 0..N loop turns; every socket it opened must be closed (a leaked one
    surfaces as an unraisable ResourceWarning, which the suite turns into an error)."""
    import gc

    from karpenter_py.manager.probes import serve
    from karpenter_py.obs.metrics import Metrics

    for turns in range(12):
        task = asyncio.create_task(
            serve(
                readiness=lambda: True,
                metrics=Metrics(),
                host="127.0.0.1",
                health_port=0,
                metrics_port=0,
            )
        )
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        gc.collect()


async def test_debug_reports_are_json_on_the_metrics_listener():
    report = {
        "unchanged": {"node-a": 'pod shop/db-0 has annotation karpenter.sh/do-not-disrupt: "true"'}
    }
    async with ProbeServers(
        readiness=lambda: True,
        metrics=Metrics(),
        host=HOST,
        health_port=0,
        metrics_port=0,
        debug={"disruption": lambda: report},
    ) as servers:
        status, body, ctype = await fetch(servers.metrics_port, "/debug/disruption")
        assert (status, ctype) == (200, "application/json")
        assert json.loads(body) == report
        status, body, _ = await fetch(servers.metrics_port, "/debug/nothing")
        assert status == 404
        assert json.loads(body) == {"error": "unknown report", "known": ["disruption"]}
