"""The least-privilege RBAC in manifests/ is enough: the controller runs as its ServiceAccount.

The App gets a token for ``karpenter/karpenter`` (bound by manifests/rbac.yaml, not admin) and
goes through a scale-up and a tear-down: every watch, write, eviction, event and the leader
Lease. Any 403 on the way shows up in the controller's logs and fails the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.kube import (
    DEPLOYMENTS,
    NODECLAIMS,
    NODEPOOLS,
    KubeClient,
    NotFoundError,
    Resource,
    load_kubeconfig,
)
from karpenter_py.manager.app import App
from tests.cluster.awskubelet import running_kubelet
from tests.cluster.harness import (
    claims_of,
    deployment,
    eventually,
    namespace,
    prepared_client,
    running,
    running_pods,
    unique,
)
from tests.cluster.test_aws import aws_settings, wait_ready
from tests.cluster.test_aws import world as aws_world
from tests.cluster.test_controller import clean_pool, pool_body, settings
from tests.clusterfixture import ClusterHandle
from tests.motofixture import MotoServer

pytestmark = pytest.mark.cluster

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
KINDS: dict[str, Resource] = {
    "Namespace": Resource("", "v1", "namespaces", False, "Namespace"),
    "ServiceAccount": Resource("", "v1", "serviceaccounts", True, "ServiceAccount"),
    "ClusterRole": Resource(
        "rbac.authorization.k8s.io", "v1", "clusterroles", False, "ClusterRole"
    ),
    "ClusterRoleBinding": Resource(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", False, "ClusterRoleBinding"
    ),
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles", True, "Role"),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings", True, "RoleBinding"),
}


@pytest.fixture
async def admin(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


async def install_rbac(admin: KubeClient) -> None:
    for name in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml"):
        for doc in yaml.safe_load_all((MANIFESTS / name).read_text()):
            if doc:
                await admin.apply(KINDS[doc["kind"]], doc, field_manager="karpy-rbac-test")


def service_account_token(cluster: ClusterHandle) -> str:
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    response = cluster.api.create(
        "/api/v1/namespaces/karpenter/serviceaccounts/karpenter/token", request
    )
    return str(response["status"]["token"])


async def controller_identity(cluster: ClusterHandle, admin: KubeClient) -> Any:
    """Install manifests/ RBAC and return a client config authenticated as the controller's
    ServiceAccount (its token, no admin certificate)."""
    await install_rbac(admin)
    token = await asyncio.to_thread(service_account_token, cluster)
    base = await asyncio.to_thread(load_kubeconfig, [cluster.kubeconfig_path])
    return dataclasses.replace(
        base,
        token=token,
        token_file=None,
        token_source=None,
        client_cert_pem=None,
        client_key_pem=None,
    )


def rbac_denials(records: list[logging.LogRecord]) -> list[str]:
    """Log records of requests the API server refused with 403, but for the namespace
    lifecycle's refusal to create in a namespace being deleted (an event published while the
    test's namespace goes away is a teardown race, not a missing permission)."""
    out = [r.getMessage() for r in records if "forbidden" in r.getMessage().lower()]
    out += [str(r.__dict__) for r in records if "403" in str(getattr(r, "error", ""))]
    return [m for m in out if "because it is being terminated" not in m]


async def test_the_controller_needs_nothing_beyond_its_rbac(
    cluster: ClusterHandle, admin: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    as_controller = await controller_identity(cluster, admin)
    pool = unique("pool")
    await admin.create(NODEPOOLS, pool_body(pool))
    elect = {"DISABLE_LEADER_ELECTION": "false", "LEADER_ELECTION_NAMESPACE": "karpenter"}
    caplog.set_level(logging.INFO)
    async with KubeClient(as_controller) as client, namespace(admin) as ns:
        try:
            async with running(App(settings(**elect), client)):
                await admin.create(DEPLOYMENTS, deployment("web", ns, pool, replicas=2))

                async def two_running() -> bool:
                    return len(await running_pods(admin, ns)) == 2

                await eventually(
                    two_running, within=90, what="2 pods Running as the controller's ServiceAccount"
                )
                # Tear-down through the same identity: drain (evictions), node delete, finalizers.
                claim: dict[str, Any] = (await claims_of(admin, pool))[0]
                await admin.delete(NODECLAIMS, claim["metadata"]["name"])

                async def claim_gone() -> bool:
                    with contextlib.suppress(NotFoundError):
                        await admin.get(NODECLAIMS, claim["metadata"]["name"])
                        return False
                    return True

                await eventually(claim_gone, within=60, what="the NodeClaim to terminate")
        finally:
            await clean_pool(admin, lambda: App(settings(), admin), pool)
    assert rbac_denials(caplog.records) == []
    assert any("acquired lease" in r.getMessage() for r in caplog.records)


async def test_the_aws_controller_needs_nothing_beyond_its_rbac(
    cluster: ClusterHandle,
    admin: KubeClient,
    aws_env: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same with ``CLOUD_PROVIDER=aws``: EC2NodeClass status and finalizer, NodeClaim
    tagging annotations and interruption handling add no permission beyond manifests/."""
    as_controller = await controller_identity(cluster, admin)
    elect = {"DISABLE_LEADER_ELECTION": "false", "LEADER_ELECTION_NAMESPACE": "karpenter"}
    caplog.set_level(logging.INFO)
    async with (
        aws_world(admin, aws_env) as w,
        KubeClient(as_controller) as client,
        w.stack() as stack,
    ):
        app = App(aws_settings(**elect), client, aws=stack)
        async with running(app), running_kubelet(w.kubelet(stack)):
            await wait_ready(w)
            await admin.create(DEPLOYMENTS, deployment("web", w.ns, w.pool, replicas=2))

            async def two_running() -> bool:
                return len(await running_pods(admin, w.ns)) == 2

            await eventually(two_running, within=120, what="2 pods Running on EC2 instances")
            claim: dict[str, Any] = (await claims_of(admin, w.pool))[0]
            await admin.delete(NODECLAIMS, claim["metadata"]["name"])

            async def claim_gone() -> bool:
                with contextlib.suppress(NotFoundError):
                    await admin.get(NODECLAIMS, claim["metadata"]["name"])
                    return False
                return True

            await eventually(claim_gone, within=60, what="the NodeClaim to terminate")
    assert rbac_denials(caplog.records) == []
