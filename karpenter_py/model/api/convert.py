"""Pure conversion between the v1beta1 and v1 forms of NodePool, NodeClaim and EC2NodeClass.

The rules are upstream's v1 migration rules (Karpenter v1.0 converted the same way in its
webhook):

* ``nodeClassRef`` ``{apiVersion, kind, name}`` becomes ``{group, kind, name}``; a reference
  without apiVersion or kind means the provider's default class, EC2NodeClass of
  ``karpenter.k8s.aws``. Going back, ``apiVersion`` is ``<group>/<served version>``.
* ``consolidationPolicy: WhenUnderutilized`` is ``WhenEmptyOrUnderutilized``; v1 requires
  ``consolidateAfter``, which v1beta1 could leave out with WhenUnderutilized: it becomes ``0s``.
* ``disruption.expireAfter`` moves to ``template.spec.expireAfter``.
* A v1beta1 NodeClaim has no expireAfter (its NodePool's ``disruption`` had it): in v1 it gets
  the ``template.spec.expireAfter`` of the NodePool its ``karpenter.sh/nodepool`` label names,
  as upstream's webhook looks that NodePool up. The caller supplies the NodePools (this module
  does no I/O); a NodeClaim without the label, or whose NodePool does not exist, is left without
  one and the CRD's default (720h) applies.
* The v1beta1 ``kubelet`` block of a NodePool template or NodeClaim has no place in v1 (v1 keeps
  kubelet settings on the EC2NodeClass): it is kept, as JSON, in the
  ``compatibility.karpenter.sh/v1beta1-kubelet-conversion`` annotation, and comes back from it.
  The AWS provider reads that annotation back (:func:`kubelet_in_effect`): as upstream's v1.0,
  a NodePool or NodeClaim carrying it launches with those kubelet settings in place of the
  EC2NodeClass's ``spec.kubelet``.
* An EC2NodeClass with no ``amiSelectorTerms`` used its family's latest EKS-optimized AMI: in v1
  that is the alias term ``<family>@latest``. ``amiFamily: Ubuntu`` (gone in v1) becomes AL2 with
  Ubuntu's root device, noted in the ``compatibility.karpenter.k8s.aws/v1beta1-ubuntu``
  annotation so the way back restores it; one without amiSelectorTerms (v1 has no Ubuntu alias)
  gets the placeholder term ``{id: ami-placeholder}`` and ``incompatible`` in that annotation, so
  it converts but is not Ready and launches nothing until it selects its AMIs, as upstream.
* A v1beta1 template's ``resources`` is dropped (v1 templates have none; upstream ignored it).

Round trips: v1beta1 → v1 → v1beta1 gives the object back with only the defaults filled in
(``nodeClassRef`` apiVersion/kind, ``consolidateAfter``). v1 → v1beta1 → v1 is lossless: what
v1beta1 cannot say (a Balanced policy, replicas, a NodeClaim's expireAfter, an EC2NodeClass's
kubelet, capacity reservations, pinned or SSM AMI terms, ...) is kept in karpenter-py's own
``compatibility.karpenter-py.sh/v1-fields`` annotation on the v1beta1 form and put back from it.

Status is the same in both versions and is copied as is. Every function takes and returns plain
JSON dicts (what the API server sends a conversion webhook) and never changes its argument.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, cast

from pydantic import ValidationError

from karpenter_py.model.api.common import NEVER
from karpenter_py.model.api.v1beta1.common import KubeletConfiguration
from karpenter_py.model.labels import (
    AWS_ANNOTATION_UBUNTU_COMPATIBILITY,
    AWS_GROUP,
    GROUP,
    KWOK_GROUP,
    LABEL_NODEPOOL,
    UBUNTU_INCOMPATIBLE,
)

JSON = dict[str, object]
# v1 NodePools by name: the facts converting a v1beta1 NodeClaim reads (see nodepool_needed).
NodePools = Mapping[str, Mapping[str, object]]
_NO_NODEPOOLS: Final[NodePools] = {}

V1_NODEPOOL: Final = f"{GROUP}/v1"
V1BETA1_NODEPOOL: Final = f"{GROUP}/v1beta1"
V1_EC2NODECLASS: Final = f"{AWS_GROUP}/v1"
V1BETA1_EC2NODECLASS: Final = f"{AWS_GROUP}/v1beta1"

KUBELET_ANNOTATION: Final = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"
UBUNTU_ANNOTATION: Final = AWS_ANNOTATION_UBUNTU_COMPATIBILITY
V1_FIELDS_ANNOTATION: Final = "compatibility.karpenter-py.sh/v1-fields"

DEFAULT_NODECLASS_GROUP: Final = AWS_GROUP
DEFAULT_NODECLASS_KIND: Final = "EC2NodeClass"
# The version a v1beta1 nodeClassRef names for a group (v1beta1 readers expect theirs).
_REF_VERSIONS: Final = {AWS_GROUP: "v1beta1", KWOK_GROUP: "v1alpha1"}

WHEN_EMPTY: Final = "WhenEmpty"
WHEN_UNDERUTILIZED: Final = "WhenUnderutilized"
WHEN_EMPTY_OR_UNDERUTILIZED: Final = "WhenEmptyOrUnderutilized"

_UBUNTU_ROOT: Final = {
    "deviceName": "/dev/sda1",
    "rootVolume": True,
    "ebs": {"encrypted": True, "volumeSize": "20Gi", "volumeType": "gp3"},
}
_UBUNTU_PLACEHOLDER: Final = {"id": "ami-placeholder"}
# amiFamily -> alias family, for v1beta1 classes without amiSelectorTerms
_ALIAS_OF: Final = {
    "AL2": "al2",
    "AL2023": "al2023",
    "Bottlerocket": "bottlerocket",
    "Windows2019": "windows2019",
    "Windows2022": "windows2022",
    "Windows2025": "windows2025",
}
_FAMILY_OF_ALIAS: Final = {alias: family for family, alias in _ALIAS_OF.items()}
# The v1beta1 kubelet block's fields (KubeletConfiguration's aliases): what the kubelet
# compatibility annotation may carry.
_V1BETA1_KUBELET_FIELDS: Final = frozenset(
    str(f.alias) for f in KubeletConfiguration.model_fields.values() if f.alias
)
# Fields of a v1beta1 AMI term (v1 adds alias and ssmParameter).
_V1BETA1_AMI_TERM_FIELDS: Final = frozenset({"tags", "id", "name", "owner"})


class ConversionError(ValueError):
    """The object cannot be converted (unknown kind or version, or no equivalent form)."""


# How deep a JSON value conversion takes: real objects nest about ten levels; conversion walks
# them recursively (copies, the v1-fields diff), so a bound keeps a crafted body from running
# Python out of stack.
MAX_NESTING: Final = 100
# The integers JSON carries through the webhook (orjson's range: int64 and uint64).
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1


def json_problem(value: object, limit: int = MAX_NESTING) -> str | None:
    """Why a decoded JSON value cannot be converted and sent back, or None: it nests deeper
    than ``limit`` containers, or holds an integer outside the 64-bit range or a number that is
    not finite (``1e400``). Iterative, so any depth is safe to ask about."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[object]
        if isinstance(node, dict):
            children = cast(JSON, node).values()
        elif isinstance(node, list):
            children = cast(list[object], node)
        else:
            if isinstance(node, int) and not _INT_MIN <= node <= _INT_MAX:
                return f"{node} is outside the 64-bit integer range"
            if isinstance(node, float) and not math.isfinite(node):
                return f"{node} is not a finite number"
            continue
        if depth > limit:
            return f"nests deeper than {limit} levels"
        stack.extend((child, depth + 1) for child in children)
    return None


@dataclass(frozen=True, slots=True)
class Converted:
    """A converted object and one line per rule that changed something."""

    object: JSON
    changes: tuple[str, ...]


# ----------------------------------------------------------------------------- helpers


def _obj(value: object) -> JSON:
    return cast(JSON, value) if isinstance(value, dict) else {}


def _annotations(obj: JSON) -> dict[str, str]:
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise ConversionError("metadata is not an object")
    ann = meta.get("annotations")
    if ann is None:
        ann = {}
        meta["annotations"] = ann
    if not isinstance(ann, dict):
        raise ConversionError("metadata.annotations is not an object")
    for key, value in cast(JSON, ann).items():
        if not isinstance(value, str):
            raise ConversionError(f"metadata.annotations[{key!r}] is not a string")
    return cast(dict[str, str], ann)


def _drop_empty_annotations(obj: JSON) -> None:
    meta = _obj(obj.get("metadata"))
    if meta.get("annotations") == {}:
        del meta["annotations"]


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _pop_json_annotation(obj: JSON, key: str) -> object:
    ann = _annotations(obj)
    text = ann.pop(key, None)
    if text is None:
        return None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ConversionError(f"annotation {key} is not valid JSON: it nests too deep") from None
    except ValueError as err:  # json.JSONDecodeError too
        raise ConversionError(f"annotation {key} is not valid JSON: {err}") from None
    problem = json_problem(value)
    if problem is not None:
        raise ConversionError(f"annotation {key}: {problem}")
    return value


def _split_api_version(api_version: str) -> str:
    """The group of ``group/version`` (an empty string for the core ``v1``)."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def _ref_to_v1(ref: JSON, changes: list[str], where: str) -> JSON:
    api_version = str(ref.get("apiVersion") or "")
    kind = str(ref.get("kind") or "")
    group = _split_api_version(api_version) if api_version else DEFAULT_NODECLASS_GROUP
    out: JSON = {"group": group, "kind": kind or DEFAULT_NODECLASS_KIND, "name": ref.get("name")}
    if not api_version or not kind:
        changes.append(
            f"{where}.nodeClassRef: no {'apiVersion' if not api_version else 'kind'}, "
            f"now group {out['group']}, kind {out['kind']}"
        )
    return out


def _ref_to_v1beta1(ref: JSON) -> JSON:
    group = str(ref.get("group") or "")
    version = _REF_VERSIONS.get(group, "v1")
    return {"apiVersion": f"{group}/{version}", "kind": ref.get("kind"), "name": ref.get("name")}


# Paths (lists of keys) to the values v1beta1 lost, with the v1 value or None for "absent".
_Diff = list[tuple[list[str], object]]
_ABSENT: Final = object()


def _diff(want: object, got: object, path: list[str], out: _Diff) -> None:
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            _diff(want.get(key, _ABSENT), got.get(key, _ABSENT), [*path, key], out)
    elif want != got:
        out.append((path, None if want is _ABSENT else want))


def _keep_v1_fields(v1_obj: JSON, beta: JSON, back: Callable[[JSON], JSON]) -> None:
    """Record in ``beta``'s annotation what converting it back would not restore."""
    again = back(copy.deepcopy(beta))
    lost: _Diff = []
    _diff(v1_obj.get("spec"), again.get("spec"), ["spec"], lost)
    want_ann = _obj(_obj(v1_obj.get("metadata")).get("annotations"))
    got_ann = _obj(_obj(again.get("metadata")).get("annotations"))
    for key in sorted(set(want_ann) | set(got_ann)):
        if want_ann.get(key) != got_ann.get(key):
            lost.append((["metadata", "annotations", key], want_ann.get(key)))
    if lost:
        _annotations(beta)[V1_FIELDS_ANNOTATION] = json.dumps(
            [{"path": path, "value": value} for path, value in lost],
            sort_keys=True,
            separators=(",", ":"),
        )


def _restore_v1_fields(obj: JSON, saved: object) -> None:
    if saved is None:
        return
    if not isinstance(saved, list):
        raise ConversionError(f"annotation {V1_FIELDS_ANNOTATION} is not a list")
    for entry in saved:
        item = _obj(entry)
        path = item.get("path")
        if not isinstance(path, list) or not path or not all(isinstance(p, str) for p in path):
            raise ConversionError(f"annotation {V1_FIELDS_ANNOTATION}: bad path {path!r}")
        node = obj
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = {}
                node[key] = child
            node = cast(JSON, child)
        value = item.get("value")
        if value is None:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = copy.deepcopy(value)


# ----------------------------------------------------------------------------- NodePool


def _nodepool_to_v1(obj: JSON, changes: list[str], _pools: NodePools) -> JSON:
    saved = _pop_json_annotation(obj, V1_FIELDS_ANNOTATION)
    spec = _obj(obj.get("spec"))
    template = _obj(spec.get("template"))
    tspec = _obj(template.get("spec"))
    disruption = _obj(spec.pop("disruption", None))

    policy = disruption.get("consolidationPolicy", WHEN_UNDERUTILIZED)
    if policy == WHEN_UNDERUTILIZED:
        policy = WHEN_EMPTY_OR_UNDERUTILIZED
        changes.append(
            "spec.disruption.consolidationPolicy: WhenUnderutilized is now WhenEmptyOrUnderutilized"
        )
    new_disruption: JSON = {}
    if "budgets" in disruption:
        new_disruption["budgets"] = disruption["budgets"]
    if disruption.get("consolidateAfter") is not None:
        new_disruption["consolidateAfter"] = disruption["consolidateAfter"]
    else:
        new_disruption["consolidateAfter"] = "0s"
        changes.append("spec.disruption.consolidateAfter: unset, now 0s (required in v1)")
    new_disruption["consolidationPolicy"] = policy
    spec["disruption"] = new_disruption

    new_tspec = _claim_spec_to_v1(obj, tspec, changes, "spec.template.spec")
    if "expireAfter" in disruption:
        new_tspec["expireAfter"] = disruption["expireAfter"]
        changes.append(
            "spec.disruption.expireAfter: moved to spec.template.spec.expireAfter "
            f"({disruption['expireAfter']})"
        )
    if "resources" in new_tspec:
        del new_tspec["resources"]
        changes.append("spec.template.spec.resources: dropped (v1 templates have none)")
    template["spec"] = new_tspec
    obj["apiVersion"] = V1_NODEPOOL
    _restore_v1_fields(obj, saved)
    return obj


def _claim_spec_to_v1(obj: JSON, spec: JSON, changes: list[str], where: str) -> JSON:
    out = dict(spec)
    if "nodeClassRef" in out:
        out["nodeClassRef"] = _ref_to_v1(_obj(out["nodeClassRef"]), changes, where)
    kubelet = out.pop("kubelet", None)
    if kubelet is not None:
        _annotations(obj)[KUBELET_ANNOTATION] = json.dumps(
            kubelet, sort_keys=True, separators=(",", ":")
        )
        changes.append(
            f"{where}.kubelet: kept in the {KUBELET_ANNOTATION} annotation "
            "(v1 sets kubelet on the EC2NodeClass: move it to its spec.kubelet)"
        )
    return out


def kubelet_from_annotation(annotations: Mapping[str, str]) -> JSON | None:
    """The kubelet settings in a NodePool's or NodeClaim's kubelet compatibility annotation, as
    v1 EC2NodeClass ``spec.kubelet`` fields; None when there is no annotation.

    The annotation holds a v1beta1 kubelet block (what :func:`to_v1` wrote). It is read as
    v1beta1 read it: the v1beta1 fields only (others are ignored, as a Go unmarshal would), each
    with its v1beta1 type. An unreadable annotation is a ConversionError: upstream refuses to
    launch with it rather than silently fall back to the EC2NodeClass's settings.
    """
    text = annotations.get(KUBELET_ANNOTATION)
    if text is None:
        return None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConversionError(f"annotation {KUBELET_ANNOTATION} is not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise ConversionError(f"annotation {KUBELET_ANNOTATION} is not a JSON object")
    known = {k: v for k, v in raw.items() if k in _V1BETA1_KUBELET_FIELDS}
    try:
        kubelet = KubeletConfiguration.model_validate(known)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise ConversionError(f"annotation {KUBELET_ANNOTATION}: {problems}") from None
    return cast(JSON, kubelet.model_dump(by_alias=True, exclude_none=True, mode="json"))


def kubelet_in_effect(
    annotations: Mapping[str, str], nodeclass_kubelet: Mapping[str, object] | None
) -> Mapping[str, object] | None:
    """The kubelet settings a node gets: those of the kubelet compatibility annotation (a
    NodePool or NodeClaim converted from v1beta1) when present, else the EC2NodeClass's own.

    Upstream's order (v1.0 ``GetKubletConfigurationWithNodePool``): the annotation wins even over
    a ``spec.kubelet`` set on the EC2NodeClass, and replaces it whole (no merge); removing the
    annotation from the NodePool is how a user moves on to the EC2NodeClass's settings.
    """
    from_annotation = kubelet_from_annotation(annotations)
    return from_annotation if from_annotation is not None else nodeclass_kubelet


def _claim_spec_to_v1beta1(obj: JSON, spec: JSON) -> JSON:
    out = dict(spec)
    if "nodeClassRef" in out:
        out["nodeClassRef"] = _ref_to_v1beta1(_obj(out["nodeClassRef"]))
    kubelet = _pop_json_annotation(obj, KUBELET_ANNOTATION)
    if kubelet is not None:
        out["kubelet"] = kubelet
    return out


def _nodepool_to_v1beta1(obj: JSON) -> JSON:
    spec = _obj(obj.get("spec"))
    template = _obj(spec.get("template"))
    tspec = _claim_spec_to_v1beta1(obj, _obj(template.get("spec")))
    disruption = _obj(spec.pop("disruption", None))
    new_disruption: JSON = {}
    if "budgets" in disruption:
        new_disruption["budgets"] = disruption["budgets"]
    policy = disruption.get("consolidationPolicy", WHEN_EMPTY_OR_UNDERUTILIZED)
    if policy != WHEN_EMPTY:
        policy = WHEN_UNDERUTILIZED  # WhenEmptyOrUnderutilized; Balanced is v1-only
    after = disruption.get("consolidateAfter")
    # v1beta1 refuses consolidateAfter with WhenUnderutilized unless it is 'Never'; any other
    # value is v1-only and goes to the v1-fields annotation (_keep_v1_fields).
    if after is not None and (policy != WHEN_UNDERUTILIZED or after == NEVER):
        new_disruption["consolidateAfter"] = after
    new_disruption["consolidationPolicy"] = policy
    if "expireAfter" in tspec:
        new_disruption["expireAfter"] = tspec.pop("expireAfter")
    spec["disruption"] = new_disruption
    template["spec"] = tspec
    spec.pop("replicas", None)
    obj["apiVersion"] = V1BETA1_NODEPOOL
    return obj


# ----------------------------------------------------------------------------- NodeClaim


def _nodeclaim_to_v1(obj: JSON, changes: list[str], pools: NodePools) -> JSON:
    saved = _pop_json_annotation(obj, V1_FIELDS_ANNOTATION)
    obj["spec"] = _claim_spec_to_v1(obj, _obj(obj.get("spec")), changes, "spec")
    obj["apiVersion"] = V1_NODEPOOL
    _restore_v1_fields(obj, saved)
    _expiry_from_nodepool(obj, pools, changes)
    return obj


def _expiry_from_nodepool(obj: JSON, pools: NodePools, changes: list[str]) -> None:
    """Give a claim converted from v1beta1 its NodePool's ``template.spec.expireAfter``."""
    spec = _obj(obj.get("spec"))
    if "expireAfter" in spec:
        return  # a v1 claim read and written back through v1beta1 keeps its own
    name = nodepool_of(obj)
    pool = pools.get(name) if name is not None else None
    template = _obj(_obj(_obj(pool).get("spec")).get("template"))
    expire_after = _obj(template.get("spec")).get("expireAfter")
    if expire_after is not None:
        spec["expireAfter"] = expire_after
        changes.append(f"spec.expireAfter: {expire_after}, from NodePool {name}")


def _nodeclaim_to_v1beta1(obj: JSON) -> JSON:
    spec = _claim_spec_to_v1beta1(obj, _obj(obj.get("spec")))
    spec.pop("expireAfter", None)
    obj["spec"] = spec
    obj["apiVersion"] = V1BETA1_NODEPOOL
    return obj


# ----------------------------------------------------------------------------- EC2NodeClass


def _ec2nodeclass_to_v1(obj: JSON, changes: list[str], _pools: NodePools) -> JSON:
    saved = _pop_json_annotation(obj, V1_FIELDS_ANNOTATION)
    spec = _obj(obj.get("spec"))
    family = spec.get("amiFamily")
    terms = spec.get("amiSelectorTerms")
    if family == "Ubuntu":
        restored = ["amiFamily"]
        spec["amiFamily"] = "AL2"
        if "blockDeviceMappings" not in spec:
            spec["blockDeviceMappings"] = [copy.deepcopy(_UBUNTU_ROOT)]
            restored.append("blockDeviceMappings")
        changes.append(
            "spec.amiFamily: Ubuntu is not a v1 family, now AL2 with Ubuntu's root device "
            f"(noted in the {UBUNTU_ANNOTATION} annotation)"
        )
        if not terms:
            # v1 has no Ubuntu alias: as upstream, the class converts (so it is not lost) but
            # holds a placeholder term and is not Ready until it selects Ubuntu AMIs itself.
            restored.append(UBUNTU_INCOMPATIBLE)
            spec["amiSelectorTerms"] = [dict(_UBUNTU_PLACEHOLDER)]
            changes.append(
                "spec.amiSelectorTerms: none, and v1 has no Ubuntu alias: now "
                f"[{{id: {_UBUNTU_PLACEHOLDER['id']}}}]; the class launches nothing until its "
                "amiSelectorTerms select Ubuntu AMIs"
            )
        _annotations(obj)[UBUNTU_ANNOTATION] = ",".join(restored)
    elif not terms:
        alias_family = _ALIAS_OF.get(str(family))
        if alias_family is None:
            raise ConversionError(f"spec.amiFamily: {family!r} needs amiSelectorTerms")
        spec.pop("amiSelectorTerms", None)
        del spec["amiFamily"]
        spec["amiSelectorTerms"] = [{"alias": f"{alias_family}@latest"}]
        changes.append(
            f"spec.amiSelectorTerms: none, now [{{alias: {alias_family}@latest}}] "
            f"(amiFamily {family} is implied by the alias)"
        )
    obj["apiVersion"] = V1_EC2NODECLASS
    _restore_v1_fields(obj, saved)
    return obj


def _ec2nodeclass_to_v1beta1(obj: JSON) -> JSON:
    spec = _obj(obj.get("spec"))
    raw_terms = spec.get("amiSelectorTerms") or []
    if not isinstance(raw_terms, list):
        raise ConversionError("spec.amiSelectorTerms is not a list")
    terms = [_obj(t) for t in cast(list[object], raw_terms)]
    alias = next((str(t["alias"]) for t in terms if "alias" in t), None)
    ubuntu = _annotations(obj).pop(UBUNTU_ANNOTATION, None)
    if alias is not None:
        family = _FAMILY_OF_ALIAS.get(alias.split("@", 1)[0], "Custom")
        spec["amiFamily"] = family
        spec.pop("amiSelectorTerms", None)
    else:
        kept = [t for t in terms if set(t) <= _V1BETA1_AMI_TERM_FIELDS]
        if kept:
            spec["amiSelectorTerms"] = kept
        else:
            spec.pop("amiSelectorTerms", None)
        if "amiFamily" not in spec:
            spec["amiFamily"] = "Custom"
    if ubuntu is not None:
        parts = ubuntu.split(",")
        if "amiFamily" in parts:
            spec["amiFamily"] = "Ubuntu"
        if UBUNTU_INCOMPATIBLE in parts:
            spec.pop("amiSelectorTerms", None)  # the placeholder the way in put there
        if "blockDeviceMappings" in parts:
            spec.pop("blockDeviceMappings", None)
    for v1_only in (
        "kubelet",
        "capacityReservationSelectorTerms",
        "placementGroupSelector",
        "networkInterfaces",
        "ipPrefixCount",
        "connectionTracking",
        "cpuOptions",
    ):
        spec.pop(v1_only, None)
    obj["apiVersion"] = V1BETA1_EC2NODECLASS
    return obj


# ----------------------------------------------------------------------------- entry points

_ToV1 = Callable[[JSON, list[str], NodePools], JSON]
_ToV1beta1 = Callable[[JSON], JSON]
_RULES: Final[Mapping[tuple[str, str], tuple[str, str, _ToV1, _ToV1beta1]]] = {
    # (group, kind) -> (v1 apiVersion, v1beta1 apiVersion, to v1, to v1beta1)
    (GROUP, "NodePool"): (V1_NODEPOOL, V1BETA1_NODEPOOL, _nodepool_to_v1, _nodepool_to_v1beta1),
    (GROUP, "NodeClaim"): (
        V1_NODEPOOL,
        V1BETA1_NODEPOOL,
        _nodeclaim_to_v1,
        _nodeclaim_to_v1beta1,
    ),
    (AWS_GROUP, "EC2NodeClass"): (
        V1_EC2NODECLASS,
        V1BETA1_EC2NODECLASS,
        _ec2nodeclass_to_v1,
        _ec2nodeclass_to_v1beta1,
    ),
}


def _rules(obj: object) -> tuple[JSON, str, tuple[str, str, _ToV1, _ToV1beta1]]:
    if not isinstance(obj, dict):
        raise ConversionError(f"expected an object, got {type(obj).__name__}")
    doc = cast(JSON, obj)
    api_version = str(doc.get("apiVersion") or "")
    kind = str(doc.get("kind") or "")
    rules = _RULES.get((_split_api_version(api_version), kind))
    if rules is None:
        raise ConversionError(f"no conversion for {kind or '<no kind>'} {api_version}")
    if api_version not in rules[:2]:
        raise ConversionError(f"{kind} has no version {api_version!r}")
    return copy.deepcopy(doc), api_version, rules


def _finish(obj: JSON) -> JSON:
    _drop_empty_annotations(obj)
    return obj


def nodepool_of(obj: Mapping[str, object]) -> str | None:
    """The NodePool a NodeClaim's ``karpenter.sh/nodepool`` label names (None: no label)."""
    name = _obj(_obj(obj.get("metadata")).get("labels")).get(LABEL_NODEPOOL)
    return name if isinstance(name, str) and name else None


def nodepool_needed(obj: object, desired_api_version: str) -> str | None:
    """The NodePool converting ``obj`` to ``desired_api_version`` reads: a v1beta1 NodeClaim's
    when v1 is wanted (its expireAfter comes from there), else None."""
    if not isinstance(obj, dict):
        return None
    doc = cast(JSON, obj)
    if (
        doc.get("kind") == "NodeClaim"
        and doc.get("apiVersion") == V1BETA1_NODEPOOL
        and desired_api_version == V1_NODEPOOL
    ):
        return nodepool_of(doc)
    return None


def to_v1(obj: object, nodepools: NodePools = _NO_NODEPOOLS) -> Converted:
    """The v1 form of a v1beta1 (or already v1) object, with what changed. ``nodepools``: the
    v1 NodePools that exist, by name (:func:`nodepool_needed` says which one an object needs)."""
    doc, api_version, (v1, _, forward, _back) = _rules(obj)
    if api_version == v1:
        return Converted(doc, ())
    changes: list[str] = [f"apiVersion: {api_version} is now {v1}"]
    return Converted(_finish(forward(doc, changes, nodepools)), tuple(changes))


def to_v1beta1(obj: object) -> JSON:
    """The v1beta1 form of a v1 (or already v1beta1) object; v1-only data goes to annotations."""
    doc, api_version, (_, v1beta1, forward, back) = _rules(obj)
    if api_version == v1beta1:
        return doc
    original = copy.deepcopy(doc)
    beta = _finish(back(doc))
    _keep_v1_fields(original, beta, lambda b: _finish(forward(b, [], _NO_NODEPOOLS)))
    return beta


def convert(obj: object, desired_api_version: str, nodepools: NodePools = _NO_NODEPOOLS) -> JSON:
    """``obj`` in ``desired_api_version`` (what a ConversionReview asks for)."""
    doc, _, (v1, v1beta1, _f, _b) = _rules(obj)
    if desired_api_version == v1:
        return to_v1(doc, nodepools).object
    if desired_api_version == v1beta1:
        return to_v1beta1(doc)
    raise ConversionError(f"cannot convert {doc.get('kind')} to {desired_api_version!r}")
