"""Session-wide fixtures: the local control plane (``cluster``), moto's server (``aws``), and a
check that every test leaves no asyncio task behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

pytest_plugins = ["tests.clusterfixture", "tests.motofixture"]


@pytest.fixture(autouse=True)
async def _no_leftover_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running (as kopf's suite does).

    Every task has an owner that awaits or cancels it before it returns; a task still pending
    after the test and all its fixtures is one nobody owns, which in the product would outlive
    its controller. Autouse fixtures are set up first and torn down last, so a fixture's own
    tasks are checked too. Pytest-asyncio closes the loop after this, cancelling what is left;
    without this check that would hide the leak.
    """
    before = asyncio.all_tasks()
    yield
    # One pass of the loop: a task cancelled in the last teardown step finishes now.
    await asyncio.sleep(0)
    leftover = asyncio.all_tasks() - before - {asyncio.current_task()}
    if leftover:
        names = sorted(repr(t) for t in leftover)
        for task in leftover:
            task.cancel()
        await asyncio.gather(*leftover, return_exceptions=True)
        pytest.fail(f"asyncio tasks left running: {names}")
