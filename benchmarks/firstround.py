"""Offline: what an early first provisioning round costs against one round of the whole burst.

The e2e benchmark's Basic pods (500 of 0.9 CPU / 3,100 Mi, 500 of 3.5 CPU / 28 Gi, the kwok
catalog, the e2e NodePool) are provisioned by the controller's own round (``Provisioner``: cluster
state -> snapshot -> solve input -> solve -> NodeClaims written and recorded in state) in two ways:

* one round of all 1,000 pods (what a batch window that waits out the whole burst gives);
* a first round of the first N pods in ReplicaSet creation order, then a second round with the
  rest created too and the first round's NodeClaims in the cluster as capacity in flight.

Creation order: the Deployment controller makes both ReplicaSets at once and each creates its pods
in slow-start batches of 1, 2, 4, 8, ... (kube-controller-manager's ``slowStartBatch``), so the
two Deployments interleave batch by batch: small 1, large 1, small 2, large 2, small 4, ...

What the second round sees of the first (``--second-round``; all three by default):

* ``pending``: the kwok provider launched the first round's NodeClaims (the nodeclaim lifecycle
  controller does at once, well inside the idle second the next batch waits at least), so each
  offers its launched instance type, room to spare included; their pods are still pending.
* ``unlaunched``: the second round comes before the launches: each first-round NodeClaim offers
  only what it was sized for (``spec.resources.requests``); pods still pending.
* ``bound``: launched, and the first round's pods bound where that round placed them (the
  kube-scheduler got there first): the second round plans only the rest, onto the room left.

Pending pods are either held where the first round placed them (the provisioner's default) or
placed anew with the rest (``Provisioner(hold=False)``, as upstream): both are run. Every
NodeClaim is priced at the offering the kwok provider launches (the cheapest its requirements
allow). Deterministic: no clock, no randomness; about 20 s.

    python benchmarks/firstround.py [--firsts 15,50,100,200] [--second-round pending] [--out f.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import yaml

if __package__ in (None, ""):  # run as a script: the repo root holds benchmarks/ and tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.e2e import BASIC, KWOKNODECLASS, deployments, nodepool, workload
from karpenter_py.aio.batcher import Batcher
from karpenter_py.aio.clock import FakeClock
from karpenter_py.cli.manifests import load_manifests
from karpenter_py.cli.offline import build_cluster
from karpenter_py.cloudprovider.kwok import KwokCloudProvider
from karpenter_py.controllers.provisioning.provisioner import Decided, Provisioner
from karpenter_py.launcher.round import RoundRunner
from karpenter_py.model.catalog import kwok_catalog
from karpenter_py.model.core import Pod
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.model.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE
from karpenter_py.scheduling.plan import ExistingPlacement, Plan
from karpenter_py.state.cluster import Cluster
from karpenter_py.state.statenode import StateNode
from tests.unit.fakes import FakeNodeAPI, FakeWriter

FIRSTS = (15, 50, 100, 200)
PODS = 1000
NOW = datetime(2026, 1, 1, tzinfo=UTC)
SecondRound = Literal["pending", "unlaunched", "bound"]
SECOND_ROUNDS: Final[tuple[SecondRound, ...]] = ("pending", "unlaunched", "bound")


def creation_order(pods: Sequence[Pod], owners: Sequence[str]) -> list[Pod]:
    """The pods of each owner (a Deployment's name prefix, in ``owners`` order) interleaved in
    slow-start batches of 1, 2, 4, ...: each owner's next batch after every owner's previous one."""
    queues = [[p for p in pods if p.name.rsplit("-", 1)[0] == owner] for owner in owners]
    out: list[Pod] = []
    size = 1
    while any(queues):
        for q in queues:
            out.extend(q[:size])
            del q[:size]
        size *= 2
    return out


def basic_world() -> tuple[Cluster, list[Pod]]:
    """The e2e NodePool and KWOKNodeClass in a synced cluster with no pods, and the Basic pods
    (pending) in creation order, read by the same road as ``karpenter-py plan``."""
    load = workload(BASIC, PODS)
    docs = [nodepool(), KWOKNODECLASS, *deployments(load)]
    with tempfile.TemporaryDirectory(prefix="karpy-firstround-") as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        manifests = load_manifests([str(path)])
    cluster = build_cluster(manifests.cluster.without_workloads(), NOW)[0]
    pods = [pod for pod, _ in manifests.cluster.pods]
    return cluster, creation_order(pods, [shape.name for shape, _ in load])


@dataclass(frozen=True, slots=True)
class Split:
    first: int  # pods in the first round (0: one round of all)
    hourly: float
    nodes: int
    first_round_nodes: int
    first_round_hourly: float
    second_round_nodes: int
    # Of what the first round's NodeClaims offer (as the second round sees them), the share
    # they hold after the second round's plan, per resource.
    first_round_cpu_used: float
    first_round_memory_used: float


class World:
    """The Basic pods and a provisioner over the e2e NodePool, the kwok provider launching."""

    def __init__(self, catalog: Sequence[InstanceType], *, hold: bool) -> None:
        self.cluster, self.pods = basic_world()
        self.cloud = KwokCloudProvider(FakeNodeAPI(), catalog)
        self.prov = Provisioner(
            RoundRunner(
                cluster=self.cluster, writer=FakeWriter(), cloud=self.cloud, clock=FakeClock()
            ),
            Batcher[str](idle=1.0, max_window=10.0),  # unused: the rounds are called directly
            hold=hold,
        )
        self.prices = {
            (it.name, o.zone, o.capacity_type): o.price for it in catalog for o in it.offerings
        }

    async def round(self, batch: Sequence[Pod]) -> tuple[list[str], Plan]:
        """``batch`` created (pending), then one provisioning round: its NodeClaims and plan."""
        for pod in batch:
            self.cluster.upsert_pod(pod)
        plans: list[Plan] = []
        decide = self.prov.decide

        async def recorded() -> Decided | None:  # the round's plan, for the fill measure
            decided = await decide()
            if decided is not None:
                plans.append(decided.plan)
            return decided

        self.prov.decide = recorded  # type: ignore[method-assign]
        try:
            result = await self.prov.provision()
        finally:
            del self.prov.decide
        if result.errors or len(result.created) != len(plans[0].new_node_claims):
            raise RuntimeError(f"the round did not place every pod: {result}")
        return list(result.created), plans[0]

    async def launch(self, names: Iterable[str]) -> None:
        for name in names:
            self.cluster.upsert_nodeclaim(await self.cloud.create(self.cluster.nodeclaims[name]))

    def hourly(self, names: Sequence[str]) -> float:
        total = 0.0
        for name in names:
            labels = self.cluster.nodeclaims[name].metadata.labels or {}
            key = (labels[LABEL_INSTANCE_TYPE], labels[LABEL_TOPOLOGY_ZONE])
            total += self.prices[(*key, labels[LABEL_CAPACITY_TYPE])]
        return round(total, 4)


async def run_split(
    first: int, catalog: Sequence[InstanceType], *, second_round: SecondRound, hold: bool
) -> Split:
    w = World(catalog, hold=hold or second_round == "bound")
    if not first:
        second = (await w.round(w.pods))[0]
        await w.launch(second)
        return Split(0, w.hourly(second), len(second), 0, 0.0, len(second), 1.0, 1.0)
    first_names, _ = await w.round(w.pods[:first])
    if second_round != "unlaunched":
        await w.launch(first_names)
    if second_round == "bound":  # where round 1 placed them: its plans say
        for placed in w.pods[:first]:
            claim = w.cluster.pod_plans.target(placed.key)
            if claim is not None:
                pod = w.cluster.pods[placed.key]
                w.cluster.upsert_pod(replace(pod, node_name=claim, unschedulable=False))
    offered = [sn for sn in w.cluster.state_nodes(NOW) if sn.nodeclaim_name in first_names]
    second, plan = await w.round(w.pods[first:])
    used = _used(w.cluster, offered, plan.existing)
    await w.launch(second)
    if second_round == "unlaunched":
        await w.launch(first_names)
    return Split(
        first=first,
        hourly=w.hourly([*first_names, *second]),
        nodes=len(first_names) + len(second),
        first_round_nodes=len(first_names),
        first_round_hourly=w.hourly(first_names),
        second_round_nodes=len(second),
        first_round_cpu_used=round(used["cpu"], 4),
        first_round_memory_used=round(used["memory"], 4),
    )


def _used(
    cluster: Cluster, nodes: Sequence[StateNode], existing: Sequence[ExistingPlacement]
) -> dict[str, float]:
    """Per resource, what ``nodes`` hold after the plan (pods bound to them, and those the plan
    puts there) over what they offer (as the state sizes them: launched, their instance type;
    else what they were sized for)."""
    on = {p.node_name: p.pods for p in existing}
    out: dict[str, float] = {}
    for resource in ("cpu", "memory"):
        offered = sum(sn.allocatable.get(resource, 0) for sn in nodes)
        placed = sum(
            pod.requests.get(resource, 0)
            for sn in nodes
            for pod in (*cluster.pods_on(sn.name), *on.get(sn.name, ()))
        )
        out[resource] = placed / offered if offered else 0.0
    return out


async def splits(firsts: Sequence[int], *, second_round: SecondRound, hold: bool) -> list[Split]:
    catalog = kwok_catalog()
    return [await run_split(n, catalog, second_round=second_round, hold=hold) for n in (0, *firsts)]


def table(rows: Sequence[Split]) -> str:
    base = rows[0]
    lines = [
        "| first round | $/h | vs one round | nodes | round 1 nodes ($/h) | round 2 nodes "
        "| round 1 CPU / memory filled by round 2 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        filled = (
            f"{100 * r.first_round_cpu_used:.1f} % / {100 * r.first_round_memory_used:.1f} %"
            if r.first
            else "-"
        )
        lines.append(
            f"| {r.first or 'all (one round)'} | {r.hourly:.4f} "
            f"| {100 * (r.hourly / base.hourly - 1):+.2f} % | {r.nodes} "
            f"| {r.first_round_nodes} ({r.first_round_hourly:.4f}) | {r.second_round_nodes} "
            f"| {filled} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--firsts", default=",".join(map(str, FIRSTS)))
    parser.add_argument("--second-round", choices=SECOND_ROUNDS, action="append")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    firsts = [int(x) for x in args.firsts.split(",") if x]
    out: dict[str, list[dict[str, object]]] = {}
    for mode in args.second_round or SECOND_ROUNDS:
        for hold in (False, True) if mode != "bound" else (True,):
            name = mode if mode == "bound" else f"{mode}, {'held' if hold else 'placed anew'}"
            rows = asyncio.run(splits(firsts, second_round=mode, hold=hold))
            print(f"\nsecond round: {name}\n{table(rows)}")
            out[name] = [asdict(r) for r in rows]
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
