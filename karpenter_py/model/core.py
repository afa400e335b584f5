"""Slim, immutable views of the core Kubernetes objects Karpenter reasons about.

The scheduler never sees wire objects: pods and nodes arrive as these frozen dataclasses, parsed
once from the API's JSON (or a user's YAML) by the ``*_from_dict`` functions. Parsing resolves what
every later step needs (effective pod requests, normalised selectors) so the hot path does no
re-computation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from sys import intern
from typing import Final, cast

from karpenter_py.model.fields import (
    JSON,
    ParseError,
    json_int,
    json_list,
    json_object,
    json_str,
    json_str_list,
    string_map,
)
from karpenter_py.model.labels import (
    NORMALIZED_LABELS,
    RESOURCE_CPU,
    RESOURCE_MEMORY,
    RESOURCE_PODS,
    TAINT_DISRUPTED_KEY,
)
from karpenter_py.model.quantity import Resources, parse_resources

EFFECT_NO_SCHEDULE: Final = "NoSchedule"
EFFECT_PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
EFFECT_NO_EXECUTE: Final = "NoExecute"
TAINT_EFFECTS: Final = (EFFECT_NO_SCHEDULE, EFFECT_PREFER_NO_SCHEDULE, EFFECT_NO_EXECUTE)

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"


# ----------------------------------------------------------------------------- quantities


def _resources(value: object, path: str) -> Resources:
    raw = json_object(value, path)
    try:
        return parse_resources(cast("dict[str, str | int | float]", raw))
    except ValueError as err:
        raise ParseError(path, str(err)) from err


def normalize_label(key: str) -> str:
    return NORMALIZED_LABELS.get(key, key)


# ----------------------------------------------------------------------------- taints / tolerations


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""


# Disruption and termination put this on a Node before draining it; its value carries no meaning.
DISRUPTED_TAINT: Final = Taint(key=TAINT_DISRUPTED_KEY, effect=EFFECT_NO_SCHEDULE)


def is_disrupted_taint(taint: Taint | Mapping[str, object]) -> bool:
    """Whether ``taint`` (a slim view or the API's JSON) is ``karpenter.sh/disrupted:NoSchedule``.

    Key and effect decide; the value is ignored, and the same key with another effect is not it.
    """
    if isinstance(taint, Taint):
        return taint.key == DISRUPTED_TAINT.key and taint.effect == DISRUPTED_TAINT.effect
    return taint.get("key") == DISRUPTED_TAINT.key and taint.get("effect") == DISRUPTED_TAINT.effect


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint: effect, key and (for Equal) value must match."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # An empty key with Equal only matches an empty-keyed taint (rejected by validation anyway).
        return self.key == taint.key and self.value == taint.value


def taint_from_dict(raw: object, path: str) -> Taint:
    data = json_object(raw, path)
    key = json_str(data.get("key"), f"{path}.key")
    effect = json_str(data.get("effect"), f"{path}.effect")
    if not key:
        raise ParseError(f"{path}.key", "taint key is required")
    if effect not in TAINT_EFFECTS:
        raise ParseError(f"{path}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
    return Taint(key=key, effect=effect, value=json_str(data.get("value"), f"{path}.value"))


def toleration_from_dict(raw: object, path: str) -> Toleration:
    data = json_object(raw, path)
    op = json_str(data.get("operator"), f"{path}.operator", "Equal") or "Equal"
    if op not in ("Equal", "Exists"):
        raise ParseError(f"{path}.operator", "must be Equal or Exists")
    return Toleration(
        key=json_str(data.get("key"), f"{path}.key"),
        operator=op,
        value=json_str(data.get("value"), f"{path}.value"),
        effect=json_str(data.get("effect"), f"{path}.effect"),
    )


# ----------------------------------------------------------------------------- selectors


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One ``matchExpressions`` / ``nodeSelectorTerms`` requirement."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    min_values: int | None = None


LABEL_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")


def selector_requirement_from_dict(
    raw: object,
    path: str,
    operators: Sequence[str] = NODE_SELECTOR_OPERATORS,
    *,
    normalize: bool = True,
) -> SelectorRequirement:
    data = json_object(raw, path)
    key = json_str(data.get("key"), f"{path}.key")
    if not key:
        raise ParseError(f"{path}.key", "key is required")
    op = json_str(data.get("operator"), f"{path}.operator")
    if op not in operators:
        raise ParseError(f"{path}.operator", f"{op!r} is not one of {', '.join(operators)}")
    values = tuple(json_str_list(data.get("values"), f"{path}.values"))
    mv = data.get("minValues")
    return SelectorRequirement(
        key=normalize_label(key) if normalize else key,
        operator=op,
        values=values,
        min_values=None if mv is None else json_int(mv, f"{path}.minValues"),
    )


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector. ``None`` selectors (absent) are modelled by the caller, not here."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In":
                if not present or labels[req.key] not in req.values:
                    return False
            elif req.operator == "NotIn":
                if present and labels[req.key] in req.values:
                    return False
            elif req.operator == "Exists":
                if not present:
                    return False
            elif req.operator == "DoesNotExist" and present:
                return False
        return True

    def with_labels(self, extra: Mapping[str, str]) -> LabelSelector:
        merged = dict(self.match_labels)
        merged.update(extra)
        return LabelSelector(tuple(sorted(merged.items())), self.match_expressions)


def label_selector_from_dict(raw: object, path: str) -> LabelSelector:
    data = json_object(raw, path)
    labels = string_map(data.get("matchLabels"), f"{path}.matchLabels")
    exprs = tuple(
        selector_requirement_from_dict(
            e, f"{path}.matchExpressions[{i}]", LABEL_SELECTOR_OPERATORS, normalize=False
        )
        for i, e in enumerate(json_list(data.get("matchExpressions"), f"{path}.matchExpressions"))
    )
    return LabelSelector(tuple(sorted(labels.items())), exprs)


# ----------------------------------------------------------------------------- selector strings

_SET = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQUALS = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*$")


class SelectorError(ValueError):
    """A label selector that does not parse; the message says which part."""


def _terms(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def label_selector_from_string(text: str) -> LabelSelector:
    """A label selector in kubectl's ``-l`` syntax (``a=b,c!=d,e in (f,g),h notin (i),j,!k``)
    as the LabelSelector the API uses: ``!=`` is ``NotIn``, ``!k`` is ``DoesNotExist``."""
    labels: list[tuple[str, str]] = []
    exprs: list[SelectorRequirement] = []
    for term in _terms(text):
        if m := _SET.match(term):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            operator = "In" if m.group(2) == "in" else "NotIn"
            exprs.append(SelectorRequirement(m.group(1), operator, values))
        elif m := _EQUALS.match(term):
            if m.group(2) == "!=":
                exprs.append(SelectorRequirement(m.group(1), "NotIn", (m.group(3),)))
            else:
                labels.append((m.group(1), m.group(3)))
        elif m := _EXISTS.match(term):
            operator = "DoesNotExist" if m.group(1) else "Exists"
            exprs.append(SelectorRequirement(m.group(2), operator))
        else:
            raise SelectorError(f"not a label selector term: {term.strip()!r}")
    return LabelSelector(tuple(sorted(labels)), tuple(exprs))


# ----------------------------------------------------------------------------- affinity


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[SelectorRequirement, ...] = ()
    has_match_fields: bool = False


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    topology_key: str
    label_selector: LabelSelector | None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"


def _node_selector_term(raw: object, path: str) -> NodeSelectorTerm:
    data = json_object(raw, path)
    exprs = tuple(
        selector_requirement_from_dict(e, f"{path}.matchExpressions[{i}]")
        for i, e in enumerate(json_list(data.get("matchExpressions"), f"{path}.matchExpressions"))
    )
    return NodeSelectorTerm(exprs, bool(json_list(data.get("matchFields"), f"{path}.matchFields")))


def _pod_affinity_term(raw: object, path: str) -> PodAffinityTerm:
    data = json_object(raw, path)
    key = json_str(data.get("topologyKey"), f"{path}.topologyKey")
    if not key:
        raise ParseError(f"{path}.topologyKey", "topologyKey is required")
    sel = data.get("labelSelector")
    ns_sel = data.get("namespaceSelector")
    return PodAffinityTerm(
        topology_key=key,
        label_selector=None
        if sel is None
        else label_selector_from_dict(sel, f"{path}.labelSelector"),
        namespaces=tuple(
            json_str(n, f"{path}.namespaces")
            for n in json_list(data.get("namespaces"), f"{path}.namespaces")
        ),
        namespace_selector=None
        if ns_sel is None
        else label_selector_from_dict(ns_sel, f"{path}.namespaceSelector"),
    )


def _weighted_pod_terms(raw: object, path: str) -> tuple[WeightedPodAffinityTerm, ...]:
    out = []
    for i, item in enumerate(json_list(raw, path)):
        data = json_object(item, f"{path}[{i}]")
        out.append(
            WeightedPodAffinityTerm(
                weight=json_int(data.get("weight"), f"{path}[{i}].weight", 1),
                term=_pod_affinity_term(
                    data.get("podAffinityTerm"), f"{path}[{i}].podAffinityTerm"
                ),
            )
        )
    return tuple(out)


def _topology_spread(raw: object, path: str) -> TopologySpreadConstraint:
    data = json_object(raw, path)
    when = json_str(data.get("whenUnsatisfiable"), f"{path}.whenUnsatisfiable", DO_NOT_SCHEDULE)
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise ParseError(f"{path}.whenUnsatisfiable", "must be DoNotSchedule or ScheduleAnyway")
    key = json_str(data.get("topologyKey"), f"{path}.topologyKey")
    if not key:
        raise ParseError(f"{path}.topologyKey", "topologyKey is required")
    skew = json_int(data.get("maxSkew"), f"{path}.maxSkew", 1)
    if skew < 1:
        raise ParseError(f"{path}.maxSkew", "must be at least 1")
    sel = data.get("labelSelector")
    md = data.get("minDomains")
    return TopologySpreadConstraint(
        max_skew=skew,
        topology_key=normalize_label(key),
        when_unsatisfiable=when,
        label_selector=None
        if sel is None
        else label_selector_from_dict(sel, f"{path}.labelSelector"),
        min_domains=None if md is None else json_int(md, f"{path}.minDomains"),
        node_affinity_policy=json_str(
            data.get("nodeAffinityPolicy"), f"{path}.nodeAffinityPolicy", "Honor"
        )
        or "Honor",
        node_taints_policy=json_str(
            data.get("nodeTaintsPolicy"), f"{path}.nodeTaintsPolicy", "Ignore"
        )
        or "Ignore",
        match_label_keys=tuple(
            json_str(k, f"{path}.matchLabelKeys")
            for k in json_list(data.get("matchLabelKeys"), f"{path}.matchLabelKeys")
        ),
    )


# ----------------------------------------------------------------------------- pods


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str = ""
    controller: bool = False
    api_version: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    """What scheduling, provisioning and draining need from a Pod.

    Identity is by object (eq=False): two pods with the same name in a plan are still two pods.
    """

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, int] = field(default_factory=dict)  # effective, includes pods=1
    node_name: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_terms: tuple[NodeSelectorTerm, ...] = ()  # OR of terms
    preferred_node_terms: tuple[PreferredNodeTerm, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    owners: tuple[OwnerRef, ...] = ()
    priority: int = 0
    priority_class_name: str = ""
    creation_timestamp: str = ""
    deletion_timestamp: str = ""
    termination_grace_period_seconds: int = 30
    phase: str = "Pending"
    start_time: str = ""  # status.startTime: when the kubelet started the pod
    scheduling_gated: bool = False
    unschedulable: bool = False  # PodScheduled=False, reason Unschedulable
    nominated_node_name: str = ""
    pvc_names: tuple[str, ...] = ()
    resource_claims: bool = False
    scheduler_name: str = "default-scheduler"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def is_daemonset_pod(self) -> bool:
        return any(o.controller and o.kind == "DaemonSet" for o in self.owners)

    def is_statefulset_pod(self) -> bool:
        """Owned by an apps/v1 StatefulSet (any owner reference, as upstream checks)."""
        return any(o.kind == "StatefulSet" and o.api_version == "apps/v1" for o in self.owners)

    def is_mirror_pod(self) -> bool:
        return "kubernetes.io/config.mirror" in self.annotations or any(
            o.kind == "Node" for o in self.owners
        )

    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def is_terminating(self) -> bool:
        return bool(self.deletion_timestamp)


def container_requests(spec: JSON, path: str) -> Resources:
    """Effective pod requests as the kube-scheduler computes them (k8s PodRequests).

    max(sum of app containers + restartable-init (sidecar) containers, the peak during init:
    each classic init container plus the sidecars started before it), plus pod overhead, plus one
    ``pods`` slot. Pod-level ``resources`` (when set) override the container sum.

    A limit without a request counts as the request, per container and at pod level, as the API
    server defaults it. Pods read from the API server are already defaulted, but pod templates
    (a DaemonSet's, whose pod is daemonset overhead; a workload's in a manifest) never are.
    """
    total: Resources = {}
    for i, c in enumerate(json_list(spec.get("containers"), f"{path}.containers")):
        total = _add(total, _container_requests(c, f"{path}.containers[{i}]"))
    init_peak: Resources = {}
    sidecars: Resources = {}
    for i, c in enumerate(json_list(spec.get("initContainers"), f"{path}.initContainers")):
        cpath = f"{path}.initContainers[{i}]"
        req = _container_requests(c, cpath)
        if json_object(c, cpath).get("restartPolicy") == "Always":
            sidecars = _add(sidecars, req)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(sidecars, req))
    effective = _max(_add(total, sidecars), init_peak)
    pod_level = json_object(spec.get("resources"), f"{path}.resources")
    if pod_level:
        effective.update(_pod_level_requests(pod_level, effective, f"{path}.resources"))
    effective = _add(effective, _resources(spec.get("overhead"), f"{path}.overhead"))
    effective[RESOURCE_PODS] = effective.get(RESOURCE_PODS, 0) + 1
    return {k: v for k, v in effective.items() if v}


def _container_requests(raw: object, path: str) -> Resources:
    """A container's requests as the API server stores them: a resource with a limit and no
    request requests its limit. Pods are defaulted on admission, but pod *templates* (a
    DaemonSet's, a Deployment's in a manifest) are not, so the default is applied here, for
    every pod this package builds."""
    res = json_object(json_object(raw, path).get("resources"), f"{path}.resources")
    requests = _resources(res.get("requests"), f"{path}.resources.requests")
    for name, amount in _resources(res.get("limits"), f"{path}.resources.limits").items():
        requests.setdefault(name, amount)
    return requests


_HUGEPAGES_PREFIX: Final = "hugepages-"


def _pod_level_resource(name: str) -> bool:
    """Resources ``spec.resources`` may name (PodLevelResources): cpu, memory, hugepages."""
    return name in (RESOURCE_CPU, RESOURCE_MEMORY) or name.startswith(_HUGEPAGES_PREFIX)


def _pod_level_requests(level: JSON, containers: Resources, path: str) -> Resources:
    """Pod-level requests after the API server's defaulting, per resource: the pod-level request
    if set; else, for hugepages the containers request, what they request; else the pod-level
    limit. Each replaces the containers' sum for its resource."""
    requests = _resources(level.get("requests"), f"{path}.requests")
    for name, amount in _resources(level.get("limits"), f"{path}.limits").items():
        if name in requests or not _pod_level_resource(name):
            continue
        if name.startswith(_HUGEPAGES_PREFIX) and containers.get(name):
            continue
        requests[name] = amount
    return requests


def _add(a: Resources, b: Resources) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _max(a: Resources, b: Resources) -> Resources:
    out = dict(a)
    for k, v in b.items():
        if v > out.get(k, 0):
            out[k] = v
    return out


def _host_ports(spec: JSON, path: str) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    for group in ("initContainers", "containers"):
        for i, c in enumerate(json_list(spec.get(group), f"{path}.{group}")):
            cpath = f"{path}.{group}[{i}]"
            for j, p in enumerate(json_list(json_object(c, cpath).get("ports"), f"{cpath}.ports")):
                pdata = json_object(p, f"{cpath}.ports[{j}]")
                hp = json_int(pdata.get("hostPort"), f"{cpath}.ports[{j}].hostPort")
                if hp > 0:
                    ports.append(
                        HostPort(
                            port=hp,
                            protocol=json_str(
                                pdata.get("protocol"), f"{cpath}.ports[{j}].protocol", "TCP"
                            )
                            or "TCP",
                            ip=json_str(
                                pdata.get("hostIP"), f"{cpath}.ports[{j}].hostIP", "0.0.0.0"
                            )
                            or "0.0.0.0",
                        )
                    )
    return tuple(ports)


def _affinity(spec: JSON, path: str) -> dict[str, object]:
    aff = json_object(spec.get("affinity"), f"{path}.affinity")
    na = json_object(aff.get("nodeAffinity"), f"{path}.affinity.nodeAffinity")
    req = json_object(
        na.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )
    rpath = f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    required = tuple(
        _node_selector_term(t, f"{rpath}[{i}]")
        for i, t in enumerate(json_list(req.get("nodeSelectorTerms"), rpath))
    )
    ppath = f"{path}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = []
    for i, t in enumerate(
        json_list(na.get("preferredDuringSchedulingIgnoredDuringExecution"), ppath)
    ):
        tdata = json_object(t, f"{ppath}[{i}]")
        preferred.append(
            PreferredNodeTerm(
                weight=json_int(tdata.get("weight"), f"{ppath}[{i}].weight", 1),
                term=_node_selector_term(tdata.get("preference"), f"{ppath}[{i}].preference"),
            )
        )
    out: dict[str, object] = {
        "required_node_terms": required,
        "preferred_node_terms": tuple(preferred),
    }
    for field_name, key in (
        ("pod_affinity", "podAffinity"),
        ("pod_anti_affinity", "podAntiAffinity"),
    ):
        block = json_object(aff.get(key), f"{path}.affinity.{key}")
        bpath = f"{path}.affinity.{key}"
        out[field_name] = tuple(
            _pod_affinity_term(t, f"{bpath}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
            for i, t in enumerate(
                json_list(
                    block.get("requiredDuringSchedulingIgnoredDuringExecution"), f"{bpath}.required"
                )
            )
        )
        out[f"preferred_{field_name}"] = _weighted_pod_terms(
            block.get("preferredDuringSchedulingIgnoredDuringExecution"),
            f"{bpath}.preferredDuringSchedulingIgnoredDuringExecution",
        )
    return out


def _owners(meta: JSON, path: str) -> tuple[OwnerRef, ...]:
    out = []
    for i, o in enumerate(json_list(meta.get("ownerReferences"), f"{path}.ownerReferences")):
        odata = json_object(o, f"{path}.ownerReferences[{i}]")
        out.append(
            OwnerRef(
                kind=json_str(odata.get("kind"), f"{path}.ownerReferences[{i}].kind"),
                name=json_str(odata.get("name"), f"{path}.ownerReferences[{i}].name"),
                uid=json_str(odata.get("uid"), f"{path}.ownerReferences[{i}].uid"),
                controller=bool(odata.get("controller")),
                api_version=json_str(
                    odata.get("apiVersion"), f"{path}.ownerReferences[{i}].apiVersion"
                ),
            )
        )
    return tuple(out)


def _unschedulable(status: JSON, path: str) -> bool:
    for i, c in enumerate(json_list(status.get("conditions"), f"{path}.conditions")):
        cond = json_object(c, f"{path}.conditions[{i}]")
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return True
    return False


def pod_from_dict(raw: object, path: str = "pod", *, default_namespace: str = "default") -> Pod:
    """Parse a Pod (API JSON or YAML) into the slim view. Raises ParseError naming the field."""
    data = json_object(raw, path)
    meta = json_object(data.get("metadata"), f"{path}.metadata")
    spec = json_object(data.get("spec"), f"{path}.spec")
    status = json_object(data.get("status"), f"{path}.status")
    return pod_from_parts(meta, spec, status, path, default_namespace=default_namespace)


def _claim_names(meta: JSON, spec: JSON, spath: str) -> tuple[str, ...]:
    """PVCs the pod mounts: named ones, and the ``<pod>-<volume>`` claim Kubernetes creates for
    each generic ephemeral volume."""
    pod_name = json_str(meta.get("name"), "metadata.name")
    names: list[str] = []
    for i, v in enumerate(json_list(spec.get("volumes"), f"{spath}.volumes")):
        vpath = f"{spath}.volumes[{i}]"
        volume = json_object(v, vpath)
        claim = json_object(volume.get("persistentVolumeClaim"), f"{vpath}.persistentVolumeClaim")
        if claim:
            names.append(
                json_str(claim.get("claimName"), f"{vpath}.persistentVolumeClaim.claimName")
            )
        elif volume.get("ephemeral") is not None and pod_name:
            names.append(f"{pod_name}-{json_str(volume.get('name'), f'{vpath}.name')}")
    return tuple(names)


def pod_from_parts(
    meta: JSON, spec: JSON, status: JSON, path: str, *, default_namespace: str = "default"
) -> Pod:
    spath = f"{path}.spec"
    aff = _affinity(spec, spath)
    pvcs = _claim_names(meta, spec, spath)
    tgp = spec.get("terminationGracePeriodSeconds")
    return Pod(
        namespace=json_str(meta.get("namespace"), f"{path}.metadata.namespace", default_namespace)
        or default_namespace,
        name=json_str(meta.get("name") or meta.get("generateName"), f"{path}.metadata.name"),
        uid=json_str(meta.get("uid"), f"{path}.metadata.uid"),
        labels=string_map(meta.get("labels"), f"{path}.metadata.labels"),
        annotations=string_map(meta.get("annotations"), f"{path}.metadata.annotations"),
        requests=container_requests(spec, spath),
        node_name=json_str(spec.get("nodeName"), f"{spath}.nodeName"),
        node_selector={
            normalize_label(k): v
            for k, v in string_map(spec.get("nodeSelector"), f"{spath}.nodeSelector").items()
        },
        required_node_terms=cast("tuple[NodeSelectorTerm, ...]", aff["required_node_terms"]),
        preferred_node_terms=cast("tuple[PreferredNodeTerm, ...]", aff["preferred_node_terms"]),
        pod_affinity=cast("tuple[PodAffinityTerm, ...]", aff["pod_affinity"]),
        preferred_pod_affinity=cast(
            "tuple[WeightedPodAffinityTerm, ...]", aff["preferred_pod_affinity"]
        ),
        pod_anti_affinity=cast("tuple[PodAffinityTerm, ...]", aff["pod_anti_affinity"]),
        preferred_pod_anti_affinity=cast(
            "tuple[WeightedPodAffinityTerm, ...]", aff["preferred_pod_anti_affinity"]
        ),
        tolerations=tuple(
            toleration_from_dict(t, f"{spath}.tolerations[{i}]")
            for i, t in enumerate(json_list(spec.get("tolerations"), f"{spath}.tolerations"))
        ),
        topology_spread=tuple(
            _topology_spread(t, f"{spath}.topologySpreadConstraints[{i}]")
            for i, t in enumerate(
                json_list(
                    spec.get("topologySpreadConstraints"), f"{spath}.topologySpreadConstraints"
                )
            )
        ),
        host_ports=_host_ports(spec, spath),
        owners=_owners(meta, f"{path}.metadata"),
        priority=json_int(spec.get("priority"), f"{spath}.priority"),
        priority_class_name=json_str(spec.get("priorityClassName"), f"{spath}.priorityClassName"),
        creation_timestamp=json_str(
            meta.get("creationTimestamp"), f"{path}.metadata.creationTimestamp"
        ),
        deletion_timestamp=json_str(
            meta.get("deletionTimestamp"), f"{path}.metadata.deletionTimestamp"
        ),
        termination_grace_period_seconds=30
        if tgp is None
        else json_int(tgp, f"{spath}.terminationGracePeriodSeconds"),
        phase=json_str(status.get("phase"), f"{path}.status.phase", "Pending") or "Pending",
        start_time=json_str(status.get("startTime"), f"{path}.status.startTime"),
        scheduling_gated=bool(json_list(spec.get("schedulingGates"), f"{spath}.schedulingGates")),
        unschedulable=_unschedulable(status, f"{path}.status"),
        nominated_node_name=json_str(
            status.get("nominatedNodeName"), f"{path}.status.nominatedNodeName"
        ),
        pvc_names=pvcs,
        resource_claims=bool(json_list(spec.get("resourceClaims"), f"{spath}.resourceClaims")),
        scheduler_name=json_str(
            spec.get("schedulerName"), f"{spath}.schedulerName", "default-scheduler"
        )
        or "default-scheduler",
    )


# ----------------------------------------------------------------------------- nodes


@dataclass(frozen=True, slots=True)
class NodeCondition:
    """One of a Node's ``status.conditions``, without the heartbeat (which changes every few
    minutes while the condition does not). ``since`` is ``lastTransitionTime`` ("" if absent)."""

    type: str
    status: str
    since: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity: Mapping[str, int] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    provider_id: str = ""
    ready: bool = False
    unschedulable: bool = False
    creation_timestamp: str = ""
    deletion_timestamp: str = ""
    finalizers: tuple[str, ...] = ()
    conditions: tuple[NodeCondition, ...] = ()

    def condition(self, type_: str) -> NodeCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


def node_from_dict(raw: object, path: str = "node") -> Node:
    data = json_object(raw, path)
    meta = json_object(data.get("metadata"), f"{path}.metadata")
    spec = json_object(data.get("spec"), f"{path}.spec")
    status = json_object(data.get("status"), f"{path}.status")
    conditions = []
    for i, c in enumerate(json_list(status.get("conditions"), f"{path}.status.conditions")):
        cpath = f"{path}.status.conditions[{i}]"
        cond = json_object(c, cpath)
        # Interned: a few types and statuses, and transition times most conditions of a node
        # (and the nodes launched with it) share, repeated over thousands of nodes.
        conditions.append(
            NodeCondition(
                type=intern(json_str(cond.get("type"), f"{cpath}.type")),
                status=intern(json_str(cond.get("status"), f"{cpath}.status")),
                since=intern(
                    json_str(cond.get("lastTransitionTime"), f"{cpath}.lastTransitionTime")
                ),
            )
        )
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    capacity = _resources(status.get("capacity"), f"{path}.status.capacity")
    allocatable = _resources(status.get("allocatable"), f"{path}.status.allocatable") or dict(
        capacity
    )
    return Node(
        name=json_str(meta.get("name"), f"{path}.metadata.name"),
        uid=json_str(meta.get("uid"), f"{path}.metadata.uid"),
        labels=string_map(meta.get("labels"), f"{path}.metadata.labels"),
        annotations=string_map(meta.get("annotations"), f"{path}.metadata.annotations"),
        taints=tuple(
            taint_from_dict(t, f"{path}.spec.taints[{i}]")
            for i, t in enumerate(json_list(spec.get("taints"), f"{path}.spec.taints"))
        ),
        capacity=capacity,
        allocatable=allocatable,
        provider_id=json_str(spec.get("providerID"), f"{path}.spec.providerID"),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        creation_timestamp=json_str(
            meta.get("creationTimestamp"), f"{path}.metadata.creationTimestamp"
        ),
        deletion_timestamp=json_str(
            meta.get("deletionTimestamp"), f"{path}.metadata.deletionTimestamp"
        ),
        finalizers=tuple(
            json_str(f, f"{path}.metadata.finalizers")
            for f in json_list(meta.get("finalizers"), f"{path}.metadata.finalizers")
        ),
        conditions=tuple(conditions),
    )
