"""In-memory stand-ins for the API ports of lower layers, shared by unit tests."""

from __future__ import annotations

import itertools
from typing import Any


class FakeNodeAPI:
    """``cloudprovider.kwok.NodeAPI`` over dicts: nodes by name, KWOKNodeClasses by name."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.nodeclasses: dict[str, dict[str, Any]] = {}
        self.nodeclass_reads = 0

    async def create_node(self, body: dict[str, Any]) -> dict[str, Any]:
        self.nodes[body["metadata"]["name"]] = body
        return body

    async def get_node(self, name: str) -> dict[str, Any] | None:
        return self.nodes.get(name)

    async def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)

    async def list_nodes(self, label_selector: str) -> list[dict[str, Any]]:
        return list(self.nodes.values())

    async def get_nodeclass(self, name: str) -> dict[str, Any] | None:
        self.nodeclass_reads += 1
        return self.nodeclasses.get(name)


class FakeWriter:
    """``Provisioner``'s NodeClaim writer: assigns names and UIDs as generateName would."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self._ids = itertools.count()

    async def create_nodeclaim(self, body: dict[str, Any]) -> dict[str, Any]:
        n = next(self._ids)
        meta = {
            **body["metadata"],
            "name": f"{body['metadata']['generateName']}{n:05d}",
            "uid": f"uid-{n}",
        }
        obj = {**body, "metadata": meta}
        self.created.append(obj)
        return obj
