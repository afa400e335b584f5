"""nodeclaim.tagging with fakes: tag a registered NodeClaim's instance once, then mark it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.controllers.nodeclaim.tagging import ANNOTATION_TAGGED, NodeClaimTagging
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.state.cluster import KINDS, Cluster
from tests.unit.fakes import FakeKube, deps, wire

PID = "aws:///us-west-2a/i-0abc"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def claim(
    name: str = "default-abcde",
    *,
    registered: bool = True,
    pid: str = PID,
    node: str = "ip-10-0-0-1.us-west-2.compute.internal",
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
) -> NodeClaim:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = NOW.isoformat()
    nc = NodeClaim.model_validate(
        {
            "metadata": meta,
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                "requirements": [],
            },
            "status": {"providerID": pid, "nodeName": node},
        }
    )
    nc.status.set_condition("Launched", "True", now=NOW)
    if registered:
        nc.status.set_condition("Registered", "True", now=NOW)
    return nc


class FakeTagger:
    def __init__(self, failures: int = 0, *, gone: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.failures = failures
        self.gone = gone

    async def tag_instance(self, provider_id: str, tags: dict[str, str]) -> None:
        self.calls.append((provider_id, dict(tags)))
        if self.gone:
            raise NodeClaimNotFoundError(f"instance {provider_id} not found")
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("ec2 CreateTags: RequestLimitExceeded")


def controller(cluster: Cluster, tagger: FakeTagger, client: FakeKube) -> NodeClaimTagging:
    return NodeClaimTagging(
        deps(client=client, cluster=cluster), tagger, cluster_name="test-cluster"
    )


def stored(cluster: Cluster, client: FakeKube, nc: NodeClaim) -> None:
    """The NodeClaim in the API and in the cache."""
    cluster.upsert_nodeclaim(nc)
    client.put(NODECLAIMS, wire(nc))


def patches(client: FakeKube) -> list[tuple[str, str, Any]]:
    return [(c.plural, c.name, c.body) for c in client.calls_of("patch")]


TAGGED_PATCH = {"metadata": {"annotations": {ANNOTATION_TAGGED: "true"}}}

CASES: list[tuple[str, NodeClaim | None, list[tuple[str, dict[str, str]]], bool]] = [
    (
        "registered: tagged and marked",
        claim(),
        [
            (
                PID,
                {
                    "Name": "ip-10-0-0-1.us-west-2.compute.internal",
                    "karpenter.sh/nodeclaim": "default-abcde",
                    "eks:eks-cluster-name": "test-cluster",
                },
            )
        ],
        True,
    ),
    # Registration writes the node name with the condition; without it there is no Name yet.
    ("registered without a node name yet", claim(node=""), [], False),
    ("unknown NodeClaim", None, [], False),
    ("not registered", claim(registered=False), [], False),
    ("registered but no provider ID", claim(pid=""), [], False),
    ("being deleted", claim(deleting=True), [], False),
    ("already tagged", claim(annotations={ANNOTATION_TAGGED: "true"}), [], False),
    (
        "annotation other than true: tagged again",
        claim(annotations={ANNOTATION_TAGGED: "false"}),
        [
            (
                PID,
                {
                    "Name": "ip-10-0-0-1.us-west-2.compute.internal",
                    "karpenter.sh/nodeclaim": "default-abcde",
                    "eks:eks-cluster-name": "test-cluster",
                },
            )
        ],
        True,
    ),
]


@pytest.mark.parametrize(
    ("nc", "tagged", "patched"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_reconcile(
    nc: NodeClaim | None, tagged: list[tuple[str, dict[str, str]]], patched: bool
) -> None:
    cluster, tagger, client = Cluster(), FakeTagger(), FakeKube()
    if nc is not None:
        stored(cluster, client, nc)
    result = await controller(cluster, tagger, client).reconcile("default-abcde")
    assert result is None
    assert tagger.calls == tagged
    assert patches(client) == ([("nodeclaims", "default-abcde", TAGGED_PATCH)] if patched else [])


async def test_tags_once_the_annotation_lands() -> None:
    cluster, tagger, client = Cluster(), FakeTagger(), FakeKube()
    tagging = controller(cluster, tagger, client)
    stored(cluster, client, claim())
    await tagging.reconcile("default-abcde")
    # The informer then delivers the patched object; a second reconcile is a no-op.
    cluster.upsert_nodeclaim(claim(annotations={ANNOTATION_TAGGED: "true"}))
    await tagging.reconcile("default-abcde")
    assert len(tagger.calls) == 1
    assert len(patches(client)) == 1


async def test_a_tagger_failure_raises_and_leaves_the_annotation_unset() -> None:
    cluster, tagger, client = Cluster(), FakeTagger(failures=1), FakeKube()
    stored(cluster, client, claim())
    tagging = controller(cluster, tagger, client)
    with pytest.raises(RuntimeError, match="RequestLimitExceeded"):
        await tagging.reconcile("default-abcde")
    assert patches(client) == []
    # The retry tags and marks it.
    assert await tagging.reconcile("default-abcde") is None
    assert len(tagger.calls) == 2
    assert patches(client) == [("nodeclaims", "default-abcde", TAGGED_PATCH)]


async def test_a_vanished_instance_is_left_to_garbage_collection() -> None:
    # Not retried (it would fail forever) and not marked tagged.
    cluster, tagger, client = Cluster(), FakeTagger(gone=True), FakeKube()
    stored(cluster, client, claim())
    assert await controller(cluster, tagger, client).reconcile("default-abcde") is None
    assert [pid for pid, _ in tagger.calls] == [PID]
    assert patches(client) == []


async def test_nodeclaim_deleted_before_the_patch_is_not_an_error() -> None:
    cluster, tagger, client = Cluster(), FakeTagger(), FakeKube()
    cluster.upsert_nodeclaim(claim())  # cached, but gone from the API
    assert await controller(cluster, tagger, client).reconcile("default-abcde") is None
    assert len(tagger.calls) == 1


async def test_run_retries_a_failed_tagging() -> None:
    """Through the runtime: an update event queues the claim; a failure is retried (1 s)."""
    patched = asyncio.Event()
    cluster, tagger = Cluster(), FakeTagger(failures=1)
    client = FakeKube(on_write=lambda *_: patched.set())
    for kind in KINDS:
        cluster.mark_synced(kind)
    tagging = controller(cluster, tagger, client)
    nc = claim()
    stored(cluster, client, nc)
    async with asyncio.timeout(10):
        async with asyncio.TaskGroup() as tg:
            runner = tg.create_task(tagging.run())
            tagging.on_nodeclaim(nc.model_dump(by_alias=True, mode="json"))
            await patched.wait()
            runner.cancel()
    assert [pid for pid, _ in tagger.calls] == [PID, PID]
    assert patches(client) == [("nodeclaims", "default-abcde", TAGGED_PATCH)]
