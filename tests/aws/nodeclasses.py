"""EC2NodeClass objects for the AWS tests (upstream getting-started shape by default)."""

from __future__ import annotations

from typing import Any

from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from tests.motofixture import CLUSTER, DISCOVERY_TAG


def ec2nodeclass_doc(
    name: str = "default",
    *,
    role: str | None = "KarpenterNodeRole-test",
    instance_profile: str | None = None,
    alias: str = "al2023@latest",
    discovery: str = CLUSTER,
    tags: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """The manifest a user applies (no uid, no status)."""
    body: dict[str, Any] = {
        "subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: discovery}}],
        "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: discovery}}],
        "amiSelectorTerms": [{"alias": alias}],
        **spec,
    }
    if role is not None:
        body["role"] = role
    if instance_profile is not None:
        body["instanceProfile"] = instance_profile
    if tags:
        body["tags"] = tags
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": body,
    }


def ec2nodeclass(
    name: str = "default",
    *,
    uid: str = "6f1c1a52-0000-4000-8000-000000000001",
    **kw: Any,
) -> EC2NodeClass:
    doc = ec2nodeclass_doc(name, **kw)
    doc["metadata"]["uid"] = uid
    return EC2NodeClass.model_validate(doc)
