"""nodeclaim.lifecycle with fakes: a NodeClaim deleted while a pass runs ends the pass quietly.

Found by the chaos suite (issue 17): a disruption command deleted a claim between the
lifecycle's read and its write; the write's 404 surfaced as ``reconcile failed`` with a
traceback. Upstream ignores NotFound on the claim's own writes.
"""

from __future__ import annotations

import pytest

from karpenter_py.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.resources import NODECLAIMS, NODES
from karpenter_py.launcher.launch import Launcher
from karpenter_py.state.cluster import Cluster
from tests import factories
from tests.unit.fakes import FakeCloudProvider, FakeKube, deps, wire

NAME = "default-abcde"


def lifecycle(cluster: Cluster, client: FakeKube, cloud: FakeCloudProvider) -> NodeClaimLifecycle:
    d = deps(client=client, cluster=cluster, cloud=cloud)
    return NodeClaimLifecycle(d, Launcher(cloud, clock=d.clock))


@pytest.mark.parametrize(
    ("finalizers", "first_write"),
    [
        # Gone before the finalizer was added: nothing launched.
        ([], "finalizer"),
        # Gone after the launch, at the write of its result: the finalizer owns the instance.
        (["karpenter.sh/termination"], "status"),
    ],
)
async def test_a_nodeclaim_deleted_during_a_pass_ends_it_without_an_error(
    finalizers: list[str], first_write: str
) -> None:
    nc = factories.nodeclaim(NAME, launched=False, finalizers=finalizers)
    cluster = Cluster()
    cluster.upsert_nodeclaim(nc)  # the cache still holds it
    client = FakeKube()  # the API server no longer does
    cloud = FakeCloudProvider()

    assert await lifecycle(cluster, client, cloud).reconcile(NAME) is None

    patched = [c.name for c in client.calls_of("patch", NODECLAIMS)]
    assert patched == [NAME]
    assert [c.status for c in client.calls_of("patch", NODECLAIMS)] == [404]
    launched = [c.name for c in cloud.create_calls]
    assert launched == ([] if first_write == "finalizer" else [NAME])


async def test_a_404_for_another_object_is_still_an_error() -> None:
    nc = factories.nodeclaim(NAME, launched=False)
    cluster = Cluster()
    cluster.upsert_nodeclaim(nc)
    client = FakeKube()
    client.put(NODECLAIMS, wire(nc))
    client.fail("patch", NAME, NotFoundError(status=404, resource=NODES.qualified, name=NAME))

    with pytest.raises(NotFoundError):
        await lifecycle(cluster, client, FakeCloudProvider()).reconcile(NAME)
