"""The viewer at scale: what one redraw and one decision cost on the scale benchmark's world.

The world (``benchmarks.scale.generate``: 5,000 nodes in 10 NodePools, their NodeClaims and
pods) is listed into the viewer's own source (``cli.viewer.source.open_live``, the controller's
reflectors and ingest sinks) from files, then timed in CPU seconds (``time.process_time``; the
machine is shared):

* ``event_us``: one pod update through the reflector into the state (the viewer only flags it);
* ``redraw_ms``: what the live viewer does at most once a second after a change: a snapshot and
  the view model (``build_view``) without decisions, median of ``--redraws``;
* ``redraw_decided_ms``: the same with the decisions shown;
* ``decide_seconds``: one disruption pass (the controller's next command) plus one provisioning
  plan (``cli.viewer.decide``), the work the live viewer does in a worker thread every 15 s or
  after a change.

Targets: ``redraw_ms`` under 1,000 (the redraw interval) at 5,000 nodes, so a redraw never
queues behind the next one.

    python -m benchmarks.viewer [--nodes 5000 --pods 100000] [--out benchmarks/results/viewer.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.scale import DAEMONSETS, FileListWatch, Size, as_event, feed, generate
from karpenter_py.cli.plan import PoolCatalogs, load_builtin_catalog, pool_instance_types
from karpenter_py.cli.viewer.decide import Decisions, decide
from karpenter_py.cli.viewer.model import View, build_view
from karpenter_py.cli.viewer.source import open_live
from karpenter_py.model.labels import KWOK_GROUP
from karpenter_py.state.snapshot import Snapshot

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
REDRAW_TARGET_MS = 1000.0


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


async def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    catalogs = PoolCatalogs(tuple(load_builtin_catalog()))
    feeds: dict[str, asyncio.Queue[bytes]] = {}
    live = open_live(
        lambda r: FileListWatch(root, r, feeds), catalogs, [(KWOK_GROUP, "KWOKNodeClass")]
    )
    out: dict[str, Any] = {}
    async with asyncio.TaskGroup() as tg:
        started = time.process_time()
        task = tg.create_task(live.run())
        await live.wait_synced()
        out["ingest_seconds"] = round(time.process_time() - started, 2)
        out["nodes_listed"] = len(live.cluster.nodes)
        out["pods_listed"] = len(live.cluster.pods)

        updates = (root / "events" / "updates.jsonl").read_bytes().splitlines()[: args.events]
        seconds = await feed(feeds, "pods", updates)
        out["event_us"] = round(seconds / max(1, len(updates)) * 1e6, 1)
        pending = (root / "events" / "pending.jsonl").read_bytes().splitlines()
        await feed(feeds, "pods", pending)

        def redraw(decisions: Decisions | None) -> tuple[float, Snapshot, View]:
            started = time.process_time()
            snapshot = live.snapshot(NOW)
            view = build_view(
                snapshot,
                decisions.instance_types
                if decisions is not None
                else pool_instance_types(snapshot, catalogs),
                disruption=decisions.disruption if decisions is not None else None,
                provisioning=decisions.provisioning if decisions is not None else None,
                sort="cost",
            )
            return time.process_time() - started, snapshot, view

        redraws = [redraw(None) for _ in range(args.redraws)]
        out["redraw_ms"] = _ms([seconds for seconds, _, _ in redraws])
        _, snapshot, view = redraws[-1]
        out["rows"] = len(view.nodes) + len(view.unregistered)
        out["pending_rows"] = len(view.pending)

        if not args.skip_decide:
            started = time.process_time()
            decisions = decide(snapshot, catalogs, every_command=False)
            out["decide_seconds"] = round(time.process_time() - started, 2)
            out["commands"] = len(decisions.disruption.decision.commands)
            decided = [redraw(decisions) for _ in range(args.redraws)]
            out["redraw_decided_ms"] = _ms([seconds for seconds, _, _ in decided])
            out["next_saving_hourly"] = round(decided[-1][2].cluster.saving, 4)
        await feed(feeds, "pods", [as_event(line, "DELETED") for line in pending])
        task.cancel()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--redraws", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-decide", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    size = Size(
        nodes=args.nodes,
        pods=args.pods,
        pending=args.pending,
        deployments=max(1, (args.pods - args.nodes * len(DAEMONSETS)) // 100),
        pending_deployments=max(1, args.pending // 100),
    )
    root = Path(tempfile.mkdtemp(prefix="karpy-viewer-"))
    try:
        world = generate(root, size, args.seed)
        result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "pending": args.pending}
        result |= asyncio.run(measure(root, args))
        result["world"] = world
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["redraw_target_ms"] = REDRAW_TARGET_MS
    for key, value in result.items():
        if key != "world":
            print(f"{key:>20}: {value}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
