"""AMI discovery for an EC2NodeClass: aliases through SSM public parameters, other selector
terms through DescribeImages.

* ``alias: <family>@<version>`` names the EKS-optimized images of a family. Each (architecture,
  variant) the family publishes has an SSM parameter holding the image id; parameters that do
  not exist (a variant not built for an architecture) are skipped. Variants carry instance-type
  requirements: ``standard`` images serve types with neither GPUs nor accelerators, ``nvidia``
  ones types with GPUs, ``neuron`` ones types with accelerators. AL2 is refused on Kubernetes
  1.33 and later (no AL2 images are published for them).
* ``id`` / ``name`` / ``owner`` / ``tags`` terms are one DescribeImages call each; without an
  id or owner, only images owned by this account or by Amazon (``self``, ``amazon``) count.
* ``ssmParameter`` terms read the parameter and select the image it names.

Every image also gets a ``kubernetes.io/arch`` requirement from its architecture (x86_64 ->
amd64, arm64 -> arm64; other architectures are ignored). For each distinct requirement set one
image wins: a non-deprecated one over a deprecated one, then the newest ``CreationDate``, then
the lowest id. The result is ordered the same way (``status.amis``).

SSM reads go through :class:`SSMCache` (24 h, as upstream): a pinned version's parameter never
changes; ``latest`` parameters move when an image is published, so :class:`AMIDiscovery` drops
them every 30 minutes (upstream runs an invalidation controller on that period; here the next
discovery after the period does it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from karpenter_py.aio.clock import Clock
from karpenter_py.aio.singleflight import SingleFlight
from karpenter_py.cloudprovider.aws.clients import AwsClients, error_code, paginate
from karpenter_py.cloudprovider.aws.subnets import selector_filters
from karpenter_py.model.api.common import NodeSelectorRequirement
from karpenter_py.model.api.ec2nodeclass import AMI, AMISelectorTerm
from karpenter_py.model.labels import (
    AWS_LABEL_INSTANCE_ACCELERATOR_COUNT,
    AWS_LABEL_INSTANCE_GPU_COUNT,
    LABEL_ARCH,
    LABEL_OS,
)

log = logging.getLogger("karpenter.aws.amis")

SSM_CACHE_TTL: Final = 24 * 3600.0
MUTABLE_INVALIDATION: Final = 30 * 60.0  # upstream's SSM invalidation period
LATEST: Final = "latest"
DEFAULT_OWNERS: Final = ("self", "amazon")
# EC2 architecture -> kubernetes.io/arch
ARCHITECTURES: Final = {"x86_64": "amd64", "arm64": "arm64"}
AL2_LAST_MINOR: Final = 32  # AL2 images exist for Kubernetes <= 1.32

VARIANT_STANDARD: Final = "standard"
VARIANT_NVIDIA: Final = "nvidia"
VARIANT_NEURON: Final = "neuron"
VARIANT_WINDOWS: Final = "windows"


class AMIResolutionError(Exception):
    """The selector cannot be resolved as written (an unsupported alias, a bad version)."""


class KubernetesVersionError(Exception):
    """The cluster's Kubernetes version, which aliases need, could not be read."""


# ----------------------------------------------------------------------------- SSM


class SSMCache:
    """SSM GetParameter with a TTL cache of found values (misses and errors are not cached)."""

    def __init__(self, clients: AwsClients, clock: Clock, *, ttl: float = SSM_CACHE_TTL) -> None:
        self.clients = clients
        self.clock = clock
        self.ttl = ttl
        self._values: dict[str, tuple[str, float, bool]] = {}  # name -> value, expiry, mutable
        self._reads = SingleFlight[str, str | None]()  # concurrent misses share one read
        self.reads = 0  # GetParameter calls made (tests check the cache with it)

    async def get(self, name: str, *, mutable: bool = False) -> str | None:
        """The parameter's value, or None when it does not exist. Other AWS errors propagate."""
        hit = self._values.get(name)
        if hit is not None and hit[1] > self.clock.monotonic():
            return hit[0]
        return await self._reads.do(name, lambda: self._read(name, mutable))

    async def _read(self, name: str, mutable: bool) -> str | None:
        now = self.clock.monotonic()
        self.reads += 1
        try:
            out = await self.clients.ssm.get_parameter(Name=name)
        except Exception as exc:
            if error_code(exc) == "ParameterNotFound":
                return None
            raise
        value = str((out.get("Parameter") or {}).get("Value") or "")
        if not value:
            return None
        self._values[name] = (value, now + self.ttl, mutable)
        return value

    def invalidate_mutable(self) -> int:
        """Forget every ``latest`` parameter (they move when an image is published)."""
        stale = [k for k, (_, _, mutable) in self._values.items() if mutable]
        for key in stale:
            del self._values[key]
        return len(stale)


# ----------------------------------------------------------------------------- aliases (pure)


def _req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=operator, values=list(values))


def variant_requirements(variant: str) -> list[NodeSelectorRequirement]:
    """What instance types an image variant serves, beyond its architecture."""
    if variant == VARIANT_NVIDIA:
        return [_req(AWS_LABEL_INSTANCE_GPU_COUNT, "Exists")]
    if variant == VARIANT_NEURON:
        return [_req(AWS_LABEL_INSTANCE_ACCELERATOR_COUNT, "Exists")]
    if variant == VARIANT_WINDOWS:
        return [_req(LABEL_OS, "In", "windows")]
    return [
        _req(AWS_LABEL_INSTANCE_ACCELERATOR_COUNT, "DoesNotExist"),
        _req(AWS_LABEL_INSTANCE_GPU_COUNT, "DoesNotExist"),
    ]


@dataclass(frozen=True, slots=True)
class AliasParameter:
    """One SSM parameter an alias reads: the image for ``arch`` (EC2 name) and ``variant``."""

    path: str
    arch: str
    variant: str


def minor_version(kubernetes_version: str) -> int:
    """The minor number of "1.31" (also "v1.31.2", "1.31+")."""
    parts = kubernetes_version.lstrip("v").split(".")
    try:
        return int("".join(ch for ch in parts[1] if ch.isdigit()))
    except (IndexError, ValueError) as exc:
        raise AMIResolutionError(f"cannot read Kubernetes version {kubernetes_version!r}") from exc


def _al2023(k8s: str, version: str) -> list[AliasParameter]:
    out: list[AliasParameter] = []
    layout: dict[str, tuple[str, ...]] = {
        "x86_64": (VARIANT_STANDARD, VARIANT_NVIDIA, VARIANT_NEURON),
        "arm64": (VARIANT_STANDARD, VARIANT_NVIDIA),
    }
    for arch, variants in layout.items():
        for variant in variants:
            base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}"
            leaf = (
                "recommended"
                if version == LATEST
                else f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{version}"
            )
            out.append(AliasParameter(f"{base}/{leaf}/image_id", arch, variant))
    return out


def _bottlerocket(k8s: str, version: str) -> list[AliasParameter]:
    # Bottlerocket's parameters spell versions without the leading "v" (1.20.3).
    release = LATEST if version == LATEST else version.removeprefix("v")
    out = []
    for arch in ("x86_64", "arm64"):
        for variant, suffix in ((VARIANT_STANDARD, ""), (VARIANT_NVIDIA, "-nvidia")):
            path = f"/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/{release}/image_id"
            out.append(AliasParameter(path, arch, variant))
    return out


def _al2(k8s: str, version: str) -> list[AliasParameter]:
    if minor_version(k8s) > AL2_LAST_MINOR:
        raise AMIResolutionError(
            f"AL2 AMIs are not published for Kubernetes {k8s} (the last is 1.{AL2_LAST_MINOR}); "
            "use the al2023 or bottlerocket alias"
        )
    # (directory, versioned name prefix, arch, variants the image serves)
    layout = (
        ("amazon-linux-2", "amazon-eks-node", "x86_64", (VARIANT_STANDARD,)),
        ("amazon-linux-2-arm64", "amazon-eks-arm64-node", "arm64", (VARIANT_STANDARD,)),
        ("amazon-linux-2-gpu", "amazon-eks-gpu-node", "x86_64", (VARIANT_NVIDIA, VARIANT_NEURON)),
    )
    out: list[AliasParameter] = []
    for directory, prefix, arch, variants in layout:
        leaf = "recommended" if version == LATEST else f"{prefix}-{k8s}-{version}"
        path = f"/aws/service/eks/optimized-ami/{k8s}/{directory}/{leaf}/image_id"
        out.extend(AliasParameter(path, arch, v) for v in variants)
    return out


def _windows(year: str) -> Callable[[str, str], list[AliasParameter]]:
    def params(k8s: str, version: str) -> list[AliasParameter]:
        name = f"Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}"
        path = f"/aws/service/ami-windows-latest/{name}/image_id"
        return [AliasParameter(path, "x86_64", VARIANT_WINDOWS)]

    return params


_ALIASES: Final[dict[str, Callable[[str, str], list[AliasParameter]]]] = {
    "al2023": _al2023,
    "bottlerocket": _bottlerocket,
    "al2": _al2,
    "windows2019": _windows("2019"),
    "windows2022": _windows("2022"),
    "windows2025": _windows("2025"),
}


def alias_parameters(alias: str, kubernetes_version: str) -> list[AliasParameter]:
    """The SSM parameters ``alias`` reads on a cluster of ``kubernetes_version`` ("1.31")."""
    family, _, version = alias.partition("@")
    build = _ALIASES.get(family)
    if build is None or not version:
        raise AMIResolutionError(f"alias {alias!r} is not supported")
    return build(kubernetes_version, version)


# ----------------------------------------------------------------------------- choosing (pure)


@dataclass(frozen=True, slots=True)
class Candidate:
    """An image and the instance-type requirements it would serve."""

    id: str
    name: str
    created: float  # CreationDate as epoch seconds (0 when EC2 did not say)
    deprecated: bool
    requirements: tuple[NodeSelectorRequirement, ...] = field(default_factory=tuple)

    def group(self) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        return tuple(sorted((r.key, r.operator, tuple(r.values)) for r in self.requirements))

    def status(self) -> AMI:
        return AMI(
            id=self.id,
            name=self.name,
            deprecated=self.deprecated,
            requirements=list(self.requirements),
        )


def _preference(c: Candidate) -> tuple[bool, float, str]:
    # Ascending: non-deprecated (False) first, then newest, then lowest id.
    return (c.deprecated, -c.created, c.id)


def choose_amis(candidates: Iterable[Candidate]) -> list[AMI]:
    """One image per requirement set (non-deprecated, then newest, then lowest id), ordered
    by that same preference."""
    best: dict[tuple[tuple[str, str, tuple[str, ...]], ...], Candidate] = {}
    for c in candidates:
        key = c.group()
        current = best.get(key)
        if current is None or _preference(c) < _preference(current):
            best[key] = c
    ordered = sorted(best.values(), key=lambda c: (_preference(c), c.group()))
    return [c.status() for c in ordered]


def _timestamp(raw: object) -> datetime | None:
    if not raw:
        return None
    try:
        when = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def is_deprecated(image: dict[str, Any], now: datetime) -> bool:
    """Deprecated once its DeprecationTime has passed."""
    when = _timestamp(image.get("DeprecationTime"))
    return when is not None and when <= now


def candidates_from_image(
    image: dict[str, Any],
    variants: Sequence[str] | None,
    now: datetime,
) -> list[Candidate]:
    """The candidates one DescribeImages entry yields: one per variant it was selected for
    (alias), or one with the architecture requirement only (other terms)."""
    arch = ARCHITECTURES.get(str(image.get("Architecture", "")))
    state = str(image.get("State") or "available")
    if arch is None or state != "available":
        return []
    base = (_req(LABEL_ARCH, "In", arch),)
    created = _timestamp(image.get("CreationDate"))
    extra = [()] if variants is None else [tuple(variant_requirements(v)) for v in variants]
    return [
        Candidate(
            id=str(image.get("ImageId", "")),
            name=str(image.get("Name", "")),
            created=created.timestamp() if created is not None else 0.0,
            deprecated=is_deprecated(image, now),
            requirements=base + reqs,
        )
        for reqs in extra
    ]


# ----------------------------------------------------------------------------- DescribeImages


def image_query(term: AMISelectorTerm) -> dict[str, Any]:
    """DescribeImages parameters for a term (not alias / ssmParameter)."""
    filters = selector_filters({"image-id": term.id, "name": term.name}, term.tags)
    params: dict[str, Any] = {"Filters": filters, "IncludeDeprecated": True}
    if term.owner is not None:
        params["Owners"] = [term.owner]
    elif term.id is None:
        params["Owners"] = list(DEFAULT_OWNERS)
    return params


async def _describe(clients: AwsClients, params: dict[str, Any]) -> list[dict[str, Any]]:
    images: list[dict[str, Any]] = await paginate(
        clients.ec2, "describe_images", "Images", **params
    )
    return images


async def _version(read: Callable[[], Awaitable[str]]) -> str:
    # The reader is the caller's (an API server call): any failure of it is "version unknown".
    try:
        return await read()
    except Exception as exc:
        raise KubernetesVersionError(f"cannot read the Kubernetes version: {exc}") from exc


class AMIDiscovery:
    """Resolves ``amiSelectorTerms`` to ``status.amis`` (SSM reads cached)."""

    def __init__(self, clients: AwsClients, clock: Clock, *, ssm: SSMCache | None = None) -> None:
        self.clients = clients
        self.clock = clock
        self.ssm = ssm or SSMCache(clients, clock)
        self._invalidated_at = clock.monotonic()

    async def discover(
        self, terms: Sequence[AMISelectorTerm], kubernetes_version: Callable[[], Awaitable[str]]
    ) -> list[AMI]:
        """AMIs for ``terms``; :class:`AMIResolutionError` for an unusable alias, AWS errors
        propagate. An empty list means nothing matched."""
        now = self.clock.now()
        if self.clock.monotonic() - self._invalidated_at >= MUTABLE_INVALIDATION:
            self.ssm.invalidate_mutable()
            self._invalidated_at = self.clock.monotonic()
        out: list[Candidate] = []
        for term in terms:
            if term.alias is not None:
                out.extend(await self._alias(term.alias, await _version(kubernetes_version), now))
            elif term.ssm_parameter is not None:
                image_id = await self.ssm.get(term.ssm_parameter)
                if image_id:
                    out.extend(await self._by_ids({image_id: None}, now))
            else:
                for image in await _describe(self.clients, image_query(term)):
                    out.extend(candidates_from_image(image, None, now))
        return choose_amis(out)

    async def _alias(self, alias: str, k8s: str, now: datetime) -> list[Candidate]:
        mutable = alias.endswith(f"@{LATEST}")
        variants: dict[str, list[str]] = {}  # image id -> variants it serves
        for param in alias_parameters(alias, k8s):
            image_id = await self.ssm.get(param.path, mutable=mutable)
            if image_id:
                variants.setdefault(image_id, []).append(param.variant)
        if not variants:
            log.info("no SSM parameters for alias", extra={"alias": alias, "kubernetes": k8s})
            return []
        return await self._by_ids(variants, now)

    async def _by_ids(
        self, variants: Mapping[str, Sequence[str] | None], now: datetime
    ) -> list[Candidate]:
        params = {
            "Filters": [{"Name": "image-id", "Values": sorted(variants)}],
            "IncludeDeprecated": True,
        }
        out: list[Candidate] = []
        for image in await _describe(self.clients, params):
            image_id = str(image.get("ImageId", ""))
            if image_id in variants:
                out.extend(candidates_from_image(image, variants[image_id], now))
        return out
