"""The fault-injection suite's CI subset (issue 17): every scenario of ``benchmarks/chaos.py``
once, on its own local control plane, with no invariant violated. ``make chaos`` runs the
whole matrix (20 seeds per scenario)."""

from __future__ import annotations

import pytest

from benchmarks.chaos import SCENARIOS, matrix, table

pytestmark = pytest.mark.cluster


async def test_every_fault_scenario_keeps_every_invariant() -> None:
    summary = await matrix(list(SCENARIOS), seeds=1, deadline=90.0, keep=False)
    assert summary["runs"] == len(SCENARIOS), table(summary)
    assert summary["violations"] == 0, table(summary)
