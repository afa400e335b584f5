"""Nominations: a node or NodeClaim expected to receive pods, and until when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from karpenter_py.state.cluster import Cluster
from tests.factories import node, nodeclaim

NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("nominations", "until"),
    [
        ({}, None),
        ({"n1": later(20)}, later(20)),
        ({"nc1": later(20)}, later(20)),
        # Both the Node and its NodeClaim: the later one holds.
        ({"n1": later(20), "nc1": later(35)}, later(35)),
        ({"n1": later(35), "nc1": later(20)}, later(35)),
        ({"n1": later(0)}, None),  # runs out at the moment itself
        ({"n1": later(-5), "nc1": later(20)}, later(20)),
    ],
)
def test_a_state_node_carries_when_its_nomination_runs_out(
    nominations: dict[str, datetime], until: datetime | None
) -> None:
    c = Cluster()
    c.upsert_node(node("n1", provider_id="fake://n1"))
    c.upsert_nodeclaim(nodeclaim("nc1", provider_id="fake://n1", node_name="n1"))
    for name, when in nominations.items():
        c.nominate(name, when)
    (sn,) = c.state_nodes(NOW)
    assert (sn.nominated, sn.nominated_until) == (until is not None, until)
