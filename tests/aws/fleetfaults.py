"""Insufficient capacity from moto's CreateFleet, for chosen (instance type, zone, capacity type).

moto never reports fleet ``Errors``. :func:`insufficient_capacity` wraps moto's in-process EC2
backend and response (the ``moto_server`` fixture runs in this process) for the duration of a
``with`` block: overrides matching a chosen offering are taken out before moto launches anything
and come back as ``Errors`` entries (``InsufficientInstanceCapacity`` by default), as EC2 does.
The product still talks to moto over HTTP; only moto's answer changes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from moto.core.responses import ActionResult
from moto.ec2.models.fleets import FleetsBackend
from moto.ec2.responses.fleets import Fleets
from moto.ec2.utils import random_fleet_id

Offering = tuple[str, str, str]  # (instance type, zone, capacity type)


@dataclass(slots=True)
class FleetFaults:
    failing: set[Offering]
    code: str = "InsufficientInstanceCapacity"
    message: str = "There is no capacity available for this offering (injected by fleetfaults)."
    requests: list[dict[str, Any]] = field(default_factory=list)  # each CreateFleet's configs
    _pending: threading.local = field(default_factory=threading.local)


@dataclass(slots=True)
class _NoCapacityFleet:
    """Stands in for moto's Fleet when every override failed (moto cannot launch zero)."""

    id: str
    instances: list[dict[str, Any]] = field(default_factory=list)


def _split(
    backend: Any, faults: FleetFaults, configs: list[dict[str, Any]], capacity_type: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(configs with the failing overrides removed, Errors entries for those)."""
    kept_configs: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for config in configs:
        kept = []
        for override in config.get("Overrides") or []:
            zone = override.get("AvailabilityZone")
            if not zone and override.get("SubnetId"):
                zone = backend.get_subnet(override["SubnetId"]).availability_zone
            if (override.get("InstanceType"), zone, capacity_type) in faults.failing:
                errors.append(
                    {
                        "LaunchTemplateAndOverrides": {
                            "LaunchTemplateSpecification": config["LaunchTemplateSpecification"],
                            "Overrides": {
                                "InstanceType": override.get("InstanceType"),
                                "SubnetId": override.get("SubnetId"),
                                "AvailabilityZone": zone,
                            },
                        },
                        "Lifecycle": capacity_type,
                        "ErrorCode": faults.code,
                        "ErrorMessage": faults.message,
                    }
                )
            else:
                kept.append(override)
        if kept:
            kept_configs.append({**config, "Overrides": kept})
    return kept_configs, errors


@contextlib.contextmanager
def insufficient_capacity(*offerings: Offering, code: str = "") -> Iterator[FleetFaults]:
    """Within the block, CreateFleet fails for ``offerings`` with ``code``."""
    faults = FleetFaults(failing=set(offerings))
    if code:
        faults.code = code
    original_backend = FleetsBackend.create_fleet
    original_response = Fleets.create_fleet

    def backend_create_fleet(self: Any, **kwargs: Any) -> Any:
        spec = kwargs.get("target_capacity_specification") or {}
        capacity_type = spec.get("DefaultTargetCapacityType") or "on-demand"
        configs = kwargs.get("launch_template_configs") or []
        faults.requests.append({"capacity_type": capacity_type, "configs": configs})
        kept, errors = _split(self, faults, configs, capacity_type)
        faults._pending.errors = errors
        if not kept:
            return _NoCapacityFleet(id=random_fleet_id())
        return original_backend(self, **{**kwargs, "launch_template_configs": kept})

    def response_create_fleet(self: Any) -> ActionResult:
        faults._pending.errors = []
        answer = original_response(self)
        errors = getattr(faults._pending, "errors", [])
        result = dict(answer.result)  # type: ignore[call-overload]
        if errors:
            result["Errors"] = errors
        result.setdefault("Instances", [])
        return ActionResult(result)

    with (
        mock.patch.object(FleetsBackend, "create_fleet", backend_create_fleet),
        mock.patch.object(Fleets, "create_fleet", response_create_fleet),
    ):
        yield faults
