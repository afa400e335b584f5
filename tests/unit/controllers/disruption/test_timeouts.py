"""Consolidation time limits (pure): a method cut short says how far it got.

Time is a fake: every what-if simulation takes exactly one second (``SimulationTimer``), so a
limit of ``K - 0.5`` seconds lets a method run exactly K simulations before it stops. The
clusters are full nodes (a 3.5-CPU pod on each 3.9-CPU node): no node can go, so every method
walks all the way to its limit or to its end.
"""

from __future__ import annotations

import pytest

from karpenter_py.controllers.disruption.context import PassContext
from karpenter_py.controllers.disruption.decide import next_command
from karpenter_py.controllers.disruption.drift import DRIFT
from karpenter_py.controllers.disruption.emptiness import EMPTINESS
from karpenter_py.controllers.disruption.multinode import MULTI_NODE
from karpenter_py.controllers.disruption.singlenode import SINGLE_NODE
from karpenter_py.controllers.disruption.staticdrift import STATIC_DRIFT
from karpenter_py.controllers.disruption.types import Timeout
from karpenter_py.scheduling.simulate import Simulation, Simulator
from karpenter_py.state.cluster import Cluster
from tests.unit.controllers.disruption.test_decide import C4, build, facts

FULL = ["3500m"]


class SimulationTimer:
    """A pass timer that advances one second per simulation the pass's Simulator runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.simulated: list[list[str]] = []  # the candidates of each simulation, in order
        run = Simulator.run

        def counted(sim: Simulator, candidates: list[str], *, repack: bool = False) -> Simulation:
            self.simulated.append(sorted(candidates))
            return run(sim, candidates, repack=repack)

        monkeypatch.setattr(Simulator, "run", counted)

    def __call__(self) -> float:
        return float(len(self.simulated))


@pytest.fixture
def timer(monkeypatch: pytest.MonkeyPatch) -> SimulationTimer:
    return SimulationTimer(monkeypatch)


def six_full_nodes() -> Cluster:
    return build([(n, C4, FULL) for n in "abcdef"])


def two_pools() -> Cluster:
    """Pool "default" with a, b, c and pool "batch" with x, y (single-node order: a x b y c)."""
    c = build([(n, C4, FULL) for n in "abc"])
    return build([(n, C4, FULL) for n in "xy"], pool="batch", into=c)


# ------------------------------------------------------------------------------ multi-node
# Without a limit the extended search over a..f runs 13 simulations: the binary search
# (a-d, a-b), every prefix (a-b .. a-f), then the growing set (a, b, .., f, each rejected).
# "examined" counts candidates that took part in at least one simulation.
@pytest.mark.parametrize(
    ("search", "k", "want"),
    [
        ("extended", 1, (4, 2)),  # a-d simulated, e and f never
        ("extended", 2, (4, 2)),  # stops before the greedy search starts
        ("extended", 5, (4, 2)),  # prefixes a-b, a-c, a-d done; a-e not reached
        ("extended", 6, (5, 1)),
        ("extended", 7, (6, 0)),  # every candidate simulated, the growing set not begun
        ("extended", 12, (6, 0)),  # the growing set stopped before f alone
        ("extended", 13, None),  # the whole search fits
        ("upstream", 1, (4, 2)),
        ("upstream", 2, None),  # the binary search ends after two simulations
    ],
)
def test_multi_node_timeout_counts_the_candidates_no_simulation_reached(
    timer: SimulationTimer, search: str, k: int, want: tuple[int, int] | None
) -> None:
    limit = k - 0.5
    f = facts(six_full_nodes(), multi_node_timeout=limit, search=search)
    ctx = PassContext(f, timer)

    assert MULTI_NODE.compute_command(ctx) is None
    assert len(timer.simulated) == k
    expected = [] if want is None else [Timeout(MULTI_NODE, limit, *want, ("default",))]
    assert ctx.timed_out == expected


# ------------------------------------------------------------------------------ single-node
@pytest.mark.parametrize(
    ("k", "want"),
    [
        (1, (1, 4, ("batch", "default"))),  # x b y c left
        (2, (2, 3, ("batch", "default"))),  # b y c left
        (3, (3, 2, ("batch", "default"))),  # y c left
        (4, (4, 1, ("default",))),  # only c left: only its pool is concerned
        (5, None),  # the scan ends before the limit
    ],
)
def test_single_node_timeout_names_the_pools_it_did_not_reach(
    timer: SimulationTimer, k: int, want: tuple[int, int, tuple[str, ...]] | None
) -> None:
    limit = k - 0.5
    ctx = PassContext(facts(two_pools(), single_node_timeout=limit), timer)

    assert SINGLE_NODE.compute_command(ctx) is None
    assert timer.simulated == [[n] for n in "axbyc"][:k]
    assert ctx.timed_out == ([] if want is None else [Timeout(SINGLE_NODE, limit, *want)])


def test_a_pass_reports_every_method_that_hit_its_limit(timer: SimulationTimer) -> None:
    """Multi-node runs out after 7 simulations, then single-node (its own clock from its own
    start) after 3 of its 6 candidates; each keeps the nodes' reasons it found."""
    f = facts(six_full_nodes(), multi_node_timeout=6.5, single_node_timeout=2.5)

    decision = next_command(f, timer=timer)

    assert decision.commands == ()
    assert decision.timed_out == (
        Timeout(MULTI_NODE, 6.5, 6, 0, ("default",)),
        Timeout(SINGLE_NODE, 2.5, 3, 3, ("default",)),
    )
    assert [t.explanation for t in decision.timed_out] == [
        "multi-node-consolidation stopped at its time limit of 6.5s with 0 of 6 candidates "
        "unexamined",
        "single-node-consolidation stopped at its time limit of 2.5s with 3 of 6 candidates "
        "unexamined",
    ]
    assert len(timer.simulated) == 10
    assert decision.eligible == {
        EMPTINESS: 0,
        STATIC_DRIFT: 0,
        DRIFT: 0,
        MULTI_NODE: 6,
        SINGLE_NODE: 6,
    }
    # The candidates single-node never simulated keep the generic reason.
    assert {n: why.split(":")[0] for n, why in decision.unchanged.items()} == {
        "a": "no cheaper replacement",
        "b": "no cheaper replacement",
        "c": "no cheaper replacement",
        "d": "no disruption method applies",
        "e": "no disruption method applies",
        "f": "no disruption method applies",
    }


def test_defaults_are_upstreams_limits() -> None:
    f = facts(six_full_nodes())
    assert (f.multi_node_timeout, f.single_node_timeout) == (60.0, 180.0)
