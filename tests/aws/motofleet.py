"""Make moto's CreateFleet behave as EC2's does where the product depends on it.

* :func:`honour_client_tokens`: a CreateFleet with a ``ClientToken`` already used answers what
  the first call answered and launches nothing more (EC2's idempotency). botocore fills the
  token in once per call and sends it again on each retry, so a call whose answer was lost
  (the connection reset after EC2 launched) is retried without a second launch; moto ignores
  the token and launched again, leaving an instance no NodeClaim knows.

Launch templates' security groups:

moto 5.2.5 reads a key EC2 launch templates do not have (``GroupSet``) when it turns a fleet's
launch template into instances, so fleet instances come up with no security group (on-demand)
or the VPC's default one (spot). Every node would then read as ``SecurityGroupDrift`` at once.
:func:`apply_template_security_groups` patches moto's fleet backend, in this process, to set each
fleet instance's groups to its template's ``SecurityGroupIds`` after moto launched it. Used by
the moto server the tests and benchmarks start; every API call still goes over HTTP.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

from moto.core.responses import ActionResult
from moto.ec2.models.fleets import FleetsBackend
from moto.ec2.responses.fleets import Fleets


def _template_groups(backend: Any, launch_spec: Any) -> list[Any]:
    spec = getattr(launch_spec, "launch_template_spec", None) or {}
    template = backend.launch_templates.get(spec.get("LaunchTemplateId", ""))
    if template is None:
        return []
    version = spec.get("Version")
    data = (
        template.get_version(version)
        if version and str(version).isdigit()
        else template.latest_version()
    ).data
    return [backend.get_security_group_from_id(g) for g in data.get("SecurityGroupIds") or []]


def _fleet_instances(fleet: Any) -> Iterator[tuple[Any, Any]]:
    """(instance, launch spec) of everything the fleet launched."""
    for entry in getattr(fleet, "on_demand_instances", []) or []:
        yield entry["instance"], entry["launch_spec"]
    for request in getattr(fleet, "spot_requests", []) or []:
        instance = getattr(request, "instance", None)
        if instance is not None:
            yield instance, getattr(request, "launch_spec", None)


def _patched(original: Any) -> Any:
    def create_fleet(self: Any, **kwargs: Any) -> Any:
        fleet = original(self, **kwargs)
        for instance, launch_spec in _fleet_instances(fleet):
            groups = [g for g in _template_groups(self, launch_spec) if g is not None]
            if groups:
                instance.security_groups = groups
        return fleet

    return create_fleet


@contextlib.contextmanager
def apply_template_security_groups() -> Iterator[None]:
    with mock.patch.object(FleetsBackend, "create_fleet", _patched(FleetsBackend.create_fleet)):
        yield


def _idempotent(original: Callable[[Any], ActionResult]) -> Callable[[Any], ActionResult]:
    answers: dict[str, ActionResult] = {}
    lock = threading.Lock()  # moto's server answers each request on its own thread

    def create_fleet(self: Any) -> ActionResult:
        token = self._get_param("ClientToken")
        if not token:
            return original(self)
        with lock:
            if token not in answers:
                answers[token] = original(self)
            return answers[token]

    return create_fleet


@contextlib.contextmanager
def honour_client_tokens() -> Iterator[None]:
    with mock.patch.object(Fleets, "create_fleet", _idempotent(Fleets.create_fleet)):
        yield
