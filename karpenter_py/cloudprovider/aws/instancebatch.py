"""DescribeInstances and TerminateInstances by instance ID, batched across concurrent callers.

Upstream's describe and terminate batchers: calls for single instances that arrive within
``idle`` seconds of each other (at most ``max_window`` after the first, at most ``max_items``
IDs) become one call with every ID; each caller gets the answer about its own instance. A garbage
collection pass that terminates 50 orphans then makes one TerminateInstances, not 50 Describe
plus 50 Terminate calls.

One bad ID must not fail the others: EC2 refuses a whole DescribeInstances when one ID is
unknown, and a TerminateInstances can fail or leave instances running (termination protection,
a zonal problem). When a batched call fails, or does not answer for some instances, those are
asked again one at a time, so each caller gets its own instance's answer or error (upstream
does the same; it costs extra calls only in that rare case).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from karpenter_py.aio.batcher import CallBatcher

log = logging.getLogger("karpenter.aws.instancebatch")

# Upstream's windows for both batchers.
IDLE: Final = 0.1
MAX_WINDOW: Final = 1.0
MAX_IDS: Final = 500
TERMINATING_STATES: Final = frozenset({"shutting-down", "terminated"})

RawInstance = Mapping[str, Any]
A = TypeVar("A")


class InstanceBatcher:
    """``describe`` and ``terminate`` one instance, batched (see the module docstring)."""

    def __init__(
        self,
        ec2: Any,
        *,
        idle: float = IDLE,
        max_window: float = MAX_WINDOW,
        max_items: int = MAX_IDS,
    ) -> None:
        self._ec2 = ec2
        self._describe: CallBatcher[None, str, RawInstance | None] = CallBatcher(
            self._describe_batch, idle=idle, max_window=max_window, max_items=max_items
        )
        self._terminate: CallBatcher[None, str, None] = CallBatcher(
            self._terminate_batch, idle=idle, max_window=max_window, max_items=max_items
        )

    @property
    def describe_calls(self) -> int:
        """Batched DescribeInstances calls so far (single-ID retries not counted)."""
        return self._describe.calls

    @property
    def terminate_calls(self) -> int:
        """Batched TerminateInstances calls so far (single-ID retries not counted)."""
        return self._terminate.calls

    async def describe(self, instance_id: str) -> RawInstance | None:
        """The instance's DescribeInstances entry; None when EC2 does not list it. EC2's error
        (e.g. ``InvalidInstanceID.NotFound``) when asking about it alone failed."""
        return await self._describe.call(None, instance_id)

    async def terminate(self, instance_id: str) -> None:
        """TerminateInstances for the instance; EC2's error when terminating it alone failed."""
        await self._terminate.call(None, instance_id)

    # ------------------------------------------------------------------ batches
    async def _describe_batch(
        self, _: None, ids: Sequence[str]
    ) -> list[RawInstance | Exception | None]:
        unique = list(dict.fromkeys(ids))
        found: dict[str, RawInstance | Exception | None] = {}
        try:
            resp = await self._ec2.describe_instances(InstanceIds=unique)
        except Exception as exc:
            if len(unique) == 1:
                raise
            log.debug("batched DescribeInstances failed; asking one by one", exc_info=exc)
        else:
            for reservation in resp.get("Reservations") or []:
                for raw in reservation.get("Instances") or []:
                    found[str(raw.get("InstanceId", ""))] = raw
            if len(unique) == 1:
                return [found.get(unique[0])] * len(ids)
        # Unanswered: eventual consistency right after a launch, or the batch failed.
        found.update(await _one_by_one([i for i in unique if i not in found], self._describe_one))
        return [found[i] for i in ids]

    async def _describe_one(self, instance_id: str) -> RawInstance | None:
        resp = await self._ec2.describe_instances(InstanceIds=[instance_id])
        for reservation in resp.get("Reservations") or []:
            for raw in reservation.get("Instances") or []:
                if raw.get("InstanceId") == instance_id:
                    return dict(raw)
        return None

    async def _terminate_batch(self, _: None, ids: Sequence[str]) -> list[Exception | None]:
        unique = list(dict.fromkeys(ids))
        if len(unique) == 1:
            await self._terminate_one(unique[0])
            return [None] * len(ids)
        done: dict[str, Exception | None] = {}
        try:
            resp = await self._ec2.terminate_instances(InstanceIds=unique)
        except Exception as exc:
            log.debug("batched TerminateInstances failed; terminating one by one", exc_info=exc)
        else:
            for change in resp.get("TerminatingInstances") or []:
                if (change.get("CurrentState") or {}).get("Name") in TERMINATING_STATES:
                    done[str(change.get("InstanceId", ""))] = None
        done.update(await _one_by_one([i for i in unique if i not in done], self._terminate_one))
        return [done[i] for i in ids]

    async def _terminate_one(self, instance_id: str) -> None:
        await self._ec2.terminate_instances(InstanceIds=[instance_id])


async def _one_by_one(
    ids: Sequence[str], call: Callable[[str], Awaitable[A]]
) -> dict[str, A | Exception]:
    """``call`` for each ID concurrently; each ID's answer or its own error."""
    out: dict[str, A | Exception] = {}

    async def one(instance_id: str) -> None:
        try:
            out[instance_id] = await call(instance_id)
        except Exception as exc:
            out[instance_id] = exc

    async with asyncio.TaskGroup() as tg:
        for instance_id in ids:
            tg.create_task(one(instance_id))
    return out
