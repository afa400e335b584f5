"""KubeClient with an exec user, end to end: real plugin process, real HTTP server."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from karpenter_py.aio.clock import FakeClock
from karpenter_py.kube import CONFIGMAPS, KubeClient, UnauthorizedError, load_config
from karpenter_py.kube.execauth import ExecPluginError
from tests.unit.kube.fakeapiserver import NS, Recorder, serve
from tests.unit.kube.fakeplugin import T0, exec_stanza, make_plugin, write_kubeconfig

EXPIRY = "2026-01-01T00:15:00Z"


async def test_requests_and_watches_carry_the_exec_token(tmp_path: Path):
    plugin = make_plugin(tmp_path / "plugin", expiry=EXPIRY)
    clock = FakeClock(datetime.fromisoformat(T0))
    rec = Recorder()
    async with serve(rec) as url:
        kc = write_kubeconfig(tmp_path / "kc", {"exec": exec_stanza(plugin)}, server=url)
        cfg = load_config(kc, clock=clock)
        async with KubeClient(cfg, qps=0, burst=0) as client:
            await client.get(CONFIGMAPS, "x", namespace=NS)
            assert rec.last()["auth"] == "Bearer tok-1"
            await client.list(CONFIGMAPS, namespace=NS)
            async with client.watch(CONFIGMAPS, namespace=NS) as stream:
                async for _ in stream:
                    pass
            assert {r["auth"] for r in rec.requests} == {"Bearer tok-1"}
            assert plugin.runs == 1  # cached across requests
            clock.step(15 * 60)
            await client.get(CONFIGMAPS, "x", namespace=NS)
            assert rec.last()["auth"] == "Bearer tok-2"


@asynccontextmanager
async def strict_server(revoked: set[str], seen: list[str]) -> AsyncIterator[str]:
    """Answers 401 for revoked tokens, like an apiserver after the token was rotated out."""

    async def handler(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        seen.append(auth)
        if auth in revoked:
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 401,
                    "reason": "Unauthorized", "message": "Unauthorized"}  # fmt: skip
            return web.json_response(body, status=401)
        if request.query.get("watch") == "true":
            return web.Response(body=b"", content_type="application/json")
        return web.json_response({"metadata": {"name": request.match_info.get("name", "")}})

    app = web.Application()
    app.router.add_get(f"/api/v1/namespaces/{NS}/configmaps/{{name}}", handler)
    app.router.add_get(f"/api/v1/namespaces/{NS}/configmaps", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def test_a_401_makes_the_next_request_fetch_a_new_token(tmp_path: Path):
    plugin = make_plugin(tmp_path / "plugin")  # no expiry: cached until the server says 401
    revoked = {"Bearer tok-1"}
    seen: list[str] = []
    async with strict_server(revoked, seen) as url:
        cfg = load_config(write_kubeconfig(tmp_path / "kc", {"exec": exec_stanza(plugin)}, url))
        async with KubeClient(cfg, qps=0, burst=0) as client:
            with pytest.raises(UnauthorizedError):
                await client.get(CONFIGMAPS, "x", namespace=NS)  # no retry inside the client
            await client.get(CONFIGMAPS, "x", namespace=NS)
            revoked.add("Bearer tok-2")
            with pytest.raises(UnauthorizedError):
                async with client.watch(CONFIGMAPS, namespace=NS):
                    pass
            await client.get(CONFIGMAPS, "x", namespace=NS)
    assert seen == ["Bearer tok-1", "Bearer tok-2", "Bearer tok-2", "Bearer tok-3"]
    assert plugin.runs == 3


async def test_a_failing_plugin_fails_the_request_before_it_is_sent(tmp_path: Path):
    plugin = make_plugin(tmp_path / "plugin", exit=1, stderr="could not reach STS")
    rec = Recorder()
    async with serve(rec) as url:
        cfg = load_config(write_kubeconfig(tmp_path / "kc", {"exec": exec_stanza(plugin)}, url))
        async with KubeClient(cfg, qps=0, burst=0) as client:
            with pytest.raises(ExecPluginError, match=r"fake-credential-plugin.*could not reach"):
                await client.get(CONFIGMAPS, "x", namespace=NS)
    assert rec.requests == []
