"""Read ordinary Kubernetes YAML into cluster objects.

``load_manifests`` turns the files given to ``karpenter-py plan -f`` into a :class:`Manifests`:
the objects a cluster would hold (:class:`ClusterObjects`: NodePools, NodeClaims, Nodes, pods,
DaemonSet templates, storage objects, ...) and the warnings reading them gave. Nothing here is
solver-shaped: ``karpenter_py.cli.offline`` puts the objects in a ``state.Cluster`` and both
``plan`` and ``plan --disruption`` go from its snapshot as the controller goes (an import-linter
contract keeps this module away from ``scheduling`` and ``state``).

Kinds and what happens to them:

* ``NodePool`` (karpenter.sh/v1): validated by the pydantic API model.
* v1beta1 ``NodePool``/``NodeClaim`` (karpenter.sh/v1beta1) and ``EC2NodeClass``
  (karpenter.k8s.aws/v1beta1), as older guides write them: validated as v1beta1, converted to v1
  by ``karpenter_py.model.api.convert`` (as the conversion webhook converts them) and then read as
  v1 objects; one warning per converted object says what changed. A v1beta1 NodeClaim is read
  after every other document: it takes the ``expireAfter`` of the NodePool its
  ``karpenter.sh/nodepool`` label names when that NodePool is in the input (720h otherwise).
* ``Pod`` (v1): pending (no ``spec.nodeName``) pods are marked unschedulable, as the
  kube-scheduler leaves the pods Karpenter plans for; bound pods use their Node's capacity.
  Finished pods (Succeeded/Failed) are skipped, as are unbound pods that are being deleted or
  that others place (DaemonSet-owned, mirror pods).
* ``Deployment``/``ReplicaSet``/``StatefulSet`` (apps/v1), ``ReplicationController`` (v1) and
  ``Job`` (batch/v1) are expanded to ``spec.replicas`` pods (default 1; a Job runs
  ``min(parallelism, completions)`` pods, none when suspended). Names are deterministic:
  ``<name>-<index>`` for every kind (index from 0), which for a StatefulSet is exactly the
  controller's ``<name>-<ordinal>``. Pods carry the template's labels plus the labels the
  controllers add (``pod-template-hash``, ``statefulset.kubernetes.io/pod-name``,
  ``apps.kubernetes.io/pod-index``, ``batch.kubernetes.io/job-name``, ``job-name``), so selectors
  and ``matchLabelKeys`` behave as in a cluster.
* ``DaemonSet`` (apps/v1): its pod template is daemonset overhead for new nodes.
* ``Node`` (v1): existing capacity; its NodePool is its ``karpenter.sh/nodepool`` label.
* ``NodeClaim`` (karpenter.sh/v1): validated and kept; the cluster model joins it to its Node.
* ``EC2NodeClass``: validated by its API model and kept by name (``ClusterObjects.nodeclasses``):
  ``plan`` sizes the built-in catalog's instance types for each NodePool under its class's AMI
  family, kubelet settings (or the NodePool's v1beta1 kubelet annotation) and root volume /
  instance store settings, as the controller does. AMIs, subnets and security groups are not
  resolved. ``KWOKNodeClass``: validated and otherwise unused.
* ``NodeOverlay`` (karpenter.sh/v1alpha1): validated and kept; with the ``NodeOverlay`` feature
  gate on, it adjusts the instance types' prices and capacity as the controller does.
* ``List`` (what ``kubectl get -o yaml`` prints) and API list responses (``PodList``, ...): their
  items are read as documents.
* ``Namespace`` (v1): its labels feed pod-affinity ``namespaceSelector``s.
* ``PersistentVolumeClaim``, ``PersistentVolume`` (v1) and ``StorageClass`` (storage.k8s.io/v1):
  volume topology, as the controller applies it (``karpenter_py.scheduling.volumes``): a pending
  pod goes only where its claims' volumes can attach, and a pod whose claim (or that claim's
  volume or class) is not in the input is unschedulable with that reason. A claim naming its
  volume (``spec.volumeName``) counts as bound; the ``pv.kubernetes.io/bind-completed``
  annotation the PV controller adds is not required. A StatefulSet's ``volumeClaimTemplates``
  become the claims ``<template>-<statefulset>-<ordinal>``: one in the input is used as is (a
  claim created earlier, perhaps bound to a zonal volume); a missing one is the unbound claim the
  controller would create, when its StorageClass (the template's, else the input's default class)
  is in the input, and is otherwise not simulated (with a warning, ``Manifests.workload_warnings``).
* Well-known kinds that do not change where pods go (Service, ConfigMap, Secret, RBAC,
  PodDisruptionBudget, PriorityClass, ...; see ``IGNORED_KINDS``) are skipped silently.
  PodDisruptionBudgets are kept, unparsed; ``karpenter_py.cli.offline`` reads them.

``ClusterObjects.without_workloads`` leaves out the pods workloads would create, for
``plan --disruption``: a cluster dump lists those as Pods.

Anything else is an error: an unknown kind, a wrong apiVersion for a known kind, a document that is
not an object, YAML that does not parse or a field that does not validate. Every error is a
:class:`ManifestError` naming the file, the 1-based document number, the object and the field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar, cast

import yaml
from pydantic import BaseModel, ValidationError

from karpenter_py.model.api import convert, v1beta1
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import (
    Node,
    OwnerRef,
    Pod,
    label_selector_from_dict,
    node_from_dict,
    pod_from_dict,
    pod_from_parts,
)
from karpenter_py.model.fields import (
    ParseError,
    json_int,
    json_list,
    json_object,
    json_str,
    string_map,
)
from karpenter_py.model.labels import AWS_GROUP
from karpenter_py.model.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObjects,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)

JSON = dict[str, object]

# Kinds that never change where pods go; skipped without a word, whatever their apiVersion.
IGNORED_KINDS: Final = frozenset(
    {
        "APIService",
        "CSIDriver",
        "CSINode",
        "CertificateSigningRequest",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "ControllerRevision",
        "CronJob",
        "CustomResourceDefinition",
        "EndpointSlice",
        "Endpoints",
        "Event",
        "HorizontalPodAutoscaler",
        "Ingress",
        "IngressClass",
        "Lease",
        "LimitRange",
        "MutatingWebhookConfiguration",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "PodTemplate",
        "PriorityClass",
        "ResourceQuota",
        "Role",
        "RoleBinding",
        "RuntimeClass",
        "Secret",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
        "VolumeAttachment",
    }
)

# Kinds plan reads, with the apiVersions it accepts for them.
API_VERSIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "Pod": ("v1",),
    "Node": ("v1",),
    "Namespace": ("v1",),
    "ReplicationController": ("v1",),
    "Deployment": ("apps/v1",),
    "ReplicaSet": ("apps/v1",),
    "StatefulSet": ("apps/v1",),
    "DaemonSet": ("apps/v1",),
    "Job": ("batch/v1",),
    "NodePool": ("karpenter.sh/v1", "karpenter.sh/v1beta1"),
    "NodeClaim": ("karpenter.sh/v1", "karpenter.sh/v1beta1"),
    "EC2NodeClass": ("karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1"),
    "KWOKNodeClass": ("karpenter.kwok.sh/v1alpha1",),
    "NodeOverlay": ("karpenter.sh/v1alpha1",),
    "PersistentVolumeClaim": ("v1",),
    "PersistentVolume": ("v1",),
    "StorageClass": ("storage.k8s.io/v1",),
}
WORKLOAD_KINDS: Final = ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController", "Job")

# Set by the API server on every Namespace (NamespaceDefaultLabelName).
LABEL_NAMESPACE_NAME: Final = "kubernetes.io/metadata.name"

# Alphabet of k8s.io/apimachinery rand.SafeEncodeString (no vowels, no confusable characters).
_SAFE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


# ----------------------------------------------------------------------------- errors


class ManifestError(Exception):
    """One problem in the input, located by file, document (1-based), object and field path."""

    def __init__(
        self,
        file: str,
        message: str,
        *,
        document: int | None = None,
        kind: str = "",
        name: str = "",
        path: str = "",
    ) -> None:
        self.file = file
        self.document = document
        self.kind = kind
        self.name = name
        self.path = path.lstrip(".")
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file
        if self.document is not None:
            where += f": document {self.document}"
            what = " ".join(part for part in (self.kind, self.name) if part)
            if what:
                where += f" ({what})"
        field_part = f"{self.path}: " if self.path else ""
        return f"{where}: {field_part}{self.message}"


@dataclass(frozen=True, slots=True)
class Source:
    """Where an object came from, for error messages."""

    file: str
    document: int
    kind: str = ""
    name: str = ""
    prefix: str = ""  # "items[3]." inside a List

    def error(self, message: str, path: str = "") -> ManifestError:
        full = f"{self.prefix}{path.lstrip('.')}" if path else self.prefix.rstrip(".")
        return ManifestError(
            self.file, message, document=self.document, kind=self.kind, name=self.name, path=full
        )

    def describe(self) -> str:
        return f"{self.file}: document {self.document} ({self.kind} {self.name})"


def pydantic_path(loc: Sequence[int | str]) -> str:
    """A pydantic error location as a field path: ("spec", "requirements", 0, "key") -> spec.requirements[0].key."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def validation_error(source: Source, err: ValidationError) -> ManifestError:
    errors = err.errors(include_url=False)
    if not errors:  # pragma: no cover - pydantic always reports at least one
        return source.error(str(err))
    first = errors[0]
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    given = first.get("input")
    if isinstance(given, bool | int | float | str) and len(repr(given)) <= 60:
        message += f" (got {given!r})"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return source.error(message, pydantic_path(tuple(first.get("loc", ()))))


# ----------------------------------------------------------------------------- YAML


class _KubeLoader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings, as Kubernetes' own YAML decoding does."""


_KubeLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml_problem(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        parts = [err.problem or "syntax error"]
        if err.problem_mark is not None:
            mark = err.problem_mark
            parts.append(f"at line {mark.line + 1}, column {mark.column + 1}")
        if err.context:
            ctx = err.context
            if err.context_mark is not None:
                ctx += f" started at line {err.context_mark.line + 1}"
            parts.append(f"({ctx})")
        return " ".join(parts)
    return str(err)


def read_text(file: str) -> str:
    """The text of ``file`` ("-" is stdin). Raises ManifestError when it cannot be read."""
    if file == "-":
        return sys.stdin.read()
    path = Path(file)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(file, "no such file") from None
    except IsADirectoryError:
        raise ManifestError(file, "is a directory") from None
    except UnicodeDecodeError as err:
        raise ManifestError(file, f"not UTF-8 text ({err.reason})") from None
    except OSError as err:
        raise ManifestError(file, err.strerror or str(err)) from None


def expand_paths(files: Sequence[str]) -> list[str]:
    """Directories stand for their *.yaml, *.yml and *.json files (sorted), as with kubectl -f."""
    out: list[str] = []
    for file in files:
        path = Path(file)
        if file != "-" and path.is_dir():
            found = sorted(
                str(p)
                for p in path.iterdir()
                if p.is_file() and p.suffix in (".yaml", ".yml", ".json")
            )
            if not found:
                raise ManifestError(file, "directory holds no .yaml, .yml or .json files")
            out.extend(found)
        else:
            out.append(file)
    return out


def documents(file: str, text: str) -> Iterator[tuple[int, object]]:
    """(1-based index, parsed document) for every document in ``text``, empty ones included."""
    stream = yaml.load_all(text, Loader=_KubeLoader)  # a SafeLoader subclass
    index = 0
    while True:
        try:
            doc = next(stream)
        except StopIteration:
            return
        except yaml.YAMLError as err:
            raise ManifestError(
                file, f"invalid YAML: {_yaml_problem(err)}", document=index + 1
            ) from None
        index += 1
        yield index, doc


def _safe_hash(value: object) -> str:
    """A short deterministic hash in the shape of the controllers' pod-template-hash."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).digest()
    number = str(int.from_bytes(digest[:4], "big"))
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in number)


# ----------------------------------------------------------------------------- result


@dataclass(frozen=True, slots=True)
class ClusterObjects:
    """The input as a cluster holds it: objects, nothing solver-shaped (``karpenter_py.cli.offline``
    puts them in a cluster model). Each object keeps its :class:`Source` for messages."""

    nodepools: tuple[tuple[NodePool, Source], ...] = ()
    # EC2NodeClasses by name: their knobs size the instance types of the NodePools naming them,
    # and a class that would not become Ready leaves its NodePools idle.
    nodeclasses: Mapping[str, tuple[EC2NodeClass, Source]] = field(default_factory=dict)
    nodeclaims: tuple[tuple[NodeClaim, Source], ...] = ()  # all of them, in input order
    nodes: tuple[tuple[Node, Source], ...] = ()
    # Pods in input order: bound ones (spec.nodeName), pending ones (marked unschedulable, as the
    # kube-scheduler leaves them) and the pods workloads would create (pending; their source is
    # the workload). Finished pods are left out.
    pods: tuple[tuple[Pod, Source], ...] = ()
    daemonsets: Mapping[str, Pod] = field(default_factory=dict)  # namespace/name -> template pod
    pdbs: tuple[tuple[JSON, Source], ...] = ()  # PodDisruptionBudget documents, unparsed
    storage: StorageObjects = field(default_factory=StorageObjects)
    # Labels of the declared Namespaces (with the kubernetes.io/metadata.name label).
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    overlays: tuple[tuple[NodeOverlay, Source], ...] = ()

    def without_workloads(self) -> ClusterObjects:
        """Only the pods of Pod documents: a cluster dump lists the pods its workloads made."""
        pods = tuple((p, source) for p, source in self.pods if source.kind == "Pod")
        return dataclasses.replace(self, pods=pods)

    def ec2nodeclass_for(self, ref: tuple[str, str, str]) -> EC2NodeClass | None:
        """The EC2NodeClass of the input that a (group, kind, name) ref names."""
        group, kind, name = ref
        if (group, kind) != (AWS_GROUP, "EC2NodeClass"):
            return None
        found = self.nodeclasses.get(name)
        return found[0] if found is not None else None


@dataclass(frozen=True, slots=True)
class Manifests:
    """Everything the files hold, and what reading them had to say."""

    cluster: ClusterObjects = field(default_factory=ClusterObjects)
    warnings: list[str] = field(default_factory=list)
    # Warnings about the pods workloads would create (their volumeClaimTemplates): only for a
    # command that plans those pods.
    workload_warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _TemplateClaim:
    """A claim a StatefulSet's controller makes from one of its volumeClaimTemplates."""

    name: str  # <template>-<statefulset>-<ordinal>
    storage_class_name: str | None  # the template's spec.storageClassName


@dataclass(slots=True)
class _Collector:
    nodepools: dict[str, tuple[NodePool, Source]] = field(default_factory=dict)
    pods: list[tuple[Pod, Source]] = field(default_factory=list)
    daemonsets: list[Pod] = field(default_factory=list)
    nodes: dict[str, tuple[Node, Source]] = field(default_factory=dict)
    claims: dict[str, tuple[NodeClaim, Source]] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    pod_sources: dict[str, Source] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    pvcs: dict[str, tuple[PersistentVolumeClaim, Source]] = field(default_factory=dict)
    pvs: dict[str, tuple[PersistentVolume, Source]] = field(default_factory=dict)
    classes: dict[str, tuple[StorageClass, Source]] = field(default_factory=dict)
    # Pending StatefulSet pod key -> the claims its volumeClaimTemplates give it.
    template_claims: dict[str, tuple[_TemplateClaim, ...]] = field(default_factory=dict)
    pdbs: list[tuple[JSON, Source]] = field(default_factory=list)
    # v1beta1 NodeClaim documents, read once every NodePool is known.
    v1beta1_claims: list[tuple[JSON, Source]] = field(default_factory=list)
    ec2nodeclasses: dict[str, tuple[EC2NodeClass, Source]] = field(default_factory=dict)
    overlays: dict[str, tuple[NodeOverlay, Source]] = field(default_factory=dict)

    def claim_pod_name(self, key: str, source: Source) -> None:
        earlier = self.pod_sources.get(key)
        if earlier is not None:
            raise source.error(
                f"pod {key} is also produced by {earlier.describe()}; pod names must be unique"
            )
        self.pod_sources[key] = source


# ----------------------------------------------------------------------------- kinds


def _pending(pod: Pod) -> Pod:
    """A pod to plan: the kube-scheduler has found no node for it (PodScheduled=False Unschedulable)."""
    return pod if pod.unschedulable else dataclasses.replace(pod, unschedulable=True)


def _add_pod(col: _Collector, pod: Pod, source: Source) -> None:
    """Bound pods use their node's capacity until they finish; unbound ones are planned unless
    they finish, are going away, or are placed by someone else (DaemonSet controller, kubelet)."""
    if not pod.name:
        raise ParseError("metadata.name", "name is required")
    col.claim_pod_name(pod.key, source)
    if pod.is_terminal():
        return
    if pod.node_name:
        col.pods.append((pod, source))
    elif not (pod.is_terminating() or pod.is_daemonset_pod() or pod.is_mirror_pod()):
        col.pods.append((_pending(pod), source))


def _read_pod(col: _Collector, doc: JSON, source: Source) -> None:
    _add_pod(col, pod_from_dict(doc, ""), source)


def _template(doc: JSON) -> tuple[JSON, JSON]:
    """(template metadata, template spec) of a workload, with the basic shape checked."""
    spec = json_object(doc.get("spec"), "spec")
    if "template" not in spec:
        raise ParseError("spec.template", "a pod template is required")
    template = json_object(spec.get("template"), "spec.template")
    tmeta = json_object(template.get("metadata"), "spec.template.metadata")
    tspec = json_object(template.get("spec"), "spec.template.spec")
    containers = tspec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ParseError("spec.template.spec.containers", "at least one container is required")
    return tmeta, tspec


def _check_selector(spec: JSON, labels: Mapping[str, str]) -> None:
    if spec.get("selector") is None:
        return
    selector = label_selector_from_dict(spec.get("selector"), "spec.selector")
    if not selector.matches(labels):
        raise ParseError("spec.selector", "does not match the pod template's labels")


def _replicas(kind: str, spec: JSON) -> int:
    if kind != "Job":
        return json_int(spec.get("replicas"), "spec.replicas", 1, minimum=0)
    if spec.get("suspend") is True:
        return 0
    parallelism = json_int(spec.get("parallelism"), "spec.parallelism", 1, minimum=0)
    completions = spec.get("completions")
    if completions is None:
        return parallelism
    return min(parallelism, json_int(completions, "spec.completions", 1, minimum=0))


def _template_pod(doc: JSON, name: str, namespace: str) -> Pod:
    """The workload's pod template parsed once; copies of it become the workload's pods."""
    tmeta, tspec = _template(doc)
    pmeta: JSON = {k: v for k, v in tmeta.items() if k not in ("name", "generateName", "namespace")}
    pmeta["name"] = name
    pmeta["namespace"] = namespace
    return pod_from_parts(pmeta, tspec, {}, "spec.template", default_namespace=namespace)


def _read_workload(col: _Collector, doc: JSON, source: Source) -> None:
    kind = source.kind
    meta = json_object(doc.get("metadata"), "metadata")
    spec = json_object(doc.get("spec"), "spec")
    name = json_str(meta.get("name"), "metadata.name")
    if not name:
        raise ParseError("metadata.name", "name is required")
    namespace = json_str(meta.get("namespace"), "metadata.namespace") or "default"
    base = _template_pod(doc, name, namespace)
    _check_selector(spec, base.labels)
    count = _replicas(kind, spec)
    template_hash = _safe_hash(spec.get("template"))

    extra: dict[str, str] = {}
    owner = OwnerRef(kind=kind, name=name, controller=True)
    if kind == "Deployment":
        extra["pod-template-hash"] = template_hash
        owner = OwnerRef(kind="ReplicaSet", name=f"{name}-{template_hash}", controller=True)
    elif kind == "StatefulSet":
        extra["controller-revision-hash"] = f"{name}-{template_hash}"
    elif kind == "Job":
        extra["batch.kubernetes.io/job-name"] = name
        extra["job-name"] = name

    templates = _claim_templates(spec) if kind == "StatefulSet" else ()
    for index in range(count):
        pod_name = f"{name}-{index}"
        labels = {**base.labels, **extra}
        if kind == "StatefulSet":
            labels["statefulset.kubernetes.io/pod-name"] = pod_name
            labels["apps.kubernetes.io/pod-index"] = str(index)
        pod = dataclasses.replace(base, name=pod_name, labels=labels, owners=(owner,))
        _add_pod(col, pod, source)
        if templates:
            col.template_claims[pod.key] = tuple(
                _TemplateClaim(f"{t}-{pod_name}", sc) for t, sc in templates
            )


def _claim_templates(spec: JSON) -> list[tuple[str, str | None]]:
    """(name, storageClassName) of each of a StatefulSet's volumeClaimTemplates."""
    out: list[tuple[str, str | None]] = []
    path = "spec.volumeClaimTemplates"
    for i, t in enumerate(json_list(spec.get("volumeClaimTemplates"), path)):
        tmeta = json_object(json_object(t, f"{path}[{i}]").get("metadata"), f"{path}[{i}].metadata")
        tname = json_str(tmeta.get("name"), f"{path}[{i}].metadata.name")
        if not tname:
            raise ParseError(f"{path}[{i}].metadata.name", "name is required")
        sc = json_object(json_object(t, f"{path}[{i}]").get("spec"), f"{path}[{i}].spec").get(
            "storageClassName"
        )
        out.append(
            (tname, None if sc is None else json_str(sc, f"{path}[{i}].spec.storageClassName"))
        )
    return out


def _read_daemonset(col: _Collector, doc: JSON, source: Source) -> None:
    meta = json_object(doc.get("metadata"), "metadata")
    name = json_str(meta.get("name"), "metadata.name")
    if not name:
        raise ParseError("metadata.name", "name is required")
    namespace = json_str(meta.get("namespace"), "metadata.namespace") or "default"
    pod = _template_pod(doc, name, namespace)
    _check_selector(json_object(doc.get("spec"), "spec"), pod.labels)
    owner = OwnerRef(kind="DaemonSet", name=name, controller=True)
    col.daemonsets.append(dataclasses.replace(pod, owners=(owner,)))


def _read_namespace(col: _Collector, doc: JSON, source: Source) -> None:
    del source
    meta = json_object(doc.get("metadata"), "metadata")
    name = json_str(meta.get("name"), "metadata.name")
    if not name:
        raise ParseError("metadata.name", "name is required")
    labels = string_map(meta.get("labels"), "metadata.labels")
    labels[LABEL_NAMESPACE_NAME] = name
    col.namespaces[name] = labels


def _read_node(col: _Collector, doc: JSON, source: Source) -> None:
    node = node_from_dict(doc, "")
    if not node.name:
        raise ParseError("metadata.name", "name is required")
    if node.name in col.nodes:
        raise source.error(
            f"node {node.name} is also defined by {col.nodes[node.name][1].describe()}"
        )
    col.nodes[node.name] = (node, source)


def _read_nodepool(col: _Collector, doc: JSON, source: Source) -> None:
    try:
        model = NodePool.model_validate(doc)
    except ValidationError as err:
        raise validation_error(source, err) from None
    if not model.metadata.name:
        raise source.error("name is required", "metadata.name")
    name = model.metadata.name
    if name in col.nodepools:
        raise source.error(
            f"NodePool {name} is also defined by {col.nodepools[name][1].describe()}"
        )
    col.nodepools[name] = (model, source)


# Provider NodeClasses are validated; an EC2NodeClass is kept for its knobs (plan resolves no
# AMIs, subnets or roles).
_NODECLASS_MODELS: Final[Mapping[str, type[BaseModel]]] = {
    "EC2NodeClass": EC2NodeClass,
    "KWOKNodeClass": KWOKNodeClass,
}


def _read_nodeclass(col: _Collector, doc: JSON, source: Source) -> None:
    try:
        model = _NODECLASS_MODELS[source.kind].model_validate(doc)
    except ValidationError as err:
        raise validation_error(source, err) from None
    if not isinstance(model, EC2NodeClass):
        return
    name = model.metadata.name
    if name in col.ec2nodeclasses:
        raise source.error(
            f"EC2NodeClass {name} is also defined by {col.ec2nodeclasses[name][1].describe()}"
        )
    col.ec2nodeclasses[name] = (model, source)


def _read_nodeclaim(col: _Collector, doc: JSON, source: Source) -> None:
    try:
        claim = NodeClaim.model_validate(doc)
    except ValidationError as err:
        raise validation_error(source, err) from None
    name = claim.metadata.name
    if not name:
        raise source.error("name is required", "metadata.name")
    if name in col.claims:
        raise source.error(f"NodeClaim {name} is also defined by {col.claims[name][1].describe()}")
    col.claims[name] = (claim, source)


T = TypeVar("T")


def _register(
    table: dict[str, tuple[T, Source]], key: str, value: T, source: Source, kind: str
) -> None:
    """Add a storage object, refusing a second definition of the same one."""
    if key in table:
        raise source.error(f"{kind} {key} is also defined by {table[key][1].describe()}")
    table[key] = (value, source)


def _read_overlay(col: _Collector, doc: JSON, source: Source) -> None:
    try:
        overlay = NodeOverlay.model_validate(doc)
    except ValidationError as err:
        raise validation_error(source, err) from None
    if not overlay.metadata.name:
        raise source.error("name is required", "metadata.name")
    _register(col.overlays, overlay.metadata.name, overlay, source, "NodeOverlay")


def _read_pvc(col: _Collector, doc: JSON, source: Source) -> None:
    pvc = pvc_from_dict(doc, "")
    _register(col.pvcs, pvc.key, pvc, source, "PersistentVolumeClaim")


def _read_pv(col: _Collector, doc: JSON, source: Source) -> None:
    pv = pv_from_dict(doc, "")
    _register(col.pvs, pv.name, pv, source, "PersistentVolume")


def _read_storage_class(col: _Collector, doc: JSON, source: Source) -> None:
    sc = storage_class_from_dict(doc, "")
    _register(col.classes, sc.name, sc, source, "StorageClass")


_READERS: Final[Mapping[str, Callable[[_Collector, JSON, Source], None]]] = {
    "Pod": _read_pod,
    "Node": _read_node,
    "Namespace": _read_namespace,
    "DaemonSet": _read_daemonset,
    "NodePool": _read_nodepool,
    "NodeClaim": _read_nodeclaim,
    "EC2NodeClass": _read_nodeclass,
    "KWOKNodeClass": _read_nodeclass,
    "NodeOverlay": _read_overlay,
    "PersistentVolumeClaim": _read_pvc,
    "PersistentVolume": _read_pv,
    "StorageClass": _read_storage_class,
    **dict.fromkeys(WORKLOAD_KINDS, _read_workload),
}


# ----------------------------------------------------------------------------- documents


def _read_document(col: _Collector, file: str, index: int, raw: object, prefix: str = "") -> None:
    bare = Source(file, index, prefix=prefix)
    if not isinstance(raw, dict):
        raise bare.error(f"expected a Kubernetes object, got {type(raw).__name__}")
    doc = cast(JSON, raw)
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        raise bare.error("kind is required", "kind")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    source = dataclasses.replace(bare, kind=kind, name=name if isinstance(name, str) else "")
    if kind == "PodDisruptionBudget":
        col.pdbs.append((doc, source))  # read by ``plan --disruption`` only
        return
    if kind in IGNORED_KINDS:
        return
    if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
        # kubectl's v1 List, or an API list response (PodList, NodeList, ...).
        _read_list(col, doc, source)
        return
    versions = API_VERSIONS.get(kind)
    if versions is None:
        raise source.error(
            f"unknown kind {kind!r}; plan reads NodePool, Pod, Deployment, ReplicaSet, "
            "StatefulSet, Job, DaemonSet, Node, NodeClass, PersistentVolumeClaim, "
            "PersistentVolume and StorageClass objects",
            "kind",
        )
    api_version = doc.get("apiVersion")
    if api_version not in versions:
        if not api_version:
            raise source.error("apiVersion is required", "apiVersion")
        raise source.error(
            f"{kind} is served as {' or '.join(versions)}, not {api_version!r}", "apiVersion"
        )
    if api_version in _V1BETA1_MODELS:
        if kind == "NodeClaim":
            # Converted once every NodePool is read: it takes its NodePool's expireAfter.
            col.v1beta1_claims.append((doc, source))
            return
        doc = _converted_v1beta1(col, doc, source, str(api_version))
    _read_kind(col, doc, source)


def _read_kind(col: _Collector, doc: JSON, source: Source) -> None:
    try:
        _READERS[source.kind](col, doc, source)
    except ParseError as err:
        raise source.error(err.problem, err.path) from None


_V1BETA1_MODELS: Final[Mapping[str, Mapping[str, type[BaseModel]]]] = {
    "karpenter.sh/v1beta1": {"NodePool": v1beta1.NodePool, "NodeClaim": v1beta1.NodeClaim},
    "karpenter.k8s.aws/v1beta1": {"EC2NodeClass": v1beta1.EC2NodeClass},
}


def _converted_v1beta1(
    col: _Collector,
    doc: JSON,
    source: Source,
    api_version: str,
    nodepools: convert.NodePools | None = None,
) -> JSON:
    """A v1beta1 object validated as v1beta1, then in its v1 form, with one warning saying
    what the conversion changed (the webhook converts the same way; ``nodepools``: the v1
    NodePools of the input, for NodeClaims)."""
    try:
        _V1BETA1_MODELS[api_version][source.kind].model_validate(doc)
        converted = convert.to_v1(doc, nodepools or {})
    except ValidationError as err:
        raise validation_error(source, err) from None
    except convert.ConversionError as err:
        raise source.error(str(err)) from None
    col.warnings.append(
        f"{source.describe()}: {source.kind} {api_version} converted to v1: "
        + "; ".join(converted.changes[1:] or ("no other change",))
    )
    return converted.object


def _read_list(col: _Collector, doc: JSON, source: Source) -> None:
    items = doc.get("items")
    if items is not None and not isinstance(items, list):
        raise source.error("expected a list", "items")
    item_kind = source.kind.removesuffix("List") if source.kind != "List" else ""
    for i, item in enumerate(items or []):
        if item_kind and isinstance(item, dict) and "kind" not in item:
            # API list responses leave kind and apiVersion off their items.
            item = {"kind": item_kind, "apiVersion": doc.get("apiVersion"), **item}
        _read_document(col, source.file, source.document, item, f"{source.prefix}items[{i}].")


def load_manifests(files: Sequence[str]) -> Manifests:
    """Read every document of every file. Raises ManifestError on the first problem."""
    col = _Collector()
    for file in expand_paths(files):
        for index, raw in documents(file, read_text(file)):
            if raw is None:  # an empty document ("---" twice, a trailing "---")
                continue
            _read_document(col, file, index, raw)
    _read_v1beta1_claims(col)
    return _finish(col)


def _read_v1beta1_claims(col: _Collector) -> None:
    """The v1beta1 NodeClaims, after every NodePool: each takes the ``expireAfter`` of the
    NodePool its label names, as the conversion webhook looks it up (their warnings come last)."""
    pools = {
        name: model.model_dump(by_alias=True, exclude_none=True, mode="json")
        for name, (model, _) in col.nodepools.items()
    }
    for doc, source in col.v1beta1_claims:
        api_version = str(doc.get("apiVersion"))
        _read_kind(col, _converted_v1beta1(col, doc, source, api_version, pools), source)


def _finish(col: _Collector) -> Manifests:
    pods, storage, workload_warnings = _volumes(col)
    return Manifests(
        cluster=ClusterObjects(
            nodepools=tuple(col.nodepools.values()),
            nodeclasses=dict(col.ec2nodeclasses),
            nodeclaims=tuple(col.claims.values()),
            nodes=tuple(col.nodes.values()),
            pods=tuple(pods),
            daemonsets={f"{p.namespace}/{p.name}": p for p in col.daemonsets},
            pdbs=tuple(col.pdbs),
            storage=storage,
            namespaces=dict(col.namespaces),
            overlays=tuple(col.overlays.values()),
        ),
        warnings=col.warnings,
        workload_warnings=workload_warnings,
    )


def _volumes(
    col: _Collector,
) -> tuple[list[tuple[Pod, Source]], StorageObjects, list[str]]:
    """The pods with their StatefulSet template claims, the storage objects (claims the
    StatefulSet controller would create from its templates included) and a warning for each
    workload whose templates cannot be simulated."""
    claims = {key: pvc for key, (pvc, _) in col.pvcs.items()}
    classes = {name: sc for name, (sc, _) in col.classes.items()}
    default = next((sc.name for sc in classes.values() if sc.is_default), None)
    pods = []
    skipped: dict[str, list[str]] = {}  # pod owner -> claims not simulated
    for pod, source in col.pods:
        names = []
        for t in col.template_claims.get(pod.key, ()):
            key = f"{pod.namespace}/{t.name}"
            class_name = t.storage_class_name if t.storage_class_name is not None else default
            if key not in claims and class_name and class_name in classes:
                claims[key] = PersistentVolumeClaim(
                    pod.namespace, t.name, storage_class_name=class_name
                )
            if key in claims:
                names.append(t.name)
            else:
                skipped.setdefault(source.describe(), []).append(t.name)
        if names:
            pod = dataclasses.replace(pod, pvc_names=(*pod.pvc_names, *names))
        pods.append((pod, source))
    warnings = [
        f"{owner}: volumeClaimTemplates not simulated for {', '.join(names)}: "
        "neither the claim nor its StorageClass is in the input"
        for owner, names in skipped.items()
    ]
    volumes = {name: pv for name, (pv, _) in col.pvs.items()}
    return pods, StorageObjects(claims=claims, volumes=volumes, classes=classes), warnings
