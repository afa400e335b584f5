"""Capacity reservations on moto's wire: moto 5.2.5 has no DescribeCapacityReservations and
its CreateFleet ignores a launch template's capacity reservation target.

Inside :func:`capacity_reservations` (the ``moto_server`` fixture runs moto in this process):

* DescribeCapacityReservations answers from the reservations :func:`seed_capacity_reservation`
  put in moto's EC2 backend (moto's reset clears them with the backend), honouring
  ``CapacityReservationIds`` (an unknown id is ``InvalidCapacityReservationId.NotFound``, as
  EC2 answers) and the filters the product sends (``state``, ``owner-id``,
  ``instance-match-criteria``, ``tag:<key>``, ``tag-key``);
* a fleet instance whose launch template targets a seeded reservation is placed in it:
  DescribeInstances then reports its ``CapacityReservationId`` and the reservation one instance
  fewer available, as EC2 does; :func:`end_reservation` ends one as EC2 does (its instances
  stay, no longer in it).

The product reads all of it over HTTP through aiobotocore; only moto's answers change.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from unittest import mock

from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models import ec2_backends
from moto.ec2.models.fleets import FleetsBackend
from moto.ec2.responses import EC2Response

from tests.aws.amiseed import ACCOUNT
from tests.motofixture import REGION

_ATTR = "karpenter_capacity_reservations"
_lock = threading.Lock()  # moto's server answers each request on its own thread


def _store(backend: Any) -> dict[str, dict[str, Any]]:
    held: dict[str, dict[str, Any]] | None = getattr(backend, _ATTR, None)
    if held is None:
        held = {}
        setattr(backend, _ATTR, held)
    return held


def seed_capacity_reservation(
    reservation_id: str,
    *,
    instance_type: str,
    zone: str,
    available: int,
    total: int | None = None,
    owner_id: str = ACCOUNT,
    match_criteria: str = "targeted",
    reservation_type: str = "default",
    end: datetime.datetime | None = None,
    state: str = "active",
    tags: Mapping[str, str] | None = None,
    interruptible: bool = False,
    region: str = REGION,
) -> None:
    """Put a reservation in moto's EC2 backend (replacing one of the same id)."""
    record: dict[str, Any] = {
        "CapacityReservationId": reservation_id,
        "OwnerId": owner_id,
        "InstanceType": instance_type,
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": zone,
        "Tenancy": "default",
        "TotalInstanceCount": total if total is not None else available,
        "AvailableInstanceCount": available,
        "State": state,
        "InstanceMatchCriteria": match_criteria,
        "ReservationType": reservation_type,
        "Interruptible": interruptible,
        "EndDateType": "limited" if end is not None else "unlimited",
        "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
    }
    if end is not None:
        record["EndDate"] = end
    with _lock:
        _store(ec2_backends[ACCOUNT][region])[reservation_id] = record


def available_count(reservation_id: str, *, region: str = REGION) -> int:
    with _lock:
        return int(_store(ec2_backends[ACCOUNT][region])[reservation_id]["AvailableInstanceCount"])


def end_reservation(reservation_id: str, *, region: str = REGION) -> None:
    """The reservation ends (expired or cancelled): EC2 drops it and its instances run on as
    plain on-demand, no longer reporting a CapacityReservationId."""
    backend = ec2_backends[ACCOUNT][region]
    with _lock:
        _store(backend).pop(reservation_id, None)
    for instance in backend.all_instances():
        if getattr(instance, "capacity_reservation_id", None) == reservation_id:
            instance.capacity_reservation_id = None  # type: ignore[attr-defined]


def _matches(record: Mapping[str, Any], name: str, values: list[str]) -> bool:
    tags = {t["Key"]: t["Value"] for t in record["Tags"]}
    if name.startswith("tag:"):
        return tags.get(name[4:]) in values
    if name == "tag-key":
        return any(v in tags for v in values)
    field = {
        "state": "State",
        "owner-id": "OwnerId",
        "instance-match-criteria": "InstanceMatchCriteria",
        "instance-type": "InstanceType",
        "availability-zone": "AvailabilityZone",
    }.get(name)
    if field is None:
        raise EC2ClientError("InvalidParameterValue", f"unsupported filter {name!r}")
    return str(record[field]) in values


def _describe(self: Any) -> ActionResult:
    ids: list[str] = self._get_param("CapacityReservationIds") or []
    filters: Mapping[str, list[str]] = self._filters_from_querystring()
    with _lock:
        store = _store(self.ec2_backend)
        missing = [i for i in ids if i not in store]
        if missing:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{missing[0]}' does not exist",
            )
        records = [dict(r) for r in store.values() if not ids or r["CapacityReservationId"] in ids]
    found = [r for r in records if all(_matches(r, n, v) for n, v in filters.items())]
    return ActionResult({"CapacityReservations": found})


def _targeted(backend: Any, launch_spec: Any) -> str | None:
    spec = getattr(launch_spec, "launch_template_spec", None) or {}
    template = backend.launch_templates.get(spec.get("LaunchTemplateId", ""))
    if template is None:
        return None
    data = template.latest_version().data
    target = (data.get("CapacityReservationSpecification") or {}).get(
        "CapacityReservationTarget"
    ) or {}
    return target.get("CapacityReservationId")


def _placing(original: Any) -> Any:
    def create_fleet(self: Any, **kwargs: Any) -> Any:
        fleet = original(self, **kwargs)
        for entry in getattr(fleet, "on_demand_instances", []) or []:
            reservation_id = _targeted(self, entry["launch_spec"])
            if reservation_id is None:
                continue
            with _lock:
                record = _store(self).get(reservation_id)
                if record is None:
                    continue
                record["AvailableInstanceCount"] = max(0, record["AvailableInstanceCount"] - 1)
            # moto's serializer emits any attribute named after a response field.
            entry["instance"].capacity_reservation_id = reservation_id
        return fleet

    return create_fleet


@contextlib.contextmanager
def capacity_reservations() -> Iterator[None]:
    with (
        mock.patch.object(EC2Response, "describe_capacity_reservations", _describe, create=True),
        mock.patch.object(FleetsBackend, "create_fleet", _placing(FleetsBackend.create_fleet)),
    ):
        yield
