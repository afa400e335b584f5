"""AMI discovery against moto: aliases through seeded SSM parameters (cached 24 h), selector
terms through DescribeImages, deprecated vs newest per architecture."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.cloudprovider.aws.amis import (
    AliasParameter,
    AMIDiscovery,
    AMIResolutionError,
    alias_parameters,
    image_query,
)
from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.model.api.ec2nodeclass import AMISelectorTerm
from tests.aws.amiseed import (
    EKS_OWNER,
    seed_al2,
    seed_al2023,
    seed_bottlerocket,
    seed_image,
)

K8S = "1.31"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
ARCH = "kubernetes.io/arch"
GPU = "karpenter.k8s.aws/instance-gpu-count"
ACCEL = "karpenter.k8s.aws/instance-accelerator-count"
# Wire form: the models leave out defaults (deprecated False, empty values).
STANDARD = [
    {"key": ARCH, "operator": "In", "values": ["amd64"]},
    {"key": ACCEL, "operator": "DoesNotExist"},
    {"key": GPU, "operator": "DoesNotExist"},
]


def term(**kw: object) -> AMISelectorTerm:
    return AMISelectorTerm.model_validate(kw)


async def version() -> str:
    return K8S


def dump(amis: list[Any]) -> list[dict[str, Any]]:
    return [a.model_dump(mode="json", by_alias=True) for a in amis]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def discovery(aws: AwsClients, clock: FakeClock) -> AMIDiscovery:
    return AMIDiscovery(aws, clock)


async def test_al2023_latest_per_arch_and_ssm_cache(
    discovery: AMIDiscovery, clock: FakeClock
) -> None:
    amd = seed_image("al2023-amd64", created=datetime(2025, 3, 1, tzinfo=UTC))
    arm = seed_image("al2023-arm64", arch="arm64", created=datetime(2025, 2, 1, tzinfo=UTC))
    seed_al2023(K8S, {"x86_64": amd, "arm64": arm})
    amis = await discovery.discover([term(alias="al2023@latest")], version)
    assert dump(amis) == [
        {"id": amd, "name": "al2023-amd64", "requirements": STANDARD},
        {
            "id": arm,
            "name": "al2023-arm64",
            "requirements": [
                {"key": ARCH, "operator": "In", "values": ["arm64"]},
                {"key": ACCEL, "operator": "DoesNotExist"},
                {"key": GPU, "operator": "DoesNotExist"},
            ],
        },
    ]
    # 5 parameters (x86 standard/nvidia/neuron, arm standard/nvidia): the 2 found are cached.
    assert discovery.ssm.reads == 5
    await discovery.discover([term(alias="al2023@latest")], version)
    assert discovery.ssm.reads == 8  # only the 3 missing ones are asked again
    clock.step(24 * 3600 + 1)
    await discovery.discover([term(alias="al2023@latest")], version)
    assert discovery.ssm.reads == 13  # the cache expired after 24 h


async def test_concurrent_misses_of_one_parameter_share_one_read(
    discovery: AMIDiscovery,
) -> None:
    amd = seed_image("al2023-amd64")
    seed_al2023(K8S, {"x86_64": amd})
    name = f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/x86_64/standard/recommended/image_id"
    async with asyncio.TaskGroup() as tg:
        reads = [tg.create_task(discovery.ssm.get(name, mutable=True)) for _ in range(3)]
    assert [r.result() for r in reads] == [amd] * 3
    assert discovery.ssm.reads == 1


async def test_al2023_nvidia_variant(discovery: AMIDiscovery) -> None:
    std = seed_image("std", created=datetime(2025, 3, 1, tzinfo=UTC))
    gpu = seed_image("gpu", created=datetime(2025, 2, 1, tzinfo=UTC))
    seed_al2023(K8S, {"x86_64": std})
    seed_al2023(K8S, {"x86_64": gpu}, variant="nvidia")
    amis = await discovery.discover([term(alias="al2023@latest")], version)
    assert dump(amis) == [
        {"id": std, "name": "std", "requirements": STANDARD},
        {
            "id": gpu,
            "name": "gpu",
            "requirements": [
                {"key": ARCH, "operator": "In", "values": ["amd64"]},
                {"key": GPU, "operator": "Exists"},
            ],
        },
    ]


async def test_pinned_al2023_and_bottlerocket_versions(discovery: AMIDiscovery) -> None:
    pinned = seed_image("al2023-pinned")
    seed_al2023(K8S, {"x86_64": pinned}, version="v20240807")
    amis = await discovery.discover([term(alias="al2023@v20240807")], version)
    assert [a.id for a in amis] == [pinned]
    assert await discovery.discover([term(alias="al2023@v20990101")], version) == []

    br = seed_image("bottlerocket-arm", arch="arm64")
    seed_bottlerocket(K8S, {"arm64": br}, version="1.20.3")
    amis = await discovery.discover([term(alias="bottlerocket@v1.20.3")], version)
    assert [(a.id, a.requirements[0].values) for a in amis] == [(br, ["arm64"])]


async def test_al2_allowed_before_133_refused_after(discovery: AMIDiscovery) -> None:
    al2 = seed_image("al2")
    seed_al2("1.32", {"": al2})

    async def v132() -> str:
        return "1.32"

    async def v133() -> str:
        return "1.33"

    assert [a.id for a in await discovery.discover([term(alias="al2@latest")], v132)] == [al2]
    with pytest.raises(AMIResolutionError, match=r"not published for Kubernetes 1\.33"):
        await discovery.discover([term(alias="al2@latest")], v133)


async def test_non_deprecated_beats_newer_deprecated_then_newest(discovery: AMIDiscovery) -> None:
    tags = {"team": "nodes"}
    old = seed_image("old", tags=tags, created=datetime(2024, 1, 1, tzinfo=UTC))
    seed_image(
        "newer-deprecated",
        tags=tags,
        created=datetime(2025, 1, 1, tzinfo=UTC),
        deprecated_at=NOW - timedelta(days=1),
    )
    arm = seed_image("arm", arch="arm64", tags=tags, created=datetime(2023, 1, 1, tzinfo=UTC))
    not_yet = seed_image(
        "deprecation-in-future",
        arch="arm64",
        tags=tags,
        created=datetime(2023, 6, 1, tzinfo=UTC),
        deprecated_at=NOW + timedelta(days=1),
    )
    amis = await discovery.discover([term(tags={"team": "nodes"})], version)
    assert [(a.id, a.deprecated) for a in amis] == [(old, False), (not_yet, False)]
    assert arm not in [a.id for a in amis]

    newest = seed_image("newest", tags=tags, created=datetime(2025, 6, 1, tzinfo=UTC))
    amis = await discovery.discover([term(tags={"team": "*"})], version)
    assert [a.id for a in amis] == [newest, not_yet]


async def test_only_deprecated_images_left(discovery: AMIDiscovery) -> None:
    dep = seed_image("dep", tags={"x": "y"}, deprecated_at=NOW - timedelta(days=3))
    amis = await discovery.discover([term(tags={"x": "y"})], version)
    assert [(a.id, a.deprecated) for a in amis] == [(dep, True)]


async def test_name_owner_and_id_terms(discovery: AMIDiscovery) -> None:
    mine = seed_image("custom-1", owner_id="123456789012", owner_alias=None)
    theirs = seed_image("custom-1", owner_id="111122223333", owner_alias=None)
    # Default owners are self and amazon: another account's image needs its owner named.
    assert [a.id for a in await discovery.discover([term(name="custom-1")], version)] == [mine]
    got = await discovery.discover([term(name="custom-1", owner="111122223333")], version)
    assert [a.id for a in got] == [theirs]
    assert [a.id for a in await discovery.discover([term(id=theirs)], version)] == [theirs]


async def test_ssm_parameter_term(aws: AwsClients, discovery: AMIDiscovery) -> None:
    image = seed_image("from-ssm")
    await aws.ssm.put_parameter(Name="/team/ami", Value=image, Type="String")
    amis = await discovery.discover([term(ssmParameter="/team/ami")], version)
    assert [a.id for a in amis] == [image]
    assert await discovery.discover([term(ssmParameter="/team/missing")], version) == []


@pytest.mark.parametrize(
    ("alias", "k8s", "expected"),
    [
        (
            "al2023@latest",
            "1.31",
            [
                (
                    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id",
                    "x86_64",
                    "standard",
                ),
                (
                    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
                    "x86_64",
                    "nvidia",
                ),
                (
                    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/neuron/recommended/image_id",
                    "x86_64",
                    "neuron",
                ),
                (
                    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id",
                    "arm64",
                    "standard",
                ),
                (
                    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/nvidia/recommended/image_id",
                    "arm64",
                    "nvidia",
                ),
            ],
        ),
        (
            "bottlerocket@latest",
            "1.30",
            [
                (
                    "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/latest/image_id",
                    "x86_64",
                    "standard",
                ),
                (
                    "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/x86_64/latest/image_id",
                    "x86_64",
                    "nvidia",
                ),
                (
                    "/aws/service/bottlerocket/aws-k8s-1.30/arm64/latest/image_id",
                    "arm64",
                    "standard",
                ),
                (
                    "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/arm64/latest/image_id",
                    "arm64",
                    "nvidia",
                ),
            ],
        ),
        (
            "al2@v20240807",
            "1.30",
            [
                (
                    "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/amazon-eks-node-1.30-v20240807/image_id",
                    "x86_64",
                    "standard",
                ),
                (
                    "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20240807/image_id",
                    "arm64",
                    "standard",
                ),
                (
                    "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240807/image_id",
                    "x86_64",
                    "nvidia",
                ),
                (
                    "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240807/image_id",
                    "x86_64",
                    "neuron",
                ),
            ],
        ),
        (
            "windows2022@latest",
            "1.31",
            [
                (
                    "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id",
                    "x86_64",
                    "windows",
                ),
            ],
        ),
    ],
)
def test_alias_parameters(alias: str, k8s: str, expected: list[tuple[str, str, str]]) -> None:
    assert alias_parameters(alias, k8s) == [AliasParameter(*e) for e in expected]


def test_image_query_default_owners() -> None:
    assert image_query(term(tags={"a": "b"})) == {
        "Filters": [{"Name": "tag:a", "Values": ["b"]}],
        "IncludeDeprecated": True,
        "Owners": ["self", "amazon"],
    }
    assert image_query(term(id="ami-1")) == {
        "Filters": [{"Name": "image-id", "Values": ["ami-1"]}],
        "IncludeDeprecated": True,
    }
    assert image_query(term(name="n", owner=EKS_OWNER))["Owners"] == [EKS_OWNER]


async def test_latest_parameters_reread_after_30_minutes(
    discovery: AMIDiscovery, clock: FakeClock
) -> None:
    first, second = seed_image("first"), seed_image("second")
    seed_al2023(K8S, {"x86_64": first})
    seed_al2023(K8S, {"x86_64": first}, version="v20250101")
    assert [a.id for a in await discovery.discover([term(alias="al2023@latest")], version)] == [
        first
    ]
    seed_al2023(K8S, {"x86_64": second})  # a new release moves the "recommended" parameter
    clock.step(29 * 60)
    assert [a.id for a in await discovery.discover([term(alias="al2023@latest")], version)] == [
        first
    ]
    pinned = await discovery.discover([term(alias="al2023@v20250101")], version)
    reads = discovery.ssm.reads
    clock.step(60)
    assert [a.id for a in await discovery.discover([term(alias="al2023@latest")], version)] == [
        second
    ]
    # The pinned version's parameter is still cached: only its misses are asked again.
    assert await discovery.discover([term(alias="al2023@v20250101")], version) == pinned
    assert discovery.ssm.reads == reads + 5 + 4
