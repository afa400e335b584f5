"""The kwok provider's drift: the KWOKNodeClass spec hash stamped at launch vs the class now."""

from __future__ import annotations

from typing import Any

from karpenter_py.cloudprovider.kwok import KwokCloudProvider, nodeclass_hash
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.catalog import kwok_catalog
from tests import factories
from tests.unit.fakes import FakeNodeAPI

HASH = "karpenter.kwok.sh/kwoknodeclass-hash"
VERSION = "karpenter.kwok.sh/kwoknodeclass-hash-version"


def nodeclass(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"},
        "spec": spec,
    }


def claim(name: str = "nc-1", kind: str = "KWOKNodeClass") -> NodeClaim:
    return factories.nodeclaim(
        name,
        launched=False,
        node_class_ref={"group": "karpenter.kwok.sh", "kind": kind, "name": "default"},
        requirements=[
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["c-4x-amd64-linux"],
            }
        ],
        resources={"cpu": "1"},
    )


class Ticker:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def provider(api: FakeNodeAPI, ticker: Ticker) -> KwokCloudProvider:
    async def sleep(seconds: float) -> None:
        return None

    return KwokCloudProvider(api, kwok_catalog(), sleep=sleep, monotonic=ticker)


def test_the_hash_follows_the_spec_and_nothing_else() -> None:
    a = KWOKNodeClass.model_validate(nodeclass({"maxPods": 50}))
    b = KWOKNodeClass.model_validate({**nodeclass({"maxPods": 50}), "metadata": {"name": "x"}})
    c = KWOKNodeClass.model_validate(nodeclass({"maxPods": 60}))
    assert nodeclass_hash(a) == nodeclass_hash(b)
    assert nodeclass_hash(a) != nodeclass_hash(c)
    assert nodeclass_hash(a).isdigit()


async def test_launch_stamps_the_hash_and_a_spec_edit_is_drift() -> None:
    api, ticker = FakeNodeAPI(), Ticker()
    api.nodeclasses["default"] = nodeclass({"maxPods": 50})
    cloud = provider(api, ticker)
    launched = await cloud.create(claim())
    stamped = nodeclass_hash(KWOKNodeClass.model_validate(api.nodeclasses["default"]))
    assert launched.metadata.annotations[HASH] == stamped
    assert launched.metadata.annotations[VERSION] == "v1"
    node_annotations = api.nodes["nc-1"]["metadata"]["annotations"]
    assert node_annotations[HASH] == stamped
    assert node_annotations["kwok.x-k8s.io/node"] == "fake"
    assert await cloud.is_drifted(launched) == ""

    api.nodeclasses["default"] = nodeclass({"maxPods": 60})
    assert await cloud.is_drifted(launched) == ""  # within the 30 s class cache
    ticker.now = 30.0
    assert await cloud.is_drifted(launched) == "NodeClassDrifted"
    api.nodeclasses["default"] = nodeclass({"maxPods": 50})  # edited back
    ticker.now = 60.0
    assert await cloud.is_drifted(launched) == ""


async def test_a_retried_launch_returns_the_stamp_of_the_existing_node() -> None:
    api, ticker = FakeNodeAPI(), Ticker()
    api.nodeclasses["default"] = nodeclass({"maxPods": 50})
    cloud = provider(api, ticker)
    first = await cloud.create(claim())
    api.nodeclasses["default"] = nodeclass({"maxPods": 60})
    ticker.now = 60.0
    again = await cloud.create(claim())  # the instance exists: nothing relaunched or restamped
    assert again.metadata.annotations[HASH] == first.metadata.annotations[HASH]
    assert await cloud.is_drifted(again) == "NodeClassDrifted"


async def test_no_stamp_no_class_or_another_hash_version_is_not_drift() -> None:
    api, ticker = FakeNodeAPI(), Ticker()
    cloud = provider(api, ticker)
    unstamped = await cloud.create(claim("a"))  # no KWOKNodeClass at launch: nothing to stamp
    assert HASH not in unstamped.metadata.annotations
    api.nodeclasses["default"] = nodeclass({"maxPods": 60})
    ticker.now = 30.0
    assert await cloud.is_drifted(unstamped) == ""

    old = claim("b")
    old.metadata.annotations = {HASH: "1", VERSION: "v0"}
    assert await cloud.is_drifted(old) == ""
    old.metadata.annotations = {HASH: "1", VERSION: "v1"}
    assert await cloud.is_drifted(old) == "NodeClassDrifted"
    del api.nodeclasses["default"]
    ticker.now = 60.0
    assert await cloud.is_drifted(old) == ""  # the class is gone: nothing to compare with


async def test_drift_checks_share_the_class_cache_with_launches() -> None:
    api, ticker = FakeNodeAPI(), Ticker()
    api.nodeclasses["default"] = nodeclass({})
    cloud = provider(api, ticker)
    launched = [await cloud.create(claim(f"nc-{i}")) for i in range(3)]
    for nc in launched:
        assert await cloud.is_drifted(nc) == ""
    assert api.nodeclass_reads == 1


async def test_other_nodeclass_kinds_are_never_drifted() -> None:
    api, ticker = FakeNodeAPI(), Ticker()
    api.nodeclasses["default"] = nodeclass({"maxPods": 60})
    cloud = provider(api, ticker)
    nc = claim(kind="EC2NodeClass")
    nc.metadata.annotations = {HASH: "1", VERSION: "v1"}
    assert await cloud.is_drifted(nc) == ""
    assert api.nodeclass_reads == 0
