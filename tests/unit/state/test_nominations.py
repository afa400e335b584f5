"""Nominations: a node or NodeClaim expected to receive pods, and until when."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.model.core import Pod
from karpenter_py.state.cluster import Cluster
from tests.factories import node, nodeclaim, pod

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


def nominating(name: str, to: str, **kw: Any) -> Pod:
    """A pending pod the kube-scheduler nominated to node ``to`` (status.nominatedNodeName)."""
    return replace(pod(name, pending=True, **kw), nominated_node_name=to)


@pytest.mark.parametrize(
    ("pods", "nominated"),
    [
        ([], False),
        ([nominating("p", "n1")], True),
        ([nominating("p", "n2")], False),  # another node
        ([replace(nominating("p", "n1"), node_name="n1")], False),  # bound: no longer pending
        ([nominating("p", "n1", phase="Failed")], False),
        ([replace(nominating("p", "n1"), deletion_timestamp="2026-01-01T00:59:00Z")], False),
        ([nominating("p", "n1"), nominating("q", "n1")], True),
    ],
)
def test_a_pending_pods_nomination_nominates_its_node(pods: list[Pod], nominated: bool) -> None:
    c = Cluster()
    c.upsert_node(node("n1", provider_id="fake://n1"))
    c.upsert_nodeclaim(nodeclaim("nc1", provider_id="fake://n1", node_name="n1"))
    c.state_nodes(NOW)  # a cached view must see the pods that come after it
    for p in pods:
        c.upsert_pod(p)
    (sn,) = c.state_nodes(NOW)
    assert (sn.nominated, sn.nominated_until) == (nominated, None)


def test_a_pods_nomination_ends_with_the_pod_or_its_binding() -> None:
    c = Cluster()
    c.upsert_node(node("n1", provider_id="fake://n1"))
    c.upsert_pod(nominating("p", "n1"))
    c.upsert_pod(nominating("q", "n1"))
    c.delete_pod("default/p")
    assert [sn.nominated for sn in c.state_nodes(NOW)] == [True]
    c.upsert_pod(replace(nominating("q", "n1"), node_name="n1"))
    assert [sn.nominated for sn in c.state_nodes(NOW)] == [False]
