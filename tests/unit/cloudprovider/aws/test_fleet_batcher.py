"""FleetBatcher with a fake EC2: windows, the 1,000 cap, partial fulfilment, failures."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from karpenter_py.cloudprovider.aws.fleet import (
    FleetBatcher,
    FleetLaunchError,
    FleetRequest,
    Override,
)

REQ = FleetRequest("on-demand", (Override("lt", "m5.large", "subnet-a", "us-west-2a", 0.1),), ())
OTHER = FleetRequest("spot", REQ.overrides, ())


class FakeEC2:
    """Answers CreateFleet with up to ``supply`` instances per call plus ``errors``."""

    def __init__(self, *, supply: int | None = None, errors: list[dict[str, Any]] | None = None):
        self.supply = supply
        self.errors = errors or []
        self.calls: list[dict[str, Any]] = []
        self.fail: Exception | None = None
        self.delay = 0.0
        self._ids = itertools.count()

    async def create_fleet(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        wanted = params["TargetCapacitySpecification"]["TotalTargetCapacity"]
        count = wanted if self.supply is None else min(wanted, self.supply)
        ids = [f"i-{next(self._ids)}" for _ in range(count)]
        return {"Instances": [{"InstanceIds": ids}] if ids else [], "Errors": self.errors}


def _capacity(ec2: FakeEC2) -> list[int]:
    return [c["TargetCapacitySpecification"]["TotalTargetCapacity"] for c in ec2.calls]


async def test_equal_requests_in_one_window_share_a_call() -> None:
    ec2 = FakeEC2()
    batcher = FleetBatcher(ec2, idle=0.02, max_window=0.5)
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(batcher.launch(REQ)) for _ in range(7)]
        other = tg.create_task(batcher.launch(OTHER))
    assert len({t.result() for t in tasks}) == 7
    assert other.result().startswith("i-")
    assert batcher.calls == 2
    assert sorted(_capacity(ec2)) == [1, 7]


async def test_requests_after_the_idle_window_get_a_new_call() -> None:
    ec2 = FakeEC2()
    batcher = FleetBatcher(ec2, idle=0.01, max_window=0.5)
    await batcher.launch(REQ)
    await batcher.launch(REQ)
    assert _capacity(ec2) == [1, 1]


async def test_max_items_splits_batches() -> None:
    ec2 = FakeEC2()
    batcher = FleetBatcher(ec2, idle=0.05, max_window=1.0, max_items=3)
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(batcher.launch(REQ)) for _ in range(7)]
    assert len({t.result() for t in tasks}) == 7
    assert _capacity(ec2) == [3, 3, 1]


async def test_partial_fulfilment_fails_the_rest_with_fleet_errors() -> None:
    error = {
        "LaunchTemplateAndOverrides": {
            "Overrides": {"InstanceType": "m5.large", "SubnetId": "subnet-a"}
        },
        "ErrorCode": "InsufficientInstanceCapacity",
        "ErrorMessage": "none",
    }
    seen: list[tuple[tuple[str, str, str], ...]] = []
    ec2 = FakeEC2(supply=2, errors=[error])
    batcher = FleetBatcher(ec2, idle=0.02, on_unavailable=seen.append)
    results = await asyncio.gather(*(batcher.launch(REQ) for _ in range(3)), return_exceptions=True)
    ids = [r for r in results if isinstance(r, str)]
    failures = [r for r in results if isinstance(r, FleetLaunchError)]
    assert len(ids) == 2
    assert len(failures) == 1
    assert failures[0].errors[0].zone == "us-west-2a"  # from the override's subnet
    assert failures[0].errors[0].capacity_type == "on-demand"
    assert seen == [(("m5.large", "us-west-2a", "on-demand"),)]


async def test_call_failure_reaches_every_waiter() -> None:
    ec2 = FakeEC2()
    ec2.fail = RuntimeError("boom")
    batcher = FleetBatcher(ec2, idle=0.02)
    results = await asyncio.gather(*(batcher.launch(REQ) for _ in range(3)), return_exceptions=True)
    assert [str(r) for r in results] == ["boom"] * 3
    assert batcher.calls == 1


async def test_cancelled_leader_hands_over_to_followers() -> None:
    ec2 = FakeEC2()
    batcher = FleetBatcher(ec2, idle=0.05, max_window=1.0)
    async with asyncio.TaskGroup() as tg:
        leader = tg.create_task(batcher.launch(REQ))
        await asyncio.sleep(0)
        followers = [tg.create_task(batcher.launch(REQ)) for _ in range(2)]
        await asyncio.sleep(0.01)
        leader.cancel()
    assert leader.cancelled()
    assert len({f.result() for f in followers}) == 2
    assert _capacity(ec2) == [2]  # the cancelled leader never called


async def test_leader_cancelled_mid_call_does_not_strand_followers() -> None:
    ec2 = FakeEC2()
    ec2.delay = 0.2
    batcher = FleetBatcher(ec2, idle=0.01, max_window=1.0)
    async with asyncio.TaskGroup() as tg:
        leader = tg.create_task(batcher.launch(REQ))
        await asyncio.sleep(0)
        follower = tg.create_task(batcher.launch(REQ))
        await asyncio.sleep(0.05)  # window closed, call in flight
        leader.cancel()
        ec2.delay = 0.0
    assert leader.cancelled()
    assert follower.result().startswith("i-")  # retried in a window of its own
    assert _capacity(ec2) == [2, 1]
