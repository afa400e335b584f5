"""IAM instance profiles for EC2NodeClasses.

``spec.role``: Karpenter owns a profile for the class.

* Name ``<cluster>_<n>``, where ``n`` is the first 8 bytes (big-endian, as a decimal number) of
  SHA-256 over ``"<region>/<nodeclass uid>"`` (the class name when it has no uid yet). The
  input is stable for the life of the object, so every reconcile finds the same profile, and a
  class deleted and re-created under the same name gets a fresh one (upstream hashes region and
  class with hashstructure; the scheme differs, the properties are the same).
* Path ``/karpenter/<region>/<cluster>/<nodeclass uid>/``.
* Tags: ``spec.tags`` plus ``eks:eks-cluster-name``, ``kubernetes.io/cluster/<cluster>=owned``,
  ``karpenter.sh/managed-by``, ``karpenter.k8s.aws/ec2nodeclass`` and
  ``topology.kubernetes.io/region``. Deletion only touches profiles carrying the class and
  cluster tags, i.e. profiles Karpenter made for this class.
* A profile holds one role: a different role found on it is removed and ``spec.role`` added.
  A profile known to be right is not re-checked for 15 minutes (upstream's existence cache).

``spec.instanceProfile``: used as given; it only has to exist.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Final

from karpenter_py.aio.clock import Clock
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.labels import (
    AWS_LABEL_EC2NODECLASS,
    LABEL_TOPOLOGY_REGION,
    TAG_EKS_CLUSTER_NAME,
)

log = logging.getLogger("karpenter.aws.instanceprofiles")

TAG_MANAGED_BY: Final = "karpenter.sh/managed-by"
CLUSTER_TAG_PREFIX: Final = "kubernetes.io/cluster/"
EXISTENCE_TTL: Final = 15 * 60.0
NOT_FOUND: Final = "NoSuchEntity"


class InstanceProfileNotFoundError(Exception):
    """``spec.instanceProfile`` (or ``spec.role``) names something IAM does not have."""


def profile_name(cluster: str, region: str, nodeclass: EC2NodeClass) -> str:
    key = f"{region}/{nodeclass.metadata.uid or nodeclass.metadata.name}".encode()
    number = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    return f"{cluster}_{number}"


def profile_path(cluster: str, region: str, nodeclass: EC2NodeClass) -> str:
    return f"/karpenter/{region}/{cluster}/{nodeclass.metadata.uid or nodeclass.metadata.name}/"


def profile_tags(cluster: str, region: str, nodeclass: EC2NodeClass) -> dict[str, str]:
    tags = dict(nodeclass.spec.tags or {})
    tags.update(
        {
            TAG_EKS_CLUSTER_NAME: cluster,
            f"{CLUSTER_TAG_PREFIX}{cluster}": "owned",
            TAG_MANAGED_BY: cluster,
            AWS_LABEL_EC2NODECLASS: nodeclass.metadata.name,
            LABEL_TOPOLOGY_REGION: region,
        }
    )
    return tags


def role_name(role: str) -> str:
    """``spec.role`` may be a role name or its ARN (``arn:aws:iam::1:role/path/Name``)."""
    return role.rsplit("/", 1)[-1] if role.startswith("arn:") else role


def _tags_of(profile: dict[str, Any]) -> dict[str, str]:
    return {str(t.get("Key")): str(t.get("Value")) for t in profile.get("Tags") or []}


class InstanceProfiles:
    def __init__(self, clients: AwsClients, cluster: str, clock: Clock) -> None:
        self.clients = clients
        self.cluster = cluster
        self.clock = clock
        self._known: dict[tuple[str, str], float] = {}  # (profile, role) -> good until

    async def _get(self, name: str) -> dict[str, Any] | None:
        try:
            out = await self.clients.iam.get_instance_profile(InstanceProfileName=name)
        except Exception as exc:
            if error_code(exc) == NOT_FOUND:
                return None
            raise
        profile: dict[str, Any] = out.get("InstanceProfile") or {}
        return profile

    async def ensure(self, nodeclass: EC2NodeClass) -> str:
        """The profile instances of ``nodeclass`` launch with, created / repaired as needed.

        Raises :class:`InstanceProfileNotFoundError` for a missing ``spec.instanceProfile`` or
        role; other AWS errors propagate."""
        spec = nodeclass.spec
        if spec.instance_profile is not None:
            if await self._get(spec.instance_profile) is None:
                raise InstanceProfileNotFoundError(
                    f"instance profile {spec.instance_profile!r} not found"
                )
            return spec.instance_profile
        region = self.clients.region
        name = profile_name(self.cluster, region, nodeclass)
        role = role_name(spec.role or "")
        now = self.clock.monotonic()
        if self._known.get((name, role), 0.0) > now:
            return name
        profile = await self._get(name)
        if profile is None:
            profile = await self._create(name, nodeclass)
        await self._attach(name, role, profile)
        self._known[(name, role)] = now + EXISTENCE_TTL
        return name

    async def _create(self, name: str, nodeclass: EC2NodeClass) -> dict[str, Any]:
        region = self.clients.region
        tags = profile_tags(self.cluster, region, nodeclass)
        try:
            out = await self.clients.iam.create_instance_profile(
                InstanceProfileName=name,
                Path=profile_path(self.cluster, region, nodeclass),
                Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())],
            )
        except Exception as exc:
            if error_code(exc) != "EntityAlreadyExists":
                raise
            # Another writer won the race; use theirs.
            existing = await self._get(name)
            if existing is None:
                raise
            return existing
        log.info(
            "created instance profile",
            extra={"instance_profile": name, "ec2nodeclass": nodeclass.metadata.name},
        )
        created: dict[str, Any] = out.get("InstanceProfile") or {}
        return created

    async def _attach(self, name: str, role: str, profile: dict[str, Any]) -> None:
        roles = [str(r.get("RoleName", "")) for r in profile.get("Roles") or []]
        if roles == [role]:
            return
        iam = self.clients.iam
        for old in roles:
            # One role per profile: the class's role replaces whatever is there.
            await iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=old)
        try:
            await iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
        except Exception as exc:
            if error_code(exc) == NOT_FOUND:
                raise InstanceProfileNotFoundError(f"role {role!r} not found") from exc
            raise
        log.info("instance profile role set", extra={"instance_profile": name, "role": role})

    async def delete(self, nodeclass: EC2NodeClass) -> bool:
        """Delete the profile Karpenter made for ``nodeclass`` (its roles removed first).
        False when there was none; a given ``spec.instanceProfile`` is never touched (it has
        another name and lacks our tags). Checked even when the class now names a profile, so
        one made while it used ``role`` is not left behind."""
        name = profile_name(self.cluster, self.clients.region, nodeclass)
        profile = await self._get(name)
        if profile is None:
            return False
        tags = _tags_of(profile)
        ours = (
            tags.get(AWS_LABEL_EC2NODECLASS) == nodeclass.metadata.name
            and tags.get(TAG_EKS_CLUSTER_NAME) == self.cluster
        )
        if not ours:
            log.warning(
                "not deleting an instance profile Karpenter did not tag",
                extra={"instance_profile": name},
            )
            return False
        iam = self.clients.iam
        for r in profile.get("Roles") or []:
            await iam.remove_role_from_instance_profile(
                InstanceProfileName=name, RoleName=str(r.get("RoleName", ""))
            )
        try:
            await iam.delete_instance_profile(InstanceProfileName=name)
        except Exception as exc:
            if error_code(exc) != NOT_FOUND:
                raise
        self._known = {k: v for k, v in self._known.items() if k[0] != name}
        log.info("deleted instance profile", extra={"instance_profile": name})
        return True
