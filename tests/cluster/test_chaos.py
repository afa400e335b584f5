"""The fault-injection suite's CI subset (issue 17): one scenario of each kind of fault in
``benchmarks/chaos.py`` once, on its own local control plane, with no invariant violated.
``make chaos`` runs the whole matrix (20 seeds of every scenario)."""

from __future__ import annotations

import pytest

from benchmarks.chaos import SCENARIOS, matrix, table

pytestmark = pytest.mark.cluster

# Process, the five faults of issue 17 where a scenario exists for them, control plane (the
# apiserver's own APF rather than the proxy's in-flight limit), disruption, bad input and the
# cloud; the slow ones (a lease to run out, a 20 s outage, 1,000 queue messages) are left to
# the matrix.
CI_SUBSET = (
    "kill-after-nodeclaims",
    "bare-nodes",
    "api-faults",
    "watch-cuts",
    "apf-throttle",
    "drift-kill",
    "bad-input",
    "aws-faults",
    "aws-ice",
    "aws-vanish",
)


def test_the_ci_subset_names_scenarios_that_exist() -> None:
    assert [name for name in CI_SUBSET if name not in SCENARIOS] == []


@pytest.mark.timeout(900)
async def test_every_fault_scenario_of_the_subset_keeps_every_invariant() -> None:
    summary = await matrix(list(CI_SUBSET), seeds=1, deadline=90.0, keep=False)
    assert summary["runs"] == len(CI_SUBSET), table(summary)
    assert summary["violations"] == 0, table(summary)
