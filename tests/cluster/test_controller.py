"""The whole controller (``manager.App``) against the local control plane.

Each test gets its own NodePool and namespace; its pods select that pool's nodes by the
``karpenter.sh/nodepool`` label, so nodes other tests left behind never count.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.cli.main import main as cli_main
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.kube import (
    DEPLOYMENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    KubeClient,
    NotFoundError,
)
from karpenter_py.manager.adapters import KubeNodeAPI
from karpenter_py.manager.app import App
from karpenter_py.manager.settings import load_settings
from karpenter_py.model.catalog import kwok_catalog, kwok_catalog_json
from tests.cluster.harness import (
    claims_of,
    deployment,
    eventually,
    force_delete_pool,
    free_port,
    is_true,
    namespace,
    nodepool,
    prepared_client,
    running,
    running_pods,
    unique,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def settings(**env: str) -> Any:
    base = {
        "HEALTH_PROBE_PORT": str(free_port()),
        "METRICS_PORT": str(free_port()),
        "BATCH_IDLE_DURATION": "500ms",
        "BATCH_MAX_DURATION": "3s",
        "DISABLE_LEADER_ELECTION": "true",
        "LEADER_ELECTION_NAMESPACE": "default",
    }
    return load_settings([], {**base, **env})


def pool_body(name: str, **kw: Any) -> dict[str, Any]:
    reqs = kw.pop(
        "requirements",
        [
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
    )
    weight = kw.pop("weight", None)
    body = nodepool(name, requirements=reqs, **kw)
    if weight is not None:
        body["spec"]["weight"] = weight
    return body


async def clean_pool(client: KubeClient, app_factory: Any, pool: str) -> None:
    """Delete the pool's NodeClaims through a running controller, then the pool itself."""
    app = app_factory()
    async with running(app):
        for nc in await claims_of(client, pool):
            with contextlib.suppress(NotFoundError):
                await client.delete(NODECLAIMS, nc["metadata"]["name"])

        async def none_left() -> bool:
            return not await claims_of(client, pool)

        with contextlib.suppress(AssertionError, TimeoutError):
            await eventually(none_left, within=30, what=f"nodeclaims of {pool} to go")
    await force_delete_pool(client, pool)  # last resort: never leave finalizers behind


def plan_json(tmp_path: Path, docs: list[Mapping[str, Any]]) -> dict[str, Any]:
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    catalog = tmp_path / "kwok.json"
    catalog.write_text(json.dumps(kwok_catalog_json()))
    out = tmp_path / "plan.json"
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert (
            cli_main(["plan", "-f", str(manifest), "--instance-types", str(catalog), "-o", "json"])
            == 0
        )
    out.write_text(buf.getvalue())
    return dict(json.loads(buf.getvalue()))


async def test_pending_deployment_becomes_running_on_the_nodes_plan_predicts(
    client: KubeClient, tmp_path: Path
) -> None:
    pool = unique("pool")
    np_body = pool_body(pool)
    await client.create(NODEPOOLS, np_body)
    async with namespace(client) as ns:
        dep = deployment("web", ns, pool, replicas=6, cpu="1500m", memory="2Gi")
        app = App(settings(), client)
        try:
            async with running(app):
                await client.create(DEPLOYMENTS, dep)

                async def all_running_on_ready_claims() -> bool:
                    # kwok runs pods on a node as soon as it is Ready; the claim's own
                    # Ready condition follows on the controller's next reconcile of it.
                    if len(await running_pods(client, ns)) != 6:
                        return False
                    claims = await claims_of(client, pool)
                    return bool(claims) and all(is_true(nc, "Ready") for nc in claims)

                await eventually(
                    all_running_on_ready_claims, within=90, what="6 pods Running, claims Ready"
                )
                claims = await claims_of(client, pool)
                nodes = (
                    await client.list(NODES, label_selector=f"karpenter.sh/nodepool={pool}")
                ).items
                # Every claim launched, registered and initialized; one node each, no orphans.
                assert claims
                # Read back from the API: the solver's annotation is written as decided.
                assert {
                    nc["metadata"]["annotations"]["karpenter.sh/nodeclaim-min-values-relaxed"]
                    for nc in claims
                } == {"false"}
                assert all(
                    any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in nc["status"]["conditions"]
                    )
                    for nc in claims
                )
                assert sorted(n["metadata"]["name"] for n in nodes) == sorted(
                    nc["status"]["nodeName"] for nc in claims
                )
                launched = sorted(
                    n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes
                )
            plan = plan_json(tmp_path, [np_body, dep])
            assert plan["unschedulable"] == []
            assert launched == sorted(c["instanceType"] for c in plan["nodeClaims"])
        finally:
            await clean_pool(client, lambda: App(settings(), client), pool)


async def test_restart_mid_scale_up_leaves_no_duplicates_or_orphans(
    client: KubeClient, tmp_path: Path
) -> None:
    pool = unique("pool")
    np_body = pool_body(
        pool,
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.kwok.sh/instance-cpu", "operator": "In", "values": ["4"]},
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        ],
    )
    await client.create(NODEPOOLS, np_body)
    async with namespace(client) as ns:
        dep = deployment("batch", ns, pool, replicas=8, cpu="3")  # one 4-cpu node per pod
        slow = KwokCloudProvider(KubeNodeAPI(client), kwok_catalog(), registration_delay=2.0)
        try:
            async with running(App(settings(), client, cloud=slow)):
                await client.create(DEPLOYMENTS, dep)

                async def some_claims() -> bool:
                    return len(await claims_of(client, pool)) >= 1

                await eventually(some_claims, within=30, what="the first NodeClaims")
            # Killed while launches were still sleeping through their boot delay.
            before = len(await claims_of(client, pool))
            async with running(App(settings(), client)):

                async def all_running() -> bool:
                    return len(await running_pods(client, ns)) == 8

                await eventually(all_running, within=90, what="8 pods Running after the restart")

                # A pod may run on a node a moment before its NodeClaim records the registration.
                async def all_registered() -> bool:
                    return all(
                        (c.get("status") or {}).get("nodeName")
                        for c in await claims_of(client, pool)
                    )

                await eventually(all_registered, within=30, what="every NodeClaim registered")
                claims = await claims_of(client, pool)
                nodes = (
                    await client.list(NODES, label_selector=f"karpenter.sh/nodepool={pool}")
                ).items
            assert before >= 1
            assert len(claims) == 8, [c["metadata"]["name"] for c in claims]
            assert len(nodes) == 8
            assert {n["metadata"]["name"] for n in nodes} == {
                c["status"]["nodeName"] for c in claims
            }
        finally:
            await clean_pool(client, lambda: App(settings(), client), pool)


async def test_only_the_leader_provisions_and_a_standby_takes_over(client: KubeClient) -> None:
    pool = unique("pool")
    await client.create(NODEPOOLS, pool_body(pool))
    lease = unique("lease")
    elect = {"DISABLE_LEADER_ELECTION": "false", "LEADER_ELECTION_NAME": lease}
    first, second = App(settings(**elect), client), App(settings(**elect), client)
    async with namespace(client) as ns:
        try:
            async with running(second, identity="b"):
                async with running(first, identity="a"):
                    # Whoever won, exactly one leads; run a scale-up through it.
                    await client.create(DEPLOYMENTS, deployment("one", ns, pool, replicas=2))

                    async def two_running() -> bool:
                        return len(await running_pods(client, ns)) == 2

                    await eventually(two_running, within=60, what="2 pods Running")
                    created = [
                        app
                        for app in (first, second)
                        if any(r.created for r in app.provisioner.rounds)
                    ]
                    assert len(created) == 1
                    leader = created[0]
                if leader is first:
                    # The leader is gone (it released the Lease); the standby must pick up new work.
                    await client.create(DEPLOYMENTS, deployment("two", ns, pool, replicas=2))

                    async def four_running() -> bool:
                        return len(await running_pods(client, ns)) == 4

                    await eventually(four_running, within=60, what="the standby to provision")
                    assert any(r.created for r in second.provisioner.rounds)
        finally:
            await clean_pool(client, lambda: App(settings(), client), pool)


def only(instance_type: str) -> list[dict[str, Any]]:
    return [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]


async def test_insufficient_capacity_makes_the_next_round_choose_another_type(
    client: KubeClient,
) -> None:
    preferred, fallback = unique("pool"), unique("pool")
    await client.create(
        NODEPOOLS, pool_body(preferred, requirements=only("c-4x-amd64-linux"), weight=100)
    )
    await client.create(
        NODEPOOLS, pool_body(fallback, requirements=only("m-4x-amd64-linux"), weight=1)
    )
    provider = KwokCloudProvider(KubeNodeAPI(client), kwok_catalog())
    for zone in ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"):
        provider.simulate_insufficient_capacity("c-4x-amd64-linux", zone, "on-demand")
    app = App(settings(), client, cloud=provider)
    async with namespace(client) as ns:
        dep = deployment("ice", ns, preferred, replicas=1, cpu="2")
        dep["spec"]["template"]["spec"]["nodeSelector"] = {}  # either pool will do
        dep["spec"]["template"]["metadata"]["labels"]["team"] = ns
        dep["spec"]["template"]["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "karpenter.sh/nodepool",
                                    "operator": "In",
                                    "values": [preferred, fallback],
                                }
                            ]
                        }
                    ]
                }
            }
        }
        try:
            async with running(app):
                await client.create(DEPLOYMENTS, dep)

                async def running_one() -> list[dict[str, Any]]:
                    return await running_pods(client, ns)

                pods = await eventually(
                    running_one, within=90, what="the pod to run on the fallback type"
                )
                node = await client.get(NODES, pods[0]["spec"]["nodeName"])
                assert (
                    node["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                    == "m-4x-amd64-linux"
                )
                assert app.launcher.unavailable.is_unavailable(
                    "c-4x-amd64-linux", "test-zone-a", "on-demand"
                )
                assert await claims_of(client, preferred) == []  # the failed claim was deleted
        finally:
            for pool in (preferred, fallback):
                await clean_pool(client, lambda: App(settings(), client), pool)


async def test_expired_nodeclaim_is_replaced_and_its_pods_move(client: KubeClient) -> None:
    pool = unique("pool")
    body = pool_body(pool)
    body["spec"]["template"]["spec"]["expireAfter"] = "15s"
    await client.create(NODEPOOLS, body)
    async with namespace(client) as ns:
        try:
            async with running(App(settings(), client)):
                await client.create(DEPLOYMENTS, deployment("app", ns, pool, replicas=1))

                async def first_node() -> str | None:
                    pods = await running_pods(client, ns)
                    return str(pods[0]["spec"]["nodeName"]) if pods else None

                original = await eventually(first_node, within=60, what="the pod to run")

                async def moved() -> str | None:
                    node = await first_node()
                    return node if node not in (None, original) else None

                # Expiry deletes the NodeClaim; the drain evicts the pod; the provisioner gives
                # the ReplicaSet's new pod a new node.
                await eventually(moved, within=90, what="the pod to run on a replacement node")

                async def original_claim_gone() -> bool:
                    claims = await claims_of(client, pool)  # a new one may have no status yet
                    names = {(nc.get("status") or {}).get("nodeName") for nc in claims}
                    return original not in names

                # The old node finishes terminating after its minimum drain time.
                await eventually(original_claim_gone, within=60, what="the expired NodeClaim to go")
        finally:
            await clean_pool(client, lambda: App(settings(), client), pool)
