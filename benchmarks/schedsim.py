"""Offline replay of the kube-scheduler over a provisioning plan (issue 26 §2).

A plan survives only as far as the kube-scheduler follows it. Without nominations it does not:
it binds each pod, as nodes register, to the feasible node its own scoring likes best. This
module replays that, deterministically and with no cluster, to count what a plan costs once the
scheduler has had its way:

1. **Round 1**: the e2e benchmark's input (its NodePool, Deployments and the kwok catalog) goes
   the controller's road: cluster state -> snapshot -> ``solve_input`` -> ``solve``.
2. **Registration and binding**: the plan's NodeClaims register in waves (``Timing``: in plan
   order or shuffled with a seed, ``wave`` nodes at a time, or all at once). After each wave the
   scheduler (``KubeScheduler``) takes every pending pod in creation order (the ReplicaSets
   interleave the Deployments) and binds it to the feasible registered node its default
   profile scores highest; a pod that fits nowhere stays pending.
3. **Later rounds**: every ``round_every`` waves, and whenever no NodeClaim is left to register,
   the provisioner runs again on the pods still pending, through the same road: registered nodes
   as Nodes with their bound pods, the NodeClaims not registered yet as launched NodeClaims
   without a Node (capacity in flight, at the type the kwok provider launched). Its new
   NodeClaims join the end of the registration queue. Until every pod is bound.

The realised cost is every NodeClaim bought, over all rounds (consolidation is off during the
e2e scale-out, as here).

The scheduler's default profile, as far as these pods exercise it (no affinities, no volumes,
no taints, no images): the NodeResourcesFit filter (every requested resource, pod count
included); NodeResourcesFit's LeastAllocated score and NodeResourcesBalancedAllocation (cpu and
memory, weight 1 each); PodTopologySpread (weight 2): a pod's own DoNotSchedule constraints as a
filter, and for pods without constraints of their own the system defaults (hostname maxSkew 3,
zone maxSkew 5, ScheduleAnyway, selecting the pod's Deployment) as a score;
``percentageOfNodesToScore`` (the e2e runs 10: at most max(10 %, 100) feasible nodes are scored,
the search starting where the last one stopped, over the nodes in zone round-robin order); ties
broken at random (reservoir sampling, seeded). ImageLocality, InterPodAffinity, NodeAffinity,
TaintToleration and VolumeBinding score every node alike here and are left out.

    python benchmarks/schedsim.py --out benchmarks/results/schedsim.json
    python benchmarks/schedsim.py --pods 5000 --out benchmarks/results/schedsim-5000.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import yaml

if __package__ in (None, ""):  # run as a script: the repo root holds benchmarks/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.e2e import (
    BASIC,
    KWOKNODECLASS,
    MIXED,
    Workload,
    controller_catalog,
    deployments,
    nodepool,
    workload,
)
from karpenter_py.cli.manifests import Manifests, load_manifests
from karpenter_py.cli.offline import build_cluster
from karpenter_py.cli.plan import solve_input
from karpenter_py.launcher.persist import nodeclaim_body
from karpenter_py.model.api.nodeclaim import NodeClaim
from karpenter_py.model.core import Node, Pod, TopologySpreadConstraint
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import (
    LABEL_HOSTNAME,
    LABEL_NODE_INITIALIZED,
    LABEL_NODE_REGISTERED,
    LABEL_TOPOLOGY_ZONE,
    RESOURCE_CPU,
    RESOURCE_MEMORY,
)
from karpenter_py.model.quantity import format_resources
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.scheduling.plan import NewNodeClaim, Plan
from karpenter_py.scheduling.scheduler import solve

MAX_NODE_SCORE: Final = 100
# kube-scheduler's minFeasibleNodesToFind and minFeasibleNodesPercentageToFind.
MIN_FEASIBLE_NODES: Final = 100
MIN_FEASIBLE_PERCENT: Final = 5
# The default profile's score plugin weights.
FIT_WEIGHT: Final = 1
BALANCED_WEIGHT: Final = 1
SPREAD_WEIGHT: Final = 2
# PodTopologySpread's system default constraints (defaultingType: System).
SYSTEM_DEFAULT_SPREAD: Final = ((LABEL_HOSTNAME, 3), (LABEL_TOPOLOGY_ZONE, 5))
APP_LABEL: Final = "app"  # what the benchmark's Deployments select their pods by
PROVIDER_PREFIX: Final = "kwok://"
T0: Final = datetime(2026, 1, 1, tzinfo=UTC)


# ----------------------------------------------------------------------------- scoring
def least_allocated(requested: Mapping[str, int], allocatable: Mapping[str, int]) -> int:
    """NodeResourcesFit's LeastAllocated score over cpu and memory (weight 1 each): per resource
    ``(allocatable - requested) * 100 // allocatable`` (0 when over), their mean, in integers.
    ``requested`` is the node's requests with the pod's added."""
    total = weights = 0
    for name in (RESOURCE_CPU, RESOURCE_MEMORY):
        alloc = allocatable.get(name, 0)
        if alloc == 0:
            continue
        req = requested.get(name, 0)
        total += 0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc
        weights += 1
    return total // weights if weights else 0


def balanced_allocation(requested: Mapping[str, int], allocatable: Mapping[str, int]) -> int:
    """NodeResourcesBalancedAllocation: ``(1 - std) * 100`` over the cpu and memory fractions
    (each capped at 1), where two fractions' std is half their difference."""
    fractions = [
        min(requested.get(name, 0) / allocatable[name], 1.0)
        for name in (RESOURCE_CPU, RESOURCE_MEMORY)
        if allocatable.get(name, 0)
    ]
    std = 0.0
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    return int((1 - std) * MAX_NODE_SCORE)


def spread_raw(counts: Sequence[int], domains: Sequence[int], max_skews: Sequence[int]) -> int:
    """PodTopologySpread's raw score of one node for ScheduleAnyway constraints: per constraint,
    the matching pods in the node's domain times ``log(domains + 2)``, plus ``maxSkew - 1``;
    the sum, rounded. Lower is better (``normalize_spread`` flips it)."""
    score = 0.0
    for count, size, skew in zip(counts, domains, max_skews, strict=True):
        score += count * math.log(size + 2) + (skew - 1)
    return round(score)


def normalize_spread(raw: Sequence[int]) -> list[int]:
    """PodTopologySpread's NormalizeScore: ``100 * (max + min - s) / max``, truncated; every node
    100 when the highest raw score is 0."""
    if not raw:
        return []
    high, low = max(raw), min(raw)
    if high == 0:
        return [MAX_NODE_SCORE] * len(raw)
    return [int(MAX_NODE_SCORE * ((high + low - s) / high)) for s in raw]


def feasible_to_find(nodes: int, percent: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind: how many feasible nodes it scores."""
    if nodes < MIN_FEASIBLE_NODES:
        return nodes
    if percent <= 0:
        percent = max(50 - nodes // 125, MIN_FEASIBLE_PERCENT)
    return max(nodes * percent // 100, MIN_FEASIBLE_NODES)


# ----------------------------------------------------------------------------- the scheduler
@dataclass(eq=False)
class SimNode:
    """A planned NodeClaim (``claim``), and once registered the Node the scheduler binds pods
    to, at its launched type's real allocatable."""

    name: str
    instance_type: InstanceType
    zone: str
    price: float
    round: int = 1  # the provisioning round that bought it (1 = the first)
    claim: NewNodeClaim | None = None
    requested: dict[str, int] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    apps: Counter[str] = field(default_factory=Counter)  # pods per Deployment

    @staticmethod
    def of(
        name: str, claim: NewNodeClaim, catalog: Mapping[str, InstanceType], round_: int
    ) -> SimNode:
        return SimNode(
            name,
            catalog[claim.instance_type.name],
            claim.offering.zone,
            claim.price,
            round_,
            claim,
        )

    @property
    def allocatable(self) -> Mapping[str, int]:
        return self.instance_type.allocatable

    def fits(self, pod: Pod) -> bool:
        alloc = self.allocatable
        req = self.requested
        return all(req.get(n, 0) + v <= alloc.get(n, 0) for n, v in pod.requests.items() if v)

    def bind(self, pod: Pod) -> None:
        for name, amount in pod.requests.items():
            self.requested[name] = self.requested.get(name, 0) + amount
        self.pods.append(pod)
        self.apps[pod.labels.get(APP_LABEL, "")] += 1

    def resource_score(self, pod: Pod) -> int:
        """LeastAllocated plus BalancedAllocation, each at its weight, for ``pod`` here."""
        requested = {
            n: self.requested.get(n, 0) + pod.requests.get(n, 0)
            for n in (RESOURCE_CPU, RESOURCE_MEMORY)
        }
        return FIT_WEIGHT * least_allocated(
            requested, self.allocatable
        ) + BALANCED_WEIGHT * balanced_allocation(requested, self.allocatable)


class KubeScheduler:
    """The registered nodes and the default profile's choice for one pod at a time."""

    def __init__(self, *, seed: int, score_percent: int, system_spread: bool = True) -> None:
        self.rng = random.Random(seed)
        self.score_percent = score_percent
        self.system_spread = system_spread
        self.by_zone: dict[str, list[SimNode]] = {}
        self.order: list[SimNode] = []  # nodeTree order: zones round-robin
        self.next_start = 0
        # zone -> Deployment -> pods bound there.
        self.zone_apps: dict[str, Counter[str]] = {}

    def register(self, nodes: Iterable[SimNode]) -> None:
        for node in nodes:
            self.by_zone.setdefault(node.zone, []).append(node)
            self.zone_apps.setdefault(node.zone, Counter())
        zones = list(self.by_zone.values())
        self.order = [
            zone[i]
            for i in range(max(map(len, zones), default=0))
            for zone in zones
            if i < len(zone)
        ]

    def schedule(self, pod: Pod) -> SimNode | None:
        """Bind ``pod`` to the node the profile picks; None when no node is feasible."""
        feasible = self._feasible(pod)
        if not feasible:
            return None
        best = feasible[0] if len(feasible) == 1 else self._select(pod, feasible)
        best.bind(pod)
        self.zone_apps[best.zone][pod.labels.get(APP_LABEL, "")] += 1
        return best

    def _feasible(self, pod: Pod) -> list[SimNode]:
        nodes = self.order
        if not nodes:
            return []
        want = feasible_to_find(len(nodes), self.score_percent)
        spread = self._filter_spread(pod)
        found: list[SimNode] = []
        processed = 0
        start = self.next_start
        for k in range(len(nodes)):
            node = nodes[(start + k) % len(nodes)]
            processed += 1
            if node.fits(pod) and (spread is None or spread(node)):
                found.append(node)
                if len(found) == want:
                    break
        self.next_start = (start + processed) % len(nodes)
        return found

    def _filter_spread(self, pod: Pod) -> Callable[[SimNode], bool] | None:
        """The pod's own DoNotSchedule zone constraints as a node check (None: no constraint).
        A domain counts when some registered node is in it; its pods are those of the pod's
        Deployment (the benchmark's selectors)."""
        hard = [c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]
        if not hard:
            return None
        for c in hard:
            if c.topology_key != LABEL_TOPOLOGY_ZONE:
                raise ValueError(f"unsupported spread key {c.topology_key}")
        app = pod.labels.get(APP_LABEL, "")
        counts = {zone: apps[app] for zone, apps in self.zone_apps.items()}
        low = min(counts.values())
        skew = min(_max_skew(c) for c in hard)
        return lambda node: counts[node.zone] + 1 - low <= skew

    def _select(self, pod: Pod, feasible: Sequence[SimNode]) -> SimNode:
        scores = [n.resource_score(pod) for n in feasible]
        if self.system_spread and not pod.topology_spread:
            app = pod.labels.get(APP_LABEL, "")
            zones = {n.zone for n in feasible}
            sizes = (len(feasible), len(zones))
            skews = tuple(s for _, s in SYSTEM_DEFAULT_SPREAD)
            raw = [
                spread_raw((n.apps[app], self.zone_apps[n.zone][app]), sizes, skews)
                for n in feasible
            ]
            scores = [
                s + SPREAD_WEIGHT * t for s, t in zip(scores, normalize_spread(raw), strict=True)
            ]
        return self._highest(feasible, scores)

    def _highest(self, nodes: Sequence[SimNode], scores: Sequence[int]) -> SimNode:
        """The highest score; ties broken as selectHost does, by reservoir sampling."""
        best = nodes[0]
        top = scores[0]
        ties = 1
        for node, score in zip(nodes[1:], scores[1:], strict=True):
            if score > top:
                best, top, ties = node, score, 1
            elif score == top:
                ties += 1
                if self.rng.randrange(ties) == 0:
                    best = node
        return best

    def run(self, pending: Sequence[Pod]) -> list[Pod]:
        """One pass over the queue in order; the pods still pending after it. A pod shape that
        found no feasible node is not retried in the pass (nodes only fill up)."""
        left: list[Pod] = []
        refused: set[tuple[object, ...]] = set()
        for pod in pending:
            # A pod with spread constraints may fit after others of its Deployment land.
            shape = (tuple(sorted(pod.requests.items())), _app(pod))
            if (not pod.topology_spread and shape in refused) or self.schedule(pod) is None:
                refused.add(shape)
                left.append(pod)
        return left


def _max_skew(c: TopologySpreadConstraint) -> int:
    return c.max_skew


def _app(pod: Pod) -> str:
    return pod.labels.get(APP_LABEL, "")


# ----------------------------------------------------------------------------- the workload
@dataclass(frozen=True)
class Setup:
    """The e2e benchmark's input as the plan command reads it (``docs``), and its catalog."""

    docs: tuple[dict[str, Any], ...]
    manifests: Manifests
    catalog: tuple[InstanceType, ...]
    pods: tuple[Pod, ...]  # in creation order

    @property
    def by_name(self) -> Mapping[str, InstanceType]:
        return {it.name: it for it in self.catalog}


def setup(load: Workload, catalog: Sequence[InstanceType]) -> Setup:
    """The e2e benchmark's NodePool and Deployments for ``load``."""
    return setup_docs([nodepool(), KWOKNODECLASS, *deployments(load)], catalog)


def setup_docs(docs: Sequence[dict[str, Any]], catalog: Sequence[InstanceType]) -> Setup:
    with tempfile.TemporaryDirectory(prefix="karpy-schedsim-") as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        manifests = load_manifests([str(path)])
    pods = creation_order([p for p, _ in manifests.cluster.pods])
    return Setup(tuple(docs), manifests, tuple(catalog), tuple(pods))


def deployments_of(s: Setup) -> list[dict[str, Any]]:
    return [d for d in s.docs if d.get("kind") == "Deployment"]


def creation_order(pods: Sequence[Pod]) -> list[Pod]:
    """The pods as the ReplicaSets create them side by side: each Deployment's i-th pod at
    ``i / replicas`` of the way through (ties in the Deployments' order)."""
    groups: dict[str, list[Pod]] = {}
    for pod in pods:
        groups.setdefault(_app(pod), []).append(pod)
    keyed = [
        ((i / len(members), g), pod)
        for g, members in enumerate(groups.values())
        for i, pod in enumerate(sorted(members, key=_ordinal))
    ]
    return [pod for _, pod in sorted(keyed, key=lambda kv: kv[0])]


def _ordinal(pod: Pod) -> int:
    return int(pod.name.rsplit("-", 1)[1])


# ----------------------------------------------------------------------------- provisioning
def provision(
    s: Setup,
    catalog: Sequence[InstanceType],
    registered: Sequence[SimNode],
    in_flight: Sequence[SimNode],
    options: SolveOptions | None = None,
    *,
    launched: bool = False,
) -> Plan:
    """A provisioning round by the controller's road: the cluster (registered Nodes with their
    pods, NodeClaims in flight, every other pod pending) -> snapshot -> ``solve_input`` ->
    ``solve``. NodeClaims in flight have not ``launched`` (the kwok provider reports a launch
    only once it has created the Node: until then a claim offers what it was sized for, its
    planned pods' requests); ``launched`` ones report their type's capacity."""
    cluster, _ = build_cluster(s.manifests.cluster, T0)
    np_ = next(iter(cluster.nodepools.values()))
    for node in in_flight:
        cluster.upsert_nodeclaim(_nodeclaim(node, np_, registered=False, launched=launched))
    for node in registered:
        cluster.upsert_nodeclaim(_nodeclaim(node, np_, registered=True))
        cluster.upsert_node(_node(node))
        for pod in node.pods:
            cluster.upsert_pod(replace(pod, node_name=node.name, unschedulable=False))
    snapshot = cluster.snapshot(T0)
    inp = solve_input(snapshot, catalog, options)
    return solve(inp, namespace_labels=snapshot.namespace_labels)


def _nodeclaim(node: SimNode, np_: Any, *, registered: bool, launched: bool = True) -> NodeClaim:
    """The NodeClaim as the launcher wrote it and, ``launched``, as the kwok provider launched
    it (its cheapest option: the claim's instance type and offering)."""
    assert node.claim is not None
    body: dict[str, Any] = nodeclaim_body(node.claim, np_)
    meta = body["metadata"]
    meta.pop("generateName", None)
    meta["name"] = node.name
    meta["uid"] = f"uid-{node.name}"
    if not launched:
        return NodeClaim.model_validate(body)
    meta["labels"] = {**meta["labels"], **node.claim.labels}
    conditions = ["Launched", *(("Registered", "Initialized") if registered else ())]
    body["status"] = {
        "providerID": f"{PROVIDER_PREFIX}{node.name}",
        "capacity": format_resources(node.instance_type.capacity),
        "allocatable": format_resources(node.instance_type.allocatable),
        "conditions": [
            {"type": c, "status": "True", "reason": c, "lastTransitionTime": T0.isoformat()}
            for c in conditions
        ],
        **({"nodeName": node.name} if registered else {}),
    }
    return NodeClaim.model_validate(body)


def _node(node: SimNode) -> Node:
    assert node.claim is not None
    labels = {
        **node.claim.labels,
        LABEL_HOSTNAME: node.name,
        LABEL_NODE_REGISTERED: "true",
        LABEL_NODE_INITIALIZED: "true",
    }
    return Node(
        name=node.name,
        uid=f"uid-node-{node.name}",
        labels=labels,
        capacity=dict(node.instance_type.capacity),
        allocatable=dict(node.instance_type.allocatable),
        provider_id=f"{PROVIDER_PREFIX}{node.name}",
        ready=True,
    )


# ----------------------------------------------------------------------------- the replay
@dataclass(frozen=True)
class Timing:
    """How the planned nodes meet the scheduler: registration ``order`` ("plan": as the plan
    lists them; "random": shuffled with ``seed``), ``wave`` nodes at a time (0: every node of
    the queue at once), a provisioning round every ``round_every`` waves (and whenever the
    queue is empty). ``seed`` also breaks the scheduler's ties."""

    order: Literal["plan", "random"] = "random"
    wave: int = 10
    round_every: int = 5
    seed: int = 1

    def describe(self) -> str:
        wave = "all at once" if self.wave <= 0 else f"waves of {self.wave}"
        return f"{self.order} order, {wave}, round every {self.round_every} waves"


@dataclass(frozen=True)
class RoundRecord:
    """One later provisioning round: the pods pending, how many it placed on registered nodes
    and on NodeClaims in flight, and what it bought."""

    pending: int
    on_registered: int
    on_in_flight: int
    new_nodes: int
    new_hourly: float
    in_flight_nodes: int


@dataclass(frozen=True)
class Outcome:
    plan_nodes: int
    plan_hourly: float
    nodes: int
    hourly: float
    rounds: tuple[RoundRecord, ...]
    unbound: int  # pods no round could place (0 unless something is wrong)
    types: Mapping[str, int]  # instance type -> nodes bought, all rounds

    def summary(self) -> dict[str, Any]:
        return {
            "plan_nodes": self.plan_nodes,
            "plan_hourly": round(self.plan_hourly, 4),
            "nodes": self.nodes,
            "hourly": round(self.hourly, 4),
            "extra_nodes": self.nodes - self.plan_nodes,
            "extra_percent": round(100 * (self.hourly / self.plan_hourly - 1), 2),
            "unbound": self.unbound,
            "rounds": [vars(r) | {"new_hourly": round(r.new_hourly, 4)} for r in self.rounds],
            "types": dict(sorted(self.types.items())),
        }


class Replay:
    """One plan met by one scheduler under one ``Timing``, round after round until every pod
    is bound (or a round can place nothing more)."""

    def __init__(
        self,
        s: Setup,
        plan: Plan,
        timing: Timing,
        *,
        score_percent: int = 10,
        system_spread: bool = True,
        options: SolveOptions | None = None,
        launched_in_flight: bool = False,
        max_rounds: int = 50,
    ) -> None:
        self.s = s
        self.plan = plan
        self.timing = timing
        self.options = options
        self.launched_in_flight = launched_in_flight
        self.max_rounds = max_rounds
        self.rng = random.Random(timing.seed)
        self.scheduler = KubeScheduler(
            seed=timing.seed, score_percent=score_percent, system_spread=system_spread
        )
        self.by_name = s.by_name
        self.bought: list[SimNode] = []
        self.queue: deque[SimNode] = deque()
        self.registered: list[SimNode] = []

    def _buy(self, claims: Sequence[NewNodeClaim], round_: int) -> None:
        nodes = [
            SimNode.of(f"node-{len(self.bought) + k:05d}", c, self.by_name, round_)
            for k, c in enumerate(claims)
        ]
        self.bought.extend(nodes)
        if self.timing.order == "random":
            self.rng.shuffle(nodes)
        self.queue.extend(nodes)

    def run(self) -> Outcome:
        self._buy(self.plan.new_node_claims, 1)
        pending = list(self.s.pods)
        rounds: list[RoundRecord] = []
        waves = 0
        while pending:
            wave = len(self.queue) if self.timing.wave <= 0 else self.timing.wave
            arrived = [self.queue.popleft() for _ in range(min(wave, len(self.queue)))]
            self.registered.extend(arrived)
            self.scheduler.register(arrived)
            pending = self.scheduler.run(pending)
            waves += 1
            if not pending or (waves < self.timing.round_every and self.queue):
                continue
            waves = 0
            if len(rounds) >= self.max_rounds:
                break
            record = self._round(pending, len(rounds) + 2)
            rounds.append(record)
            if not record.new_nodes and not self.queue:
                break  # nothing will register and nothing was bought: stuck
        return Outcome(
            plan_nodes=len(self.plan.new_node_claims),
            plan_hourly=self.plan.hourly_cost,
            nodes=len(self.bought),
            hourly=sum(n.price for n in self.bought),
            rounds=tuple(rounds),
            unbound=len(pending),
            types=Counter(n.instance_type.name for n in self.bought),
        )

    def _round(self, pending: Sequence[Pod], number: int) -> RoundRecord:
        in_flight = list(self.queue)
        plan = provision(
            self.s,
            self.s.catalog,
            self.registered,
            in_flight,
            self.options,
            launched=self.launched_in_flight,
        )
        flying = {n.name for n in in_flight}
        on_flight = sum(len(p.pods) for p in plan.existing if p.node_name in flying)
        on_registered = sum(len(p.pods) for p in plan.existing) - on_flight
        self._buy(plan.new_node_claims, number)
        return RoundRecord(
            pending=len(pending),
            on_registered=on_registered,
            on_in_flight=on_flight,
            new_nodes=len(plan.new_node_claims),
            new_hourly=plan.hourly_cost,
            in_flight_nodes=len(in_flight),
        )


# ----------------------------------------------------------------------------- plans
PlanMaker = Callable[[Setup], Plan]


def plan_today(s: Setup) -> Plan:
    """The solver's plan, as ``karpenter-py plan`` and the controller's first round make it."""
    return provision(s, s.catalog, [], [])


def plan_greedy(s: Setup) -> Plan:
    """Upstream's greedy plan (no re-pack)."""
    return provision(s, s.catalog, [], [], SolveOptions(repack=False))


def plan_per_shape(s: Setup) -> Plan:
    """Every Deployment planned alone: each node holds one pod shape."""
    claims: list[NewNodeClaim] = []
    for doc in deployments_of(s):
        alone = setup_docs([nodepool(), KWOKNODECLASS, doc], s.catalog)
        claims.extend(provision(alone, alone.catalog, [], []).new_node_claims)
    return Plan(tuple(claims), (), ())


def plan_uniform(s: Setup) -> Plan:
    """The plan on one instance type, the one today's plan uses most: every node can take any
    other node's planned pods, whichever the scheduler sends it."""
    most = Counter(nc.instance_type.name for nc in plan_today(s).new_node_claims).most_common(1)
    only = [it for it in s.catalog if it.name == most[0][0]]
    return provision(s, only, [], [])


def plan_slack(fraction: float) -> PlanMaker:
    """The plan on a catalog whose types have ``fraction`` less cpu and memory allocatable:
    every node keeps that much of each free (the replay launches the real types)."""

    def make(s: Setup) -> Plan:
        return provision(s, deflated(s.catalog, fraction), [], [])

    return make


def deflated(catalog: Sequence[InstanceType], fraction: float) -> list[InstanceType]:
    out = []
    for it in catalog:
        alloc = dict(it.allocatable)
        for name in (RESOURCE_CPU, RESOURCE_MEMORY):
            alloc[name] = int(alloc.get(name, 0) * (1 - fraction))
        out.append(replace(it, allocatable=alloc))
    return out


# ----------------------------------------------------------------------------- the table
PLANS: Final[Mapping[str, PlanMaker]] = {
    "today": plan_today,
    "greedy": plan_greedy,
    "per-shape": plan_per_shape,
    "uniform": plan_uniform,
    "slack-2%": plan_slack(0.02),
    "slack-5%": plan_slack(0.05),
}


def timings(seeds: int) -> dict[str, list[Timing]]:
    """The registration scenarios: every node at once before any pod (no timing at all); in
    plan order one node at a time (a round only once all registered); and random order in
    waves of 10 with a round every 5 waves, over ``seeds`` seeds."""
    return {
        "all at once": [Timing(order="plan", wave=0, seed=1)],
        "plan order, 1 by 1": [Timing(order="plan", wave=1, round_every=1 << 30, seed=1)],
        "random waves of 10": [
            Timing(order="random", wave=10, round_every=5, seed=k) for k in range(1, seeds + 1)
        ],
    }


def measure(
    s: Setup,
    plans: Sequence[str],
    scenarios: Mapping[str, Sequence[Timing]],
    *,
    score_percent: int,
    launched_in_flight: bool,
    system_spread: bool = True,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in plans:
        plan = PLANS[name](s)
        for scenario, runs in scenarios.items():
            start = time.monotonic()
            outcomes = [
                Replay(
                    s,
                    plan,
                    timing,
                    score_percent=score_percent,
                    system_spread=system_spread,
                    launched_in_flight=launched_in_flight,
                ).run()
                for timing in runs
            ]
            rows.append(row(name, scenario, outcomes, time.monotonic() - start))
            print(_line(rows[-1]), file=sys.stderr, flush=True)
    return rows


def row(plan: str, scenario: str, outcomes: Sequence[Outcome], seconds: float) -> dict[str, Any]:
    first = outcomes[0]
    hourly = [o.hourly for o in outcomes]
    nodes = [o.nodes for o in outcomes]
    return {
        "plan": plan,
        "scenario": scenario,
        "runs": len(outcomes),
        "plan_hourly": round(first.plan_hourly, 2),
        "plan_nodes": first.plan_nodes,
        "hourly_mean": round(statistics.mean(hourly), 2),
        "hourly_min": round(min(hourly), 2),
        "hourly_max": round(max(hourly), 2),
        "nodes_mean": round(statistics.mean(nodes), 1),
        "nodes_min": min(nodes),
        "nodes_max": max(nodes),
        "over_plan_percent": round(100 * (statistics.mean(hourly) / first.plan_hourly - 1), 1),
        "unbound": sum(o.unbound for o in outcomes),
        "seconds": round(seconds, 1),
        "outcomes": [o.summary() for o in outcomes],
    }


def _line(r: Mapping[str, Any]) -> str:
    spread = (
        f" ({r['hourly_min']:.2f}-{r['hourly_max']:.2f}, {r['nodes_min']}-{r['nodes_max']})"
        if r["runs"] > 1
        else ""
    )
    return (
        f"{r['plan']:<10} {r['scenario']:<20} plan ${r['plan_hourly']:7.2f}/h {r['plan_nodes']:4} "
        f"nodes -> ${r['hourly_mean']:7.2f}/h {r['nodes_mean']:6.1f} nodes "
        f"(+{r['over_plan_percent']}%){spread}"
    )


def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    out = [
        "| plan | scenario | plan $/h | plan nodes | realised $/h | realised nodes | over plan |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        hourly = f"{r['hourly_mean']:.2f}"
        nodes = f"{r['nodes_mean']:g}"
        if r["runs"] > 1:
            hourly += f" ({r['hourly_min']:.2f}-{r['hourly_max']:.2f})"
            nodes += f" ({r['nodes_min']}-{r['nodes_max']})"
        out.append(
            f"| {r['plan']} | {r['scenario']} | {r['plan_hourly']:.2f} | {r['plan_nodes']} | "
            f"{hourly} | {nodes} | +{r['over_plan_percent']} % |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pods", type=int, default=1000, help="pods over the Basic case's two Deployments"
    )
    parser.add_argument("--mixed", action="store_true", help="the e2e's 16 mixed Deployments")
    parser.add_argument("--plans", default=",".join(PLANS), help="comma-separated plan makers")
    parser.add_argument("--seeds", type=int, default=5, help="random-order runs per plan")
    parser.add_argument(
        "--score-percent",
        type=int,
        default=10,
        help="the scheduler's percentageOfNodesToScore (the e2e's 10; 0: adaptive)",
    )
    parser.add_argument(
        "--launched-in-flight",
        action="store_true",
        help="NodeClaims in flight report their type's capacity (kwok reports it only with "
        "the Node: by default they offer their planned pods' requests)",
    )
    parser.add_argument(
        "--no-system-spread",
        action="store_true",
        help="leave out PodTopologySpread's system-default score (an ablation)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    s = setup(workload(MIXED if args.mixed else BASIC, args.pods), controller_catalog())
    plans = [p for p in args.plans.split(",") if p]
    unknown = [p for p in plans if p not in PLANS]
    if unknown:
        parser.error(f"unknown plans {unknown}: choose from {list(PLANS)}")
    rows = measure(
        s,
        plans,
        timings(args.seeds),
        score_percent=args.score_percent,
        launched_in_flight=args.launched_in_flight,
        system_spread=not args.no_system_spread,
    )
    print(markdown(rows))
    if args.out:
        result = {
            "pods": len(s.pods),
            "workload": "mixed" if args.mixed else "basic",
            "score_percent": args.score_percent,
            "launched_in_flight": args.launched_in_flight,
            "system_spread": not args.no_system_spread,
            "rows": rows,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
