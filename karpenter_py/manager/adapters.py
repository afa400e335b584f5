"""Ports of lower layers filled with the kube client (the manager is the composition root)."""

from __future__ import annotations

from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.resources import KWOKNODECLASSES, NODECLAIMS, NODES

Raw = dict[str, object]


class KubeNodeAPI:
    """``cloudprovider.kwok.NodeAPI`` over the real API server."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def create_node(self, body: Raw) -> Raw:
        return await self.client.create(NODES, body)

    async def get_node(self, name: str) -> Raw | None:
        try:
            return await self.client.get(NODES, name)
        except NotFoundError:
            return None

    async def delete_node(self, name: str) -> None:
        try:
            await self.client.delete(NODES, name)
        except NotFoundError:
            return

    async def list_nodes(self, label_selector: str) -> list[Raw]:
        return list((await self.client.list(NODES, label_selector=label_selector)).items)

    async def get_nodeclass(self, name: str) -> Raw | None:
        try:
            return await self.client.get(KWOKNODECLASSES, name)
        except NotFoundError:
            return None


class KubeNodeClaimWriter:
    """``Provisioner``'s writer: NodeClaims go straight to the API server."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def create_nodeclaim(self, body: Raw) -> Raw:
        return await self.client.create(NODECLAIMS, body)
