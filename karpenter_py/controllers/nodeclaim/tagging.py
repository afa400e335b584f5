"""``nodeclaim.tagging``: once a NodeClaim's Node registered, tag its instance with the names
people search the console by (AWS: ``Name=<node name>``, ``karpenter.sh/nodeclaim=<name>``,
``eks:eks-cluster-name``), then mark the NodeClaim ``karpenter.k8s.aws/tagged=true`` so it is
done once. Upstream runs this in the AWS provider; here it talks to any cloud through the
``InstanceTagger`` port, so a tagging failure only delays the tags (retried with backoff).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from karpenter_py.cloudprovider.errors import NodeClaimNotFoundError
from karpenter_py.controllers.runtime import Deps, QueueController, Result, Watch
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.resources import NODECLAIMS
from karpenter_py.model.api.nodeclaim import CONDITION_REGISTERED
from karpenter_py.model.labels import TAG_EKS_CLUSTER_NAME, TAG_NAME, TAG_NODECLAIM

log = logging.getLogger("karpenter.nodeclaim.tagging")

ANNOTATION_TAGGED = "karpenter.k8s.aws/tagged"


class InstanceTagger(Protocol):
    async def tag_instance(self, provider_id: str, tags: dict[str, str]) -> None: ...


class NodeClaimTagging(QueueController):
    name = "nodeclaim.tagging"
    default_workers = 4

    backoff_base = 1.0
    backoff_max = 300.0

    def __init__(
        self, deps: Deps, tagger: InstanceTagger, *, cluster_name: str, workers: int | None = None
    ) -> None:
        super().__init__(deps, workers=workers)
        self.tagger = tagger
        self.cluster_name = cluster_name
        # Tagged by this process; the annotation may not be in the cache yet when the
        # NodeClaim comes back round (our own patch is one more update).
        self._tagged: set[str] = set()

    on_nodeclaim = QueueController.enqueue

    def watches(self) -> Sequence[Watch]:
        return (Watch(NODECLAIMS, upsert=self.on_nodeclaim),)

    async def reconcile(self, key: str) -> Result | None:
        nc = self.deps.cluster.nodeclaims.get(key)
        if nc is None or nc.metadata.deletion_timestamp is not None:
            return None
        if nc.metadata.annotations.get(ANNOTATION_TAGGED) == "true" or key in self._tagged:
            if len(self._tagged) > 10_000:  # annotations landed long ago; forget them
                self._tagged.clear()
            return None
        status = nc.status
        if (
            not status.is_true(CONDITION_REGISTERED)
            or not status.provider_id
            or not status.node_name
        ):
            return None  # the next NodeClaim update (registration) brings it back
        tags = {TAG_NODECLAIM: key, TAG_EKS_CLUSTER_NAME: self.cluster_name}
        tags[TAG_NAME] = status.node_name
        try:
            await self.tagger.tag_instance(status.provider_id, tags)
        except NodeClaimNotFoundError:
            # The instance is gone: garbage collection removes the NodeClaim; retrying the
            # tags would only fail again.
            log.info("instance to tag not found", extra={"nodeclaim": key})
            return None
        try:
            await self.deps.client.patch(
                NODECLAIMS, key, {"metadata": {"annotations": {ANNOTATION_TAGGED: "true"}}}
            )
        except NotFoundError:
            return None
        self._tagged.add(key)
        log.info("tagged instance", extra={"nodeclaim": key, "provider_id": nc.status.provider_id})
        return None
