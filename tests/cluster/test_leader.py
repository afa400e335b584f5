"""Leader election against the real kube-apiserver: one leader, fast handover, expiry, loss.

Short timings (lease 2 s, renew deadline 1.5 s, retry 0.3 s) keep the suite quick; the algorithm
is the same one production runs with 15 s / 10 s / 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from karpenter_py.kube import LEASES, KubeClient, NotFoundError, load_kubeconfig
from karpenter_py.manager.leader import LeaderElector, LeadershipLost
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

NS = "default"
LEASE, RENEW, RETRY = 2.0, 1.5, 0.3


@pytest.fixture
async def clients(
    cluster: ClusterHandle,
) -> AsyncIterator[tuple[KubeClient, KubeClient, KubeClient]]:
    """Three clients: two candidates (as two processes would have) and an observer."""
    config = await asyncio.to_thread(load_kubeconfig, [cluster.kubeconfig_path])
    async with (
        KubeClient(config, timeout=5) as a,
        KubeClient(config, timeout=5) as b,
        KubeClient(config, timeout=5) as observer,
    ):
        yield a, b, observer


@pytest.fixture
async def lease_name(clients: tuple[KubeClient, KubeClient, KubeClient]) -> AsyncIterator[str]:
    name = f"karpy-leader-{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(NotFoundError):
        await clients[2].delete(LEASES, name, namespace=NS)


def make(client: KubeClient, name: str, identity: str, **kw: object) -> LeaderElector:
    return LeaderElector(
        client,
        name=name,
        namespace=NS,
        identity=identity,
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        **kw,  # type: ignore[arg-type]
    )


async def until(cond, *, within: float, what: str) -> float:
    """Poll ``cond`` every 20 ms; returns the seconds it took. Fails after ``within``."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not cond():
        if loop.time() - start > within:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.02)
    return loop.time() - start


async def holder(client: KubeClient, name: str) -> str:
    lease = await client.get(LEASES, name, namespace=NS)
    return str(lease["spec"].get("holderIdentity") or "")


async def test_two_candidates_exactly_one_leads(clients, lease_name):
    a_client, b_client, observer = clients
    a, b = make(a_client, lease_name, "replica-a"), make(b_client, lease_name, "replica-b")
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(a.run()), tg.create_task(b.run())]
        await until(lambda: a.is_leader or b.is_leader, within=10, what="a leader")
        leader, follower = (a, b) if a.is_leader else (b, a)
        # for several lease durations: still exactly one leader, and the Lease agrees
        for _ in range(16):
            await asyncio.sleep(RETRY)
            assert leader.is_leader
            assert not follower.is_leader
            assert await holder(observer, lease_name) == leader.identity
        lease = await observer.get(LEASES, lease_name, namespace=NS)
        assert lease["spec"]["leaseDurationSeconds"] == int(LEASE)
        assert lease["spec"]["renewTime"] != lease["spec"]["acquireTime"]  # renewing
        for task in tasks:
            task.cancel()


async def test_cancelled_leader_releases_and_the_other_takes_over(clients, lease_name):
    a_client, b_client, observer = clients
    a, b = make(a_client, lease_name, "replica-a"), make(b_client, lease_name, "replica-b")
    async with asyncio.TaskGroup() as tg:
        ta = tg.create_task(a.run())
        await until(lambda: a.is_leader, within=10, what="a to lead")
        tb = tg.create_task(b.run())
        await asyncio.sleep(1.0)
        assert not b.is_leader
        transitions = (await observer.get(LEASES, lease_name, namespace=NS))["spec"][
            "leaseTransitions"
        ]

        ta.cancel()  # graceful shutdown: ReleaseOnCancel
        took = await until(lambda: b.is_leader, within=LEASE, what="b to take over")
        assert took < LEASE  # the release spares the standby the lease duration
        assert ta.done()
        assert a.leadership.lost
        lease = await observer.get(LEASES, lease_name, namespace=NS)
        assert lease["spec"]["holderIdentity"] == "replica-b"
        assert lease["spec"]["leaseTransitions"] == transitions + 1
        tb.cancel()
    # b released on its way out too
    lease = await observer.get(LEASES, lease_name, namespace=NS)
    assert "holderIdentity" not in lease["spec"]
    assert lease["spec"]["leaseDurationSeconds"] == 1


async def test_dead_leader_is_replaced_after_the_lease_expires(clients, lease_name):
    a_client, b_client, _ = clients
    a = make(a_client, lease_name, "replica-a", release_on_cancel=False)  # dies, no goodbye
    b = make(b_client, lease_name, "replica-b")
    async with asyncio.TaskGroup() as tg:
        ta = tg.create_task(a.run())
        await until(lambda: a.is_leader, within=10, what="a to lead")
        tb = tg.create_task(b.run())
        await asyncio.sleep(1.0)
        ta.cancel()
        took = await until(lambda: b.is_leader, within=LEASE + 3, what="b to take over")
        # b waited for the lease to run out (measured from the last renewal it saw) ...
        assert took > LEASE - RETRY * 2.2 - RETRY
        # ... and not much longer: one lease duration plus at most one jittered retry
        assert took < LEASE + RETRY * 2.2 + 0.5
        tb.cancel()


async def test_leader_whose_lease_is_taken_steps_down(clients, lease_name):
    a_client, _, observer = clients
    a = make(a_client, lease_name, "replica-a")
    loop = asyncio.get_running_loop()
    with pytest.raises(ExceptionGroup) as info:  # noqa: PT012 -- the TaskGroup is the subject
        async with asyncio.TaskGroup() as tg:
            tg.create_task(a.run())
            await until(lambda: a.is_leader, within=10, what="a to lead")
            lease = await observer.get(LEASES, lease_name, namespace=NS)
            lease["spec"]["holderIdentity"] = "intruder"
            lease["spec"]["leaseDurationSeconds"] = 3600
            await observer.update(LEASES, lease, namespace=NS)
            stolen_at = loop.time()
            await a.leadership.wait_lost()
            lost_after = loop.time() - stolen_at
    assert info.group_contains(LeadershipLost)
    assert lost_after < RETRY + RENEW + 0.5  # next renewal fails, then the renew deadline
    assert await holder(observer, lease_name) == "intruder"  # it does not fight back
