"""``karpenter-py plan --disruption``: what disruption would do now to the cluster in some YAML.

The input is what a cluster dump gives (``kubectl get nodes,pods,nodeclaims,nodepools,pdb,
daemonsets,namespaces -A -o yaml``) or hand-written files of the same kinds, read by the same
reader as ``plan`` (``karpenter_py.cli.manifests``). The objects go into a
:class:`~karpenter_py.state.cluster.Cluster` by the builder ``plan`` uses too
(``karpenter_py.cli.offline.build_cluster``), whose ``snapshot()`` joins NodeClaims to Nodes by
providerID and ``status.nodeName``, and the controller's own decision code runs on it:
``karpenter_py.controllers.disruption.decide.evaluate`` applies each command to the cluster as it
would leave it and looks again, so the output lists every command in order.

Offline, a few things a cluster would provide are filled in by the builder, each as the
controllers would:

* Nothing is made up for a Node with a ``karpenter.sh/nodepool`` label and no NodeClaim in the
  input: as in a cluster, Karpenter never disrupts it, and it is listed unchanged with that
  reason. Hand-written files give each managed Node its NodeClaim (``status.providerID`` or
  ``status.nodeName`` joins them).
* ``Consolidatable``: upstream's controller sets it, so a NodeClaim without it is not
  consolidatable yet. Only when no NodeClaim of the input carries the condition (a hand-written
  file) does each get one computed at ``--now`` from the NodePool's ``consolidateAfter`` and
  ``status.lastPodEventTime`` (else the ``Initialized`` transition), by
  ``nodeclaim.disruption.set_consolidatable``, the function the NodeClaim controller uses, and a
  warning says so.
* A ``Drifted`` condition in the input is honoured as it is. A launched NodeClaim without one
  that carries the ``karpenter.sh/nodepool-hash`` annotation is checked for NodePool drift
  (``nodeclaim.drift.nodepool_drift``: template hash, then requirements) and marked Drifted when
  it has drifted. Instance-type and provider drift need the cloud and are not checked.
* A PodDisruptionBudget's ``status.disruptionsAllowed`` is used when present (parsed by the
  controller's ``state.ingest.pdb_from_dict``). Without it, it is computed as the disruption
  controller does, over the pods in the input its selector matches: expected = the matching
  pods (standing in for the owners' scale), healthy = the matching pods bound to a node and not
  terminating; ``maxUnavailable`` (int, or a percentage rounded up) gives desired healthy =
  expected - maxUnavailable, ``minAvailable`` (int, or a percentage rounded up) gives desired
  healthy directly; allowed = healthy - desired, and 0 when negative, when nothing is expected
  or when neither field is set.
* A NodePool's NodeClass counts as Ready (``plan`` resolves no NodeClasses) unless it is an
  EC2NodeClass of the input that selects no AMI (a v1beta1 Ubuntu class without
  ``amiSelectorTerms``), and every pool may use its whole instance-type catalog, chosen as ``plan`` chooses it
  (``karpenter_py.cli.plan.load_catalogs``: ``--instance-types``, else the built-in AWS one,
  sized under the pool's EC2NodeClass when the input has it); the solver filters by each pool's
  requirements.
* Pods are the input's Pod documents: bound ones (``spec.nodeName``) use their node, unbound
  ones are pending. Workloads (Deployments, ...) are not expanded: a dump lists their pods.

Output (``-o json``, a stable contract; hourly prices)::

    {"commands": [{"method", "reason", "candidates": [node names],
                   "replacements": [{"nodePool", "instanceType", "instanceTypes",
                                     "capacityType", "zone", "price"}],
                   "savings": {"hourly"}}],
     "unchanged": [{"node", "reason"}],
     "cost": {"before", "after"}}

Every node of the input (and every NodeClaim still in flight) is named once: as a candidate of
one command, or in ``unchanged`` with the decision code's reason. ``cost.before`` is what all of
them cost per hour; ``cost.after`` is that minus the commands' savings.

Nodes without a NodePool in the input are decided about too, as ``plan`` plans for them: none
is a candidate (the controller leaves nodes no NodePool manages alone), each is listed unchanged
with the reason, and one warning on stderr says that no NodePool was found.

Exit status: 0 when a decision was printed, 2 when the input is unusable (one line on stderr
naming the file, document and field, as ``plan``) or holds neither a NodePool nor a Node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, TextIO

from karpenter_py.cli import plan as plan_cli
from karpenter_py.cli.manifests import ManifestError, load_manifests
from karpenter_py.cli.offline import build_cluster
from karpenter_py.cli.plan import (
    ESTIMATED_MARK,
    EXIT_OK,
    EXIT_USAGE,
    NO_NODEPOOL_OR_NODE,
    OutputFormat,
    PlanError,
    PoolCatalogs,
    _money,
    _natural,
    _price,
    _table,
)
from karpenter_py.controllers.disruption.candidates import hourly_price
from karpenter_py.controllers.disruption.decide import Facts, evaluate, next_command
from karpenter_py.controllers.disruption.types import Candidate, Command, Decision
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.instances import IndexCache
from karpenter_py.scheduling.plan import NewNodeClaim
from karpenter_py.state.snapshot import Snapshot

# ----------------------------------------------------------------------------- --now


def parse_now(text: str) -> datetime:
    """An RFC 3339 time with its offset (``2026-01-01T12:00:00Z``), as UTC."""
    problem = f"--now {text!r}: not an RFC 3339 time with a time zone (e.g. 2026-01-01T12:00:00Z)"
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise PlanError(problem) from None
    if value.tzinfo is None:
        raise PlanError(problem)
    return value.astimezone(UTC)


NO_NODEPOOL_CANDIDATES: Final = (
    "no NodePool found; no node is a disruption candidate (nodes no NodePool manages are left "
    "alone)"
)


# ----------------------------------------------------------------------------- the decision


@dataclass(frozen=True, slots=True)
class DisruptionPlan:
    """One evaluation and what it needs to be printed."""

    decision: Decision
    snapshot: Snapshot
    instance_types: Mapping[str, Sequence[InstanceType]]
    now: datetime

    @property
    def cost_before(self) -> float:
        return sum(hourly_price(sn, self.instance_types) for sn in self.snapshot.nodes)

    @property
    def savings(self) -> float:
        return sum(c.savings for c in self.decision.commands)

    @property
    def cost_after(self) -> float:
        return self.cost_before - self.savings

    def unchanged(self) -> list[tuple[str, str]]:
        """(node, reason), nodes in natural name order."""
        items = self.decision.unchanged.items()
        return sorted(items, key=lambda kv: _natural(kv[0]))


def plan_disruption(
    snapshot: Snapshot,
    catalog: Sequence[InstanceType] | PoolCatalogs,
    *,
    options: SolveOptions | None = None,
    every_command: bool = True,
) -> DisruptionPlan:
    """Evaluate disruption on the snapshot with the controller's decision code (``catalog``: one
    list for every pool, or ``plan_cli.load_catalogs``' per-pool ones): every command in order
    (``evaluate``), or with ``every_command=False`` only the one the controller's next pass
    would take (``next_command``: one pass, where a big cluster's full list may take hundreds)."""
    now = snapshot.now
    instance_types = plan_cli.pool_instance_types(snapshot, catalog)
    facts = Facts(
        snapshot=snapshot,
        instance_types=instance_types,
        now=now,
        options=options or SolveOptions(),
        indexes=IndexCache(),
    )
    decision = evaluate(facts) if every_command else next_command(facts)
    return DisruptionPlan(decision, snapshot, instance_types, now)


# ----------------------------------------------------------------------------- output


def _replacement_json(nc: NewNodeClaim) -> dict[str, object]:
    return {
        "nodePool": nc.node_pool,
        "instanceType": nc.instance_type.name,
        "instanceTypes": [it.name for it in nc.instance_types],
        "capacityType": nc.offering.capacity_type,
        "zone": nc.offering.zone,
        "price": _price(nc.price),
    }


def command_json(command: Command) -> dict[str, object]:
    return {
        "method": command.method.name,
        "reason": command.reason.value,
        "candidates": [c.name for c in command.candidates],
        "replacements": [_replacement_json(nc) for nc in command.replacements],
        "savings": {"hourly": _price(command.savings)},
    }


def disruption_json(result: DisruptionPlan) -> dict[str, object]:
    """The ``-o json`` contract. Keys and their order are part of it."""
    return {
        "commands": [command_json(c) for c in result.decision.commands],
        "unchanged": [{"node": n, "reason": r} for n, r in result.unchanged()],
        "cost": {"before": _price(result.cost_before), "after": _price(result.cost_after)},
    }


def render_json(result: DisruptionPlan) -> str:
    return json.dumps(disruption_json(result), indent=2, sort_keys=False) + "\n"


def _candidate_estimated(c: Candidate) -> bool:
    it = c.instance_type
    if it is None:
        return False
    return any(
        o.price_estimated
        for o in it.offerings
        if o.zone == c.zone and o.capacity_type == c.capacity_type and o.price == c.price
    )


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _command_block(index: int, command: Command) -> tuple[str, bool]:
    """One command as text, and whether it shows an estimated price."""
    estimated = False
    rows = []
    for c in command.candidates:
        mark = ESTIMATED_MARK if _candidate_estimated(c) else ""
        estimated = estimated or bool(mark)
        rows.append(
            [
                c.name,
                c.pool_name,
                c.instance_type_name or "-",
                c.zone or "-",
                c.capacity_type or "-",
                f"{mark}{_money(c.price)}",
            ]
        )
    lines = [
        f"{index}. {command.method.name} ({command.reason.value}): {command.explanation}",
        f"  Candidates ({len(command.candidates)}):",
        _indent(
            _table(
                ["NODE", "NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY", "PRICE/H"],
                rows,
                frozenset({5}),
            ),
            "    ",
        ),
    ]
    if command.replacements:
        reps = []
        for nc in command.replacements:
            mark = ESTIMATED_MARK if nc.offering.price_estimated else ""
            estimated = estimated or bool(mark)
            reps.append(
                [
                    nc.node_pool,
                    nc.instance_type.name,
                    nc.offering.zone,
                    nc.offering.capacity_type,
                    f"{mark}{_money(nc.price)}",
                    str(len(nc.instance_types)),
                ]
            )
        lines.append(f"  Replacements ({len(reps)}):")
        lines.append(
            _indent(
                _table(
                    ["NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY", "PRICE/H", "OPTIONS"],
                    reps,
                    frozenset({4, 5}),
                ),
                "    ",
            )
        )
    else:
        lines.append("  Replacements: none")
    lines.append(f"  Saving: ${_money(command.savings)}/h")
    return "\n".join(lines), estimated


def render_table(result: DisruptionPlan) -> str:
    """The ``-o table`` report: commands in order, nodes left alone, cost before and after."""
    commands = result.decision.commands
    total = len(result.snapshot.nodes)
    disrupted = sum(len(c.candidates) for c in commands)
    when = result.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    sections = [
        f"Disruption at {when}: {_nodes(total)}, {disrupted} disrupted by "
        f"{len(commands)} command{'s' if len(commands) != 1 else ''}"
    ]
    estimated = False
    if commands:
        blocks = []
        for i, command in enumerate(commands, start=1):
            text, marked = _command_block(i, command)
            blocks.append(text)
            estimated = estimated or marked
        sections.append("Commands:\n" + "\n\n".join(blocks))
    else:
        sections.append("Commands: none")
    unchanged = result.unchanged()
    if unchanged:
        sections.append(
            f"Unchanged nodes ({len(unchanged)}):\n"
            + _table(["NODE", "REASON"], [[n, r] for n, r in unchanged], frozenset())
        )
    cost = (
        f"Hourly cost: before ${_money(result.cost_before)}, after ${_money(result.cost_after)}"
        f", saving ${_money(result.savings)}"
    )
    if estimated:
        cost += f"  ({ESTIMATED_MARK} marks an estimated spot price)"
    sections.append(cost)
    return "\n\n".join(sections) + "\n"


# ----------------------------------------------------------------------------- command


def load_dump(
    files: Sequence[str],
    at: datetime,
    *,
    instance_types: str | None = None,
    node_overlay: bool = False,
    stderr: TextIO,
) -> tuple[Snapshot, PoolCatalogs]:
    """The snapshot of the cluster in ``files`` at ``at`` and each pool's catalog, as
    ``plan --disruption`` (and ``viewer -f``) decide on them; warnings go to ``stderr``.
    ``ManifestError`` or ``PlanError`` when the input is unusable."""
    manifests = load_manifests(files)
    # A dump lists the pods its workloads made: workloads are not expanded here.
    objects = manifests.cluster.without_workloads()
    cluster, warnings = build_cluster(objects, at, disruption=True, node_overlay=node_overlay)
    for warning in (*manifests.warnings, *warnings):
        print(f"warning: {warning}", file=stderr)
    # Without NodePools the decision still runs: no node is a candidate, and each one is
    # listed with why (as the controller leaves nodes no NodePool manages alone); with
    # neither NodePools nor Nodes there is nothing to decide about.
    if not objects.nodepools and not objects.nodes:
        raise PlanError(NO_NODEPOOL_OR_NODE)
    if not objects.nodepools:
        print(f"warning: {NO_NODEPOOL_CANDIDATES}", file=stderr)
    return cluster.snapshot(at), plan_cli.load_catalogs(objects, instance_types)


def run_disruption(
    files: Sequence[str],
    *,
    instance_types: str | None = None,
    output: OutputFormat = "table",
    options: SolveOptions | None = None,
    now: str | None = None,
    node_overlay: bool = False,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    try:
        at = parse_now(now) if now is not None else datetime.now(UTC)
        snapshot, catalogs = load_dump(
            files, at, instance_types=instance_types, node_overlay=node_overlay, stderr=stderr
        )
        result = plan_disruption(snapshot, catalogs, options=options)
    except (ManifestError, PlanError) as err:
        print(f"error: {err}", file=stderr)
        return EXIT_USAGE
    for timeout in result.decision.timed_out:
        print(f"warning: {timeout.explanation}; the best command found is shown", file=stderr)
    if output == "json":
        stdout.write(render_json(result))
    else:
        stdout.write(render_table(result))
    return EXIT_OK
