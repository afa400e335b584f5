"""A tiny aiohttp apiserver double for wire-level tests of KubeClient (no cluster needed)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

NS = "ns"


def status(code: int, reason: str, message: str, **details: Any) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        body["details"] = details
    return web.json_response(body, status=code)


def cm(name: str, rv: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "resourceVersion": str(rv),
            "uid": f"uid-{name}",
        }
    }


@dataclass
class Recorder:
    requests: list[dict[str, Any]] = field(default_factory=list)
    watch_disconnected: asyncio.Event = field(default_factory=asyncio.Event)

    def last(self) -> dict[str, Any]:
        return self.requests[-1]


def build_app(rec: Recorder) -> web.Application:
    items = [cm(f"cm{i}", 10 + i) for i in range(7)]

    async def record(request: web.Request) -> None:
        raw = await request.read()
        rec.requests.append(
            {
                "method": request.method,
                "path": request.path,
                "query": dict(request.query),
                "content_type": request.headers.get("Content-Type"),
                "auth": request.headers.get("Authorization"),
                "body": json.loads(raw) if raw else None,
            }
        )

    async def configmaps(request: web.Request) -> web.StreamResponse:
        await record(request)
        if request.query.get("watch") == "true":
            return await watch(request)
        if request.query.get("continue") == "expired":
            return status(410, "Expired", "The provided continue parameter is too old")
        limit = int(request.query.get("limit", "0") or 0)
        start = int(request.query.get("continue", "0") or 0)
        end = start + limit if limit else len(items)
        meta: dict[str, Any] = {"resourceVersion": "99"}
        if end < len(items):
            meta["continue"] = str(end)
            meta["remainingItemCount"] = len(items) - end
        return web.json_response(
            {
                "kind": "ConfigMapList",
                "apiVersion": "v1",
                "metadata": meta,
                "items": items[start:end],
            }
        )

    async def watch(request: web.Request) -> web.StreamResponse:
        rv = request.query.get("resourceVersion")
        if rv == "gone":
            return status(410, "Expired", "too old resource version: 1 (500)")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)

        async def send(etype: str, obj: dict[str, Any], *, split: bool = False) -> None:
            line = json.dumps({"type": etype, "object": obj}).encode() + b"\n"
            if split:  # deliver one event in many small writes, across chunk boundaries
                for i in range(0, len(line), 7000):
                    await resp.write(line[i : i + 7000])
            else:
                await resp.write(line)

        try:
            if rv == "1":
                await send("ADDED", {**cm("a", 2), "kind": "ConfigMap"})
                await send(
                    "ERROR",
                    {
                        "kind": "Status",
                        "code": 410,
                        "reason": "Expired",
                        "message": "too old resource version: 1 (500)",
                    },
                )
            elif rv == "big":
                big = {**cm("big", 3), "data": {"blob": "x" * 300_000}}
                await send("ADDED", big, split=True)
                # two events in one write, the second without a trailing newline before EOF
                await resp.write(
                    json.dumps({"type": "MODIFIED", "object": cm("b", 4)}).encode()
                    + b"\n\n"
                    + json.dumps({"type": "DELETED", "object": cm("b", 5)}).encode()
                )
            elif rv == "hang":
                await send("ADDED", cm("h", 6))
                try:
                    await asyncio.sleep(3600)
                finally:
                    rec.watch_disconnected.set()
            elif rv == "garbage":
                await resp.write(b"{not json}\n")
            else:
                await send("ADDED", cm("a", 100))
                await send(
                    "BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": "101"}}
                )
                await send("MODIFIED", cm("a", 102))
                await send("DELETED", cm("a", 103))
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            rec.watch_disconnected.set()
            raise
        return resp

    async def configmap(request: web.Request) -> web.Response:
        await record(request)
        name = request.match_info["name"]
        body = rec.last()["body"]
        if name == "missing":
            return status(404, "NotFound", f'configmaps "{name}" not found')
        if request.method == "PUT" and body["metadata"].get("resourceVersion") != "7":
            return status(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version",
            )
        if request.method == "DELETE":
            return web.json_response({"kind": "Status", "status": "Success"})
        return web.json_response(cm(name, 8))

    async def create(request: web.Request) -> web.Response:
        await record(request)
        name = rec.last()["body"]["metadata"]["name"]
        if name == "exists":
            return status(409, "AlreadyExists", f'configmaps "{name}" already exists')
        if name == "invalid":
            return status(
                422,
                "Invalid",
                "ConfigMap is invalid",
                causes=[
                    {"reason": "FieldValueInvalid", "field": "metadata.name", "message": "bad"}
                ],
            )
        return web.json_response(cm(name, 1), status=201)

    async def eviction(request: web.Request) -> web.Response:
        await record(request)
        if request.match_info["name"] == "guarded":
            resp = status(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
            )
            resp.headers["Retry-After"] = "5"
            return resp
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def nodes(request: web.Request) -> web.Response:
        await record(request)
        if request.query.get("labelSelector") == "proxy":
            return web.Response(status=502, text="upstream connect error")
        return status(503, "ServiceUnavailable", "etcd is down")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({})

    app = web.Application()
    app.router.add_route("GET", f"/api/v1/namespaces/{NS}/configmaps", configmaps)
    app.router.add_route("POST", f"/api/v1/namespaces/{NS}/configmaps", create)
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        app.router.add_route(method, f"/api/v1/namespaces/{NS}/configmaps/{{name}}", configmap)
        app.router.add_route(
            method, f"/api/v1/namespaces/{NS}/configmaps/{{name}}/status", configmap
        )
    app.router.add_route("POST", f"/api/v1/namespaces/{NS}/pods/{{name}}/eviction", eviction)
    app.router.add_route("GET", "/api/v1/nodes", nodes)
    app.router.add_route("GET", "/apis/karpenter.sh/v1/nodepools", slow)
    return app


@asynccontextmanager
async def serve(rec: Recorder) -> AsyncIterator[str]:
    server = TestServer(build_app(rec), host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()
