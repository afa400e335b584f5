"""What the solver is given: NodePools as templates, existing capacity, options.

Everything here is plain data, built by callers (the plan CLI, the provisioner, disruption) from
API objects. The solver does no I/O and reads no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from karpenter_py.model.core import Node, Pod, SelectorRequirement, Taint, normalize_label
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.quantity import parse_resources

MAX_INSTANCE_TYPES: Final = 600

# Where a pod's volumes can attach: OR-ed alternatives, each a set of node requirements (AND),
# tried in order. Empty means the volumes do not constrain the pod.
VolumeAlternatives = tuple[tuple[SelectorRequirement, ...], ...]


@dataclass(frozen=True, slots=True, eq=False)
class PoolTemplate:
    """A NodePool as the scheduler sees it."""

    name: str
    weight: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requirements: tuple[SelectorRequirement, ...] = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    # Remaining headroom is limits - usage; None means unlimited.
    limits: Mapping[str, int] | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    node_class_ref: tuple[str, str, str] = ("", "", "")  # group, kind, name
    expire_after: str = "720h"
    termination_grace_period: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ExistingNode:
    """A node (or an in-flight NodeClaim not yet registered) pods may be placed on."""

    node: Node
    pods: tuple[Pod, ...] = ()  # pods bound to it (daemonset pods included)
    node_pool: str = ""  # "" for nodes Karpenter does not manage
    initialized: bool = True
    in_flight: bool = False  # a NodeClaim without a Node yet: labels/allocatable are predicted
    # Managed-but-uninitialized nodes ignore boot-time (ephemeral) taints for scheduling.
    marked_for_deletion: bool = False


@dataclass(frozen=True, slots=True)
class SolveOptions:
    preference_policy: Literal["Respect", "Ignore"] = "Respect"
    min_values_policy: Literal["Strict", "BestEffort"] = "Strict"
    max_instance_types: int = MAX_INSTANCE_TYPES
    # After the greedy pass, re-pack the round's new NodeClaims onto cheaper instance types
    # (scheduling.packing). False gives upstream's greedy plan, for comparison.
    repack: bool = True
    # Whether the re-pack may use more NodeClaims than the greedy pass did. Consolidation's
    # simulations turn it off: a replacement that splits into more nodes is not one it can take.
    repack_split: bool = True


class _RequirementLike(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def values(self) -> Sequence[str]: ...
    @property
    def min_values(self) -> int | None: ...


def pool_template(
    *,
    name: str,
    weight: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    requirements: Sequence[_RequirementLike] = (),
    taints: Sequence[Taint] = (),
    startup_taints: Sequence[Taint] = (),
    limits: Mapping[str, str | int] | None = None,
    usage: Mapping[str, str | int] | None = None,
    node_class_ref: tuple[str, str, str] = ("", "", ""),
    expire_after: str = "720h",
    termination_grace_period: str | None = None,
) -> PoolTemplate:
    """Build a PoolTemplate from loosely typed parts (quantities as strings, any requirement type)."""
    return PoolTemplate(
        name=name,
        weight=weight or 0,
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
        requirements=tuple(
            SelectorRequirement(normalize_label(r.key), r.operator, tuple(r.values), r.min_values)
            for r in requirements
        ),
        taints=tuple(taints),
        startup_taints=tuple(startup_taints),
        limits=None if limits is None else parse_resources(limits),
        usage=parse_resources(usage or {}),
        node_class_ref=node_class_ref,
        expire_after=expire_after,
        termination_grace_period=termination_grace_period,
    )


@dataclass(frozen=True, slots=True)
class VolumeFacts:
    """One pod's volume topology: requirement alternatives, or why its volumes rule it out
    (a missing claim, volume or class; a claim not bound yet; ...)."""

    alternatives: VolumeAlternatives = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SolveInput:
    pods: Sequence[Pod]
    pools: Sequence[PoolTemplate]
    # Instance types each pool may use (the cloud provider's answer for that pool's NodeClass).
    instance_types: Mapping[str, Sequence[InstanceType]]
    existing: Sequence[ExistingNode] = ()
    daemonsets: Sequence[Pod] = ()  # one template pod per DaemonSet
    options: SolveOptions = SolveOptions()
    # Pod key -> where its volumes can attach (``scheduling.volumes``). These narrow the node a
    # pod goes to, never the pod's own affinity: topology spread still counts it as it asks.
    volume_requirements: Mapping[str, VolumeAlternatives] = field(default_factory=dict)
    # Pod key -> why its volumes make it unschedulable.
    volume_errors: Mapping[str, str] = field(default_factory=dict)
