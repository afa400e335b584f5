"""CustomResourceDefinitions built from the API models.

The models are the single source of truth: this module asks pydantic for each kind's JSON
schema and rewrites it into the *structural* OpenAPI v3 schema the API server demands
(https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
every node typed, no ``$ref``, no ``anyOf``/``null`` for optional fields (absence is how
Kubernetes says "unset"), ``additionalProperties`` only for maps, ``metadata`` left to the
server. CEL rules, patterns, limits and defaults come from the markers in ``base.py``.

Pure: returns dicts; ``karpenter_py.cli.crds`` writes them as YAML.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from pydantic import BaseModel

from karpenter_py.model.api.base import CEL_RULES, CRD_DEFAULT, CRD_REQUIRED, JSON
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.kwoknodeclass import KWOKNodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodeoverlay import NodeOverlay
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.api.v1beta1 import EC2NodeClass as EC2NodeClassV1beta1
from karpenter_py.model.api.v1beta1 import NodeClaim as NodeClaimV1beta1
from karpenter_py.model.api.v1beta1 import NodePool as NodePoolV1beta1

CATEGORY: Final = "karpenter"

# Where the API server sends ConversionReviews for the kinds that serve v1beta1 too: the
# controller's Service (manifests/service.yaml). The controller patches the CA bundle in at run
# time (karpenter_py.manager.webhook), and the Service's namespace if it runs elsewhere.
WEBHOOK_SERVICE: Final = {
    "name": "karpenter",
    "namespace": "karpenter",
    "path": "/convert",
    "port": 8443,
}

# Keys pydantic emits that have no place in a CRD schema.
_DROPPED: Final = frozenset({"title", "default", "$defs", "examples"})

_API_VERSION_PROP: Final = {
    "description": "APIVersion defines the versioned schema of this representation of an object.",
    "type": "string",
}
_KIND_PROP: Final = {
    "description": "Kind is a string value representing the REST resource this object represents.",
    "type": "string",
}


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    priority: int = 0

    def as_dict(self) -> JSON:
        out: JSON = {"jsonPath": self.json_path, "name": self.name}
        if self.priority:
            out["priority"] = self.priority
        out["type"] = self.type
        return out


def _type_meta(model: type[BaseModel]) -> tuple[str, str, str]:
    """(group, version, kind) from the model's own ``apiVersion`` and ``kind`` defaults."""
    api_version = str(model.model_fields["api_version"].default)
    group, _, version = api_version.rpartition("/")
    return group, version, str(model.model_fields["kind"].default)


@dataclass(frozen=True)
class ServedVersion:
    """An older version the CRD serves beside the storage version (converted by the webhook)."""

    model: type[BaseModel]
    printer_columns: tuple[PrinterColumn, ...] = ()

    @property
    def version(self) -> str:
        return _type_meta(self.model)[1]


@dataclass(frozen=True)
class Kind:
    """Everything about one kind's CRD that is not in its schema; the group, version and kind
    are the model's (its ``apiVersion`` and ``kind`` defaults)."""

    model: type[BaseModel]
    plural: str
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    scale: tuple[str, str] | None = None  # (specReplicasPath, statusReplicasPath)
    categories: tuple[str, ...] = (CATEGORY,)
    older: tuple[ServedVersion, ...] = ()

    @property
    def group(self) -> str:
        return _type_meta(self.model)[0]

    @property
    def version(self) -> str:
        return _type_meta(self.model)[1]

    @property
    def kind(self) -> str:
        return _type_meta(self.model)[2]

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def filename(self) -> str:
        """The file name upstream uses (controller-gen's ``<group>_<plural>.yaml``)."""
        return f"{self.group}_{self.plural}.yaml"


_READY = '.status.conditions[?(@.type=="Ready")].status'
_AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")
_READY_COLUMN = PrinterColumn("Ready", _READY)

KINDS: Final = (
    Kind(
        model=NodePool,
        plural="nodepools",
        printer_columns=(
            PrinterColumn("NodeClass", ".spec.template.spec.nodeClassRef.name"),
            PrinterColumn("Nodes", ".status.nodes"),
            PrinterColumn("Ready", _READY),
            _AGE,
            PrinterColumn("Weight", ".spec.weight", "integer", 1),
            PrinterColumn("CPU", ".status.resources.cpu", priority=1),
            PrinterColumn("Memory", ".status.resources.memory", priority=1),
        ),
        scale=(".spec.replicas", ".status.nodes"),
        older=(
            ServedVersion(
                NodePoolV1beta1,
                (PrinterColumn("NodeClass", ".spec.template.spec.nodeClassRef.name"), _AGE),
            ),
        ),
    ),
    Kind(
        model=NodeClaim,
        plural="nodeclaims",
        printer_columns=(
            PrinterColumn("Type", ".metadata.labels.node\\.kubernetes\\.io/instance-type"),
            PrinterColumn("Capacity", ".metadata.labels.karpenter\\.sh/capacity-type"),
            PrinterColumn("Zone", ".metadata.labels.topology\\.kubernetes\\.io/zone"),
            PrinterColumn("Node", ".status.nodeName"),
            PrinterColumn("Ready", _READY),
            _AGE,
            PrinterColumn("ImageID", ".status.imageID", priority=1),
            PrinterColumn("ID", ".status.providerID", priority=1),
            PrinterColumn("NodePool", ".metadata.labels.karpenter\\.sh/nodepool", priority=1),
            PrinterColumn("NodeClass", ".spec.nodeClassRef.name", priority=1),
            PrinterColumn("Drifted", '.status.conditions[?(@.type=="Drifted")].status', priority=1),
        ),
        older=(
            ServedVersion(
                NodeClaimV1beta1,
                (
                    PrinterColumn("Node", ".status.nodeName"),
                    PrinterColumn("Ready", _READY),
                    _AGE,
                ),
            ),
        ),
    ),
    Kind(
        model=EC2NodeClass,
        plural="ec2nodeclasses",
        short_names=("ec2nc", "ec2ncs"),
        printer_columns=(
            PrinterColumn("Ready", _READY),
            _AGE,
            PrinterColumn("Role", ".spec.role", priority=1),
        ),
        older=(ServedVersion(EC2NodeClassV1beta1, (PrinterColumn("Ready", _READY), _AGE)),),
    ),
    Kind(
        model=KWOKNodeClass,
        plural="kwoknodeclasses",
        short_names=("kwoknc", "kwokncs"),
    ),
    Kind(
        model=NodeOverlay,
        plural="nodeoverlays",
        short_names=("overlays",),
        printer_columns=(
            _READY_COLUMN,
            _AGE,
            PrinterColumn("Weight", ".spec.weight", "integer", 1),
        ),
    ),
)


class SchemaError(ValueError):
    """A model produced JSON schema the converter cannot express structurally."""


# ----------------------------------------------------------------------------- conversion


def _merge(base: JSON, overlay: Mapping[str, object]) -> JSON:
    """Overlay field-level keys on a referenced schema; CEL rule lists add up."""
    out = dict(base)
    for key, value in overlay.items():
        existing = out.get(key)
        if (
            key in (CEL_RULES, CRD_REQUIRED)
            and isinstance(existing, list)
            and isinstance(value, list)
        ):
            out[key] = [*existing, *value]
        else:
            out[key] = value
    return out


def _resolve(node: JSON, defs: Mapping[str, JSON]) -> JSON:
    """Inline ``$ref`` and collapse ``anyOf [X, null]`` into X, keeping the outer keys."""
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = defs[ref.rsplit("/", 1)[-1]]
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _resolve(_merge(copy.deepcopy(target), rest), defs)
    branches = node.get("anyOf")
    if isinstance(branches, list):
        non_null = [cast(JSON, b) for b in branches if cast(JSON, b).get("type") != "null"]
        if len(non_null) != len(branches) and len(non_null) == 1:
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return _resolve(_merge(_resolve(non_null[0], defs), rest), defs)
    return node


def _int_or_string(node: JSON) -> bool:
    branches = node.get("anyOf")
    if not isinstance(branches, list):
        return False
    types = sorted(str(cast(JSON, b).get("type")) for b in branches)
    return types == ["integer", "string"]


def convert(node: JSON, defs: Mapping[str, JSON], path: str = "") -> JSON:
    """Rewrite one pydantic JSON-schema node (and its children) into structural OpenAPI."""
    node = _resolve(node, defs)
    out: JSON = {}
    if _int_or_string(node):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        out["x-kubernetes-int-or-string"] = True
    elif "anyOf" in node or "oneOf" in node or "allOf" in node:
        raise SchemaError(f"{path or '<root>'}: unions cannot be expressed in a structural schema")
    required: list[str] = []
    for key, value in node.items():
        if key in _DROPPED or key in ("anyOf", "$ref"):
            continue
        if key in ("required", CRD_REQUIRED):
            required.extend(cast(list[str], value))
        else:
            _convert_key(out, key, value, defs, path)
    if required:
        out["required"] = sorted(set(required))
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        raise SchemaError(f"{path or '<root>'}: schema node has no type")
    return dict(sorted(out.items()))


def _convert_key(out: JSON, key: str, value: object, defs: Mapping[str, JSON], path: str) -> None:
    if key == "const":
        out["enum"] = [value]
    elif key == CRD_DEFAULT:
        out["default"] = value
    elif key == "properties":
        props = cast(JSON, value)
        out["properties"] = {
            name: convert(cast(JSON, sub), defs, f"{path}.{name}")
            for name, sub in sorted(props.items())
        }
    elif key == "items":
        out["items"] = convert(cast(JSON, value), defs, f"{path}[]")
    elif key == "additionalProperties":
        # False is pydantic's extra="forbid"; the API server prunes unknown fields instead (and
        # forbids additionalProperties beside properties). True means "any JSON": dropped too.
        if isinstance(value, dict) and value:
            out["additionalProperties"] = convert(cast(JSON, value), defs, f"{path}.*")
    else:
        out[key] = value


def openapi_schema(model: type[BaseModel]) -> JSON:
    """The structural ``openAPIV3Schema`` for a root API kind."""
    raw = cast(JSON, model.model_json_schema(by_alias=True, mode="validation"))
    defs = cast(dict[str, JSON], raw.get("$defs", {}))
    schema = convert(raw, defs)
    props = cast(JSON, schema["properties"])
    # The server owns apiVersion/kind/metadata; metadata may carry no schema of its own.
    props["apiVersion"] = dict(_API_VERSION_PROP)
    props["kind"] = dict(_KIND_PROP)
    props["metadata"] = {"type": "object"}
    schema["properties"] = dict(sorted(props.items()))
    schema["required"] = [r for r in cast(list[str], schema.get("required", [])) if r == "spec"]
    if not schema["required"]:
        del schema["required"]
    return schema


def build_crd(kind: Kind) -> JSON:
    names: JSON = {
        "categories": list(kind.categories),
        "kind": kind.kind,
        "listKind": f"{kind.kind}List",
        "plural": kind.plural,
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    names["singular"] = kind.kind.lower()
    subresources: JSON = {"status": {}}
    if kind.scale is not None:
        subresources["scale"] = {
            "specReplicasPath": kind.scale[0],
            "statusReplicasPath": kind.scale[1],
        }
    versions = [
        _version(kind.version, kind.model, kind.printer_columns, subresources, storage=True),
        *(
            # Older versions get no scale subresource: v1beta1 has no spec.replicas.
            _version(v.version, v.model, v.printer_columns, {"status": {}}, storage=False)
            for v in kind.older
        ),
    ]
    spec: JSON = {}
    if kind.older:
        spec["conversion"] = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"service": dict(WEBHOOK_SERVICE)},
                "conversionReviewVersions": ["v1"],
            },
        }
    spec["group"] = kind.group
    spec["names"] = names
    spec["scope"] = "Cluster"
    spec["versions"] = versions
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.name},
        "spec": spec,
    }


def _version(
    name: str,
    model: type[BaseModel],
    printer_columns: Sequence[PrinterColumn],
    subresources: JSON,
    *,
    storage: bool,
) -> JSON:
    version: JSON = {}
    if printer_columns:
        version["additionalPrinterColumns"] = [c.as_dict() for c in printer_columns]
    version["name"] = name
    version["schema"] = {"openAPIV3Schema": openapi_schema(model)}
    version["served"] = True
    version["storage"] = storage
    version["subresources"] = subresources
    return version


def build_crds(kinds: Sequence[Kind] = KINDS) -> dict[str, JSON]:
    """File name -> CRD, in a stable order."""
    return {kind.filename: build_crd(kind) for kind in kinds}
