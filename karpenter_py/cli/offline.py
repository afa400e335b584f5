"""The input of ``karpenter-py plan`` as a cluster: one road from objects to a plan.

``plan`` and ``plan --disruption`` both put what :mod:`karpenter_py.cli.manifests` read into a
:class:`~karpenter_py.state.cluster.Cluster` here, then go as the controller goes:
``Cluster.snapshot()`` -> ``scheduling.fromstate.solve_input`` -> ``solve`` (``plan``), or the
disruption decision code on the same snapshot (``plan --disruption``). There is no second way
from objects to solver input.

Offline, a few things a cluster would provide are filled in, each as the controllers would:

* Nothing is made up for a Node with a ``karpenter.sh/nodepool`` label and no NodeClaim in the
  input: as in a cluster, such a node is never disrupted (the decision says so as its reason).
* ``Consolidatable``: its absence means "not yet", as upstream's controller sets it; only when
  no NodeClaim of the input carries the condition (a hand-written file) does each get one
  computed at ``now``, with a warning saying so. A launched NodeClaim
  without ``Drifted`` that carries the ``karpenter.sh/nodepool-hash`` annotation is checked for
  NodePool drift (see :func:`refresh_conditions`).
* A PodDisruptionBudget without ``status.disruptionsAllowed`` gets it computed over the input's
  pods (:func:`computed_disruptions_allowed`).
* NodeClasses: a NodePool's class is Ready unless it is an EC2NodeClass of the input that would
  not become Ready (a v1beta1 Ubuntu class without ``amiSelectorTerms`` selects no AMI); then the
  snapshot's rule leaves the NodePool idle, with a warning. ``plan`` resolves no other NodeClass.
* A PersistentVolumeClaim naming its volume (``spec.volumeName``) counts as bound: the
  ``pv.kubernetes.io/bind-completed`` annotation the PV controller adds is not required of a
  hand-written file.
* Namespaces: the declared ones, plus every namespace a pod is in, each with the
  ``kubernetes.io/metadata.name`` label the API server sets.

What the cluster model then decides is the controller's: a NodeClaim whose Node is in the input
joins it; a launched one without its Node is capacity in flight; one not launched yet counts
against its NodePool's limits at its requested size (``state.usage``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Final

from karpenter_py.cli.manifests import (
    JSON,
    LABEL_NAMESPACE_NAME,
    ClusterObjects,
    Source,
)
from karpenter_py.controllers.nodeclaim.common import nodepool_of
from karpenter_py.controllers.nodeclaim.disruption import set_consolidatable, set_drifted
from karpenter_py.controllers.nodeclaim.drift import nodepool_drift
from karpenter_py.model.api.nodeclaim import (
    CONDITION_CONSOLIDATABLE,
    CONDITION_DRIFTED,
    CONDITION_LAUNCHED,
    NodeClaim,
)
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import Node, Pod
from karpenter_py.model.fields import ParseError
from karpenter_py.model.labels import (
    ANNOTATION_NODEPOOL_HASH,
)
from karpenter_py.scheduling.fromstate import nodeclass_key
from karpenter_py.state.cluster import Cluster, NodeClassKey
from karpenter_py.state.ingest import pdb_from_dict
from karpenter_py.state.pdb import PodDisruptionBudget

PDB_API_VERSION: Final = "policy/v1"


# ----------------------------------------------------------------------------- PDBs


def _scaled(value: object, total: int, path: str) -> int:
    """An IntOrString as Kubernetes scales it (percentages of ``total``, rounded up)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ParseError(path, f"must be greater than or equal to 0, got {value}")
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        percent = int(value[:-1])
        if percent > 100:
            raise ParseError(path, f"must not be greater than 100%, got {value!r}")
        return -(-percent * total // 100)
    raise ParseError(path, f"must be an integer or a percentage (e.g. '50%'), got {value!r}")


def computed_disruptions_allowed(spec: Mapping[str, object], pods: Sequence[Pod]) -> int:
    """The disruption controller's ``disruptionsAllowed`` for a PDB whose selector matches
    ``pods``: bound, non-terminating pods count as healthy; every matching pod is expected."""
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        raise ParseError("spec", "minAvailable and maxUnavailable cannot both be set")
    expected = len(pods)
    healthy = sum(1 for p in pods if p.node_name and not p.is_terminating())
    if max_unavailable is not None:
        desired = max(0, expected - _scaled(max_unavailable, expected, "spec.maxUnavailable"))
    elif min_available is not None:
        desired = _scaled(min_available, expected, "spec.minAvailable")
    else:
        return 0  # no rule: the controller expects nothing and allows nothing
    allowed = healthy - desired
    return allowed if expected > 0 and allowed > 0 else 0


def read_pdb(doc: JSON, source: Source, pods: Sequence[Pod]) -> PodDisruptionBudget:
    """A PodDisruptionBudget document as the cluster model keeps it."""
    api_version = doc.get("apiVersion")
    if api_version != PDB_API_VERSION:
        if not api_version:
            raise source.error("apiVersion is required", "apiVersion")
        raise source.error(
            f"PodDisruptionBudget is served as {PDB_API_VERSION}, not {api_version!r}",
            "apiVersion",
        )
    try:
        pdb = pdb_from_dict(doc)
        status = doc.get("status")
        status = status if isinstance(status, dict) else {}
        given = status.get("disruptionsAllowed")
        if given is not None:
            if isinstance(given, bool) or not isinstance(given, int) or given < 0:
                raise ParseError(
                    "status.disruptionsAllowed", f"expected a count (>= 0), got {given!r}"
                )
            return pdb
        spec = doc.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        covered = [p for p in pods if pdb.covers(p)]
        return replace(pdb, disruptions_allowed=computed_disruptions_allowed(spec, covered))
    except ParseError as err:
        raise source.error(err.problem, err.path) from None


# ----------------------------------------------------------------------------- NodeClaims


def refresh_conditions(
    nc: NodeClaim, np: NodePool, now: datetime, *, consolidatable: bool = True
) -> None:
    """Fill in, in place, the conditions the NodeClaim controller would have written by ``now``:
    ``Consolidatable`` when absent and ``consolidatable`` (the input carries that condition
    nowhere), and ``Drifted`` from NodePool drift when absent and the NodeClaim carries a
    nodepool-hash."""
    if consolidatable and nc.status.get_condition(CONDITION_CONSOLIDATABLE) is None:
        set_consolidatable(nc, np, now)
    if (
        nc.status.get_condition(CONDITION_DRIFTED) is None
        and nc.metadata.annotations.get(ANNOTATION_NODEPOOL_HASH)
        and nc.status.is_true(CONDITION_LAUNCHED)
    ):
        reason = nodepool_drift(nc, np)
        if reason:
            set_drifted(nc, reason, now)


# ----------------------------------------------------------------------------- the cluster


def build_cluster(
    objects: ClusterObjects,
    now: datetime,
    *,
    disruption: bool = False,
    node_overlay: bool = False,
) -> tuple[Cluster, list[str]]:
    """The objects in a Cluster, with what the controllers would have added (see the module
    docstring), and the warnings about what the cluster leaves out or idle (``disruption``:
    also about what only disruption reads). NodeOverlays go in only with ``node_overlay`` (the
    feature gate), as the controller reflects them only then."""
    cluster = Cluster()
    warnings: list[str] = []
    _add_nodepools(cluster, objects, warnings)
    for overlay, source in objects.overlays:
        if node_overlay:
            cluster.upsert_overlay(overlay)
        else:
            warnings.append(
                f"{source.describe()}: ignored: the NodeOverlay feature gate is off "
                "(FEATURE_GATES or --feature-gates NodeOverlay=true turns it on)"
            )
    _add_nodes(cluster, objects, now, warnings, disruption=disruption)
    node_names = _node_names(cluster, objects, now)
    for pod, source in objects.pods:
        if pod.node_name and pod.node_name not in node_names:
            warnings.append(
                f"{source.describe()}: pod {pod.key} is bound to node {pod.node_name!r}, "
                "which is not in the input; ignored"
            )
        cluster.upsert_pod(pod)
    for name, template in objects.daemonsets.items():
        cluster.upsert_daemonset(name, template)
    cluster.namespace_labels = namespace_labels(objects)
    pods = [pod for pod, _ in objects.pods]
    cluster.replace_pdbs(read_pdb(doc, source, pods) for doc, source in objects.pdbs)
    cluster.replace_pvcs(
        replace(pvc, bind_completed=True) if pvc.volume_name else pvc
        for pvc in objects.storage.claims.values()
    )
    cluster.replace_pvs(objects.storage.volumes.values())
    cluster.replace_storage_classes(objects.storage.classes.values())
    return cluster, warnings


def _add_nodepools(cluster: Cluster, objects: ClusterObjects, warnings: list[str]) -> None:
    """The NodePools, each with its NodeClass marked Ready or not (``_nodeclass_ready``)."""
    for np, source in objects.nodepools:
        cluster.upsert_nodepool(np)
        key = nodeclass_key(np)
        ready = _nodeclass_ready(objects, key)
        cluster.upsert_nodeclass(key, ready)
        if not ready:
            warnings.append(
                f"{source.describe()}: NodePool {np.metadata.name} launches nothing: its "
                f"EC2NodeClass {key[2]} is not ready (a v1beta1 Ubuntu class without "
                "amiSelectorTerms selects no AMI)"
            )


def _add_nodes(
    cluster: Cluster,
    objects: ClusterObjects,
    now: datetime,
    warnings: list[str],
    *,
    disruption: bool,
) -> None:
    """The NodeClaims and Nodes, joined as the cluster joins them (providerID, then
    ``status.nodeName``); every NodeClaim of a NodePool of the input gets the conditions its
    controller would have written by ``now``."""
    for nc, source in objects.nodeclaims:
        if not nc.status.capacity and not nc.status.allocatable:
            warnings.append(
                f"{source.describe()}: NodeClaim has not launched yet (no status.capacity): it "
                "counts against its NodePool's limits at its requested resources and takes pods "
                "only up to them"
            )
        cluster.upsert_nodeclaim(nc.model_copy(deep=True))
    for node, source in objects.nodes:
        _check_created(node, source)
        cluster.upsert_node(node)
    pools = {np.metadata.name: np for np, _ in objects.nodepools}
    # Upstream's controller sets Consolidatable; its absence means "not yet". Only an input
    # where no NodeClaim carries it (a hand-written file) has it computed, and is told so.
    carried = any(
        nc.status.get_condition(CONDITION_CONSOLIDATABLE) is not None
        for nc in cluster.nodeclaims.values()
    )
    computed = False
    for nc in cluster.nodeclaims.values():
        pool = pools.get(nodepool_of(nc))
        if pool is not None:
            refresh_conditions(nc, pool, now, consolidatable=not carried)
            computed = computed or nc.status.get_condition(CONDITION_CONSOLIDATABLE) is not None
    if computed and not carried and disruption:
        warnings.append(
            f"no NodeClaim in the input carries a {CONDITION_CONSOLIDATABLE} condition: each "
            "gets one computed at --now from its NodePool's consolidateAfter"
        )


def _check_created(node: Node, source: Source) -> None:
    """A Node's ``creationTimestamp``, when given, must be an RFC 3339 time."""
    if not node.creation_timestamp:
        return
    try:
        datetime.fromisoformat(node.creation_timestamp)
    except ValueError:
        raise source.error(
            f"not an RFC 3339 time: {node.creation_timestamp!r}", "metadata.creationTimestamp"
        ) from None


def _nodeclass_ready(objects: ClusterObjects, key: NodeClassKey) -> bool:
    """Whether the NodeClass would be Ready: an EC2NodeClass of the input unless it selects no
    AMI (the v1beta1 Ubuntu placeholder); any other class, as plan resolves none."""
    nodeclass = objects.ec2nodeclass_for(key)
    return nodeclass is None or not nodeclass.ubuntu_incompatible()


def _node_names(cluster: Cluster, objects: ClusterObjects, now: datetime) -> set[str]:
    """The names pods may be bound to: every Node and every NodeClaim in flight. A NodeClaim in
    flight named like another node is an input error (two nodes of one name)."""
    names = {node.name for node, _ in objects.nodes}
    claim_sources = {nc.metadata.name: source for nc, source in objects.nodeclaims}
    for sn in cluster.state_nodes(now):
        if sn.node is not None:
            continue
        source = claim_sources.get(sn.nodeclaim_name)
        if sn.name in names and source is not None:
            raise source.error(f"node {sn.name} is defined twice", "status.nodeName")
        names.add(sn.name)
    return names


def namespace_labels(objects: ClusterObjects) -> dict[str, dict[str, str]]:
    """Namespace labels for namespaceSelectors: the declared Namespaces plus every namespace a
    pod or DaemonSet is in, each with the label the API server sets."""
    labels = {name: dict(values) for name, values in objects.namespaces.items()}
    for pod in (*(p for p, _ in objects.pods), *objects.daemonsets.values()):
        labels.setdefault(pod.namespace, {LABEL_NAMESPACE_NAME: pod.namespace})
    return labels
