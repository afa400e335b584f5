"""``App.run``: what one part's failure may and may not end (the parts themselves stubbed)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import KubeConfig
from karpenter_py.manager import app as app_module
from karpenter_py.manager import webhook
from karpenter_py.manager.app import App
from karpenter_py.manager.settings import Settings


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_failing_webhook_never_ends_the_decision_loops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    settings = Settings(webhook_port=8443, disable_leader_election=True)
    app = App(settings, KubeClient(KubeConfig(server="https://127.0.0.1:1")), clock=clock)
    webhook_runs: list[float] = []
    decisions: list[str] = []

    async def failing_webhook(*_: Any, **__: Any) -> None:
        webhook_runs.append(clock.monotonic())
        raise RuntimeError("WebhookServer needs a certificate (use()) before it starts")

    async def forever(*_: Any, **__: Any) -> None:
        await asyncio.Event().wait()

    async def run_decisions() -> None:
        decisions.append("started")
        await forever()

    monkeypatch.setattr(webhook, "serve", failing_webhook)
    monkeypatch.setattr(app_module, "serve", forever)  # probes and metrics
    monkeypatch.setattr(app_module, "run_state_metrics", forever)
    monkeypatch.setattr(app, "run_informers", forever)
    monkeypatch.setattr(app, "run_decisions", run_decisions)

    async with asyncio.TaskGroup() as tg:
        running = tg.create_task(app.run())
        await settle()
        assert (webhook_runs, decisions, running.done()) == ([0.0], ["started"], False)
        # The webhook is started again after a back-off (at most 30 s), and again...
        for runs in (2, 3):
            clock.step(60)
            await settle()
            assert (len(webhook_runs), running.done()) == (runs, False)
        # ...while the decision loops it runs beside were never stopped.
        assert decisions == ["started"]
        running.cancel()
