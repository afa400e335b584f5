"""Drift checks for ``nodeclaim.disruption``: pure functions, no I/O, ``now`` passed in.

Each check answers with a drift reason, or ``""`` when the NodeClaim still matches:

* :func:`static_drift` -> ``NodePoolDrifted``: the NodeClaim's ``karpenter.sh/nodepool-hash``
  differs from the hash of the NodePool's template as it is now (the same
  :func:`~karpenter_py.launcher.persist.nodepool_hash` the launcher stamped at creation and the
  readiness controller writes on the NodePool). Compared only when the NodeClaim's
  ``karpenter.sh/nodepool-hash-version`` is the version that function produces: a hash from an
  older algorithm says nothing about the template.
* :func:`requirements_drift` -> ``RequirementsDrifted``: the NodeClaim's labels no longer satisfy
  the NodePool's requirements. A requirement on a key the labels lack is satisfied when it asks
  for absence (``NotIn``/``DoesNotExist``) or when the key is a well-known label, as upstream's
  ``Compatible`` does; any other missing key is drift.
* :func:`instance_type_drift` -> ``InstanceTypeNotFound``: the NodeClaim's instance type (label)
  is missing, no longer offered for the pool, or has no offering for the NodeClaim's zone and
  capacity type. Availability is not looked at: a temporarily exhausted offering is still
  offered. A ``reserved`` NodeClaim is also content with an on-demand offering (reservations are
  demoted to on-demand), and its reservation ID is left to the provider.
  :func:`instance_type_check_due` gates it: only from 1 h of age, and at most every 30 min after a
  check that found the type.

The provider's own check (``CloudProvider.is_drifted``) runs last, in the controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

from karpenter_py.launcher.persist import nodepool_hash
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import SelectorRequirement, normalize_label
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE,
    NODEPOOL_HASH_VERSION,
)
from karpenter_py.scheduling.requirements import WELL_KNOWN, Req, Requirements, compatible

NODEPOOL_DRIFTED: Final = "NodePoolDrifted"
REQUIREMENTS_DRIFTED: Final = "RequirementsDrifted"
INSTANCE_TYPE_NOT_FOUND: Final = "InstanceTypeNotFound"

# Instance types are the provider's answer, not a user's edit: checking them late and rarely is
# fine, and it keeps GetInstanceTypes calls per NodeClaim low.
INSTANCE_TYPE_CHECK_MIN_AGE: Final = timedelta(hours=1)
INSTANCE_TYPE_CHECK_INTERVAL: Final = timedelta(minutes=30)


def static_drift(nc: NodeClaim, np: NodePool) -> str:
    """``NodePoolDrifted`` when the template hash moved since the NodeClaim was created."""
    claimed = nc.metadata.annotations.get(ANNOTATION_NODEPOOL_HASH)
    version = nc.metadata.annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION)
    if not claimed or version != NODEPOOL_HASH_VERSION:
        return ""
    return NODEPOOL_DRIFTED if claimed != nodepool_hash(np) else ""


def nodepool_requirements(np: NodePool) -> Requirements:
    """The NodePool's ``spec.template.spec.requirements`` (beta keys normalised), nothing else:
    template labels are covered by the hash."""
    return Requirements.from_selectors(
        SelectorRequirement(normalize_label(r.key), r.operator, tuple(r.values), r.min_values)
        for r in np.spec.template.spec.requirements
    )


def requirements_drift(nc: NodeClaim, np: NodePool) -> str:
    """``RequirementsDrifted`` when the NodeClaim's labels fall outside the pool's requirements."""
    labels = Requirements.from_labels(nc.metadata.labels)
    why = compatible(labels, nodepool_requirements(np), allow_undefined=WELL_KNOWN)
    return "" if why is None else REQUIREMENTS_DRIFTED


def _offering_requirements(o: Offering) -> Requirements:
    reqs = [
        Req.in_(LABEL_TOPOLOGY_ZONE, (o.zone,)),
        Req.in_(LABEL_CAPACITY_TYPE, (o.capacity_type,)),
        *(Req.in_(k, (v,)) for k, v in o.labels.items()),
    ]
    return Requirements.of(reqs)


def _claim_offering_requirements(nc: NodeClaim) -> Requirements:
    reqs = Requirements.from_labels(nc.metadata.labels)
    if nc.metadata.labels.get(LABEL_CAPACITY_TYPE) == CAPACITY_TYPE_RESERVED:
        reqs = reqs.replaced(
            Req.in_(LABEL_CAPACITY_TYPE, (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_ON_DEMAND))
        ).without(AWS_LABEL_CAPACITY_RESERVATION_ID)
    return reqs


def instance_type_drift(nc: NodeClaim, instance_types: Sequence[InstanceType]) -> str:
    """``InstanceTypeNotFound`` when the NodeClaim's type or a matching offering is gone."""
    name = nc.metadata.labels.get(LABEL_INSTANCE_TYPE)
    it = next((t for t in instance_types if t.name == name), None) if name else None
    if it is None:
        return INSTANCE_TYPE_NOT_FOUND
    reqs = _claim_offering_requirements(nc)
    for o in it.offerings:
        if compatible(reqs, _offering_requirements(o), allow_undefined=WELL_KNOWN) is None:
            return ""
    return INSTANCE_TYPE_NOT_FOUND


def instance_type_check_due(nc: NodeClaim, now: datetime, last_found: datetime | None) -> bool:
    """Whether to ask for instance types now: the NodeClaim is at least 1 h old, and the last
    check that found its type (``last_found``, None if none) is 30 min or more ago. Only checks
    that found the type count, so a drifted answer is confirmed on every reconcile."""
    created = nc.metadata.creation_timestamp
    if created is None or now - created < INSTANCE_TYPE_CHECK_MIN_AGE:
        return False
    return last_found is None or now - last_found >= INSTANCE_TYPE_CHECK_INTERVAL


def nodepool_drift(nc: NodeClaim, np: NodePool) -> str:
    """The checks that need no cloud call, in upstream's order: static, then requirements."""
    return static_drift(nc, np) or requirements_drift(nc, np)
