"""Security group discovery for an EC2NodeClass: ``securityGroupSelectorTerms`` ->
DescribeSecurityGroups.

Terms are ORed, the fields of a term ANDed; a term selects by ``id`` (``group-id``), ``name``
(the group's name, ``group-name``, not its Name tag) or ``tags`` (``*`` = any value). The result
is unique by id and sorted by id, the order ``status.securityGroups`` keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from karpenter_py.cloudprovider.aws.clients import AwsClients, paginate
from karpenter_py.cloudprovider.aws.subnets import selector_filters
from karpenter_py.model.api.ec2nodeclass import SecurityGroup, SecurityGroupSelectorTerm


def security_group_filters(term: SecurityGroupSelectorTerm) -> list[dict[str, Any]]:
    """The DescribeSecurityGroups filters of one term (its fields ANDed)."""
    return selector_filters({"group-id": term.id, "group-name": term.name}, term.tags)


async def discover_security_groups(
    clients: AwsClients, terms: Sequence[SecurityGroupSelectorTerm]
) -> list[SecurityGroup]:
    """Every security group matching any term, sorted by id. AWS errors propagate."""
    found: dict[str, SecurityGroup] = {}
    for term in terms:
        raw = await paginate(
            clients.ec2,
            "describe_security_groups",
            "SecurityGroups",
            Filters=security_group_filters(term),
        )
        for group in raw:
            gid = str(group.get("GroupId", ""))
            if gid:
                found[gid] = SecurityGroup(id=gid, name=str(group.get("GroupName", "")))
    return [found[k] for k in sorted(found)]
