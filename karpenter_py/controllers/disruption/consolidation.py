"""Consolidation, shared by the multi- and single-node methods (pure): can these candidates go,
or be replaced by cheaper capacity, and is such a command still right after the validation delay?

``consolidate`` asks the pass's simulator "could these nodes' pods run elsewhere, and on what?"
and turns the answer into a command with upstream's price rules: each replacement is narrowed to
the options whose worst launch price still saves, with upstream's capacity-type rules
(spot-to-spot needs its feature gate and, for a single node, 15 cheaper spot types), and the
NodePool's minValues still met; ``consolidationPolicy: Balanced`` pools approve a move only when
its saving is worth its disruption.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Final

from karpenter_py.controllers.disruption.candidates import (
    consolidation_block,
    order_for_consolidation,
)
from karpenter_py.controllers.disruption.context import (
    PassContext,
    money,
    nodes,
    placements,
    pod_error,
)
from karpenter_py.controllers.disruption.types import Candidate, Command, Method, Reason
from karpenter_py.model.instancetype import InstanceType, Offering
from karpenter_py.model.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE,
)
from karpenter_py.scheduling.plan import NewNodeClaim
from karpenter_py.scheduling.requirements import Req, Requirements
from karpenter_py.scheduling.simulate import Simulation

MIN_SPOT_TO_SPOT_TYPES = 15
BALANCED_APPROVAL = 0.5  # score >= 1/k with k = 2

SPOT = "spot"
ON_DEMAND = "on-demand"
RESERVED = "reserved"


class Consolidation:
    """What the multi- and single-node methods share (upstream embeds a ``consolidation`` in
    both): the Underutilized reason, the graceful class, re-validation by a fresh simulation, and
    ``single``, which turns on the single-node spot-to-spot rules."""

    reason: Final = Reason.UNDERUTILIZED
    reason_label: Final = "underutilized"
    eventual: Final = False
    validates: Final = True
    single: bool

    def block(self, candidate: Candidate, now: datetime) -> str | None:
        return consolidation_block(candidate, now)

    def revalidate(self, ctx: PassContext, command: Command) -> tuple[Command | None, str]:
        return revalidate(ctx, command, single=self.single, shrink=not self.single)


def consolidation_candidates(ctx: PassContext, method: Method) -> list[Candidate]:
    """The candidates ``method`` may consolidate, in upstream's order and within budget; the
    others are told why."""
    return ctx.within_budget(
        order_for_consolidation(ctx.admitted(method, ctx.candidates)), method.reason
    )


def refined(ctx: PassContext, command: Command, *, single: bool) -> Command:
    """The chosen command with its replacements packed (``consolidate(refine=True)``): the
    search simulates greedily, the command it settles on gets the packing step's choice."""
    if not command.replacements:
        return command
    again, _ = consolidate(
        ctx,
        list(command.candidates),
        method=command.method,
        single=single,
        max_replacements=len(command.replacements),
        refine=True,
    )
    return command if again is None else again


def revalidate(
    ctx: PassContext, command: Command, *, single: bool, shrink: bool = False
) -> tuple[Command | None, str]:
    """Upstream's re-check of a command that replaces or deletes by simulation: every candidate
    must still qualify and fit the budget, and a fresh simulation must agree on the number of
    replacements with a type list that includes the command's. Beyond upstream, a fresh
    simulation that needs fewer replacements and saves more is the command returned, and with
    ``shrink`` (multi-node) a command some of whose candidates no longer qualify goes on with
    the two or more that still do, when a fresh simulation of those alone still saves."""
    method = command.method
    current = {c.name: c for c in ctx.candidates_for(method)}
    fresh: list[Candidate] = []
    dropped: list[str] = []
    for name in (c.name for c in command.candidates):
        c = current.get(name)
        if c is None:
            dropped.append(
                f"candidate {name} no longer qualifies: {ctx.unchanged.get(name, 'changed')}"
            )
            continue
        why = consolidation_block(c, ctx.facts.now, empty_ok=True)
        if why is not None:
            dropped.append(f"candidate {c.name}: {why}")
            continue
        fresh.append(c)
    if dropped and not (shrink and len(fresh) >= 2):
        return None, dropped[0]
    if len(ctx.within_budget(fresh, method.reason)) < len(fresh):
        return None, f"budget no longer allows disrupting {len(fresh)} node(s)"
    limit = max(1, len(command.replacements))
    again, why = consolidate(
        ctx, fresh, method=method, single=single, max_replacements=limit, refine=True
    )
    if dropped:
        # A few candidates got pods meanwhile (often the evictions of the command before this
        # one). Upstream drops the whole command, and the rest, unchanged through this delay,
        # wait for a new search and a new delay; here they go on if they still save alone.
        return (again, "") if again is not None else (None, f"{dropped[0]}; the rest: {why}")
    if again is None:
        return None, f"re-simulation: {why}"
    if len(again.replacements) < len(command.replacements) and again.savings > command.savings:
        # The cluster changed while the command waited (a scale-in emptied room elsewhere): the
        # same candidates now go with fewer new nodes. Upstream rejects the command and finds
        # this one a pass later; the fresh simulation is as current as that pass would be.
        return again, ""
    if len(again.replacements) != len(command.replacements):
        return None, (
            f"re-simulation needs {len(again.replacements)} replacement(s), "
            f"the command {len(command.replacements)}"
        )
    for old, new in zip(command.replacements, again.replacements, strict=True):
        if not {it.name for it in old.instance_types} <= {it.name for it in new.instance_types}:
            return None, "re-simulation narrowed the replacement's instance types"
    return command, ""


def consolidate(
    ctx: PassContext,
    cands: Sequence[Candidate],
    *,
    method: Method,
    single: bool,
    max_replacements: int,
    refine: bool = False,
) -> tuple[Command | None, str]:
    """Can these candidates go (delete) or be replaced by cheaper capacity? The command, or
    None and a reason a person can act on. With ``refine``, a replacing command is also
    simulated with the packing step, and the one that saves more is returned."""
    unknown = [c for c in cands if c.price <= 0]
    if unknown:
        return (
            None,
            f"price of {unknown[0].instance_type_name or 'its instance type'} is unknown",
        )
    names = [c.name for c in cands]
    command, why = _command(
        ctx, cands, ctx.sim.run(names), method=method, single=single, limit=max_replacements
    )
    if refine and command is not None and command.replacements:
        packed, _ = _command(
            ctx,
            cands,
            ctx.sim.run(names, repack=True),
            method=method,
            single=single,
            limit=max_replacements,
        )
        if packed is not None and packed.savings > command.savings + 1e-9:
            return packed, ""
    return command, why


def _command(
    ctx: PassContext,
    cands: Sequence[Candidate],
    sim: Simulation,
    *,
    method: Method,
    single: bool,
    limit: int,
) -> tuple[Command | None, str]:
    """The command a simulation without ``cands`` supports, or None and why not."""
    total = sum(c.price for c in cands)
    if not sim.all_scheduled:
        return None, pod_error(sim)
    reps = sim.replacements
    if not reps:
        return (
            Command(
                method,
                tuple(cands),
                placements=placements(sim),
                explanation=f"{nodes(len(cands))} can go: pods fit elsewhere, saves "
                f"{money(total)}/h",
            ),
            "",
        )
    if len(reps) > limit:
        return None, f"its pods would need {len(reps)} new nodes"
    cheaper: list[NewNodeClaim] = []
    spent = 0.0
    for i, nc in enumerate(reps):
        # Each replacement must save even at its worst launch price, with the others at
        # their cheapest: the command never costs more than what it removes.
        others = sum(r.price for r in reps[i + 1 :])
        narrowed, why = _cheaper(ctx, nc, total - spent - others, cands, single=single)
        if narrowed is None:
            return None, why
        cheaper.append(narrowed)
        spent += _worst_price(narrowed)
    command = Command(
        method,
        tuple(cands),
        replacements=tuple(cheaper),
        placements=placements(sim),
    )
    balanced = _balanced_why(ctx, command)
    if balanced is not None:
        return None, balanced
    types = ", ".join(sorted({r.instance_type.name for r in cheaper}))
    return (
        replace(
            command,
            explanation=f"{nodes(len(cands))} -> {nodes(len(cheaper))} ({types}) saves "
            f"{money(command.savings)}/h",
        ),
        "",
    )


def _capacity_types(
    ctx: PassContext, reqs: Requirements, cands: Sequence[Candidate]
) -> tuple[set[str] | None, str]:
    """Capacity types a replacement may launch as, by upstream's rules: spot candidates
    need the SpotToSpotConsolidation gate to go to spot, and a replacement that may be spot
    or on-demand is pinned to spot (an on-demand fallback could cost more than today)."""
    ct = reqs.get(LABEL_CAPACITY_TYPE)
    allowed = {t for t in (SPOT, ON_DEMAND, RESERVED) if ct is None or ct.has(t)}
    if all(c.capacity_type == SPOT for c in cands) and SPOT in allowed:
        if not ctx.facts.spot_to_spot:
            return None, (
                "spot-to-spot consolidation is disabled (feature gate SpotToSpotConsolidation)"
            )
        return {SPOT}, ""
    if SPOT in allowed and ON_DEMAND in allowed:
        allowed.discard(ON_DEMAND)
    return allowed, ""


def _cheaper(
    ctx: PassContext, nc: NewNodeClaim, budget: float, cands: Sequence[Candidate], *, single: bool
) -> tuple[NewNodeClaim | None, str]:
    """Narrow a replacement to the options whose worst launch price is below ``budget``,
    with upstream's capacity-type rules; None and why when nothing qualifies."""
    reqs = Requirements.from_selectors(nc.requirements)
    allowed, why = _capacity_types(ctx, reqs, cands)
    if allowed is None:
        return None, why
    zone = reqs.get(LABEL_TOPOLOGY_ZONE)
    kept, why = _cheaper_options(nc.instance_types, allowed, zone, budget, cands)
    if not kept:
        return None, why
    min_values = [(k, r) for k, r in reqs.items() if r.min_values is not None]
    if allowed == {SPOT} and all(c.capacity_type == SPOT for c in cands) and single:
        if len(kept) < MIN_SPOT_TO_SPOT_TYPES:
            return None, (
                f"only {len(kept)} cheaper spot types ({MIN_SPOT_TO_SPOT_TYPES} needed for "
                "spot-to-spot consolidation)"
            )
        n = MIN_SPOT_TO_SPOT_TYPES
        while n < len(kept) and not _meets(kept[:n], min_values):
            n += 1
        kept = kept[:n]
    if not _meets(kept, min_values):
        return None, "the cheaper options would not meet the NodePool's minValues"
    return _narrow(nc, kept, allowed, zone), ""


def _balanced_why(ctx: PassContext, command: Command) -> str | None:
    """consolidationPolicy Balanced: each source pool approves only moves whose share of the
    pool's saving is at least half their share of the pool's disruption (k = 2)."""
    by_pool: dict[str, list[Candidate]] = {}
    for c in command.candidates:
        if c.nodepool.spec.disruption.consolidation_policy == "Balanced":
            by_pool.setdefault(c.pool_name, []).append(c)
    if not by_pool:
        return None
    saving_share = command.savings / max(1, len(command.candidates))
    for pool, mine in by_pool.items():
        pool_nodes = [c for c in ctx.candidates if c.pool_name == pool]
        pool_cost = sum(c.price for c in pool_nodes) or 1.0
        pool_disruption = sum(1.0 + c.disruption_cost for c in pool_nodes) or 1.0
        evicted = sum(1.0 + c.disruption_cost for c in mine)
        score = (saving_share * len(mine) / pool_cost) / (evicted / pool_disruption)
        if score < BALANCED_APPROVAL:
            return f"Balanced policy of nodepool {pool}: score {score:.2f} < {BALANCED_APPROVAL}"
    return None


def _cheaper_options(
    types: Sequence[InstanceType],
    allowed: set[str],
    zone: Req | None,
    budget: float,
    cands: Sequence[Candidate],
) -> tuple[list[InstanceType], str]:
    """Options whose worst launch price is below ``budget``, cheapest first (a candidate's own
    type must also beat that candidate's price); else [] and why, naming the cheapest."""
    priced: list[tuple[float, str, InstanceType]] = []
    cheapest: tuple[float, str] | None = None
    own: dict[str, float] = {}
    for c in cands:
        own[c.instance_type_name] = min(c.price, own.get(c.instance_type_name, c.price))
    for it in types:
        worst = _worst_launch_price(it, allowed, zone)
        if worst is None:
            continue
        if cheapest is None or (worst, it.name) < cheapest:
            cheapest = (worst, it.name)
        if it.name in own and worst >= own[it.name]:
            continue  # swapping a node for its own type saves nothing
        if worst < budget - 1e-12:
            priced.append((worst, it.name, it))
    if priced:
        priced.sort(key=lambda p: (p[0], p[1]))
        return [it for _, _, it in priced], ""
    if cheapest is None:
        return [], "no replacement offering is available"
    return [], (
        f"no cheaper replacement: cheapest option {cheapest[1]} at {money(cheapest[0])}/h"
        f" >= current {money(budget)}/h"
    )


def _offerings(it: InstanceType, allowed: set[str], zone: Req | None) -> list[Offering]:
    return [
        o
        for o in it.offerings
        if o.available and o.capacity_type in allowed and (zone is None or zone.has(o.zone))
    ]


def _worst_launch_price(it: InstanceType, allowed: set[str], zone: Req | None) -> float | None:
    """Upstream's worst launch price: the dearest compatible reserved offering, else spot, else
    on-demand; None when the type has no compatible offering."""
    offers = _offerings(it, allowed, zone)
    for ct in (RESERVED, SPOT, ON_DEMAND):
        prices = [o.price for o in offers if o.capacity_type == ct]
        if prices:
            return max(prices)
    return None


def _worst_price(nc: NewNodeClaim) -> float:
    reqs = Requirements.from_selectors(nc.requirements)
    ct = reqs.get(LABEL_CAPACITY_TYPE)
    allowed = {t for t in (SPOT, ON_DEMAND, RESERVED) if ct is None or ct.has(t)}
    prices = [
        p
        for it in nc.instance_types
        if (p := _worst_launch_price(it, allowed, reqs.get(LABEL_TOPOLOGY_ZONE))) is not None
    ]
    return max(prices, default=nc.price)


def _meets(types: Sequence[InstanceType], wanted: Sequence[tuple[str, Req]]) -> bool:
    for key, req in wanted:
        values = {v for it in types for v in it.requirements.get(key, ()) if req.has(v)}
        if len(values) < (req.min_values or 0):
            return False
    return True


def _narrow(
    nc: NewNodeClaim, kept: Sequence[InstanceType], allowed: set[str], zone: Req | None
) -> NewNodeClaim:
    """The replacement restricted to ``kept`` types and ``allowed`` capacity types, its cheapest
    option and offering recomputed."""
    reqs = Requirements.from_selectors(nc.requirements)
    reqs = reqs.with_req(Req.in_(LABEL_INSTANCE_TYPE, (it.name for it in kept)))
    offered = {o.capacity_type for it in kept for o in _offerings(it, allowed, zone)}
    reqs = reqs.with_req(Req.in_(LABEL_CAPACITY_TYPE, offered))
    best_it, best = min(
        ((it, o) for it in kept for o in _offerings(it, allowed, zone)),
        key=lambda p: (p[1].price, p[0].name),
    )
    labels = dict(nc.labels)
    labels.update(
        {
            LABEL_INSTANCE_TYPE: best_it.name,
            LABEL_TOPOLOGY_ZONE: best.zone,
            LABEL_CAPACITY_TYPE: best.capacity_type,
        }
    )
    return replace(
        nc,
        instance_types=tuple(kept),
        requirements=reqs.to_selectors(),
        labels=labels,
        instance_type=best_it,
        offering=best,
    )
