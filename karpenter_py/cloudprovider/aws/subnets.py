"""Subnet discovery for an EC2NodeClass: ``subnetSelectorTerms`` -> DescribeSubnets.

Terms are ORed (one DescribeSubnets call each, results unioned by id); the fields of one term
are ANDed (EC2 ANDs the filters of one call). A tag value of ``*`` means "has this tag key, any
value" (filter ``tag-key``), as upstream's selectors do. The result is ordered the way
``status.subnets`` is: most free IPv4 addresses first, then by id so the order is stable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_py.cloudprovider.aws.clients import AwsClients, paginate
from karpenter_py.model.api.ec2nodeclass import Subnet, SubnetSelectorTerm

ANY_VALUE = "*"


@dataclass(frozen=True, slots=True)
class DiscoveredSubnet:
    id: str
    zone: str
    zone_id: str
    available_ips: int

    def status(self) -> Subnet:
        return Subnet(id=self.id, zone=self.zone, zone_id=self.zone_id)


def tag_filters(tags: dict[str, str]) -> list[dict[str, Any]]:
    """EC2 filters for a selector's tags: ``tag:<k>=<v>``, or ``tag-key=<k>`` for ``*``."""
    out: list[dict[str, Any]] = []
    for key in sorted(tags):
        value = tags[key]
        if value == ANY_VALUE:
            out.append({"Name": "tag-key", "Values": [key]})
        else:
            out.append({"Name": f"tag:{key}", "Values": [value]})
    return out


def selector_filters(
    exact: Mapping[str, str | None], tags: dict[str, str] | None
) -> list[dict[str, Any]]:
    """The Describe* filters of one selector term, ANDed: an exact-match filter for each field
    the term sets (``exact`` maps filter name to the field's value), then its tags."""
    out: list[dict[str, Any]] = [
        {"Name": name, "Values": [value]} for name, value in exact.items() if value is not None
    ]
    out.extend(tag_filters(tags or {}))
    return out


def subnet_filters(term: SubnetSelectorTerm) -> list[dict[str, Any]]:
    """The DescribeSubnets filters of one term (its fields ANDed)."""
    return selector_filters({"subnet-id": term.id}, term.tags)


def _parse(raw: dict[str, Any]) -> DiscoveredSubnet:
    return DiscoveredSubnet(
        id=str(raw.get("SubnetId", "")),
        zone=str(raw.get("AvailabilityZone", "")),
        zone_id=str(raw.get("AvailabilityZoneId", "")),
        available_ips=int(raw.get("AvailableIpAddressCount") or 0),
    )


def order_subnets(subnets: Sequence[DiscoveredSubnet]) -> list[DiscoveredSubnet]:
    """Unique by id; most free IPs first, then id."""
    unique = {s.id: s for s in subnets if s.id}
    return sorted(unique.values(), key=lambda s: (-s.available_ips, s.id))


async def discover_subnets(
    clients: AwsClients, terms: Sequence[SubnetSelectorTerm]
) -> list[DiscoveredSubnet]:
    """Every subnet matching any term, in ``status.subnets`` order. AWS errors propagate."""
    found: list[DiscoveredSubnet] = []
    for term in terms:
        raw = await paginate(
            clients.ec2, "describe_subnets", "Subnets", Filters=subnet_filters(term)
        )
        found.extend(_parse(r) for r in raw)
    return order_subnets(found)
