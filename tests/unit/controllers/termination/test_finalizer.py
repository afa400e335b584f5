"""``remove_finalizer``: ours goes, others' stay, and a write that raced ours is a 409 conflict
(retried quietly by the runtime), never a lost finalizer or a 422 that reads as a bug."""

from __future__ import annotations

import pytest

from karpenter_py.controllers.termination.common import remove_finalizer
from karpenter_py.kube.errors import ConflictError
from karpenter_py.kube.resources import NODES
from karpenter_py.model.labels import FINALIZER_TERMINATION
from tests.factories import node_dict
from tests.unit.fakes import FakeKube

OTHER = "example.com/keep"


def stored_node(finalizers: list[str]) -> FakeKube:
    body = node_dict("n1", resource_version="7")
    body["metadata"]["finalizers"] = finalizers
    return FakeKube((NODES, body))


@pytest.mark.parametrize(
    ("finalizers", "left"),
    [
        ([FINALIZER_TERMINATION, OTHER], [OTHER]),
        ([OTHER, FINALIZER_TERMINATION], [OTHER]),
        ([FINALIZER_TERMINATION], []),
    ],
)
async def test_only_our_finalizer_goes(finalizers: list[str], left: list[str]) -> None:
    kube = stored_node(finalizers)
    removed = await remove_finalizer(
        kube,
        NODES,
        "n1",
        finalizers=finalizers,
        resource_version="7",
        finalizer=FINALIZER_TERMINATION,
    )
    assert removed is True
    assert kube.stored(NODES, "n1")["metadata"]["finalizers"] == left


async def test_a_write_that_raced_ours_is_a_conflict_and_loses_nothing() -> None:
    kube = stored_node([FINALIZER_TERMINATION, OTHER])
    with pytest.raises(ConflictError):
        await remove_finalizer(
            kube,
            NODES,
            "n1",
            finalizers=[FINALIZER_TERMINATION],  # read before OTHER was added
            resource_version="6",
            finalizer=FINALIZER_TERMINATION,
        )
    assert kube.stored(NODES, "n1")["metadata"]["finalizers"] == [FINALIZER_TERMINATION, OTHER]


async def test_an_object_already_gone_is_reported() -> None:
    kube = FakeKube()
    removed = await remove_finalizer(
        kube,
        NODES,
        "n1",
        finalizers=[FINALIZER_TERMINATION],
        resource_version="7",
        finalizer=FINALIZER_TERMINATION,
    )
    assert removed is False
