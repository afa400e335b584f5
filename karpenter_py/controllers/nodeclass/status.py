"""``nodeclass.status``: EC2NodeClass status, conditions and the termination finalizer.

Upstream runs one controller per part (pkg/controllers/nodeclass/{subnet,securitygroup,ami,
instanceprofile,validation,readiness}.go) over one object; here they are one reconciler and a
class costs at most one status write per pass:

* ``status.subnets`` / ``securityGroups`` / ``amis`` / ``instanceProfile`` from
  :class:`NodeClassResolver`; conditions ``SubnetsReady``, ``SecurityGroupsReady``,
  ``AMIsReady``, ``InstanceProfileReady``, ``ValidationSucceeded`` and their roll-up ``Ready``
  (True only when all five are; else reason ``UnhealthyDependents`` listing the False ones).
  A part whose AWS call failed keeps its previous status value (only its condition says why);
  a part that matched nothing is emptied.
* With the ReservedCapacity gate on (the resolver then has a reservation provider) also
  ``status.capacityReservations`` and ``CapacityReservationsReady``, which joins Ready's
  dependents as upstream's readiness does with the gate on; gate off, neither is written.
* Every class is re-resolved each minute (upstream's shortest timer, the subnets'; security
  groups and AMIs would wait 5 min: one timer keeps it simple and only costs API calls).
* Finalizer ``karpenter.k8s.aws/termination`` is added first. On deletion the class waits while
  any NodeClaim references it (re-checked on NodeClaim deletes and every 10 s), then its launch
  templates and Karpenter-made instance profile are deleted and the finalizer removed.

Status is written through the ``status`` subresource with a merge patch guarded by the
resourceVersion it was computed from; nothing is written when nothing changed. A class that
does not parse is skipped (the provider launches nothing with it either): it gets
``ValidationSucceeded`` False with reason ``EC2NodeClassValidationFailed`` and the errors,
``Ready`` False, and a Warning event the first time an error shows.

Construction: ``NodeClassStatus(client, cluster, resolver, recorder, clock=..., metrics=...)`` with
``NodeClassResolver(clients, cluster_name, kubernetes_version=KubernetesVersion(client,
clock=clock))``. Woken by EC2NodeClass upserts and deletes and by NodeClaim deletes; see
:meth:`NodeClassStatus.watches`. It waits for the cluster state to sync: the NodeClaims a
deleting class waits for are only known once the caches listed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from karpenter_py.aio.clock import Clock
from karpenter_py.aio.singleflight import SingleFlight
from karpenter_py.cloudprovider.aws.clients import is_aws_error
from karpenter_py.cloudprovider.aws.nodeclass import Failure, NodeClassResolver, ResolvedNodeClass
from karpenter_py.controllers.conditions import DesiredCondition as DesiredCondition  # re-exported
from karpenter_py.controllers.conditions import (
    ready_rollup,
    report_unreadable,
    set_conditions,
    validation_message,
)
from karpenter_py.controllers.runtime import Deps, QueueController, Result, Watch
from karpenter_py.kube.client import KubeClient, PatchType
from karpenter_py.kube.errors import NotFoundError
from karpenter_py.kube.events import object_ref
from karpenter_py.kube.objects import KubeObject
from karpenter_py.kube.resources import EC2NODECLASSES, NODECLAIMS
from karpenter_py.model.api.ec2nodeclass import (
    AMI,
    API_VERSION,
    CONDITION_AMIS_READY,
    CONDITION_CAPACITY_RESERVATIONS_READY,
    CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_SECURITY_GROUPS_READY,
    CONDITION_SUBNETS_READY,
    CONDITION_VALIDATION_SUCCEEDED,
    KIND,
    EC2NodeClass,
)
from karpenter_py.model.api.meta import (
    CONDITION_FALSE,
    CONDITION_TRUE,
    Condition,
)
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.labels import AWS_FINALIZER_TERMINATION, AWS_GROUP

log = logging.getLogger("karpenter.nodeclass.status")

# The conditions that roll up into Ready, in the order Ready's message names them.
READY_DEPENDENTS: Final = (
    CONDITION_SUBNETS_READY,
    CONDITION_SECURITY_GROUPS_READY,
    CONDITION_AMIS_READY,
    CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_VALIDATION_SUCCEEDED,
)
REQUEUE_SECONDS: Final = 60.0
WAIT_SECONDS: Final = 10.0  # re-check of a deleting class still referenced by NodeClaims
REASON_VALIDATION_FAILED: Final = "EC2NodeClassValidationFailed"  # a class that does not parse
VERSION_TTL: Final = 300.0


# ----------------------------------------------------------------------------- decisions (pure)


def desired_conditions(
    failures: Mapping[str, Failure], *, reserved_capacity: bool = False
) -> list[DesiredCondition]:
    """The five part conditions (True unless they failed), CapacityReservationsReady with the
    ReservedCapacity gate on (upstream adds it to Ready's dependents only then), and Ready."""
    out = []
    parts = (*READY_DEPENDENTS, CONDITION_CAPACITY_RESERVATIONS_READY)
    for type_ in parts if reserved_capacity else READY_DEPENDENTS:
        failure = failures.get(type_)
        if failure is None:
            out.append(DesiredCondition(type_, CONDITION_TRUE, type_))
        else:
            out.append(DesiredCondition(type_, CONDITION_FALSE, failure.reason, failure.message))
    out.append(ready_rollup(out))
    return out


def apply_conditions(
    current: Sequence[Condition],
    desired: Iterable[DesiredCondition],
    *,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """``current`` with ``desired`` set (others kept; lastTransitionTime moves on flips only)."""
    return set_conditions(current, desired, now=now, generation=generation)[0]


def status_body(
    nodeclass: EC2NodeClass, resolved: ResolvedNodeClass, conditions: Sequence[Condition]
) -> dict[str, Any]:
    """The status fields this controller owns, in wire form. A part that failed transiently
    (an AWS error) keeps its previous value."""
    old = nodeclass.status
    keep = {t for t, f in resolved.failures.items() if f.transient}
    subnets = old.subnets if CONDITION_SUBNETS_READY in keep else resolved.subnets
    groups = (
        old.security_groups if CONDITION_SECURITY_GROUPS_READY in keep else resolved.security_groups
    )
    amis = old.amis if CONDITION_AMIS_READY in keep else resolved.amis
    profile = (
        old.instance_profile
        if CONDITION_INSTANCE_PROFILE_READY in keep
        else resolved.instance_profile
    )
    body = {
        "subnets": [s.model_dump(mode="json", by_alias=True) for s in subnets],
        "securityGroups": [g.model_dump(mode="json", by_alias=True) for g in groups],
        "amis": [_ami_wire(a) for a in amis],
        "instanceProfile": profile,
        "conditions": [c.model_dump(mode="json", by_alias=True) for c in conditions],
    }
    if resolved.capacity_reservations is not None:  # the ReservedCapacity gate is on
        reservations = (
            old.capacity_reservations
            if CONDITION_CAPACITY_RESERVATIONS_READY in keep
            else resolved.capacity_reservations
        )
        body["capacityReservations"] = [
            r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in reservations
        ]
    return body


def _ami_wire(ami: AMI) -> dict[str, Any]:
    # The CRD requires ``requirements`` even when empty; the model's dump leaves defaults out.
    wire = ami.model_dump(mode="json", by_alias=True)
    wire.setdefault("requirements", [])
    return wire


def current_body(nodeclass: EC2NodeClass, *, reserved_capacity: bool = False) -> dict[str, Any]:
    """The same fields as :func:`status_body`, as the object has them now."""
    wire = nodeclass.status.model_dump(mode="json", by_alias=True)
    body = {
        "subnets": wire.get("subnets", []),
        "securityGroups": wire.get("securityGroups", []),
        "amis": [_ami_wire(a) for a in nodeclass.status.amis],
        "instanceProfile": wire.get("instanceProfile", ""),
        "conditions": wire.get("conditions", []),
    }
    if reserved_capacity:
        body["capacityReservations"] = [
            r.model_dump(mode="json", by_alias=True, exclude_none=True)
            for r in nodeclass.status.capacity_reservations
        ]
    return body


def referencing_nodeclaims(nodeclaims: Iterable[NodeClaim], name: str) -> list[str]:
    """Names of the NodeClaims whose nodeClassRef is the EC2NodeClass ``name``."""
    out = []
    for nc in nodeclaims:
        ref = nc.spec.node_class_ref
        if ref.group == AWS_GROUP and ref.kind == KIND and ref.name == name:
            out.append(nc.metadata.name)
    return sorted(out)


def finalizers_patch(
    resource_version: str, finalizers: Sequence[str], *, add: bool
) -> dict[str, Any]:
    """Merge patch adding or removing our finalizer, guarded by ``resource_version``."""
    rest = [f for f in finalizers if f != AWS_FINALIZER_TERMINATION]
    wanted = [*rest, AWS_FINALIZER_TERMINATION] if add else rest
    return {"metadata": {"finalizers": wanted, "resourceVersion": resource_version}}


# ----------------------------------------------------------------------------- k8s version


class KubernetesVersion:
    """The API server's ``major.minor`` ("1.31"), read from ``GET /version``, cached 5 min;
    what AMI aliases are resolved for."""

    def __init__(self, client: KubeClient, *, clock: Clock, ttl: float = VERSION_TTL) -> None:
        self.client = client
        self.clock = clock
        self.ttl = ttl
        self._value: tuple[str, float] | None = None
        self._reads = SingleFlight[str, str]()  # classes resolved together share one GET

    async def __call__(self) -> str:
        if self._value is not None and self._value[1] > self.clock.monotonic():
            return self._value[0]
        return await self._reads.do("version", self._read)

    async def _read(self) -> str:
        now = self.clock.monotonic()
        info = await self.client.version()
        major = str(info.get("major", "")).rstrip("+")
        minor = str(info.get("minor", "")).rstrip("+")
        if not (major.isdigit() and minor.isdigit()):
            # Some distributions leave major/minor empty: fall back to gitVersion v1.31.2.
            parts = str(info.get("gitVersion", "")).lstrip("v").split(".")
            major, minor = [*parts, "", ""][:2]
        version = f"{major}.{minor}"
        self._value = (version, now + self.ttl)
        return version


# ----------------------------------------------------------------------------- reconciler


class NodeClassStatus(QueueController):
    name = "nodeclass.status"
    default_workers = 2

    def __init__(
        self,
        deps: Deps,
        resolver: NodeClassResolver,
        *,
        workers: int | None = None,
        requeue_seconds: float = REQUEUE_SECONDS,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        super().__init__(deps, workers=workers)
        self.resolver = resolver
        self.requeue_seconds = requeue_seconds
        self.wait_seconds = wait_seconds

    # ------------------------------------------------------------------ triggers (sync)
    def watches(self) -> Sequence[Watch]:
        return (
            Watch(EC2NODECLASSES, upsert=self.on_nodeclass, delete=self.on_nodeclass_deleted),
            Watch(NODECLAIMS, delete=self.on_nodeclaim_deleted),
        )

    on_nodeclass = QueueController.enqueue
    # Gone: the reconcile finds nothing and drops the key (its cleanup ran before the finalizer
    # came off).
    on_nodeclass_deleted = QueueController.enqueue

    def on_nodeclaim_deleted(self, obj: KubeObject) -> None:
        """A deleting EC2NodeClass may have been waiting for this NodeClaim."""
        ref = (obj.get("spec") or {}).get("nodeClassRef") or {}
        if ref.get("group") == AWS_GROUP and ref.get("kind") == KIND and ref.get("name"):
            self.queue.add(str(ref["name"]))

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: str) -> Result | None:
        try:
            raw = await self.deps.client.get(EC2NODECLASSES, key)
        except NotFoundError:
            return None
        try:
            nodeclass = EC2NodeClass.model_validate(raw)
        except ValidationError as err:
            # Nothing launches with it (the provider skips it too): say why on the object.
            await report_unreadable(
                self.deps,
                EC2NODECLASSES,
                raw,
                validation_message(err),
                reason=REASON_VALIDATION_FAILED,
            )
            return None
        if nodeclass.metadata.deletion_timestamp is not None:
            return await self._finalize(nodeclass)
        if AWS_FINALIZER_TERMINATION not in nodeclass.metadata.finalizers:
            nodeclass = await self._set_finalizer(nodeclass, add=True)
        resolved = await self.resolver.resolve(nodeclass)
        await self._write_status(nodeclass, resolved)
        return Result(requeue_after=self.requeue_seconds)

    async def _set_finalizer(self, nodeclass: EC2NodeClass, *, add: bool) -> EC2NodeClass:
        meta = nodeclass.metadata
        patch = finalizers_patch(meta.resource_version, meta.finalizers, add=add)
        updated = await self.deps.client.patch(EC2NODECLASSES, meta.name, patch)
        return EC2NodeClass.model_validate(updated)

    async def _write_status(self, nodeclass: EC2NodeClass, resolved: ResolvedNodeClass) -> None:
        meta = nodeclass.metadata
        reserved = resolved.capacity_reservations is not None
        conditions = apply_conditions(
            nodeclass.status.conditions,
            desired_conditions(resolved.failures, reserved_capacity=reserved),
            now=self.deps.clock.now(),
            generation=meta.generation,
        )
        body = status_body(nodeclass, resolved, conditions)
        if body == current_body(nodeclass, reserved_capacity=reserved):
            return
        patch = {"status": body, "metadata": {"resourceVersion": meta.resource_version}}
        await self.deps.client.patch(
            EC2NODECLASSES, meta.name, patch, patch_type=PatchType.MERGE, subresource="status"
        )
        self._record_failures(nodeclass, resolved)
        log.info(
            "ec2nodeclass status updated",
            extra={
                "ec2nodeclass": meta.name,
                "ready": resolved.ready,
                "failures": {t: f.reason for t, f in resolved.failures.items()},
            },
        )

    def _record_failures(self, nodeclass: EC2NodeClass, resolved: ResolvedNodeClass) -> None:
        before = {c.type: c.status for c in nodeclass.status.conditions}
        ref = self._ref(nodeclass)
        for type_, failure in resolved.failures.items():
            if before.get(type_) != CONDITION_FALSE:
                self.deps.recorder.record(
                    ref, failure.reason, f"{type_}: {failure.message}", event_type="Warning"
                )

    @staticmethod
    def _ref(nodeclass: EC2NodeClass) -> KubeObject:
        meta = nodeclass.metadata
        return object_ref(API_VERSION, KIND, meta.name, uid=meta.uid or None)

    async def _finalize(self, nodeclass: EC2NodeClass) -> Result | None:
        meta = nodeclass.metadata
        if AWS_FINALIZER_TERMINATION not in meta.finalizers:
            return None
        waiting = referencing_nodeclaims(self.deps.cluster.nodeclaims.values(), meta.name)
        if waiting:
            log.info(
                "ec2nodeclass deletion waits for nodeclaims",
                extra={"ec2nodeclass": meta.name, "nodeclaims": waiting[:10]},
            )
            self.deps.recorder.record(
                self._ref(nodeclass),
                "WaitingOnNodeClaimTermination",
                f"Waiting on NodeClaim termination for {', '.join(waiting[:10])}",
                dedupe_values=(meta.name,),
            )
            return Result(requeue_after=self.wait_seconds)
        try:
            await self.resolver.cleanup(nodeclass)
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            log.warning(
                "ec2nodeclass cleanup failed; retrying",
                extra={"ec2nodeclass": meta.name, "error": str(exc)},
            )
            return Result(requeue_after=self.wait_seconds)
        try:
            await self._set_finalizer(nodeclass, add=False)
        except NotFoundError:
            return None
        log.info("ec2nodeclass finalized", extra={"ec2nodeclass": meta.name})
        return None
