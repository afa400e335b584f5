"""Resource descriptors: enough to build a REST path, nothing discovered at run time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``plural.group``, the name used in RBAC and error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The REST path; a namespaced resource without namespace addresses all namespaces."""
        if not self.namespaced and namespace:
            raise ValueError(f"{self.qualified} is cluster-scoped; got namespace {namespace!r}")
        if subresource and not name:
            raise ValueError("a subresource needs an object name")
        parts = ["/api", self.version] if not self.group else ["/apis", self.group, self.version]
        if namespace:
            parts += ["namespaces", quote(namespace, safe="")]
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


PODS: Final = Resource("", "v1", "pods", True, "Pod")
NODES: Final = Resource("", "v1", "nodes", False, "Node")
NAMESPACES: Final = Resource("", "v1", "namespaces", False, "Namespace")
EVENTS: Final = Resource("", "v1", "events", True, "Event")
CONFIGMAPS: Final = Resource("", "v1", "configmaps", True, "ConfigMap")
PERSISTENTVOLUMECLAIMS: Final = Resource(
    "", "v1", "persistentvolumeclaims", True, "PersistentVolumeClaim"
)
PERSISTENTVOLUMES: Final = Resource("", "v1", "persistentvolumes", False, "PersistentVolume")
STORAGECLASSES: Final = Resource("storage.k8s.io", "v1", "storageclasses", False, "StorageClass")
DAEMONSETS: Final = Resource("apps", "v1", "daemonsets", True, "DaemonSet")
DEPLOYMENTS: Final = Resource("apps", "v1", "deployments", True, "Deployment")
PODDISRUPTIONBUDGETS: Final = Resource(
    "policy", "v1", "poddisruptionbudgets", True, "PodDisruptionBudget"
)
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")
NODEPOOLS: Final = Resource("karpenter.sh", "v1", "nodepools", False, "NodePool")
NODECLAIMS: Final = Resource("karpenter.sh", "v1", "nodeclaims", False, "NodeClaim")
NODEOVERLAYS: Final = Resource("karpenter.sh", "v1alpha1", "nodeoverlays", False, "NodeOverlay")
EC2NODECLASSES: Final = Resource("karpenter.k8s.aws", "v1", "ec2nodeclasses", False, "EC2NodeClass")
KWOKNODECLASSES: Final = Resource(
    "karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", False, "KWOKNodeClass"
)
VOLUMEATTACHMENTS: Final = Resource(
    "storage.k8s.io", "v1", "volumeattachments", False, "VolumeAttachment"
)
