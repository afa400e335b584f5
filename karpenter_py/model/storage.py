"""Slim, immutable views of the storage objects volume topology reads.

PersistentVolumeClaims, PersistentVolumes and StorageClasses reduced to what decides where a pod
that mounts them can run (upstream's ``volumetopology.go``): a claim's binding, a volume's
required node affinity, a class's binding mode and allowed topologies. The ``*_from_dict``
parsers read API JSON or a user's YAML and raise :class:`ParseError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from karpenter_py.model.core import (
    SelectorRequirement,
    normalize_label,
    selector_requirement_from_dict,
)
from karpenter_py.model.fields import JSON, ParseError, json_list, json_object, json_str

# Set by the PV controller once a claim and its volume are bound to each other; without it the
# kube-scheduler treats a claim that names a volume as not bound yet.
ANNOTATION_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"

BINDING_IMMEDIATE: Final = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
BINDING_MODES: Final = (BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER)

CLAIM_LOST: Final = "Lost"

# Marks the class the API server's DefaultStorageClass admission gives claims that name none.
ANNOTATION_DEFAULT_CLASS: Final = "storageclass.kubernetes.io/is-default-class"

# One OR-ed alternative: requirements that must all hold (AND).
Term = tuple[SelectorRequirement, ...]


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str = ""  # spec.volumeName: the volume it is (being) bound to
    storage_class_name: str | None = None  # None: unset; "": explicitly no class
    phase: str = "Pending"
    bind_completed: bool = False  # the pv.kubernetes.io/bind-completed annotation is present
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    # spec.nodeAffinity.required.nodeSelectorTerms (matchExpressions only), OR-ed; () = anywhere.
    node_affinity: tuple[Term, ...] = ()
    local: bool = False  # a ``local`` or ``hostPath`` volume: lives on one node's disk
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    volume_binding_mode: str = BINDING_IMMEDIATE
    # allowedTopologies as node requirements (each matchLabelExpression becomes ``In``), OR-ed.
    allowed_topologies: tuple[Term, ...] = ()
    is_default: bool = False  # annotated storageclass.kubernetes.io/is-default-class: "true"


@dataclass(frozen=True, slots=True)
class StorageObjects:
    """The claims (by ``namespace/name``), volumes and classes (by name) a decision reads."""

    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)


# ----------------------------------------------------------------------------- parsing


def _name(meta: JSON, path: str) -> str:
    name = json_str(meta.get("name"), f"{path}.metadata.name")
    if not name:
        raise ParseError(f"{path}.metadata.name", "name is required")
    return name


def _parts(raw: object, path: str) -> tuple[JSON, JSON, JSON]:
    data = json_object(raw, path)
    return (
        json_object(data.get("metadata"), f"{path}.metadata"),
        json_object(data.get("spec"), f"{path}.spec"),
        json_object(data.get("status"), f"{path}.status"),
    )


def pvc_from_dict(
    raw: object, path: str = "persistentVolumeClaim", *, default_namespace: str = "default"
) -> PersistentVolumeClaim:
    meta, spec, status = _parts(raw, path)
    annotations = json_object(meta.get("annotations"), f"{path}.metadata.annotations")
    sc = spec.get("storageClassName")
    return PersistentVolumeClaim(
        namespace=json_str(meta.get("namespace"), f"{path}.metadata.namespace")
        or default_namespace,
        name=_name(meta, path),
        volume_name=json_str(spec.get("volumeName"), f"{path}.spec.volumeName"),
        storage_class_name=None if sc is None else json_str(sc, f"{path}.spec.storageClassName"),
        phase=json_str(status.get("phase"), f"{path}.status.phase", "Pending") or "Pending",
        bind_completed=ANNOTATION_BIND_COMPLETED in annotations,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def pv_from_dict(raw: object, path: str = "persistentVolume") -> PersistentVolume:
    meta, spec, _ = _parts(raw, path)
    affinity = json_object(spec.get("nodeAffinity"), f"{path}.spec.nodeAffinity")
    required = json_object(affinity.get("required"), f"{path}.spec.nodeAffinity.required")
    tpath = f"{path}.spec.nodeAffinity.required.nodeSelectorTerms"
    terms = []
    for i, t in enumerate(json_list(required.get("nodeSelectorTerms"), tpath)):
        epath = f"{tpath}[{i}].matchExpressions"
        exprs = json_list(json_object(t, f"{tpath}[{i}]").get("matchExpressions"), epath)
        terms.append(
            tuple(selector_requirement_from_dict(e, f"{epath}[{j}]") for j, e in enumerate(exprs))
        )
    return PersistentVolume(
        name=_name(meta, path),
        node_affinity=tuple(terms),
        local=spec.get("local") is not None or spec.get("hostPath") is not None,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def storage_class_from_dict(raw: object, path: str = "storageClass") -> StorageClass:
    data = json_object(raw, path)
    meta = json_object(data.get("metadata"), f"{path}.metadata")
    mode = json_str(data.get("volumeBindingMode"), f"{path}.volumeBindingMode") or BINDING_IMMEDIATE
    if mode not in BINDING_MODES:
        raise ParseError(f"{path}.volumeBindingMode", f"must be one of {', '.join(BINDING_MODES)}")
    tpath = f"{path}.allowedTopologies"
    terms = []
    for i, t in enumerate(json_list(data.get("allowedTopologies"), tpath)):
        epath = f"{tpath}[{i}].matchLabelExpressions"
        term = []
        for j, e in enumerate(
            json_list(json_object(t, f"{tpath}[{i}]").get("matchLabelExpressions"), epath)
        ):
            expr = json_object(e, f"{epath}[{j}]")
            key = json_str(expr.get("key"), f"{epath}[{j}].key")
            if not key:
                raise ParseError(f"{epath}[{j}].key", "key is required")
            values = tuple(
                json_str(v, f"{epath}[{j}].values[{k}]")
                for k, v in enumerate(json_list(expr.get("values"), f"{epath}[{j}].values"))
            )
            term.append(SelectorRequirement(normalize_label(key), "In", values))
        terms.append(tuple(term))
    annotations = json_object(meta.get("annotations"), f"{path}.metadata.annotations")
    return StorageClass(
        name=_name(meta, path),
        provisioner=json_str(data.get("provisioner"), f"{path}.provisioner"),
        volume_binding_mode=mode,
        allowed_topologies=tuple(terms),
        is_default=annotations.get(ANNOTATION_DEFAULT_CLASS) == "true",
    )
