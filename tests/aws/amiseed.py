"""Seed moto (running in this process) with what it cannot be told over the wire: the public
SSM parameters of the EKS-optimized AMIs (PutParameter under ``/aws/`` is refused) and images
with chosen names, owners, tags, creation dates and deprecation times (RegisterImage takes
none of those, and moto does not model DeprecationTime).

Only the seeding reaches into moto's backends; the product reads all of it over HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import Ami
from moto.ec2.utils import random_ami_id
from moto.ssm.models import Parameter, ssm_backends

from tests.motofixture import REGION

ACCOUNT = "123456789012"
AMAZON = "amazon"  # owner alias moto matches Owners=["amazon"] against
EKS_OWNER = "602401143452"


def seed_ssm_parameter(name: str, value: str, *, region: str = REGION) -> None:
    """Set an SSM parameter, even one under the reserved ``/aws/`` prefix."""
    backend = ssm_backends[ACCOUNT][region]
    versions = backend._parameters[name]
    versions.append(
        Parameter(  # type: ignore[abstract]
            account_id=ACCOUNT,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.now(UTC),
            version=len(versions) + 1,
            data_type="aws:ec2:image",
        )
    )


def al2023_parameter(k8s: str, arch: str, variant: str = "standard", version: str = "") -> str:
    leaf = f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{version}" if version else "recommended"
    return (
        f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/{leaf}/image_id"
    )


def seed_al2023(
    k8s: str, images: Mapping[str, str], *, variant: str = "standard", version: str = ""
) -> None:
    """AL2023 parameters: ``images`` maps EC2 architecture (x86_64, arm64) -> image id."""
    for arch, image_id in images.items():
        seed_ssm_parameter(al2023_parameter(k8s, arch, variant, version), image_id)


def seed_bottlerocket(
    k8s: str, images: Mapping[str, str], *, nvidia: bool = False, version: str = "latest"
) -> None:
    suffix = "-nvidia" if nvidia else ""
    for arch, image_id in images.items():
        path = f"/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/{version}/image_id"
        seed_ssm_parameter(path, image_id)


def seed_al2(k8s: str, images: Mapping[str, str]) -> None:
    """AL2 ``recommended`` parameters: keys are the directory suffix ("" x86, "-arm64", "-gpu")."""
    for suffix, image_id in images.items():
        path = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}/recommended/image_id"
        seed_ssm_parameter(path, image_id)


def seed_image(
    name: str,
    *,
    arch: str = "x86_64",
    owner_id: str = EKS_OWNER,
    owner_alias: str | None = AMAZON,
    created: datetime = datetime(2025, 1, 1, tzinfo=UTC),
    deprecated_at: datetime | None = None,
    tags: Mapping[str, str] | None = None,
    image_id: str | None = None,
    region: str = REGION,
) -> str:
    """Register an image in moto's EC2 backend; returns its id."""
    backend = ec2_backends[ACCOUNT][region]
    ami = Ami(
        backend,
        image_id or random_ami_id(),
        name=name,
        owner_id=owner_id,
        owner_alias=owner_alias,
        architecture=arch,
        virtualization_type="hvm",
        creation_date=created,
        region_name=f"{region}a",
        tags=dict(tags or {}),
    )
    if deprecated_at is not None:
        # moto's DescribeImages serializer emits any attribute named after a response field.
        ami.deprecation_time = deprecated_at.strftime("%Y-%m-%dT%H:%M:%S.000Z")  # type: ignore[attr-defined]
    backend.amis[ami.id] = ami
    return str(ami.id)
