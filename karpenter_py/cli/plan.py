"""``karpenter-py plan``: what Karpenter would launch for the pods in some YAML files.

Reads the manifests (see ``karpenter_py.cli.manifests``), runs the scheduling simulation against an
instance-type catalog (the built-in AWS one, or a KWOK-format JSON file) and prints the result as
a table for people or as JSON, a stable contract for scripts. With the built-in catalog, a
NodePool whose EC2NodeClass is in the input gets the catalog sized under that class's knobs
(``load_catalogs``), as the controller sizes its instance types::

    {"nodeClaims": [{"nodePool", "instanceType", "instanceTypes", "capacityType", "zone",
                     "price", "labels", "taints", "pods"}],
     "existingNodes": [{"name", "pods"}],
     "unschedulable": [{"pod", "reason"}],
     "cost": {"hourly"},
     "staticNodePools": [{"nodePool", "replicas", "nodes", "deleting", "launch", "remove",
                          "heldBack"}]}

``staticNodePools`` is there only when the input has static NodePools (``spec.replicas``): with
the ``StaticCapacity`` gate on (``--feature-gates`` or ``FEATURE_GATES``, read as the controller
reads them) each shows what the static.capacity controller would do (``controllers.static.decide``:
the NodeClaims ``launch``ed as ``nodeClaims`` entries, the NodeClaim names to ``remove``); with it
off, only ``replicas`` and ``nodes`` (nothing keeps the pool at its replicas; pods never launch
into it either way).

Exit status: 0 when a plan was made (even if some pods cannot be scheduled; they are listed), 2
when the input is unusable. Input problems produce one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TextIO

from karpenter_py.cli.manifests import ClusterObjects, ManifestError, load_manifests
from karpenter_py.cli.offline import build_cluster
from karpenter_py.controllers.static.decide import StaticDecision, decide
from karpenter_py.manager.settings import FeatureGates
from karpenter_py.model.api.convert import ConversionError, kubelet_in_effect
from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling import fromstate
from karpenter_py.scheduling.inputs import SolveInput, SolveOptions
from karpenter_py.scheduling.overlays import overlaid_types
from karpenter_py.scheduling.plan import NewNodeClaim, Plan
from karpenter_py.state.snapshot import Snapshot

if TYPE_CHECKING:
    from karpenter_py.cloudprovider.aws.instancetype_math import NodeKnobs


class Solver(Protocol):
    """``karpenter_py.scheduling.scheduler.solve``."""

    def __call__(
        self, inp: SolveInput, *, namespace_labels: Mapping[str, Mapping[str, str]] | None = None
    ) -> Plan: ...


OutputFormat = Literal["table", "json"]

EXIT_OK = 0
EXIT_USAGE = 2
ESTIMATED_MARK = "~"
STATIC_GATE_OFF = "StaticCapacity gate off: nothing keeps the pool at its replicas"


# Without NodePools plan still places pods on the Nodes given, as the controller would, and
# reports the rest unschedulable; with neither there is nothing to plan against.
NO_NODEPOOL_OR_NODE = (
    "no NodePool or Node found; plan needs a NodePool to launch nodes for, or Nodes to place "
    "pods on"
)


class PlanError(Exception):
    """An input problem; the message is what the user sees (after "error: ")."""


# ----------------------------------------------------------------------------- seams


def load_solver() -> Solver:
    """The scheduler's ``solve``, looked up when the command runs (tests substitute their own)."""
    from karpenter_py.scheduling.scheduler import solve

    return solve


def load_builtin_catalog(knobs: NodeKnobs | None = None) -> Sequence[InstanceType]:
    """The built-in AWS catalog under ``knobs`` (the default EC2NodeClass when None)."""
    from karpenter_py.cloudprovider.aws.instancetype_math import builtin_aws_catalog

    return builtin_aws_catalog(knobs)


def load_catalog_file(file: str) -> list[InstanceType]:
    """Instance types from a KWOK-format JSON catalog file."""
    from karpenter_py.model.catalog import instance_types_from_kwok_json
    from karpenter_py.model.fields import ParseError

    try:
        text = Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"{file}: no such file") from None
    except OSError as err:
        raise PlanError(f"{file}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise PlanError(f"{file}: not UTF-8 text ({err.reason})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise PlanError(
            f"{file}: invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from None
    try:
        types = instance_types_from_kwok_json(data, source="catalog")
    except ParseError as err:
        raise PlanError(f"{file}: {err.path}: {err.problem}") from None
    if not types:
        raise PlanError(f"{file}: the catalog lists no instance types")
    return types


@dataclass(frozen=True, slots=True)
class PoolCatalogs:
    """The instance types each NodePool plans with: its own when sized under its EC2NodeClass,
    else ``default``. Pools of one class share one tuple (the solver indexes by identity)."""

    default: tuple[InstanceType, ...]
    by_pool: Mapping[str, tuple[InstanceType, ...]] = field(default_factory=dict)

    def of(self, pool: str) -> tuple[InstanceType, ...]:
        return self.by_pool.get(pool, self.default)


def as_pool_catalogs(catalog: Sequence[InstanceType] | PoolCatalogs) -> PoolCatalogs:
    """``catalog`` as given, or one catalog for every pool."""
    return catalog if isinstance(catalog, PoolCatalogs) else PoolCatalogs(tuple(catalog))


def load_catalogs(objects: ClusterObjects, instance_types: str | None) -> PoolCatalogs:
    """Each NodePool's instance types, as the controller would build them.

    ``--instance-types`` (a KWOK-format file: no EC2 facts to size) is every pool's catalog.
    Otherwise a NodePool whose nodeClassRef names an EC2NodeClass of the input gets the built-in
    catalog under that class's knobs (``knobs_for``; the kubelet of the NodePool's v1beta1
    compatibility annotation wins over the class's, as ``kubelet_in_effect`` says), with the
    controller's default VM_MEMORY_OVERHEAD_PERCENT and no reserved ENIs; any other pool (its
    class not in the input, a KWOKNodeClass) gets the default built-in catalog.
    """
    if instance_types is not None:
        return PoolCatalogs(tuple(load_catalog_file(instance_types)))
    from karpenter_py.cloudprovider.aws.instancetype_math import VM_MEMORY_OVERHEAD_PERCENT
    from karpenter_py.cloudprovider.aws.knobs import knobs_for

    by_pool: dict[str, tuple[InstanceType, ...]] = {}
    for nodepool, _ in objects.nodepools:
        nodeclass = objects.ec2nodeclass_for(fromstate.nodeclass_key(nodepool))
        if nodeclass is None:
            continue
        try:
            kubelet = kubelet_in_effect(nodepool.metadata.annotations, nodeclass.spec.kubelet)
        except ConversionError as err:
            raise PlanError(f"NodePool {nodepool.metadata.name}: {err}") from None
        knobs = knobs_for(
            nodeclass,
            vm_memory_overhead_percent=VM_MEMORY_OVERHEAD_PERCENT,
            reserved_enis=0,
            kubelet=kubelet,
        )
        by_pool[nodepool.metadata.name] = tuple(load_builtin_catalog(knobs))
    return PoolCatalogs(tuple(load_builtin_catalog()), by_pool)


# ----------------------------------------------------------------------------- input


def has_target(objects: ClusterObjects) -> bool:
    """Whether there is anything to plan onto: a NodePool (even an idle one), a Node or a
    NodeClaim."""
    return bool(objects.nodepools or objects.nodes or objects.nodeclaims)


def solve_input(
    snapshot: Snapshot,
    catalog: Sequence[InstanceType] | PoolCatalogs,
    options: SolveOptions | None = None,
) -> SolveInput:
    """The controller's solver input for the snapshot (``fromstate.solve_input``). Every pool may
    use its whole catalog (one list for all, or ``load_catalogs``' per-pool ones): the solver
    filters by each pool's requirements."""
    return fromstate.solve_input(
        snapshot,
        instance_types=pool_instance_types(snapshot, catalog),
        options=options or SolveOptions(),
    )


def pool_instance_types(
    snapshot: Snapshot, catalog: Sequence[InstanceType] | PoolCatalogs
) -> Mapping[str, Sequence[InstanceType]]:
    """Each NodePool's instance types as the controller's rounds hand them to its decisions:
    its catalog with the snapshot's NodeOverlays applied (``overlays.overlaid_types``) over the
    pools that may launch, as the rounds resolve them; the others' as they are."""
    catalogs = as_pool_catalogs(catalog)
    types = {name: catalogs.of(name) for name in snapshot.nodepools}
    ready = {np.metadata.name or "" for np in fromstate.provisionable_pools(snapshot)}
    return {**types, **overlaid_types(snapshot, {n: t for n, t in types.items() if n in ready})}


# ----------------------------------------------------------------------------- output

_DIGITS = re.compile(r"(\d+)")


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key putting inflate-2 before inflate-10."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(text) if part
    )


def _pod_names(pods: Sequence[Pod]) -> list[str]:
    return sorted((p.key for p in pods), key=_natural)


def _price(value: float) -> float:
    return round(value, 6)


def node_claim_json(nc: NewNodeClaim) -> dict[str, object]:
    return {
        "nodePool": nc.node_pool,
        "instanceType": nc.instance_type.name,
        "instanceTypes": [it.name for it in nc.instance_types],
        "capacityType": nc.offering.capacity_type,
        "zone": nc.offering.zone,
        "price": _price(nc.price),
        "labels": dict(sorted(nc.labels.items())),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in nc.taints],
        "pods": _pod_names(nc.pods),
    }


def _existing(plan: Plan) -> list[tuple[str, list[str]]]:
    """(node name, pods newly placed there), nodes in name order; nodes receiving none left out."""
    by_node: dict[str, list[Pod]] = {}
    for placement in plan.existing:
        by_node.setdefault(placement.node_name, []).extend(placement.pods)
    return [
        (name, _pod_names(pods))
        for name, pods in sorted(by_node.items(), key=lambda kv: _natural(kv[0]))
        if pods
    ]


def plan_json(plan: Plan) -> dict[str, object]:
    """The ``-o json`` contract. Keys and their order are part of it."""
    return {
        "nodeClaims": [node_claim_json(nc) for nc in plan.new_node_claims],
        "existingNodes": [{"name": name, "pods": pods} for name, pods in _existing(plan)],
        "unschedulable": [{"pod": e.pod.key, "reason": e.reason} for e in plan.errors],
        "cost": {"hourly": _price(plan.hourly_cost)},
    }


def static_json(decision: StaticDecision, gate: bool) -> dict[str, object]:
    return {
        "nodePool": decision.pool,
        "replicas": decision.replicas,
        "nodes": decision.count.running,
        "deleting": decision.count.deleting,
        "launch": [node_claim_json(nc) for nc in decision.launch] if gate else [],
        "remove": list(decision.remove) if gate else [],
        "heldBack": decision.held_back if gate else STATIC_GATE_OFF,
    }


def render_json(plan: Plan, static: StaticPlan | None = None) -> str:
    out = plan_json(plan)
    if static is not None and static.decisions:
        out["staticNodePools"] = [static_json(d, static.gate) for d in static.decisions]
    return json.dumps(out, indent=2, sort_keys=False) + "\n"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        out = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def _money(value: float) -> str:
    return f"{value:.4f}" if value < 100 else f"{value:.2f}"


def render_table(plan: Plan, *, pending: int | None = None) -> str:
    """The ``-o table`` report: new nodes, existing-node placements, unschedulable pods, cost."""
    sections: list[str] = []
    on_new = sum(len(nc.pods) for nc in plan.new_node_claims)
    on_existing = sum(len(p.pods) for p in plan.existing)
    total = pending if pending is not None else on_new + on_existing + len(plan.errors)
    sections.append(
        f"{total} pending pod{'s' if total != 1 else ''}: {on_new} on new nodes, "
        f"{on_existing} on existing nodes, {len(plan.errors)} unschedulable"
    )

    estimated = any(nc.offering.price_estimated for nc in plan.new_node_claims)
    if plan.new_node_claims:
        rows = []
        for nc in plan.new_node_claims:
            mark = ESTIMATED_MARK if nc.offering.price_estimated else ""
            rows.append(
                [
                    nc.node_pool,
                    nc.instance_type.name,
                    nc.offering.zone,
                    nc.offering.capacity_type,
                    f"{mark}{_money(nc.price)}",
                    str(len(nc.pods)),
                    str(len(nc.instance_types)),
                ]
            )
        sections.append(
            f"New nodes ({len(plan.new_node_claims)}):\n"
            + _table(
                ["NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY", "PRICE/H", "PODS", "OPTIONS"],
                rows,
                frozenset({4, 5, 6}),
            )
        )
    else:
        sections.append("New nodes: none")

    placements = _existing(plan)
    if placements:
        rows = [[name, str(len(pods))] for name, pods in placements]
        sections.append(
            f"Existing nodes receiving pods ({len(rows)}):\n"
            + _table(["NODE", "NEW PODS"], rows, frozenset({1}))
        )

    if plan.errors:
        rows = [[e.pod.key, e.reason] for e in plan.errors]
        sections.append(
            f"Unschedulable pods ({len(plan.errors)}):\n"
            + _table(["POD", "REASON"], rows, frozenset())
        )

    cost = f"Total hourly cost: ${_money(plan.hourly_cost)}"
    if estimated:
        cost += f"  ({ESTIMATED_MARK} marks an estimated spot price)"
    sections.append(cost)
    return "\n\n".join(sections) + "\n"


def render_static_table(static: StaticPlan) -> str:
    """The static NodePools section of ``-o table`` ("" when there are none)."""
    if not static.decisions:
        return ""
    rows = []
    for d in static.decisions:
        launch = ", ".join(nc.instance_type.name for nc in d.launch) if static.gate else ""
        remove = ", ".join(d.remove) if static.gate else ""
        note = d.held_back if static.gate else STATIC_GATE_OFF
        rows.append(
            [
                d.pool,
                str(d.replicas),
                str(d.count.running),
                str(d.count.deleting),
                f"{len(d.launch)} {launch}".strip() if static.gate else "0",
                f"{len(d.remove)} {remove}".strip() if static.gate else "0",
                note,
            ]
        )
    return (
        f"Static NodePools ({len(rows)}):\n"
        + _table(
            ["NODEPOOL", "REPLICAS", "NODES", "DELETING", "LAUNCH", "REMOVE", "NOTE"],
            rows,
            frozenset({1, 2, 3}),
        )
        + "\n"
    )


@dataclass(frozen=True, slots=True)
class StaticPlan:
    """What the static.capacity controller would do, and whether its gate is on."""

    gate: bool
    decisions: tuple[StaticDecision, ...]


def static_plan(
    snapshot: Snapshot,
    catalog: Sequence[InstanceType] | PoolCatalogs,
    options: SolveOptions | None,
    gates: FeatureGates,
) -> StaticPlan:
    """The controller's decisions for every static NodePool (``controllers.static.decide``)."""
    catalogs = as_pool_catalogs(catalog)
    decisions = decide(
        snapshot,
        {name: catalogs.of(name) for name in snapshot.nodepools},
        options=options or SolveOptions(),
    )
    return StaticPlan(gates.static_capacity, decisions)


# ----------------------------------------------------------------------------- command


def run_plan(
    files: Sequence[str],
    *,
    instance_types: str | None = None,
    output: OutputFormat = "table",
    options: SolveOptions | None = None,
    gates: FeatureGates | None = None,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    """``gates``: the feature gates, read as the controller reads them (NodeOverlay,
    StaticCapacity)."""
    gates = gates if gates is not None else FeatureGates()
    try:
        manifests = load_manifests(files)
        now = datetime.now(UTC)
        cluster, warnings = build_cluster(manifests.cluster, now, node_overlay=gates.node_overlay)
        for warning in (*manifests.warnings, *manifests.workload_warnings, *warnings):
            print(f"warning: {warning}", file=stderr)
        if not has_target(manifests.cluster):
            raise PlanError(NO_NODEPOOL_OR_NODE)
        snapshot = cluster.snapshot(now)
        catalogs = load_catalogs(manifests.cluster, instance_types)
        inp = solve_input(snapshot, catalogs, options)
    except (ManifestError, PlanError) as err:
        print(f"error: {err}", file=stderr)
        return EXIT_USAGE
    plan = load_solver()(inp, namespace_labels=snapshot.namespace_labels)
    static = static_plan(snapshot, catalogs, options, gates)
    if output == "json":
        stdout.write(render_json(plan, static))
    else:
        table = render_table(plan, pending=len(inp.pods))
        extra = render_static_table(static)
        stdout.write(table + ("\n" + extra if extra else ""))
    return EXIT_OK
