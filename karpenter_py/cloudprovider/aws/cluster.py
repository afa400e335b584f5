"""What the provider knows about the EKS cluster its nodes join.

``CLUSTER_ENDPOINT`` and ``CLUSTER_CA_BUNDLE`` when set; otherwise EKS ``DescribeCluster`` fills
them (and the service CIDR, which AL2023's nodeadm needs for cluster DNS), as upstream's operator
does at start-up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, is_aws_error

log = logging.getLogger("karpenter.aws.cluster")

DEFAULT_SERVICE_CIDR = "10.100.0.0/16"  # EKS's default when DescribeCluster cannot say


class ClusterInfoError(ValueError):
    """The cluster's endpoint could not be found (a settings error: exit 2)."""


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    name: str
    region: str
    endpoint: str
    ca_bundle: str = ""  # base64 PEM, as EKS hands it out
    service_cidr: str = DEFAULT_SERVICE_CIDR
    ip_family: str = "ipv4"


async def resolve_cluster(
    clients: AwsClients, *, name: str, endpoint: str = "", ca_bundle: str = ""
) -> ClusterInfo:
    """Settings first; EKS DescribeCluster for whatever they leave out."""
    try:
        described = (await clients.eks.describe_cluster(name=name)).get("cluster") or {}
    except Exception as exc:
        if not is_aws_error(exc):
            raise
        if not endpoint:
            raise ClusterInfoError(
                f"CLUSTER_ENDPOINT is not set and EKS DescribeCluster for {name!r} failed: "
                f"{error_code(exc) or exc}"
            ) from exc
        log.info("DescribeCluster failed; using the settings", extra={"error": str(exc)})
        described = {}
    network = described.get("kubernetesNetworkConfig") or {}
    return ClusterInfo(
        name=name,
        region=clients.region,
        endpoint=endpoint or str(described.get("endpoint") or ""),
        ca_bundle=ca_bundle or str((described.get("certificateAuthority") or {}).get("data") or ""),
        service_cidr=str(network.get("serviceIpv4Cidr") or DEFAULT_SERVICE_CIDR),
        ip_family=str(network.get("ipFamily") or "ipv4"),
    )
