"""Wire-level tests of karpenter_py.kube.KubeClient against an in-process aiohttp server.

(They live here because tests/unit/kube is not ours to create yet; move them when it exists.)
"""

import asyncio
import time
from pathlib import Path

import pytest

from karpenter_py.kube import (
    CONFIGMAPS,
    NODEPOOLS,
    NODES,
    AlreadyExistsError,
    ConflictError,
    GoneError,
    InvalidError,
    KubeClient,
    KubeConfig,
    KubeTimeoutError,
    NotFoundError,
    PatchType,
    ServerError,
    TooManyRequestsError,
    TransportError,
)
from tests.unit.kube.fakeapiserver import NS, Recorder, serve


async def drain(client, **kw) -> list[str]:
    """Open a watch and read it to the end; returns the event types seen."""
    seen = []
    async with client.watch(CONFIGMAPS, namespace=NS, **kw) as stream:
        async for e in stream:
            seen.append(e.type)
    return seen


@pytest.fixture
async def env():
    rec = Recorder()
    async with (
        serve(rec) as url,
        KubeClient(KubeConfig(server=url, token="t0k"), qps=0, burst=0) as client,
    ):
        yield client, rec


async def test_get_sends_token_and_maps_404(env):
    client, rec = env
    obj = await client.get(CONFIGMAPS, "present", namespace=NS)
    assert obj["metadata"]["name"] == "present"
    assert rec.last()["auth"] == "Bearer t0k"
    with pytest.raises(NotFoundError) as info:
        await client.get(CONFIGMAPS, "missing", namespace=NS)
    err = info.value
    assert (err.status, err.reason, err.verb, err.name, err.namespace) == (
        404,
        "NotFound",
        "get",
        "missing",
        NS,
    )
    assert "not found" in err.message


async def test_namespaced_resource_needs_a_namespace(env):
    client, _ = env
    with pytest.raises(ValueError, match="namespaced"):
        await client.get(CONFIGMAPS, "x")


async def test_paged_list_follows_continue_and_fills_kind(env):
    client, rec = env
    result = await client.list(CONFIGMAPS, namespace=NS, limit=2)
    assert [i["metadata"]["name"] for i in result.items] == [f"cm{i}" for i in range(7)]
    assert result.resource_version == "99"
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in result.items)
    list_requests = [r for r in rec.requests if r["path"].endswith("/configmaps")]
    assert len(list_requests) == 4
    assert "continue" not in list_requests[0]["query"]
    assert [r["query"].get("continue") for r in list_requests[1:]] == ["2", "4", "6"]
    page = await client.list_page(CONFIGMAPS, namespace=NS, limit=3)
    assert (len(page.items), page.continue_token, page.remaining) == (3, "3", 4)


async def test_expired_continue_token_is_gone(env):
    client, _ = env
    with pytest.raises(GoneError) as info:
        await client.list_page(CONFIGMAPS, namespace=NS, limit=2, continue_token="expired")
    assert info.value.relist_required


async def test_watch_yields_events_and_bookmarks_with_params(env):
    client, rec = env
    async with client.watch(
        CONFIGMAPS, namespace=NS, resource_version="99", timeout_seconds=300
    ) as stream:
        events = [(e.type, e.object["metadata"]["resourceVersion"]) async for e in stream]
    assert events == [
        ("ADDED", "100"),
        ("BOOKMARK", "101"),
        ("MODIFIED", "102"),
        ("DELETED", "103"),
    ]
    q = rec.last()["query"]
    assert q == {
        "watch": "true",
        "resourceVersion": "99",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "300",
    }


async def test_watch_handles_big_objects_split_lines_and_missing_final_newline(env):
    client, _ = env
    async with client.watch(CONFIGMAPS, namespace=NS, resource_version="big") as stream:
        events = [e async for e in stream]
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert len(events[0].object["data"]["blob"]) == 300_000


async def test_watch_410_on_request_and_inside_stream(env):
    client, _ = env
    with pytest.raises(GoneError):
        async with client.watch(CONFIGMAPS, namespace=NS, resource_version="gone"):
            pass
    with pytest.raises(GoneError) as info:
        await drain(client, resource_version="1")  # an ADDED, then an ERROR event with code 410
    assert info.value.reason == "Expired"


async def test_watch_garbage_is_a_transport_error(env):
    client, _ = env
    with pytest.raises(TransportError, match="undecodable"):
        await drain(client, resource_version="garbage")


async def test_watch_abort_breaks_the_stream_and_server_sees_disconnect(env):
    client, rec = env
    async with client.watch(CONFIGMAPS, namespace=NS, resource_version="hang") as stream:
        first = await anext(stream)
        assert first.object["metadata"]["name"] == "h"
        stream.abort()
        with pytest.raises(TransportError):
            await anext(stream)
    async with asyncio.timeout(5):
        await rec.watch_disconnected.wait()


async def test_cancelling_a_watch_reader_closes_the_connection(env):
    client, rec = env
    got_first = asyncio.Event()

    async def reader() -> None:
        async with client.watch(CONFIGMAPS, namespace=NS, resource_version="hang") as stream:
            async for _ in stream:
                got_first.set()

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(reader())
        await got_first.wait()
        task.cancel()
    async with asyncio.timeout(5):
        await rec.watch_disconnected.wait()


async def test_watch_gives_up_after_its_deadline(env):
    client, _ = env
    started = time.monotonic()
    with pytest.raises(KubeTimeoutError):
        await drain(client, resource_version="hang", timeout_seconds=1, deadline_grace=0.1)
    assert time.monotonic() - started < 5


async def test_create_conflicts_and_validation(env):
    client, rec = env
    created = await client.create(CONFIGMAPS, {"metadata": {"name": "ok", "namespace": NS}})
    assert created["metadata"]["resourceVersion"] == "1"
    assert rec.last()["content_type"] == "application/json"
    with pytest.raises(AlreadyExistsError) as exists:
        await client.create(CONFIGMAPS, {"metadata": {"name": "exists"}}, namespace=NS)
    assert isinstance(exists.value, ConflictError)
    with pytest.raises(InvalidError) as invalid:
        await client.create(CONFIGMAPS, {"metadata": {"name": "invalid"}}, namespace=NS)
    assert invalid.value.causes[0]["field"] == "metadata.name"


async def test_update_optimistic_lock(env):
    client, rec = env
    await client.update(
        CONFIGMAPS, {"metadata": {"name": "x", "namespace": NS, "resourceVersion": "7"}}
    )
    assert rec.last()["method"] == "PUT"
    with pytest.raises(ConflictError) as info:
        await client.replace(
            CONFIGMAPS, {"metadata": {"name": "x", "namespace": NS, "resourceVersion": "6"}}
        )
    assert not isinstance(info.value, AlreadyExistsError)
    await client.update_status(
        CONFIGMAPS, {"metadata": {"name": "x", "namespace": NS, "resourceVersion": "7"}}
    )
    assert rec.last()["path"] == f"/api/v1/namespaces/{NS}/configmaps/x/status"


@pytest.mark.parametrize(
    ("patch_type", "patch", "content_type", "query"),
    [
        (PatchType.MERGE, {"data": {"a": "1"}}, "application/merge-patch+json", {}),
        (
            PatchType.JSON,
            [{"op": "add", "path": "/data/a", "value": "1"}],
            "application/json-patch+json",
            {},
        ),
        (PatchType.STRATEGIC, {"data": {"a": "1"}}, "application/strategic-merge-patch+json", {}),
    ],
)
async def test_patch_types(env, patch_type, patch, content_type, query):
    client, rec = env
    await client.patch(CONFIGMAPS, "x", patch, namespace=NS, patch_type=patch_type)
    assert rec.last()["content_type"] == content_type
    assert rec.last()["body"] == patch
    assert rec.last()["query"] == query


async def test_server_side_apply(env):
    client, rec = env
    await client.apply(
        CONFIGMAPS,
        {"metadata": {"name": "x", "namespace": NS}, "data": {}},
        field_manager="karpenter",
    )
    last = rec.last()
    assert last["method"] == "PATCH"
    assert last["content_type"] == "application/apply-patch+yaml"
    assert last["query"] == {"fieldManager": "karpenter", "force": "true"}
    with pytest.raises(ValueError, match="field_manager"):
        await client.patch(CONFIGMAPS, "x", {}, namespace=NS, patch_type=PatchType.APPLY)


async def test_delete_sends_preconditions_and_options(env):
    client, rec = env
    await client.delete(
        CONFIGMAPS,
        "x",
        namespace=NS,
        uid="u1",
        resource_version="7",
        grace_period_seconds=0,
        propagation_policy="Background",
    )
    assert rec.last()["body"] == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u1", "resourceVersion": "7"},
        "gracePeriodSeconds": 0,
        "propagationPolicy": "Background",
    }


async def test_evict_posts_policy_v1_eviction_and_maps_pdb_429(env):
    client, rec = env
    await client.evict("free", namespace=NS, grace_period_seconds=30)
    body = rec.last()["body"]
    assert body["apiVersion"] == "policy/v1"
    assert body["kind"] == "Eviction"
    assert body["metadata"] == {"name": "free", "namespace": NS}
    assert body["deleteOptions"]["gracePeriodSeconds"] == 30
    with pytest.raises(TooManyRequestsError) as info:
        await client.evict("guarded", namespace=NS)
    assert info.value.retry_after == 5.0
    assert "disruption budget" in info.value.message


async def test_server_errors_and_non_json_bodies(env):
    client, _ = env
    with pytest.raises(ServerError) as info:
        await client.list(NODES)
    assert info.value.status == 503
    assert info.value.reason == "ServiceUnavailable"
    with pytest.raises(ServerError) as proxy:
        await client.list(NODES, label_selector="proxy")
    assert proxy.value.status == 502
    assert "upstream connect error" in proxy.value.message


async def test_request_timeout_is_a_kube_timeout():
    rec = Recorder()
    async with serve(rec) as url, KubeClient(KubeConfig(server=url), timeout=0.1) as client:
        with pytest.raises(KubeTimeoutError):
            await client.list(NODEPOOLS)


async def test_connection_refused_is_a_transport_error():
    async with KubeClient(KubeConfig(server="http://127.0.0.1:1"), timeout=2) as client:
        with pytest.raises(TransportError):
            await client.get(NODES, "n")
        with pytest.raises(TransportError):
            async with client.watch(NODES, resource_version="1"):
                pass


async def test_client_side_rate_limit_spaces_requests():
    rec = Recorder()
    async with serve(rec) as url, KubeClient(KubeConfig(server=url), qps=20, burst=1) as client:
        started = time.monotonic()
        for _ in range(4):
            await client.get(CONFIGMAPS, "x", namespace=NS)
        # 1 from the burst, then 3 at 20 qps: at least ~150 ms (loose lower bound only)
        assert time.monotonic() - started >= 0.12


async def test_token_file_is_reread(tmp_path: Path):
    rec = Recorder()
    token = tmp_path / "token"
    token.write_text("first\n")
    async with (
        serve(rec) as url,
        KubeClient(KubeConfig(server=url, token_file=str(token)), token_refresh=0) as client,
    ):
        await client.get(CONFIGMAPS, "x", namespace=NS)
        assert rec.last()["auth"] == "Bearer first"
        token.write_text("second")
        await client.get(CONFIGMAPS, "x", namespace=NS)
        assert rec.last()["auth"] == "Bearer second"


async def test_observer_sees_every_request(env):
    client, _ = env
    seen = []
    client._observer = lambda verb, res, status, secs: seen.append((verb, res, status))
    await client.get(CONFIGMAPS, "x", namespace=NS)
    with pytest.raises(NotFoundError):
        await client.get(CONFIGMAPS, "missing", namespace=NS)
    assert seen == [("get", "configmaps", 200), ("get", "configmaps", 404)]


async def test_unopened_client_says_so():
    client = KubeClient(KubeConfig(server="http://127.0.0.1:1"))
    with pytest.raises(RuntimeError, match="not open"):
        await client.get(NODES, "n")
