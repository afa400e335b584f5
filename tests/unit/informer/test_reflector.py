import asyncio
from collections import Counter
from collections.abc import Sequence

import pytest

from karpenter_py.aio import Backoff
from karpenter_py.informer import Reflector, Store, field_indexer
from karpenter_py.informer.store import keep_identity
from karpenter_py.kube.errors import GoneError, ServerError, TooManyRequestsError, TransportError
from karpenter_py.kube.objects import KubeObject, object_key
from tests.unit.informer.fakeapi import FakeApi


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.listed_pages: list[list[str]] = []
        self.synced_count = 0

    def upsert(self, obj: KubeObject) -> None:
        self.calls.append(("upsert", object_key(obj)))

    def delete(self, obj: KubeObject) -> None:
        self.calls.append(("delete", object_key(obj)))

    def listed(self, objs: Sequence[KubeObject]) -> None:
        self.listed_pages.append(sorted(object_key(o) for o in objs))

    def synced(self) -> None:
        self.synced_count += 1


class Sleeps:
    """Injected sleep: records requested delays, yields without waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def make(api: FakeApi, sink: RecordingSink, sleeps: Sleeps | None = None, **kw) -> Reflector:
    return Reflector(
        api,
        name="configmaps",
        store=Store(indexers={"data": field_indexer("data", "v")}),
        sinks=[sink],
        sleep=kw.pop("sleep", None) or sleeps or Sleeps(),
        backoff=Backoff(initial=0.8, maximum=30, jitter=0),
        min_watch_duration=kw.pop("min_watch_duration", 0.0),
        **kw,
    )


async def settle(cond) -> None:
    """Poll a condition the fake cannot signal (bounded: fails the test after ~2 s)."""
    for _ in range(2000):
        if cond():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not reached")


def contents(store: Store) -> dict[str, str]:
    return {object_key(o): o["metadata"]["resourceVersion"] for o in store.list()}


def api_contents(api: FakeApi) -> dict[str, str]:
    return {f"ns/{n}": o["metadata"]["resourceVersion"] for n, o in api.objects.items()}


async def test_first_list_replaces_then_synced_then_watches_from_list_rv():
    api, sink = FakeApi(), RecordingSink()
    for n in "abc":
        api.create(n)
    r = make(api, sink)
    assert not r.synced
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        async with asyncio.timeout(2):
            await r.wait_synced()
        await settle(lambda: api.watch_calls)
        task.cancel()
    assert sink.listed_pages == [["ns/a", "ns/b", "ns/c"]]
    assert sink.synced_count == 1
    assert sink.calls == []  # the first list is a replace, not per-object upserts
    assert api.list_calls == [None]  # consistent read by default
    assert api.watch_calls == ["103"]
    assert contents(r.store) == api_contents(api)


async def test_first_list_reaches_store_and_sinks_a_page_at_a_time():
    api, sink = FakeApi(), RecordingSink()
    for n in "abcde":
        api.create(n, data="x")

    def tag(obj: KubeObject) -> KubeObject:
        obj["metadata"]["labels"] = {"seen": "yes"}
        return obj

    r = Reflector(
        api,
        name="configmaps",
        store=Store(keep=keep_identity(("metadata", "labels"))),
        sinks=[sink],
        page_size=2,
        transform=tag,
    )
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        async with asyncio.timeout(2):
            await r.wait_synced()
        task.cancel()
    assert sink.listed_pages == [["ns/a", "ns/b"], ["ns/c", "ns/d"], ["ns/e"]]
    assert sink.synced_count == 1
    # The store keeps what a relist diff and delete handlers read, after the transform.
    assert r.store.get("ns/a") == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "101",
            "labels": {"seen": "yes"},
        },
    }


async def test_a_first_list_cut_part_way_is_finished_by_a_diffing_relist():
    api, sink = FakeApi(), RecordingSink()
    for n in "abcde":
        api.create(n)
    # The list fails after its first page, the next one at once; then the reflector backs off.
    expired = GoneError(status=410, reason="Expired", message="continue token expired")
    api.list_errors += [(1, expired), (0, expired)]

    async def meanwhile(_: float) -> None:
        # While it waits: "a" goes, "f" comes, "b" changes.
        if "a" in api.objects:
            api.delete("a")
            api.create("f")
            api.update("b", "changed")
        await asyncio.sleep(0)

    r = make(api, sink, page_size=2, sleep=meanwhile)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        async with asyncio.timeout(2):
            await r.wait_synced()
        task.cancel()
    assert sink.listed_pages == [["ns/a", "ns/b"]]  # the one page that arrived
    # The relist delivers what differs from that page: a gone, b changed, c..f new.
    assert sorted(sink.calls) == [
        ("delete", "ns/a"),
        ("upsert", "ns/b"),
        ("upsert", "ns/c"),
        ("upsert", "ns/d"),
        ("upsert", "ns/e"),
        ("upsert", "ns/f"),
    ]
    assert sink.synced_count == 1
    assert contents(r.store) == api_contents(api)


async def test_watch_events_reach_store_and_sinks_and_bookmarks_move_rv():
    api, sink = FakeApi(), RecordingSink()
    api.create("a")
    r = make(api, sink)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        await settle(lambda: api.watchers)
        api.create("b", "x")
        api.update("a", "y")
        api.delete("b")
        api.bookmark()
        await settle(lambda: r.resource_version == str(api.rv))
        task.cancel()
    assert sink.calls == [("upsert", "ns/b"), ("upsert", "ns/a"), ("delete", "ns/b")]
    assert contents(r.store) == api_contents(api)
    assert r.store.index_keys("data", "y") == ["ns/a"]
    assert r.store.resource_version == str(api.rv)
    stats = r.statistics()
    assert (stats.events, stats.bookmarks, stats.lists) == (3, 1, 1)


async def test_server_timeout_rewatches_from_last_rv_without_relisting():
    api, sink = FakeApi(), RecordingSink()
    r = make(api, sink)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        await settle(lambda: api.watchers)
        api.create("a")
        await settle(lambda: len(r.store) == 1)
        api.end_watches()
        await settle(lambda: len(api.watch_calls) == 2 and api.watchers)
        api.create("b")
        await settle(lambda: len(r.store) == 2)
        task.cancel()
    assert api.watch_calls == ["100", "101"]
    assert api.list_calls == [None]
    assert sink.calls == [("upsert", "ns/a"), ("upsert", "ns/b")]


@pytest.mark.parametrize("gone", ["http", "stream"])
async def test_410_relists_and_delivers_exact_diff(gone):
    api, sink = FakeApi(gone=gone), RecordingSink()
    for n in ("keep", "change", "vanish", "recreate"):
        api.create(n)
    r = make(api, sink)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        await settle(lambda: api.watchers)
        # The connection silently dies: changes happen that the reflector never sees, and the
        # server's history is compacted past the reflector's resourceVersion.
        api.deliver = False
        api.update("change", "v2")
        api.delete("vanish")
        api.delete("recreate")
        api.create("recreate", "again")
        api.create("new")
        api.compact()
        api.deliver = True
        api.break_watches()
        await settle(lambda: r.statistics().relists == 1 and api.watchers)
        api.create("after")  # and watching continues from the relist's RV
        await settle(lambda: "ns/after" in r.store)
        task.cancel()
    assert contents(r.store) == api_contents(api)
    relist_calls = sink.calls[: len(sink.calls) - 1]
    assert sorted(c for c in relist_calls if c[0] == "delete") == [
        ("delete", "ns/recreate"),
        ("delete", "ns/vanish"),
    ]
    assert sorted(c for c in relist_calls if c[0] == "upsert") == [
        ("upsert", "ns/change"),
        ("upsert", "ns/new"),
        ("upsert", "ns/recreate"),
    ]
    assert ("upsert", "ns/keep") not in sink.calls  # unchanged objects are not re-delivered
    assert sink.calls[-1] == ("upsert", "ns/after")
    assert sink.synced_count == 1
    assert len(sink.listed_pages) == 1
    assert len(api.list_calls) == 2
    # the failed watch was attempted from the stale RV; the next one from the relist RV
    assert api.watch_calls[-2] == "104"
    assert int(api.watch_calls[-1]) >= api.oldest


async def test_connection_errors_back_off_exponentially_then_resume_without_relist():
    api, sink, sleeps = FakeApi(), RecordingSink(), Sleeps()
    api.create("a")
    api.watch_errors = [TransportError("refused"), ServerError(status=503), TransportError("reset")]
    r = make(api, sink, sleeps)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        await settle(lambda: api.watchers)
        api.create("b")
        await settle(lambda: len(r.store) == 2)
        api.break_watches()  # after data flowed, backoff starts again from the beginning
        await settle(lambda: len(api.watch_calls) == 5 and api.watchers)
        task.cancel()
    assert sleeps.delays == [0.8, 1.6, 3.2, 0.8]
    assert api.list_calls == [None]
    assert api.watch_calls == ["101", "101", "101", "101", "102"]
    assert Counter(sink.calls) == Counter({("upsert", "ns/b"): 1})
    assert r.statistics().errors == 4


async def test_429_waits_at_least_retry_after():
    api, sink, sleeps = FakeApi(), RecordingSink(), Sleeps()
    api.watch_errors = [TooManyRequestsError(status=429, retry_after=7.0)]
    r = make(api, sink, sleeps)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        await settle(lambda: api.watchers)
        task.cancel()
    assert sleeps.delays == [7.0]


async def test_immediately_closed_watch_is_treated_as_an_error():
    api, sink, sleeps = FakeApi(), RecordingSink(), Sleeps()
    r = make(api, sink, sleeps, min_watch_duration=60.0)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        for i in range(3):
            await settle(lambda: api.watchers)
            api.end_watches()
            await settle(lambda i=i: len(api.watch_calls) == i + 2)
        task.cancel()
    assert sleeps.delays == [0.8, 1.6, 3.2]


async def test_repeated_410_after_relist_backs_off():
    api, sink, sleeps = FakeApi(gone="http"), RecordingSink(), Sleeps()
    api.oldest = 10**9  # every watch is "too old"
    r = make(api, sink, sleeps)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        await settle(lambda: len(api.list_calls) >= 4)
        task.cancel()
    assert sleeps.delays[:2] == [0.8, 1.6]  # first 410 relists at once, later ones back off


async def test_run_again_resumes_from_last_rv_without_relisting():
    api, sink = FakeApi(), RecordingSink()
    api.create("a")
    r = make(api, sink)
    for _ in range(2):
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(r.run())
            await settle(lambda: api.watchers)
            task.cancel()
        await settle(lambda: not api.watchers)  # the stream was closed on cancellation
    assert api.list_calls == [None]
    assert api.watch_calls == ["101", "101"]


async def test_sink_errors_propagate():
    api = FakeApi()

    class Broken(RecordingSink):
        def upsert(self, obj: KubeObject) -> None:
            raise RuntimeError("bug in consumer")

    r = make(api, Broken())

    async def scenario() -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(r.run())
            await settle(lambda: api.watchers)
            api.create("a")

    with pytest.raises(ExceptionGroup) as info:
        await scenario()
    assert isinstance(info.value.exceptions[0], RuntimeError)
    assert not api.watchers  # the watch was closed on the way out


async def test_watch_timeout_is_jittered_within_bounds():
    api, sink = FakeApi(), RecordingSink()
    seen: list[int] = []
    original = api.watch

    def spy(*, resource_version: str, timeout_seconds: int):
        seen.append(timeout_seconds)
        return original(resource_version=resource_version, timeout_seconds=timeout_seconds)

    api.watch = spy  # type: ignore[method-assign]
    r = make(api, sink, watch_timeout=(300.0, 600.0))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.run())
        for i in range(5):
            await settle(lambda: api.watchers)
            api.end_watches()
            await settle(lambda i=i: len(api.watch_calls) == i + 2)
        task.cancel()
    assert all(300 <= t <= 600 for t in seen)
    assert len(set(seen)) > 1
