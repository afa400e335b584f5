"""A DaemonSet whose template sets limits but no requests, against the local control plane and
the whole controller.

The API server defaults a pod's missing requests from its limits but leaves a DaemonSet's pod
template alone, so the controller must apply the same default when it sizes daemonset overhead:
here the agent's 1500m limit is its request, a pod that fits beside it gets a node, and one that
does not is reported unschedulable instead of being placed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpenter_py.kube import DAEMONSETS, NODEPOOLS, PODS, KubeClient
from karpenter_py.manager.app import App
from karpenter_py.state.ingest import daemonset_template
from tests.cluster.harness import (
    claims_of,
    events_for,
    eventually,
    namespace,
    prepared_client,
    running,
    unique,
)
from tests.cluster.test_controller import clean_pool, pool_body, settings
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

TYPE = "c-2x-amd64-linux"  # kwok catalog: 1900m cpu allocatable


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


def agent(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "agent",
                            "image": "pause",
                            "resources": {"limits": {"cpu": "1500m", "memory": "256Mi"}},
                        }
                    ],
                },
            },
        },
    }


def app_pod(name: str, ns: str, pool: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": pool},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "app", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


async def test_limits_only_daemonset_is_reserved_and_a_pod_that_cannot_fit_stays_pending(
    client: KubeClient,
) -> None:
    pool = unique("dslimits")
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [TYPE]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    await client.create(NODEPOOLS, pool_body(pool, requirements=requirements))
    async with namespace(client) as ns:
        try:
            created = await client.create(DAEMONSETS, agent(ns))
            # The premise: the API server did not default the template's requests ...
            container = created["spec"]["template"]["spec"]["containers"][0]
            assert container["resources"] == {"limits": {"cpu": "1500m", "memory": "256Mi"}}
            # ... and the controller's view of it reserves the limits.
            assert dict(daemonset_template(created).requests) == {
                "cpu": 1500,
                "memory": 256 * 2**20,
                "pods": 1,
            }
            async with running(App(settings(), client)):
                await client.create(PODS, app_pod("fits", ns, pool, "250m"))

                async def fits_bound() -> str:
                    got = await client.get(PODS, "fits", namespace=ns)
                    return str(got["spec"].get("nodeName") or "")

                node = await eventually(fits_bound, within=90, what="pod 'fits' bound")

                # The pod can bind (kube-scheduler) before the lifecycle controller writes the
                # claim's status.nodeName: wait for the claim to name the node.
                async def claims_named() -> list[dict[str, Any]] | None:
                    claims = await claims_of(client, pool)
                    named = [nc.get("status", {}).get("nodeName") for nc in claims]
                    return claims if all(named) else None

                claims = await eventually(claims_named, within=30, what="the claim naming its node")
                assert [nc["status"].get("nodeName") for nc in claims] == [node]
                # The claim reserved the agent's limit beside the pod it was made for.
                assert claims[0]["spec"]["resources"]["requests"]["cpu"] == "1750m"

                # The API server defaults the agent's own pod, on the new node, the same way.
                async def agent_pod() -> dict[str, Any] | None:
                    pods = (await client.list(PODS, namespace=ns, label_selector="app=agent")).items
                    return next((p for p in pods if p["spec"].get("nodeName") == node), None)

                ds_pod = await eventually(agent_pod, within=60, what="the agent's pod on the node")
                requests = ds_pod["spec"]["containers"][0]["resources"]["requests"]
                assert requests == {"cpu": "1500m", "memory": "256Mi"}

                # Only now the pod that cannot fit beside the agent anywhere: created earlier,
                # the kube-scheduler could bind it to the new node before the agent's pod lands
                # (1900m - 250m free), which is its call, not the controller's.
                await client.create(PODS, app_pod("too-big", ns, pool, "1"))
                want = (
                    f'nodepool "{pool}": no instance type has enough resources after daemonset '
                    "overhead (cpu 1 > largest 400m)"
                )

                async def too_big_reported() -> list[str]:
                    events = await events_for(client, "too-big", "FailedScheduling")
                    return [str(e.get("message")) for e in events if want in str(e.get("message"))]

                messages = await eventually(
                    too_big_reported, within=60, what="FailedScheduling for 'too-big'"
                )
                assert messages[0].startswith("Failed to schedule pod, ")
                too_big = await client.get(PODS, "too-big", namespace=ns)
                assert not too_big["spec"].get("nodeName")
                assert len(await claims_of(client, pool)) == 1  # no node launched for it
        finally:
            await clean_pool(client, lambda: App(settings(), client), pool)
