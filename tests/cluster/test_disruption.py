"""Disruption end to end: the whole controller (``manager.App``, kwok provider) on the local
control plane, with the loop period and the validation delay shortened.

Each test has its own NodePool and namespace; its pods select the pool by the
``karpenter.sh/nodepool`` label. The kill tests stop the controller at one step of a command
(a private queue step is swapped for one that parks forever) and check that a fresh controller
finishes the job with nothing duplicated, leaked or left tainted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from karpenter_py.controllers.disruption.queue import Entry
from karpenter_py.kube import (
    DEPLOYMENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    KubeClient,
    NotFoundError,
    PatchType,
)
from karpenter_py.manager.app import App
from karpenter_py.manager.settings import Settings, load_settings
from tests.cluster import harness
from tests.cluster.harness import (
    claims_of,
    condition,
    events_for,
    eventually,
    free_port,
    namespace,
    nodepool,
    pdb,
    prepared_client,
    running,
    running_pods,
    unique,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

# Small pods: 256 Mi each, so CPU alone decides what fits where.
deployment = functools.partial(harness.deployment, memory="256Mi")

DISRUPTED = "karpenter.sh/disrupted"


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def settings() -> Settings:
    return load_settings(
        [],
        {
            "HEALTH_PROBE_PORT": str(free_port()),
            "METRICS_PORT": str(free_port()),
            "BATCH_IDLE_DURATION": "300ms",
            "BATCH_MAX_DURATION": "2s",
            "DISABLE_LEADER_ELECTION": "true",
            "LEADER_ELECTION_NAMESPACE": "default",
        },
    )


def new_app(client: KubeClient) -> App:
    """The controller with test timers: a 1 s loop, a 1 s validation delay, 0.5 s queue polls."""
    app = App(settings(), client)
    app.disruption.period = 1.0
    app.disruption.validation_delay = 1.0
    app.disruption.recheck_after = 10.0
    app.disruption.queue.poll_interval = 0.5
    # Upstream nominates for max(2 x BATCH_MAX_DURATION, 10 s); the round's default is 20 s.
    app.rounds.nomination_seconds = 10.0
    return app


def pool_body(
    name: str,
    *,
    consolidate_after: str = "0s",
    budgets: list[dict[str, Any]] | None = None,
    instance_types: list[str] | None = None,
) -> dict[str, Any]:
    reqs: list[dict[str, Any]] = [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    if instance_types:
        reqs.append(
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types}
        )
    body = nodepool(name, requirements=reqs)
    disruption: dict[str, Any] = {"consolidateAfter": consolidate_after}
    if budgets is not None:
        disruption["budgets"] = budgets
    body["spec"]["disruption"] = disruption
    return body


async def nodes_of(client: KubeClient, pool: str) -> list[dict[str, Any]]:
    return list((await client.list(NODES, label_selector=f"karpenter.sh/nodepool={pool}")).items)


def names(objs: list[dict[str, Any]]) -> set[str]:
    return {o["metadata"]["name"] for o in objs}


def disrupted_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") == DISRUPTED]


async def wait_running(client: KubeClient, ns: str, n: int, *, within: float = 60) -> None:
    async def ready() -> bool:
        return len(await running_pods(client, ns)) == n

    await eventually(ready, within=within, interval=0.5, what=f"{n} pods Running")


async def clean_pool(client: KubeClient, pool: str, ns: str) -> None:
    """Delete the test's Deployments (so nothing asks for capacity again), the pool's NodeClaims
    through a controller, then strip what is left."""
    for dep in (await client.list(DEPLOYMENTS, namespace=ns)).items:
        with contextlib.suppress(NotFoundError):
            await client.delete(DEPLOYMENTS, dep["metadata"]["name"], namespace=ns)
    for p in (await client.list(PODS, namespace=ns)).items:
        with contextlib.suppress(NotFoundError):
            await client.delete(PODS, p["metadata"]["name"], namespace=ns, grace_period_seconds=0)
    app = new_app(client)
    async with running(app):
        for nc in await claims_of(client, pool):
            with contextlib.suppress(NotFoundError):
                await client.delete(NODECLAIMS, nc["metadata"]["name"])

        async def none_left() -> bool:
            return not await claims_of(client, pool)

        with contextlib.suppress(AssertionError):
            await eventually(none_left, within=30, interval=0.5, what=f"nodeclaims of {pool}")
    for resource, items in ((NODECLAIMS, await claims_of(client, pool)),):
        for obj in items:
            with contextlib.suppress(NotFoundError):
                await client.patch(
                    resource,
                    obj["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                    patch_type=PatchType.MERGE,
                )
    with contextlib.suppress(NotFoundError):
        await client.delete(NODEPOOLS, pool)


async def has_event(client: KubeClient, name: str, reason: str, text: str = "") -> bool:
    return any(text in (e.get("message") or "") for e in await events_for(client, name, reason))


# ----------------------------------------------------------------------------- consolidation


async def test_an_empty_node_is_removed_after_consolidate_after(client: KubeClient) -> None:
    pool = unique("pool")
    await client.create(NODEPOOLS, pool_body(pool, consolidate_after="3s"))
    async with namespace(client) as ns:
        app = new_app(client)
        try:
            async with running(app):
                await client.create(DEPLOYMENTS, deployment("web", ns, pool))
                await wait_running(client, ns, 1)
                (claim,) = await claims_of(client, pool)
                name = claim["metadata"]["name"]
                await client.patch(
                    DEPLOYMENTS,
                    "web",
                    {"spec": {"replicas": 0}},
                    namespace=ns,
                    patch_type=PatchType.MERGE,
                )

                async def gone() -> bool:
                    return not await claims_of(client, pool)

                await eventually(gone, within=60, interval=0.5, what="the empty node to go")
                assert not await nodes_of(client, pool)
                await eventually(
                    lambda: has_event(client, name, "DisruptionTerminating", "Empty"),
                    within=10,
                    what="DisruptionTerminating",
                )
                assert (
                    app.metrics.registry.get_sample_value(
                        "karpenter_nodeclaims_disrupted_total",
                        {"reason": "empty", "nodepool": pool, "capacity_type": "on-demand"},
                    )
                    == 1.0
                )
                assert (
                    app.metrics.registry.get_sample_value(
                        "karpenter_voluntary_disruption_decisions_total",
                        {"decision": "delete", "reason": "empty", "consolidation_type": "empty"},
                    )
                    == 1.0
                )
        finally:
            await clean_pool(client, pool, ns)


async def test_a_do_not_disrupt_pod_blocks_and_says_so(client: KubeClient) -> None:
    pool = unique("pool")
    await client.create(NODEPOOLS, pool_body(pool))
    async with namespace(client) as ns:
        app = new_app(client)
        try:
            async with running(app):
                dep = deployment(
                    "pinned", ns, pool, annotations={"karpenter.sh/do-not-disrupt": "true"}
                )
                await client.create(DEPLOYMENTS, dep)
                await wait_running(client, ns, 1)
                (claim,) = await claims_of(client, pool)
                name = claim["metadata"]["name"]
                # Scale the pool's only other reason to stay away: the pod itself is the block.
                await eventually(
                    lambda: has_event(
                        client, name, "Unconsolidatable", 'karpenter.sh/do-not-disrupt: "true"'
                    ),
                    within=45,
                    interval=0.5,
                    what="Unconsolidatable naming the do-not-disrupt pod",
                )
                node_name = claim["status"]["nodeName"]
                assert await has_event(client, node_name, "Unconsolidatable", "do-not-disrupt")
                assert names(await claims_of(client, pool)) == {name}
                report = app.disruption.report()
                assert "do-not-disrupt" in report["unchanged"][node_name]
        finally:
            await clean_pool(client, pool, ns)


async def test_an_oversized_node_is_replaced_by_a_cheaper_one(client: KubeClient) -> None:
    pool = unique("pool")
    await client.create(
        NODEPOOLS,
        pool_body(pool, instance_types=["c-1x-amd64-linux", "c-4x-amd64-linux"]),
    )
    async with namespace(client) as ns:
        app = new_app(client)
        try:
            async with running(app):
                await client.create(DEPLOYMENTS, deployment("big", ns, pool, cpu="3"))
                await wait_running(client, ns, 1)
                (big,) = await claims_of(client, pool)
                assert big["metadata"]["labels"]["node.kubernetes.io/instance-type"] == (
                    "c-4x-amd64-linux"
                )
                # The workload shrinks: a 4-cpu node for a 100m pod.
                await client.patch(
                    DEPLOYMENTS,
                    "big",
                    {
                        "spec": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "app",
                                            "resources": {"requests": {"cpu": "100m"}},
                                        }
                                    ]
                                }
                            }
                        }
                    },
                    namespace=ns,
                    patch_type=PatchType.STRATEGIC,
                )

                async def replaced() -> bool:
                    claims = await claims_of(client, pool)
                    pods = await running_pods(client, ns)
                    return (
                        len(claims) == 1
                        and claims[0]["metadata"]["name"] != big["metadata"]["name"]
                        and len(pods) == 1
                        and pods[0]["spec"].get("nodeName") == claims[0]["status"].get("nodeName")
                    )

                await eventually(replaced, within=90, interval=0.5, what="a cheaper replacement")
                (small,) = await claims_of(client, pool)
                assert small["metadata"]["labels"]["node.kubernetes.io/instance-type"] == (
                    "c-1x-amd64-linux"
                )
                assert (
                    app.metrics.registry.get_sample_value(
                        "karpenter_nodeclaims_disrupted_total",
                        {
                            "reason": "underutilized",
                            "nodepool": pool,
                            "capacity_type": "on-demand",
                        },
                    )
                    == 1.0
                )
        finally:
            await clean_pool(client, pool, ns)


async def test_a_zero_budget_blocks_with_an_event(client: KubeClient) -> None:
    """An empty node a zero budget keeps stays, with a DisruptionBlocked event, and its price is
    reported as the saving the budget blocks."""
    pool = unique("pool")
    await client.create(NODEPOOLS, pool_body(pool, budgets=[{"nodes": "0"}]))
    async with namespace(client) as ns:
        app = new_app(client)
        try:
            async with running(app):
                await client.create(DEPLOYMENTS, deployment("web", ns, pool))
                await wait_running(client, ns, 1)
                (claim,) = await claims_of(client, pool)
                await client.patch(
                    DEPLOYMENTS,
                    "web",
                    {"spec": {"replicas": 0}},
                    namespace=ns,
                    patch_type=PatchType.MERGE,
                )
                await eventually(
                    lambda: has_event(client, pool, "DisruptionBlocked", "reason Empty"),
                    within=30,
                    interval=0.5,
                    what="DisruptionBlocked on the NodePool",
                )
                await asyncio.sleep(5)  # several passes: the empty node must stay
                assert names(await claims_of(client, pool)) == {claim["metadata"]["name"]}
                assert (
                    app.metrics.registry.get_sample_value(
                        "karpenter_nodepools_allowed_disruptions",
                        {"nodepool": pool, "reason": "Empty"},
                    )
                    == 0.0
                )
                await kept_node_is_priced_and_a_blocked_saving(client, app, pool)
        finally:
            await clean_pool(client, pool, ns)


def node_prices(app: App, pool: str) -> dict[str, float]:
    """node name -> karpenter_nodes_hourly_price of the pool's nodes."""
    return {
        s.labels["node_name"]: s.value
        for family in app.metrics.registry.collect()
        for s in family.samples
        if s.name == "karpenter_nodes_hourly_price" and s.labels["nodepool"] == pool
    }


async def kept_node_is_priced_and_a_blocked_saving(client: KubeClient, app: App, pool: str) -> None:
    """The pool's one empty node, kept by a zero budget, is priced (node, NodePool total and its
    offering agree) and its whole price is the blocked saving of reason ``budget``; once the
    budget opens, emptiness deletes it and its series go."""
    get = app.metrics.registry.get_sample_value
    blocked = "karpenter_voluntary_disruption_blocked_savings_hourly"
    (node,) = await nodes_of(client, pool)
    name, labels = node["metadata"]["name"], node["metadata"]["labels"]
    offering = {
        "instance_type": labels["node.kubernetes.io/instance-type"],
        "capacity_type": "on-demand",
        "zone": labels["topology.kubernetes.io/zone"],
    }
    price = node_prices(app, pool)[name]
    assert price > 0.0
    assert (
        get("karpenter_nodes_hourly_price", {"node_name": name, "nodepool": pool, **offering})
        == price
    )
    assert get("karpenter_nodepools_hourly_price", {"nodepool": pool}) == price
    assert get("karpenter_cloudprovider_instance_type_offering_price_estimate", offering) == price
    await eventually(
        lambda: get(blocked, {"reason": "budget"}) == price,
        within=30,
        interval=0.5,
        what="the empty node's price as the saving the budget blocks",
    )

    await client.patch(
        NODEPOOLS,
        pool,
        {"spec": {"disruption": {"budgets": [{"nodes": "100%"}]}}},
        patch_type=PatchType.MERGE,
    )
    await eventually(
        lambda: not node_prices(app, pool),
        within=60,
        interval=0.5,
        what="the deleted node's price series removed",
    )
    assert get("karpenter_nodepools_hourly_price", {"nodepool": pool}) is None
    assert get(blocked, {"reason": "budget"}) == 0.0


async def test_three_nodes_become_one(client: KubeClient) -> None:
    pool = unique("pool")
    body = pool_body(
        pool,
        # Consolidation waits until the three nodes are underused together: the ballast pods
        # go one by one, and a pass between two deletions sees one candidate (single-node).
        consolidate_after="Never",
        instance_types=["c-4x-amd64-linux"],
        budgets=[{"nodes": "100%"}],  # the default 10% would let one node go at a time
    )
    await client.create(NODEPOOLS, body)
    async with namespace(client) as ns:
        app = new_app(client)
        try:
            async with running(app):
                # A 3-cpu ballast pod per 4-cpu node, then one 500m pod per node (0.9 cpu is
                # left on each); without the ballast the three small pods fit on one node.
                await client.create(
                    DEPLOYMENTS, deployment("ballast", ns, pool, replicas=3, cpu="3")
                )
                await wait_running(client, ns, 3)
                await client.create(
                    DEPLOYMENTS, deployment("small", ns, pool, replicas=3, cpu="500m")
                )
                await wait_running(client, ns, 6)
                first = names(await claims_of(client, pool))
                assert len(first) == 3
                await client.delete(DEPLOYMENTS, "ballast", namespace=ns)

                def cache_settled() -> bool:
                    # The controller's own view: only the small pods on the pool's nodes, and
                    # no node nominated for pods (nomination keeps a node out of a pass).
                    now = app.clock.now()
                    on_nodes = [
                        p for p in app.cluster.pods.values() if p.namespace == ns and p.node_name
                    ]
                    hosts = {p.node_name for p in on_nodes}
                    return (
                        len(on_nodes) == 3
                        and all(p.name.startswith("small-") for p in on_nodes)
                        and not any(app.cluster.is_nominated(n, now) for n in hosts)
                    )

                await eventually(cache_settled, within=60, interval=0.5, what="ballast gone")
                await client.patch(
                    NODEPOOLS,
                    pool,
                    {"spec": {"disruption": {"consolidateAfter": "0s"}}},
                    patch_type=PatchType.MERGE,
                )

                async def consolidated() -> bool:
                    claims = await claims_of(client, pool)
                    pods = await running_pods(client, ns)
                    return (
                        len(claims) == 1
                        and len(pods) == 3
                        and {p["spec"].get("nodeName") for p in pods}
                        == {claims[0]["status"].get("nodeName")}
                    )

                await eventually(consolidated, within=90, interval=0.5, what="3 nodes -> 1")
                done = [e for e in app.disruption.queue.history if e.outcome.value == "Succeeded"]
                assert [e.command.method.name for e in done] == ["multi-node-consolidation"]
                assert len(done[0].command.candidates) >= 2
        finally:
            await clean_pool(client, pool, ns)


async def test_a_pdb_allowing_no_disruption_blocks_and_says_so(client: KubeClient) -> None:
    pool = unique("pool")
    await client.create(NODEPOOLS, pool_body(pool, consolidate_after="2s"))
    async with namespace(client) as ns:
        app = new_app(client)
        try:
            await client.create(PODDISRUPTIONBUDGETS, pdb("keep", {"app": "web"}), namespace=ns)
            async with running(app):
                await client.create(DEPLOYMENTS, deployment("web", ns, pool))
                await wait_running(client, ns, 1)
                (claim,) = await claims_of(client, pool)
                node_name = claim["status"]["nodeName"]
                await eventually(
                    lambda: has_event(client, node_name, "Unconsolidatable", f"PDB {ns}/keep"),
                    within=45,
                    interval=0.5,
                    what="Unconsolidatable naming the PDB",
                )
                assert names(await claims_of(client, pool)) == {claim["metadata"]["name"]}
        finally:
            await clean_pool(client, pool, ns)


# ----------------------------------------------------------------------------- drift + restarts


async def drift(client: KubeClient, pool: str, version: str) -> None:
    await client.patch(
        NODEPOOLS,
        pool,
        {"spec": {"template": {"metadata": {"labels": {"app-version": version}}}}},
        patch_type=PatchType.MERGE,
    )


async def test_a_template_change_replaces_drifted_nodes_one_by_one(client: KubeClient) -> None:
    pool = unique("pool")
    # consolidateAfter Never: only drift acts (an empty replacement is not consolidated away).
    body = pool_body(pool, consolidate_after="Never", instance_types=["c-4x-amd64-linux"])
    await client.create(NODEPOOLS, body)  # one 3-cpu pod per node
    async with namespace(client) as ns:
        app = new_app(client)
        try:
            async with running(app):
                await client.create(DEPLOYMENTS, deployment("web", ns, pool, replicas=2, cpu="3"))
                await wait_running(client, ns, 2)
                old = names(await claims_of(client, pool))
                assert len(old) == 2
                await drift(client, pool, "2")
                most_queued = 0

                async def all_replaced() -> bool:
                    nonlocal most_queued
                    most_queued = max(most_queued, len(app.disruption.queue))
                    claims = await claims_of(client, pool)
                    live = [c for c in claims if c["metadata"]["name"] not in old]
                    pods = await running_pods(client, ns)
                    return not (names(claims) & old) and len(live) == 2 and len(pods) == 2

                await eventually(all_replaced, within=100, interval=0.2, what="2 nodes replaced")
                # One command at a time, one drifted candidate and one replacement each.
                assert most_queued == 1
                history = list(app.disruption.queue.history)
                assert [(e.command.method.name, e.outcome.value) for e in history] == [
                    ("drift", "Succeeded"),
                    ("drift", "Succeeded"),
                ]
                assert [len(e.command.candidates) for e in history] == [1, 1]
                assert [len(e.replacements) for e in history] == [1, 1]
                assert {n for e in history for n in e.deleted} == old
                for c in await claims_of(client, pool):
                    assert c["metadata"]["labels"]["app-version"] == "2"
        finally:
            await clean_pool(client, pool, ns)


Park = Callable[[Entry], Awaitable[None]]


async def park_forever() -> None:
    await asyncio.Event().wait()


def park_after_taint(app: App, parked: asyncio.Event) -> None:
    async def launch(entry: Entry) -> None:
        parked.set()
        await park_forever()

    app.disruption.queue._launch = launch  # type: ignore[method-assign]


def park_after_create(app: App, parked: asyncio.Event) -> None:
    original = app.disruption.queue._launch

    async def launch(entry: Entry) -> None:
        await original(entry)
        parked.set()
        await park_forever()

    app.disruption.queue._launch = launch  # type: ignore[method-assign]


def park_while_waiting(app: App, parked: asyncio.Event) -> None:
    async def wait(entry: Entry) -> None:
        parked.set()
        await park_forever()

    app.disruption.queue._wait_initialized = wait  # type: ignore[method-assign]


@pytest.mark.parametrize(
    "park",
    [park_after_taint, park_after_create, park_while_waiting],
    ids=["after-taint", "after-create", "after-mark"],
)
async def test_a_controller_killed_mid_command_leaves_nothing_behind(
    client: KubeClient, park: Callable[[App, asyncio.Event], None]
) -> None:
    pool = unique("pool")
    await client.create(NODEPOOLS, pool_body(pool, consolidate_after="Never"))
    async with namespace(client) as ns:
        try:
            first = new_app(client)
            parked = asyncio.Event()
            park(first, parked)
            async with running(first):
                await client.create(DEPLOYMENTS, deployment("web", ns, pool, cpu="3"))
                await wait_running(client, ns, 1)
                (original,) = await claims_of(client, pool)
                await drift(client, pool, "2")
                async with asyncio.timeout(60):
                    await parked.wait()
                (entry,) = first.disruption.queue.entries
                made = list(entry.replacements)
            # Killed mid-command: the candidate keeps the taint and condition it was given.
            node = await client.get(NODES, original["status"]["nodeName"])
            assert disrupted_taints(node) == [{"key": DISRUPTED, "effect": "NoSchedule"}]
            stale = await client.get(NODECLAIMS, original["metadata"]["name"])
            assert condition(stale, "DisruptionReason") is not None
            assert not stale["metadata"].get("deletionTimestamp")
            before = names(await claims_of(client, pool))
            assert before == {original["metadata"]["name"], *made}

            second = new_app(client)
            async with running(second):

                async def settled() -> bool:
                    claims = await claims_of(client, pool)
                    pods = await running_pods(client, ns)
                    return (
                        len(claims) == 1
                        and original["metadata"]["name"] not in names(claims)
                        and len(pods) == 1
                        and pods[0]["spec"].get("nodeName") == claims[0]["status"].get("nodeName")
                    )

                await eventually(settled, within=90, interval=0.5, what="the drift to finish")
                (final,) = await claims_of(client, pool)
                if made:
                    # The replacement created before the kill is the one that stays.
                    assert final["metadata"]["name"] == made[0]
                assert not second.disruption.queue.entries
                for n in await nodes_of(client, pool):
                    assert not disrupted_taints(n)
                assert condition(final, "DisruptionReason") is None
        finally:
            await clean_pool(client, pool, ns)
