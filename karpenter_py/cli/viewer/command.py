"""``karpenter-py viewer``: live (the cluster of a kubeconfig), ``--once`` (print and exit), or
``-f`` (a cluster dump, read as ``plan --disruption`` reads it).

Exit status: 0 after a view was shown, 2 on unusable input or a cluster that cannot be reached
or listed in time (one line on stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TextIO

from karpenter_py.cli.disruption import load_dump, parse_now
from karpenter_py.cli.manifests import ManifestError
from karpenter_py.cli.plan import (
    EXIT_OK,
    EXIT_USAGE,
    PlanError,
    PoolCatalogs,
    load_builtin_catalog,
    load_catalog_file,
)
from karpenter_py.cli.viewer.decide import decide
from karpenter_py.cli.viewer.model import Filter, SortKey, View, build_view, parse_filter
from karpenter_py.cli.viewer.source import DumpSource, open_live, served_nodeclasses
from karpenter_py.cli.viewer.text import render_text
from karpenter_py.kube.config import ConfigError, load_config
from karpenter_py.kube.errors import KubeError
from karpenter_py.model.core import SelectorError
from karpenter_py.scheduling.inputs import SolveOptions
from karpenter_py.state.snapshot import Snapshot

SYNC_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class ViewerArgs:
    files: Sequence[str]
    once: bool
    kubeconfig: str | None
    context: str | None
    instance_types: str | None
    now: str | None
    sort: SortKey
    filter: str
    node_overlay: bool
    options: SolveOptions


def _now() -> datetime:
    return datetime.now(UTC)


def view_once(snapshot: Snapshot, catalogs: PoolCatalogs, args: ViewerArgs, keep: Filter) -> View:
    """The view of one snapshot with both decisions made on it."""
    decisions = decide(snapshot, catalogs, args.options)
    return build_view(
        snapshot,
        decisions.instance_types,
        disruption=decisions.disruption,
        provisioning=decisions.provisioning,
        sort=args.sort,
        keep=keep,
    )


def live_catalogs(instance_types: str | None) -> PoolCatalogs:
    """``--instance-types`` (KWOK JSON) for every pool, else the built-in AWS catalog."""
    if instance_types is not None:
        return PoolCatalogs(tuple(load_catalog_file(instance_types)))
    return PoolCatalogs(tuple(load_builtin_catalog()))


async def _live(args: ViewerArgs, catalogs: PoolCatalogs, stdout: TextIO) -> int:
    from karpenter_py.informer.source import KubeListWatch
    from karpenter_py.kube import KubeClient

    config = await asyncio.to_thread(load_config, args.kubeconfig, context=args.context)
    async with KubeClient(config) as client:
        nodeclasses = await served_nodeclasses(client)
        source = open_live(
            lambda r: KubeListWatch(client, r),
            catalogs,
            nodeclasses,
            node_overlay=args.node_overlay,
        )
        if not args.once:
            from karpenter_py.cli.viewer.tui import Viewer

            app = Viewer(source, clock=_now, options=args.options)
            app.sort_by, app.filter_text = args.sort, args.filter
            await app.run_async()
            return EXIT_OK
        snapshot: Snapshot | None = None
        async with asyncio.TaskGroup() as tg:
            feed = tg.create_task(source.run())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SYNC_SECONDS):
                    await source.wait_synced()
                snapshot = source.snapshot(_now())
            feed.cancel()
    if snapshot is None:
        raise PlanError(f"the cluster was not listed within {SYNC_SECONDS:.0f} s")
    keep = parse_filter(args.filter, snapshot.nodepools)
    render_text(await asyncio.to_thread(view_once, snapshot, catalogs, args, keep), stdout)
    return EXIT_OK


def run_viewer(args: ViewerArgs, *, stdout: TextIO, stderr: TextIO) -> int:
    try:
        if args.files:
            at = parse_now(args.now) if args.now is not None else _now()
            snapshot, catalogs = load_dump(
                args.files,
                at,
                instance_types=args.instance_types,
                node_overlay=args.node_overlay,
                stderr=stderr,
            )
            keep = parse_filter(args.filter, snapshot.nodepools)
            if args.once or not stdout.isatty():
                render_text(view_once(snapshot, catalogs, args, keep), stdout)
                return EXIT_OK
            from karpenter_py.cli.viewer.tui import Viewer

            app = Viewer(
                DumpSource(snapshot, catalogs),
                clock=lambda: at,
                options=args.options,
                every_command=True,
            )
            app.sort_by, app.filter_text = args.sort, args.filter
            app.run()
            return EXIT_OK
        if args.now is not None:
            raise PlanError("--now needs -f (a live cluster is viewed as it is now)")
        catalogs = live_catalogs(args.instance_types)
        parse_filter(args.filter, ())  # a bad selector fails before connecting
        return asyncio.run(_live(args, catalogs, stdout))
    except (ManifestError, PlanError, SelectorError) as err:
        print(f"error: {err}", file=stderr)
        return EXIT_USAGE
    except ConfigError as err:
        print(f"error: cannot load the kubeconfig: {err}", file=stderr)
        return EXIT_USAGE
    except KubeError as err:  # refused, unreachable, or not allowed to list (401/403)
        print(f"error: cannot list the cluster: {err}", file=stderr)
        return EXIT_USAGE
