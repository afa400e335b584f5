"""The AWS cloud provider: NodeClaims become EC2 instances launched by CreateFleet.

Composition of the parts that each own one AWS concern:

- ``NodeClassStore``: the EC2NodeClasses the manager's informer sees (their status holds the
  resolved subnets, security groups, AMIs and instance profile the status controller wrote);
- ``InstanceTypeProvider`` (DescribeInstanceTypes/Offerings + prices) for ``get_instance_types``;
- ``InstanceProvider`` (launch templates + batched CreateFleet, Describe/Terminate) for
  ``create``, ``get``, ``list`` and ``delete``;
- ``drift`` for ``is_drifted``.

``create`` is idempotent by NodeClaim name: an instance already tagged
``karpenter.sh/nodeclaim=<name>`` (a launch whose status write a restart lost) is adopted rather
than launched again, so a restart mid-launch never leaves two instances for one NodeClaim.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping, Sequence
from typing import Final

from karpenter_py.cloudprovider.aws.capacityreservations import CapacityReservationProvider
from karpenter_py.cloudprovider.aws.cluster import ClusterInfo
from karpenter_py.cloudprovider.aws.drift import (
    EC2NODECLASS_HASH_VERSION,
    drift_reason,
    ec2nodeclass_hash,
)
from karpenter_py.cloudprovider.aws.instance import Instance, InstanceProvider, parse_provider_id
from karpenter_py.cloudprovider.aws.instancetypes import InstanceTypeProvider
from karpenter_py.cloudprovider.errors import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpenter_py.cloudprovider.protocol import NodeClassRef, RepairPolicy
from karpenter_py.cloudprovider.selection import OfferingCache, candidates, with_offerings
from karpenter_py.model.api.convert import ConversionError, kubelet_in_effect
from karpenter_py.model.api.ec2nodeclass import EC2NodeClass
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    AWS_ANNOTATION_EC2NODECLASS_HASH,
    AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION,
    AWS_GROUP,
    AWS_LABEL_CAPACITY_RESERVATION_ID,
    AWS_LABEL_EC2NODECLASS,
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    TAG_EKS_CLUSTER_NAME,
    TAG_NODECLAIM,
)
from karpenter_py.model.quantity import format_resources

log = logging.getLogger("karpenter.aws.provider")

OfferingKey = tuple[str, str, str]  # instance type, zone, capacity type
Raw = Mapping[str, object]


class NodeClassStore:
    """EC2NodeClasses by name, kept by the manager's ec2nodeclasses informer."""

    def __init__(self) -> None:
        self._classes: dict[str, EC2NodeClass] = {}

    def upsert(self, obj: Raw) -> None:
        try:
            nc = EC2NodeClass.model_validate(obj)
        except ValueError:
            log.warning("unreadable EC2NodeClass", extra={"object": _name_of(obj)})
            return
        self._classes[nc.metadata.name or ""] = nc

    def delete(self, obj: Raw) -> None:
        self._classes.pop(_name_of(obj), None)

    def replace(self, objs: Sequence[Raw]) -> None:
        self._classes.clear()
        for obj in objs:
            self.upsert(obj)

    def get(self, name: str) -> EC2NodeClass | None:
        return self._classes.get(name)


def _name_of(obj: Raw) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""


# Upstream AWS: an unready node for 30 min, and the EKS node monitoring agent's conditions: a
# failed accelerator for 10 min, storage, networking, kernel and container runtime for 30.
REPAIR_POLICIES: Final = (
    RepairPolicy("Ready", "False", 30 * 60.0),
    RepairPolicy("Ready", "Unknown", 30 * 60.0),
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * 60.0),
    RepairPolicy("StorageReady", "False", 30 * 60.0),
    RepairPolicy("NetworkingReady", "False", 30 * 60.0),
    RepairPolicy("KernelReady", "False", 30 * 60.0),
    RepairPolicy("ContainerRuntimeReady", "False", 30 * 60.0),
)


class AwsCloudProvider:
    def __init__(
        self,
        cluster: ClusterInfo,
        nodeclasses: NodeClassStore,
        instance_types: InstanceTypeProvider,
        instances: InstanceProvider,
        *,
        offerings: OfferingCache,
        reservations: CapacityReservationProvider | None = None,
    ) -> None:
        self.cluster = cluster
        # Given with the ReservedCapacity gate on: counts launches into and out of reservations,
        # and an instance in a reservation reads as capacity type ``reserved``.
        self.reservations = reservations
        self.nodeclasses = nodeclasses
        self.instance_types = instance_types
        self.instances = instances
        # The launcher's insufficient-capacity cache: launches skip what it holds, as the solver
        # does, and it learns the offerings a CreateFleet reported without capacity even when
        # another override launched.
        self.offerings = offerings

    @property
    def name(self) -> str:
        return "aws"

    # ------------------------------------------------------------------ CloudProvider
    async def get_instance_types(self, nodepool: NodePool) -> builtins.list[InstanceType]:
        nodeclass = self._ready_nodeclass(nodepool.spec.template.spec.node_class_ref.name)
        if nodeclass is None:
            return []
        try:
            kubelet = kubelet_in_effect(nodepool.metadata.annotations, nodeclass.spec.kubelet)
        except ConversionError as err:
            # Upstream fails the pool's instance types: the pool is skipped, the others plan.
            log.warning(
                "nodepool skipped: unreadable kubelet compatibility annotation",
                extra={"nodepool": nodepool.metadata.name, "error": str(err)},
            )
            return []
        await self._ensure_loaded()
        return self.instance_types.list(nodeclass, kubelet)

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        ref = nodeclaim.spec.node_class_ref
        nodeclass = self._ready_nodeclass(ref.name)
        if nodeclass is None:
            raise NodeClassNotReadyError(f"EC2NodeClass {ref.name!r} is missing or not Ready")
        try:
            # The claim's own copy of its NodePool's annotation (written when it was created).
            kubelet = kubelet_in_effect(nodeclaim.metadata.annotations, nodeclass.spec.kubelet)
        except ConversionError as err:
            raise CreateError(f"nodeclaim {nodeclaim.name}: {err}") from None
        await self._ensure_loaded()
        types = self.instance_types.list(nodeclass, kubelet)
        existing = await self._launched_for(nodeclaim.name)
        if existing is not None:
            log.info(
                "adopting the instance of an earlier launch",
                extra={"nodeclaim": nodeclaim.name, "instance": existing.id},
            )
            return self._launched(nodeclaim, nodeclass, existing, types)
        chosen = candidates(nodeclaim, types, self.offerings.is_unavailable)
        if not chosen:
            raise InsufficientCapacityError(
                f"no instance type of nodeclaim {nodeclaim.name} has an available offering",
            )
        instance = await self.instances.create(
            nodeclass,
            nodeclaim,
            [with_offerings(c) for c in chosen],
            self._tags(nodeclaim, nodeclass),
        )
        if self.reservations is not None and instance.capacity_reservation_id:
            self.reservations.mark_launched(instance.capacity_reservation_id)
        return self._launched(nodeclaim, nodeclass, instance, types)

    async def delete(self, nodeclaim: NodeClaim) -> None:
        pid = nodeclaim.status.provider_id
        if not pid:
            found = await self._launched_for(nodeclaim.name)
            if found is None:
                raise NodeClaimNotFoundError(f"no instance for nodeclaim {nodeclaim.name}")
            pid = found.provider_id
        await self.instances.delete(_instance_id(pid))
        reservation = nodeclaim.metadata.labels.get(AWS_LABEL_CAPACITY_RESERVATION_ID)
        if self.reservations is not None and reservation:
            self.reservations.mark_terminated(reservation)

    async def get(self, provider_id: str) -> NodeClaim:
        return self._from_instance(await self.instances.get(_instance_id(provider_id)))

    async def list(self) -> builtins.list[NodeClaim]:
        return [self._from_instance(i) for i in await self.instances.list()]

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        nodeclass = self.nodeclasses.get(nodeclaim.spec.node_class_ref.name)
        if nodeclass is None or not nodeclaim.status.provider_id:
            return ""
        try:
            instance = await self.instances.get(_instance_id(nodeclaim.status.provider_id))
        except NodeClaimNotFoundError:
            return ""  # garbage collection owns vanished instances
        return drift_reason(
            nodeclaim, nodeclass, instance, reserved_capacity=self.reservations is not None
        )

    async def tag_instance(self, provider_id: str, tags: dict[str, str]) -> None:
        """``nodeclaim.tagging``'s port: add those of ``tags`` the instance behind
        ``provider_id`` does not carry yet, so a ``Name`` from the class's ``spec.tags`` stays.
        ``NodeClaimNotFoundError`` when the instance is gone (or terminated)."""
        instance_id = _instance_id(provider_id)
        current = (await self.instances.get(instance_id)).tags
        await self.instances.tag(instance_id, {k: v for k, v in tags.items() if k not in current})

    def repair_policies(self) -> builtins.list[RepairPolicy]:
        return list(REPAIR_POLICIES)

    def supported_node_classes(self) -> builtins.list[NodeClassRef]:
        return [NodeClassRef(AWS_GROUP, "EC2NodeClass")]

    # ------------------------------------------------------------------ helpers
    def _capacity_type(self, instance: Instance) -> str:
        """``reserved`` for an instance in a capacity reservation (gate on), else what EC2 says."""
        if self.reservations is not None and instance.capacity_reservation_id:
            return CAPACITY_TYPE_RESERVED
        return instance.capacity_type

    def offerings_failed(self, offerings: tuple[OfferingKey, ...]) -> None:
        """``InstanceProvider``'s sink for per-override capacity errors."""
        self.offerings.mark_all(offerings)

    async def _ensure_loaded(self) -> None:
        """The first call loads instance types unless the refresh loop already did (an error
        then surfaces to the caller)."""
        if not self.instance_types.loaded:
            await self.instance_types.refresh()

    def _ready_nodeclass(self, name: str) -> EC2NodeClass | None:
        nodeclass = self.nodeclasses.get(name)
        if nodeclass is None or not nodeclass.status.is_true("Ready"):
            return None
        return nodeclass

    async def _launched_for(self, nodeclaim_name: str) -> Instance | None:
        return await self.instances.find(nodeclaim_name)

    def _tags(self, nodeclaim: NodeClaim, nodeclass: EC2NodeClass) -> dict[str, str]:
        """Tags on the instance, its volumes and the fleet: the class's ``spec.tags`` under
        Karpenter's own (upstream's set; ours win, though validation keeps them apart)."""
        ref = nodeclaim.spec.node_class_ref
        return {
            **(nodeclass.spec.tags or {}),
            f"kubernetes.io/cluster/{self.cluster.name}": "owned",
            TAG_EKS_CLUSTER_NAME: self.cluster.name,
            LABEL_NODEPOOL: nodeclaim.metadata.labels.get(LABEL_NODEPOOL, ""),
            AWS_LABEL_EC2NODECLASS: ref.name,
            TAG_NODECLAIM: nodeclaim.name,
        }

    def _launched(
        self,
        nodeclaim: NodeClaim,
        nodeclass: EC2NodeClass,
        instance: Instance,
        types: builtins.list[InstanceType],
    ) -> NodeClaim:
        """The NodeClaim with what the launch resolved: provider ID, image, labels, resources."""
        out = nodeclaim.model_copy(deep=True)
        out.status.provider_id = instance.provider_id
        out.status.image_id = instance.image_id
        it = next((t for t in types if t.name == instance.instance_type), None)
        capacity_type = self._capacity_type(instance)
        labels = dict(_type_labels(it, instance, capacity_type) if it is not None else {})
        labels.update(
            {
                LABEL_INSTANCE_TYPE: instance.instance_type,
                LABEL_TOPOLOGY_ZONE: instance.zone,
                LABEL_TOPOLOGY_REGION: self.cluster.region,
                LABEL_CAPACITY_TYPE: capacity_type,
            }
        )
        if capacity_type == CAPACITY_TYPE_RESERVED:
            # EC2's word on the reservation, should the type's offerings no longer list it.
            labels[AWS_LABEL_CAPACITY_RESERVATION_ID] = instance.capacity_reservation_id
        labels.update(out.metadata.labels or {})  # the NodeClaim's own labels win
        out.metadata.labels = labels
        if it is not None:
            out.status.capacity = format_resources(it.capacity)
            out.status.allocatable = format_resources(it.allocatable)
        out.metadata.annotations[AWS_ANNOTATION_EC2NODECLASS_HASH] = ec2nodeclass_hash(nodeclass)
        out.metadata.annotations[AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION] = (
            EC2NODECLASS_HASH_VERSION
        )
        return out

    def _from_instance(self, instance: Instance) -> NodeClaim:
        """A live instance seen as the NodeClaim it was launched for (for get/list/GC)."""
        return NodeClaim.model_validate(
            {
                "metadata": {
                    "name": instance.tags.get(TAG_NODECLAIM, ""),
                    "labels": {
                        LABEL_NODEPOOL: instance.tags.get(LABEL_NODEPOOL, ""),
                        LABEL_INSTANCE_TYPE: instance.instance_type,
                        LABEL_TOPOLOGY_ZONE: instance.zone,
                        LABEL_CAPACITY_TYPE: self._capacity_type(instance),
                    },
                    "creationTimestamp": instance.launch_time.isoformat(),
                },
                "spec": {
                    "requirements": [],
                    "nodeClassRef": {
                        "group": AWS_GROUP,
                        "kind": "EC2NodeClass",
                        "name": instance.tags.get(AWS_LABEL_EC2NODECLASS, ""),
                    },
                },
                "status": {"providerID": instance.provider_id, "imageID": instance.image_id},
            }
        )


def _instance_id(provider_id: str) -> str:
    try:
        return parse_provider_id(provider_id)
    except ValueError as e:
        raise NodeClaimNotFoundError(str(e)) from e


def _type_labels(it: InstanceType, instance: Instance, capacity_type: str) -> dict[str, str]:
    """Single-valued labels of the launched type and offering (arch, os, family, zone-id, the
    reservation's id, type and interruptible flag...)."""
    labels = {k: next(iter(v)) for k, v in it.requirements.items() if len(v) == 1}
    for o in it.offerings:
        if o.zone != instance.zone or o.capacity_type != capacity_type:
            continue
        reservation = o.labels.get(AWS_LABEL_CAPACITY_RESERVATION_ID)
        if reservation is None or reservation == instance.capacity_reservation_id:
            labels.update(o.labels)
            break
    return labels
