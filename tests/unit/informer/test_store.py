from typing import Any

import pytest

from karpenter_py.informer import Store, field_indexer
from tests import factories


def pod(
    name: str, node: str = "", rv: str = "1", uid: str | None = None, ns: str = "default"
) -> dict[str, Any]:
    return factories.pod_dict(
        name, namespace=ns, node_name=node, resource_version=rv, uid=uid or f"uid-{name}"
    )


def node(name: str, provider_id: str = "", rv: str = "1") -> dict[str, Any]:
    return factories.node_dict(name, provider_id=provider_id, resource_version=rv)


def test_keys_namespace_and_cluster_scoped():
    store = Store()
    store.upsert(pod("p", ns="ns1"))
    store.upsert(node("n1"))
    assert sorted(store.keys()) == ["n1", "ns1/p"]
    assert store.get_by_name("p", "ns1") is store.get("ns1/p")
    assert store.get_by_name("n1") is not None
    assert "n1" in store
    assert len(store) == 2


def test_index_follows_updates_and_deletes():
    store = Store(indexers={"node": field_indexer("spec", "nodeName")})
    store.upsert(pod("a", "n1"))
    store.upsert(pod("b", "n1"))
    store.upsert(pod("c"))  # unbound: not indexed
    assert [p["metadata"]["name"] for p in store.by_index("node", "n1")] == ["a", "b"]
    store.upsert(pod("b", "n2", rv="2"))  # moved
    assert store.index_keys("node", "n1") == ["default/a"]
    assert store.index_keys("node", "n2") == ["default/b"]
    old = store.delete(pod("a", "n1"))
    assert old is not None
    assert store.by_index("node", "n1") == []
    assert store.index_values("node") == ["n2"]  # empty buckets are dropped
    assert store.delete(pod("zzz")) is None


def test_multi_value_index_and_late_indexer():
    store = Store()
    store.upsert({"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}})
    store.add_indexer(
        "labels", lambda o: [f"{k}={v}" for k, v in o["metadata"].get("labels", {}).items()]
    )
    assert store.index_keys("labels", "a=1") == ["x"]
    assert store.index_keys("labels", "b=2") == ["x"]
    store.upsert({"metadata": {"name": "x", "labels": {"a": "1"}}})
    assert store.index_keys("labels", "b=2") == []


def test_unknown_index_is_a_clear_error():
    with pytest.raises(KeyError, match="missing"):
        Store().by_index("missing", "v")


def test_replace_reports_deleted_upserted_unchanged_and_reindexes():
    store = Store(indexers={"pid": field_indexer("spec", "providerID")})
    store.replace([node("keep", "p1"), node("change", "p2"), node("gone", "p3")], "10")
    diff = store.replace(
        [node("keep", "p1"), node("change", "p2b", rv="2"), node("new", "p4")], "20"
    )
    assert [o["metadata"]["name"] for o in diff.deleted] == ["gone"]
    assert sorted(o["metadata"]["name"] for o in diff.upserted) == ["change", "new"]
    assert diff.unchanged == 1
    assert store.resource_version == "20"
    assert sorted(store.keys()) == ["change", "keep", "new"]
    assert store.index_keys("pid", "p3") == []
    assert store.index_keys("pid", "p2") == []
    assert store.index_keys("pid", "p2b") == ["change"]


def test_replace_treats_recreated_name_as_delete_plus_upsert():
    store = Store()
    store.replace([pod("p", uid="old")], "1")
    diff = store.replace([pod("p", uid="new", rv="5")], "5")
    assert [o["metadata"]["uid"] for o in diff.deleted] == ["old"]
    assert [o["metadata"]["uid"] for o in diff.upserted] == ["new"]


def test_replace_without_resource_versions_compares_content():
    store = Store()
    store.replace([{"metadata": {"name": "a"}, "data": 1}], None)
    diff = store.replace([{"metadata": {"name": "a"}, "data": 1}], None)
    assert diff.upserted == []
    assert diff.unchanged == 1
    diff = store.replace([{"metadata": {"name": "a"}, "data": 2}], None)
    assert len(diff.upserted) == 1
