"""v1beta1 objects on the real API server, converted by the controller's webhook.

The CRDs from manifests/crds serve v1beta1 beside v1 with a Webhook conversion. The test API
server has no pod network, so each test runs the webhook (``manager.webhook.serve``: the
certificate controller and the HTTPS server) on 127.0.0.1 and lets the controller point the CRDs
at ``https://127.0.0.1:<port>/convert`` with its CA. The CRDs are shared by the whole session:
every test puts their ``spec.conversion`` back as it found it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError

from karpenter_py.kube import (
    NODECLAIMS,
    NODEPOOLS,
    InvalidError,
    KubeClient,
    NotFoundError,
    Resource,
)
from karpenter_py.kube.errors import ApiError
from karpenter_py.manager.certs import not_after
from karpenter_py.manager.webhook import CONVERTED_CRDS, SECRETS, WebhookConfig, bundle_of, serve
from karpenter_py.model.api import v1beta1
from karpenter_py.model.api.base import format_validation_error
from karpenter_py.model.api.convert import KUBELET_ANNOTATION, UBUNTU_ANNOTATION
from tests.cluster.harness import (
    CRDS,
    eventually,
    free_port,
    namespace,
    prepared_client,
    unique,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

NODEPOOLS_V1BETA1 = Resource("karpenter.sh", "v1beta1", "nodepools", False, "NodePool")
NODECLAIMS_V1BETA1 = Resource("karpenter.sh", "v1beta1", "nodeclaims", False, "NodeClaim")
EC2NODECLASSES_V1 = Resource("karpenter.k8s.aws", "v1", "ec2nodeclasses", False, "EC2NodeClass")
EC2NODECLASSES_V1BETA1 = Resource(
    "karpenter.k8s.aws", "v1beta1", "ec2nodeclasses", False, "EC2NodeClass"
)


def guide_nodepool(name: str) -> dict[str, Any]:
    """The NodePool of Karpenter's v0.3x guide (plus a kubelet block)."""
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    ],
                    "nodeClassRef": {"name": "default"},
                    "kubelet": {"maxPods": 110},
                }
            },
            "limits": {"cpu": "1k"},
            "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "720h"},
        },
    }


def guide_nodeclass(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiFamily": "AL2023",
            "role": "KarpenterNodeRole-demo",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    }


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        saved = {
            name: copy.deepcopy((await c.get(CRDS, name))["spec"].get("conversion"))
            for name in CONVERTED_CRDS
        }
        try:
            yield c
        finally:
            for name, conversion in saved.items():
                crd = await c.get(CRDS, name)
                crd["spec"]["conversion"] = conversion
                await c.update(CRDS, crd)


@contextlib.asynccontextmanager
async def webhook(client: KubeClient, config: WebhookConfig) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(serve(client, config, host="127.0.0.1"))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def config_for(ns: str, port: int, **kw: Any) -> WebhookConfig:
    return WebhookConfig(
        namespace=ns, port=port, url=f"https://127.0.0.1:{port}/convert", resync=1.0, **kw
    )


async def ca_bundles(client: KubeClient) -> set[str]:
    out = set()
    for name in CONVERTED_CRDS:
        crd = await client.get(CRDS, name)
        cfg = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        out.add(cfg.get("caBundle", ""))
    return out


async def converts(client: KubeClient) -> bool:
    """The API server reaches the webhook (it picks up CRD changes within a moment): a dry-run
    v1beta1 create is converted to v1 for storage."""
    try:
        await client.create(NODEPOOLS_V1BETA1, guide_nodepool(unique("probe")), dry_run=True)
    except ApiError:
        return False
    return True


async def test_v1beta1_applies_and_reads_back_in_both_versions(client: KubeClient) -> None:
    port = free_port()
    pool, nodeclass = unique("beta-pool"), unique("beta-class")
    ubuntu_class = unique("beta-ubuntu")
    async with namespace(client) as ns, webhook(client, config_for(ns, port)):
        secret = await eventually(
            lambda: _secret_or_none(client, ns), within=30, what="the webhook Secret"
        )
        bundle = bundle_of(secret)
        assert bundle is not None
        assert secret["type"] == "kubernetes.io/tls"
        expected_ca = base64.b64encode(bundle.ca_pem).decode()

        async def published() -> bool:
            return await ca_bundles(client) == {expected_ca}

        await eventually(published, within=30, what="the CA bundle on every CRD")
        for name in CONVERTED_CRDS:
            crd = await client.get(CRDS, name)
            assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == (
                f"https://127.0.0.1:{port}/convert"
            )
        await eventually(lambda: converts(client), within=30, what="conversion to work")

        try:
            await client.create(NODEPOOLS_V1BETA1, guide_nodepool(pool))
            as_v1 = await client.get(NODEPOOLS, pool)
            assert as_v1["apiVersion"] == "karpenter.sh/v1"
            tspec = as_v1["spec"]["template"]["spec"]
            assert tspec["nodeClassRef"] == {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": "default",
            }
            assert tspec["expireAfter"] == "720h"
            assert "kubelet" not in tspec
            assert as_v1["spec"]["disruption"] == {
                "budgets": [{"nodes": "10%"}],
                "consolidateAfter": "0s",
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
            }
            assert json.loads(as_v1["metadata"]["annotations"][KUBELET_ANNOTATION]) == {
                "maxPods": 110
            }

            as_beta = await client.get(NODEPOOLS_V1BETA1, pool)
            assert as_beta["apiVersion"] == "karpenter.sh/v1beta1"
            assert as_beta["spec"]["disruption"] == {
                "budgets": [{"nodes": "10%"}],
                "consolidationPolicy": "WhenUnderutilized",
                "expireAfter": "720h",
            }
            assert as_beta["spec"]["template"]["spec"]["kubelet"] == {"maxPods": 110}
            assert as_beta["spec"]["template"]["spec"]["nodeClassRef"] == {
                "apiVersion": "karpenter.k8s.aws/v1beta1",
                "kind": "EC2NodeClass",
                "name": "default",
            }
            assert KUBELET_ANNOTATION not in (as_beta["metadata"].get("annotations") or {})

            # An update through v1beta1 keeps what v1 holds.
            as_beta["spec"]["weight"] = 7
            await client.update(NODEPOOLS_V1BETA1, as_beta)
            again = await client.get(NODEPOOLS, pool)
            assert again["spec"]["weight"] == 7
            assert again["spec"]["template"] == as_v1["spec"]["template"]

            await client.create(EC2NODECLASSES_V1BETA1, guide_nodeclass(nodeclass))
            ec2 = await client.get(EC2NODECLASSES_V1, nodeclass)
            assert ec2["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
            assert "amiFamily" not in ec2["spec"]
            ec2_beta = await client.get(EC2NODECLASSES_V1BETA1, nodeclass)
            assert ec2_beta["spec"]["amiFamily"] == "AL2023"
            assert "amiSelectorTerms" not in ec2_beta["spec"]

            # An Ubuntu class without AMI terms is stored (with the placeholder term the v1
            # schema needs) and reads back as it was applied.
            ubuntu = guide_nodeclass(ubuntu_class)
            ubuntu["spec"]["amiFamily"] = "Ubuntu"
            await client.create(EC2NODECLASSES_V1BETA1, ubuntu)
            ub = await client.get(EC2NODECLASSES_V1, ubuntu_class)
            assert ub["spec"]["amiFamily"] == "AL2"
            assert ub["spec"]["amiSelectorTerms"] == [{"id": "ami-placeholder"}]
            assert ub["metadata"]["annotations"][UBUNTU_ANNOTATION] == (
                "amiFamily,blockDeviceMappings,incompatible"
            )
            ub_beta = await client.get(EC2NODECLASSES_V1BETA1, ubuntu_class)
            assert ub_beta["spec"].pop("metadataOptions")["httpTokens"] == "required"  # v1 default
            assert ub_beta["spec"] == ubuntu["spec"]
        finally:
            for resource, name in (
                (NODEPOOLS, pool),
                (EC2NODECLASSES_V1, nodeclass),
                (EC2NODECLASSES_V1, ubuntu_class),
            ):
                with contextlib.suppress(NotFoundError):
                    await client.delete(resource, name)


async def _secret_or_none(client: KubeClient, ns: str) -> dict[str, Any] | None:
    try:
        return await client.get(SECRETS, "karpenter-cert", namespace=ns)
    except NotFoundError:
        return None


async def test_certificate_is_rotated_before_expiry(client: KubeClient) -> None:
    port = free_port()
    pool = unique("beta-rot")
    # Valid 40s, renewed when under 30s are left: the controller rotates ~10s in.
    async with namespace(client) as ns:
        cfg = config_for(
            ns, port, validity=dt.timedelta(seconds=40), renew_before=dt.timedelta(seconds=30)
        )
        async with webhook(client, cfg):
            first = await eventually(
                lambda: _secret_or_none(client, ns), within=30, what="the webhook Secret"
            )
            first_bundle = bundle_of(first)
            assert first_bundle is not None
            lifetime = not_after(first_bundle.cert_pem) - dt.datetime.now(dt.UTC)
            assert dt.timedelta(seconds=30) < lifetime <= dt.timedelta(seconds=40)

            async def rotated() -> dict[str, Any] | None:
                secret = await _secret_or_none(client, ns)
                bundle = bundle_of(secret) if secret else None
                if bundle is None or bundle == first_bundle:
                    return None
                return secret

            second = await eventually(rotated, within=40, interval=0.5, what="a new certificate")
            second_bundle = bundle_of(second)
            assert second_bundle is not None
            assert second_bundle.ca_pem != first_bundle.ca_pem
            # The bundle trusts the new CA and, until replicas catch up, the previous one.
            assert second_bundle.ca_pem.count(b"BEGIN CERTIFICATE") == 2
            assert second_bundle.ca_pem.endswith(first_bundle.ca_pem)
            assert not_after(second_bundle.cert_pem) > not_after(first_bundle.cert_pem)
            new_ca = base64.b64encode(second_bundle.ca_pem).decode()

            async def published() -> bool:
                return await ca_bundles(client) == {new_ca}

            await eventually(published, within=30, what="the new CA bundle on every CRD")
            # The API server trusts the new certificate: v1beta1 requests still convert.
            await eventually(lambda: converts(client), within=30, what="conversion")
            try:
                await client.create(NODEPOOLS_V1BETA1, guide_nodepool(pool))
                beta = await client.get(NODEPOOLS_V1BETA1, pool)
                assert beta["spec"]["disruption"]["consolidationPolicy"] == "WhenUnderutilized"
            finally:
                with contextlib.suppress(NotFoundError):
                    await client.delete(NODEPOOLS, pool)


async def test_webhook_outage_is_a_clear_error_not_data_loss(client: KubeClient) -> None:
    port = free_port()
    pool, new_pool = unique("beta-out"), unique("beta-new")
    async with namespace(client) as ns:
        cfg = config_for(ns, port)
        try:
            async with webhook(client, cfg):
                await eventually(lambda: converts(client), within=30, what="conversion")
                await client.create(NODEPOOLS_V1BETA1, guide_nodepool(pool))
                before = await client.get(NODEPOOLS, pool)

            # The webhook is down (the CRDs still point at it).
            with pytest.raises(ApiError) as err:
                await client.get(NODEPOOLS_V1BETA1, pool)
            assert "conversion webhook" in str(err.value)
            with pytest.raises(ApiError) as err:
                await client.create(NODEPOOLS_V1BETA1, guide_nodepool(new_pool))
            assert "conversion webhook" in str(err.value)
            # v1 needs no webhook: reads and lists work, the object is intact.
            during = await client.get(NODEPOOLS, pool)
            assert during == before
            names = [p["metadata"]["name"] for p in (await client.list(NODEPOOLS)).items]
            assert pool in names
            assert new_pool not in names

            async with webhook(client, cfg):
                await eventually(lambda: converts(client), within=30, what="conversion")
                beta = await client.get(NODEPOOLS_V1BETA1, pool)
                assert beta["spec"]["template"]["spec"]["kubelet"] == {"maxPods": 110}
                assert await client.get(NODEPOOLS, pool) == before
        finally:
            for name in (pool, new_pool):
                with contextlib.suppress(NotFoundError):
                    await client.delete(NODEPOOLS, name)


def beta_nodeclaim(name: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {
            "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            ],
            "nodeClassRef": {"name": "default"},
            "kubelet": {"maxPods": 50},
        },
    }


async def test_v1beta1_nodeclaim_takes_its_nodepool_expiry(client: KubeClient) -> None:
    port = free_port()
    pool = unique("beta-exp")
    claim, orphan = unique("beta-claim"), unique("beta-orphan")
    body = guide_nodepool(pool)
    body["spec"]["disruption"]["expireAfter"] = "48h"
    async with namespace(client) as ns, webhook(client, config_for(ns, port)):
        await eventually(lambda: converts(client), within=30, what="conversion to work")
        try:
            await client.create(NODEPOOLS_V1BETA1, body)
            await client.create(NODECLAIMS_V1BETA1, beta_nodeclaim(claim, pool))
            await client.create(NODECLAIMS_V1BETA1, beta_nodeclaim(orphan, unique("no-pool")))
            as_v1 = await client.get(NODECLAIMS, claim)
            assert as_v1["spec"]["expireAfter"] == "48h"
            assert json.loads(as_v1["metadata"]["annotations"][KUBELET_ANNOTATION]) == {
                "maxPods": 50
            }
            # No such NodePool: the CRD default, as upstream.
            assert (await client.get(NODECLAIMS, orphan))["spec"]["expireAfter"] == "720h"
            as_beta = await client.get(NODECLAIMS_V1BETA1, claim)
            assert "expireAfter" not in as_beta["spec"]
            assert as_beta["spec"]["kubelet"] == {"maxPods": 50}
        finally:
            for resource, name in ((NODECLAIMS, claim), (NODECLAIMS, orphan), (NODEPOOLS, pool)):
                with contextlib.suppress(NotFoundError):
                    await client.delete(resource, name)


def _edited(body: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    out = copy.deepcopy(body)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return out


_TSPEC = "spec.template.spec"
_CEL_SKIPPED = (
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)
_INVALID_V1BETA1: list[tuple[str, str, object, list[tuple[str, str]]]] = [
    (
        "NodePool",
        "spec.disruption.consolidateAfter",
        "30s",
        [
            (
                "spec.disruption",
                "Invalid value: consolidateAfter cannot be combined with "
                "consolidationPolicy=WhenUnderutilized",
            )
        ],
    ),
    (
        "NodePool",
        f"{_TSPEC}.kubelet",
        {"evictionSoft": {"memory.available": "500Mi"}},
        [
            (
                f"{_TSPEC}.kubelet",
                "Invalid value: evictionSoft OwnerKey does not have a matching "
                "evictionSoftGracePeriod",
            )
        ],
    ),
    (
        "NodePool",
        f"{_TSPEC}.requirements",
        [{"key": "karpenter.sh/nodepool", "operator": "Exists"}],
        [(f"{_TSPEC}.requirements", 'Invalid value: label "karpenter.sh/nodepool" is restricted')],
    ),
    (
        "NodePool",
        f"{_TSPEC}.resources",
        {"requests": {"cpu": "1"}},
        [
            (f"{_TSPEC}.resources", "Too many: 1: must have at most 0 items"),
            # a schema error stops the CEL rules; the API server says so in a cause of its own
            ("<nil>", _CEL_SKIPPED),
        ],
    ),
    (
        "NodeClaim",
        "spec.kubelet",
        {"kubeReserved": {"gpu": "1"}},
        [
            (
                "spec.kubelet.kubeReserved",
                "Invalid value: valid keys for kubeReserved are "
                "['cpu','memory','ephemeral-storage','pid']",
            )
        ],
    ),
    (
        "NodePool",
        f"{_TSPEC}.kubelet",
        {"kubeReserved": {"cpu": -1}, "systemReserved": {"memory": "-1Gi"}},
        [
            (
                f"{_TSPEC}.kubelet.kubeReserved",
                "Invalid value: kubeReserved value cannot be a negative resource quantity",
            ),
            (
                f"{_TSPEC}.kubelet.systemReserved",
                "Invalid value: systemReserved value cannot be a negative resource quantity",
            ),
        ],
    ),
    (
        "EC2NodeClass",
        "spec.instanceProfile",
        "KarpenterNodeInstanceProfile",
        [("spec", "Invalid value: must specify exactly one of ['role', 'instanceProfile']")],
    ),
    (
        "EC2NodeClass",
        "spec.amiFamily",
        "Custom",
        [("spec", "Invalid value: amiSelectorTerms is required when amiFamily == 'Custom'")],
    ),
    (
        "EC2NodeClass",
        "spec.tags",
        {"kubernetes.io/cluster/demo": "owned"},
        [
            (
                "spec.tags",
                "Invalid value: tag contains a restricted tag matching kubernetes.io/cluster/",
            )
        ],
    ),
    (
        "EC2NodeClass",
        "spec.subnetSelectorTerms",
        [{"id": "subnet-0123", "tags": {"a": "b"}}],
        [
            (
                "spec.subnetSelectorTerms",
                "Invalid value: 'id' is mutually exclusive, cannot be set with a combination of "
                "other fields in subnetSelectorTerms",
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("kind", "path", "value", "causes"),
    _INVALID_V1BETA1,
    ids=[f"{c[0]}:{c[1]}" for c in _INVALID_V1BETA1],
)
async def test_invalid_v1beta1_is_refused_by_the_v1beta1_schema(
    client: KubeClient, kind: str, path: str, value: object, causes: list[tuple[str, str]]
) -> None:
    """The API server checks a v1beta1 request against the v1beta1 schema (before any
    conversion, so no webhook is needed); the v1beta1 model refuses the same, at or under the
    field the API server names."""
    name = unique("invalid")
    base, resource, model = {
        "NodePool": (guide_nodepool(name), NODEPOOLS_V1BETA1, v1beta1.NodePool),
        "NodeClaim": (beta_nodeclaim(name, "default"), NODECLAIMS_V1BETA1, v1beta1.NodeClaim),
        "EC2NodeClass": (guide_nodeclass(name), EC2NODECLASSES_V1BETA1, v1beta1.EC2NodeClass),
    }[kind]
    body = _edited(base, path, value)
    with pytest.raises(InvalidError) as err:
        await client.create(resource, body, dry_run=True)
    # Sorted: the API server reports the causes of sibling fields in no fixed order (CI saw
    # systemReserved's before kubeReserved's); each cause is still matched exactly.
    got = sorted((str(c.get("field")), str(c.get("message"))) for c in err.value.causes)
    assert got == sorted(causes)
    with pytest.raises(ValidationError) as problems:
        model.model_validate(body)
    fields = sorted(line.split(": ", 1)[0] for line in format_validation_error(problems.value))
    expected = sorted(field for field, message in causes if message != _CEL_SKIPPED)
    assert len(fields) == len(expected)
    assert all(f.startswith(e) for f, e in zip(fields, expected, strict=True)), fields
