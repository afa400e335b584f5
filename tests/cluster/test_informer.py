"""The informer and kube client against the real local control plane.

ConfigMaps are served without the apiserver's watch cache (hack/cluster.py passes
``--watch-cache-sizes=configmaps#0``), so a watch resumed after an etcd compaction gets a genuine
410 Gone from etcd; Nodes go through the watch cache (bookmarks, label selectors).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from karpenter_py.aio import Backoff
from karpenter_py.informer import KubeListWatch, Reflector, Store
from karpenter_py.kube import (
    CONFIGMAPS,
    NAMESPACES,
    NODES,
    PODS,
    ConflictError,
    InvalidError,
    KubeClient,
    KubeObject,
    NotFoundError,
    Page,
    PatchType,
    Resource,
    WatchEvent,
    load_kubeconfig,
    object_key,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def eventually(
    cond: Callable[[], bool], *, within: float = 30.0, what: str = "condition"
) -> None:
    """Poll ``cond`` (the apiserver cannot signal us) until true or fail after ``within`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    for _ in range(int(within / 0.02) + 1):
        if cond():
            return
        if loop.time() > deadline:
            break
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {within}s waiting for {what}")


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (verb, key, uid)
        self.listed_pages: list[list[str]] = []
        self.synced_count = 0

    def upsert(self, obj: KubeObject) -> None:
        self.calls.append(("upsert", object_key(obj), obj["metadata"]["uid"]))

    def delete(self, obj: KubeObject) -> None:
        self.calls.append(("delete", object_key(obj), obj["metadata"]["uid"]))

    def listed(self, objs: Sequence[KubeObject]) -> None:
        self.listed_pages.append(sorted(object_key(o) for o in objs))

    def synced(self) -> None:
        self.synced_count += 1


class CapturingListWatch:
    """KubeListWatch that remembers each open watch stream, so a test can cut it."""

    def __init__(self, inner: KubeListWatch) -> None:
        self.inner = inner
        self.streams: list[Any] = []
        self.watch_rvs: list[str] = []

    def pages(self, *, resource_version: str | None, limit: int | None) -> AsyncIterator[Page]:
        return self.inner.pages(resource_version=resource_version, limit=limit)

    @contextlib.asynccontextmanager
    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        self.watch_rvs.append(resource_version)
        async with self.inner.watch(
            resource_version=resource_version, timeout_seconds=timeout_seconds
        ) as stream:
            self.streams.append(stream)
            yield stream


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    config = await asyncio.to_thread(load_kubeconfig, [cluster.kubeconfig_path])
    async with KubeClient(config, qps=200, burst=300) as c:
        yield c


@pytest.fixture
async def namespace(client: KubeClient) -> AsyncIterator[str]:
    name = unique("karpy-informer")
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    with contextlib.suppress(NotFoundError):
        await client.delete(NAMESPACES, name)


# kube-controller-manager adds kube-root-ca.crt to every namespace: select only our objects.
MINE = "karpy-informer-test=yes"


def configmap(name: str, value: str = "0", labels: dict[str, str] | None = None) -> KubeObject:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {"karpy-informer-test": "yes"}},
        "data": {"v": value},
    }


async def api_state(client: KubeClient, resource: Resource, **kw: Any) -> dict[str, str]:
    result = await client.list(resource, **kw)
    return {object_key(o): o["metadata"]["resourceVersion"] for o in result.items}


def store_state(store: Store) -> dict[str, str]:
    return {object_key(o): o["metadata"]["resourceVersion"] for o in store.list()}


# ----------------------------------------------------------------------------- kube client


async def test_paged_list_limit_2_returns_all_7(client: KubeClient, namespace: str) -> None:
    for i in range(7):
        await client.create(CONFIGMAPS, configmap(f"cm{i}"), namespace=namespace)
    result = await client.list(CONFIGMAPS, namespace=namespace, limit=2, label_selector=MINE)
    names = [o["metadata"]["name"] for o in result.items]
    assert sorted(names) == [f"cm{i}" for i in range(7)]
    assert len(set(names)) == 7
    assert result.resource_version
    pages, token = 0, None
    while True:
        page = await client.list_page(
            CONFIGMAPS, namespace=namespace, limit=2, continue_token=token
        )
        pages += 1
        assert len(page.items) <= 2
        if page.continue_token is None:
            break
        token = page.continue_token
    assert pages == 4
    # and a reflector with the same page size syncs all of them
    reflector = Reflector(
        KubeListWatch(client, CONFIGMAPS, namespace=namespace, label_selector=MINE),
        name="cm",
        page_size=2,
    )
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(reflector.run())
        async with asyncio.timeout(30):
            await reflector.wait_synced()
        task.cancel()
    assert sorted(o["metadata"]["name"] for o in reflector.store.list()) == [
        f"cm{i}" for i in range(7)
    ]


async def test_client_verbs_and_typed_errors(client: KubeClient, namespace: str) -> None:
    created = await client.create(CONFIGMAPS, configmap("verbs"), namespace=namespace)
    with pytest.raises(ConflictError):  # AlreadyExists is a ConflictError
        await client.create(CONFIGMAPS, configmap("verbs"), namespace=namespace)
    stale = dict(created)
    updated = await client.update(CONFIGMAPS, {**created, "data": {"v": "1"}}, namespace=namespace)
    with pytest.raises(ConflictError):  # optimistic lock: the RV in `stale` is outdated
        await client.update(CONFIGMAPS, {**stale, "data": {"v": "2"}}, namespace=namespace)
    merged = await client.patch(CONFIGMAPS, "verbs", {"data": {"m": "x"}}, namespace=namespace)
    assert merged["data"] == {"v": "1", "m": "x"}
    jp = await client.patch(
        CONFIGMAPS,
        "verbs",
        [{"op": "test", "path": "/metadata/resourceVersion", "value": merged["metadata"]["resourceVersion"]},
         {"op": "remove", "path": "/data/m"}],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )  # fmt: skip
    assert jp["data"] == {"v": "1"}
    applied = await client.apply(
        CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": namespace}, "data": {"a": "1"}},
        field_manager="karpy-test",
    )  # fmt: skip
    assert applied["data"] == {"a": "1"}
    with pytest.raises(InvalidError) as invalid:
        await client.create(CONFIGMAPS, configmap("Not_A_Valid_Name"), namespace=namespace)
    assert invalid.value.causes
    with pytest.raises(ConflictError):  # uid precondition mismatch
        await client.delete(
            CONFIGMAPS, "verbs", namespace=namespace, uid="00000000-0000-0000-0000-000000000000"
        )
    await client.delete(CONFIGMAPS, "verbs", namespace=namespace, uid=updated["metadata"]["uid"])
    with pytest.raises(NotFoundError):
        await client.get(CONFIGMAPS, "verbs", namespace=namespace)
    # eviction of a pod no PDB covers deletes it
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "evictee"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    await client.create(PODS, pod, namespace=namespace)
    await client.evict("evictee", namespace=namespace, grace_period_seconds=0)
    with pytest.raises(NotFoundError):
        await client.evict("no-such-pod", namespace=namespace)


# ----------------------------------------------------------------------------- reflector


@pytest.mark.parametrize("kind", ["configmaps", "nodes"])
async def test_list_watch_sees_creates_updates_deletes(
    client: KubeClient, namespace: str, kind: str
) -> None:
    label = unique("run")
    if kind == "configmaps":
        resource, ns = CONFIGMAPS, namespace
    else:
        resource, ns = NODES, None
    source = KubeListWatch(
        client, resource, namespace=ns, label_selector=f"karpy-informer-test={label}"
    )
    labels = {"karpy-informer-test": label}
    sink = RecordingSink()
    reflector = Reflector(source, name=kind, sinks=[sink])

    def body(name: str) -> KubeObject:
        if resource is NODES:
            return {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
            }
        return configmap(name, labels=labels)

    pre = unique("pre")
    await client.create(resource, body(pre), namespace=ns)
    name = unique("obj")
    try:
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(reflector.run())
            async with asyncio.timeout(30):
                await reflector.wait_synced()
            assert sink.listed_pages == [[f"{ns}/{pre}" if ns else pre]]
            created = await client.create(resource, body(name), namespace=ns)
            await client.patch(
                resource, name, {"metadata": {"annotations": {"step": "2"}}}, namespace=ns
            )
            await client.delete(resource, name, namespace=ns)
            key = f"{ns}/{name}" if ns else name
            await eventually(
                lambda: ("delete", key, created["metadata"]["uid"]) in sink.calls,
                what="delete event",
            )
            task.cancel()
    finally:
        for n in (pre, name):
            with contextlib.suppress(NotFoundError):
                await client.delete(resource, n, namespace=ns)
    verbs = [c[0] for c in sink.calls if c[1] == key]
    if resource is NODES:  # node controllers may add their own updates (taints, CIDRs) in between
        assert verbs[0] == "upsert"
        assert verbs[-1] == "delete"
        assert verbs.count("delete") == 1
        assert verbs.count("upsert") >= 2
    else:
        assert verbs == ["upsert", "upsert", "delete"]
    assert key not in reflector.store
    assert reflector.statistics().lists == 1


async def test_410_after_etcd_compaction_relists_without_loss_or_duplicates(
    client: KubeClient, namespace: str, cluster: ClusterHandle
) -> None:
    if cluster.etcd_url is None:
        pytest.skip("needs etcd on loopback (a hack/cluster.py cluster) to compact")
    for name in ("keep", "change", "vanish", "recreate", "keep2"):
        await client.create(CONFIGMAPS, configmap(name), namespace=namespace)
    sink = RecordingSink()
    source = CapturingListWatch(
        KubeListWatch(client, CONFIGMAPS, namespace=namespace, label_selector=MINE)
    )
    reflector = Reflector(source, name="configmaps", sinks=[sink])
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(reflector.run())
        async with asyncio.timeout(30):
            await reflector.wait_synced()
        await eventually(lambda: bool(source.streams), what="watch open")
        task.cancel()
    stale_rv = reflector.resource_version
    assert stale_rv is not None
    uids = {object_key(o): o["metadata"]["uid"] for o in reflector.store.list()}

    # While nobody watches: change, delete, delete+re-create, create; then compact etcd past it all.
    await client.patch(CONFIGMAPS, "change", {"data": {"v": "1"}}, namespace=namespace)
    await client.delete(CONFIGMAPS, "vanish", namespace=namespace)
    await client.delete(CONFIGMAPS, "recreate", namespace=namespace)
    new_uid = (
        await client.create(CONFIGMAPS, configmap("recreate", "again"), namespace=namespace)
    )["metadata"]["uid"]
    await client.create(CONFIGMAPS, configmap("new"), namespace=namespace)
    revision = await asyncio.to_thread(cluster.compact_etcd)
    assert revision > int(stale_rv)

    before = len(sink.calls)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(reflector.run())  # resumes from stale_rv -> 410 -> relist
        await eventually(lambda: reflector.statistics().relists == 1, what="relist after 410")
        await eventually(lambda: len(source.watch_rvs) >= 3, what="watch after relist")
        after = await client.create(CONFIGMAPS, configmap("after"), namespace=namespace)
        await eventually(lambda: f"{namespace}/after" in reflector.store, what="event after relist")
        task.cancel()

    ns = namespace
    delta = sink.calls[before:]
    assert source.watch_rvs[1] == stale_rv  # the resumed watch really used the expired RV
    assert sorted(c for c in delta if c[0] == "delete") == sorted(
        [
            ("delete", f"{ns}/recreate", uids[f"{ns}/recreate"]),  # the old object behind the name
            ("delete", f"{ns}/vanish", uids[f"{ns}/vanish"]),
        ]
    )
    upserts = Counter(c[1] for c in delta if c[0] == "upsert")
    assert upserts == Counter(
        {f"{ns}/change": 1, f"{ns}/recreate": 1, f"{ns}/new": 1, f"{ns}/after": 1}
    )
    assert ("upsert", f"{ns}/recreate", new_uid) in delta
    assert ("upsert", f"{ns}/after", after["metadata"]["uid"]) in delta
    assert store_state(reflector.store) == await api_state(
        client, CONFIGMAPS, namespace=namespace, label_selector=MINE
    )
    assert sink.synced_count == 1
    assert reflector.statistics().lists == 2


async def test_dropped_connection_resumes_from_last_rv_without_duplicates(
    client: KubeClient, namespace: str
) -> None:
    sink = RecordingSink()
    source = CapturingListWatch(
        KubeListWatch(client, CONFIGMAPS, namespace=namespace, label_selector=MINE)
    )
    disconnected, resume = asyncio.Event(), asyncio.Event()

    async def gated_sleep(seconds: float) -> None:
        # The reflector backs off after the cut; hold it there while the test writes.
        disconnected.set()
        await resume.wait()

    reflector = Reflector(
        source,
        name="configmaps",
        sinks=[sink],
        sleep=gated_sleep,
        backoff=Backoff(initial=0.1, maximum=1),
    )
    await client.create(CONFIGMAPS, configmap("before"), namespace=namespace)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(reflector.run())
        async with asyncio.timeout(30):
            await reflector.wait_synced()
        await eventually(lambda: bool(source.streams), what="watch open")
        await client.create(CONFIGMAPS, configmap("live"), namespace=namespace)
        await eventually(lambda: f"{namespace}/live" in reflector.store, what="live event")
        rv_before_cut = reflector.resource_version

        source.streams[-1].abort()  # cut the TCP connection under the reader
        async with asyncio.timeout(30):
            await disconnected.wait()
        for i in range(3):
            await client.create(CONFIGMAPS, configmap(f"while-down-{i}"), namespace=namespace)
        await client.patch(CONFIGMAPS, "before", {"data": {"v": "changed"}}, namespace=namespace)
        resume.set()

        await eventually(
            lambda: f"{namespace}/while-down-2" in reflector.store, what="catch-up events"
        )
        await eventually(
            lambda: reflector.store.get(f"{namespace}/before")["data"] == {"v": "changed"},  # type: ignore[index]
            what="catch-up update",
        )
        task.cancel()

    assert source.watch_rvs[1] == rv_before_cut  # resumed exactly where it stopped
    assert reflector.statistics().lists == 1  # no relist was needed
    assert reflector.statistics().errors >= 1
    upserts = Counter(c[1] for c in sink.calls if c[0] == "upsert")
    expected = {
        f"{namespace}/live": 1,
        f"{namespace}/before": 1,
        **{f"{namespace}/while-down-{i}": 1 for i in range(3)},
    }
    assert upserts == Counter(expected)  # every change exactly once
    assert store_state(reflector.store) == await api_state(
        client, CONFIGMAPS, namespace=namespace, label_selector=MINE
    )


async def test_server_side_watch_timeout_rewatches_without_gaps(
    client: KubeClient, namespace: str
) -> None:
    sink = RecordingSink()
    source = CapturingListWatch(
        KubeListWatch(client, CONFIGMAPS, namespace=namespace, label_selector=MINE)
    )
    reflector = Reflector(
        source, name="configmaps", sinks=[sink], watch_timeout=(1.0, 1.5), min_watch_duration=0.0
    )
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(reflector.run())
        async with asyncio.timeout(30):
            await reflector.wait_synced()
        for i in range(6):  # writes straddle several server-closed watches
            await client.create(CONFIGMAPS, configmap(f"t{i}"), namespace=namespace)
            await asyncio.sleep(0.5)
        await eventually(lambda: len(reflector.store) == 6, what="all objects")
        task.cancel()
    assert len(source.watch_rvs) >= 2
    assert reflector.statistics().lists == 1
    assert Counter(c[1] for c in sink.calls) == Counter({f"{namespace}/t{i}": 1 for i in range(6)})
