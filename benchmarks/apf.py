"""The apiserver's own throttling for the chaos suite: API Priority and Fairness (APF).

The real kube-apiserver never throttles ``system:masters`` (the local control plane's admin and
the controller's usual identity), so a scenario that wants genuine 429s runs the controller as a
ServiceAccount (:func:`service_account_token`) and, while the fault lasts, routes that
ServiceAccount's requests to a priority level of its own with a tiny share of the server's
concurrency that rejects what does not fit (:func:`tight_priority_level`). What the apiserver
rejected is read from its metrics (:func:`rejected_requests`).

The seat count follows APF's arithmetic: a level's limit is ``ceil(server concurrency x its
shares / every level's shares)``. The server's concurrency is max-requests-inflight plus
max-mutating-requests-inflight (400 + 200) and the built-in levels' shares add up to 245, so one
share is ``ceil(600 / 246) = 3`` seats; with ``lendablePercent`` 0 and ``borrowingLimitPercent``
0 it neither lends nor borrows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator
from typing import Any, Final

from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.errors import AlreadyExistsError, NotFoundError
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import Resource

SERVICEACCOUNTS: Final = Resource("", "v1", "serviceaccounts", True, "ServiceAccount")
SECRETS: Final = Resource("", "v1", "secrets", True, "Secret")
CLUSTERROLEBINDINGS: Final = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", False, "ClusterRoleBinding"
)
FLOWSCHEMAS: Final = Resource(
    "flowcontrol.apiserver.k8s.io", "v1", "flowschemas", False, "FlowSchema"
)
PRIORITYLEVELS: Final = Resource(
    "flowcontrol.apiserver.k8s.io",
    "v1",
    "prioritylevelconfigurations",
    False,
    "PriorityLevelConfiguration",
)

NAMESPACE = "kube-system"
ACCOUNT = "chaos-controller"
LEVEL = "chaos-tight"
TOKEN_WAIT = 30.0  # seconds for kube-controller-manager's token controller to fill the Secret


async def service_account_token(client: KubeClient) -> str:
    """A token for ServiceAccount ``kube-system/chaos-controller`` bound to cluster-admin
    (created once; the legacy token Secret, which kube-controller-manager fills)."""
    for resource, body in (
        (SERVICEACCOUNTS, {"metadata": {"name": ACCOUNT, "namespace": NAMESPACE}}),
        (SECRETS, _token_secret()),
        (CLUSTERROLEBINDINGS, _admin_binding()),
    ):
        with contextlib.suppress(AlreadyExistsError):
            await client.create(
                resource, body, namespace=NAMESPACE if resource.namespaced else None
            )
    deadline = time.monotonic() + TOKEN_WAIT
    while True:
        secret = await client.get(SECRETS, ACCOUNT, namespace=NAMESPACE)
        token = (secret.get("data") or {}).get("token")
        if token:
            return base64.b64decode(token).decode()
        if time.monotonic() > deadline:
            raise TimeoutError(f"secret {NAMESPACE}/{ACCOUNT} has no token after {TOKEN_WAIT} s")
        await asyncio.sleep(0.2)


def _token_secret() -> KubeObject:
    return {
        "metadata": {
            "name": ACCOUNT,
            "namespace": NAMESPACE,
            "annotations": {"kubernetes.io/service-account.name": ACCOUNT},
        },
        "type": "kubernetes.io/service-account-token",
    }


def _admin_binding() -> KubeObject:
    return {
        "metadata": {"name": ACCOUNT},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
    }


@contextlib.asynccontextmanager
async def tight_priority_level(client: KubeClient, shares: int = 1) -> AsyncIterator[None]:
    """While inside: the ServiceAccount's requests go to a level of ``shares`` shares that
    rejects (429) what finds no free seat; removed on the way out."""
    level: KubeObject = {
        "metadata": {"name": LEVEL},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    everything: dict[str, Any] = {
        "subjects": [
            {"kind": "ServiceAccount", "serviceAccount": {"namespace": NAMESPACE, "name": ACCOUNT}}
        ],
        "resourceRules": [
            {
                "verbs": ["*"],
                "apiGroups": ["*"],
                "resources": ["*"],
                "clusterScope": True,
                "namespaces": ["*"],
            }
        ],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    }
    schema: KubeObject = {
        "metadata": {"name": ACCOUNT},
        "spec": {
            "priorityLevelConfiguration": {"name": LEVEL},
            "matchingPrecedence": 100,  # before every built-in schema but exempt's (1)
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [everything],
        },
    }
    await client.create(PRIORITYLEVELS, level)
    try:
        await client.create(FLOWSCHEMAS, schema)
        try:
            yield
        finally:
            with contextlib.suppress(NotFoundError):
                await client.delete(FLOWSCHEMAS, ACCOUNT)
    finally:
        with contextlib.suppress(NotFoundError):
            await client.delete(PRIORITYLEVELS, LEVEL)


async def remove_leftovers(client: KubeClient) -> None:
    """What a run killed inside :func:`tight_priority_level` may have left."""
    for resource, name in ((FLOWSCHEMAS, ACCOUNT), (PRIORITYLEVELS, LEVEL)):
        with contextlib.suppress(NotFoundError):
            await client.delete(resource, name)


async def rejected_requests(server: str, token: str, ctx: ssl.SSLContext) -> int:
    """Requests APF has rejected at :data:`LEVEL` since the apiserver started."""
    text = await asyncio.to_thread(_metrics, server, token, ctx)
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_flowcontrol_rejected_requests_total{") and (
            f'priority_level="{LEVEL}"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _metrics(server: str, token: str, ctx: ssl.SSLContext) -> str:
    req = urllib.request.Request(server + "/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
        return str(resp.read().decode())
