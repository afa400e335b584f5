"""``karpenter-py viewer`` as a person uses it: in a terminal (tmux), against the local control
plane, while the controller scales a Deployment's nodes out and in; and ``--once`` against the
same cluster.

The pane is read with ``tmux capture-pane`` until what a person would look for shows up (rows,
totals, a reason), each wait with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import shlex
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from karpenter_py.cli.main import main as cli_main
from karpenter_py.kube import DEPLOYMENTS, NODEPOOLS, KubeClient, NotFoundError, PatchType
from karpenter_py.manager.app import App
from karpenter_py.model.catalog import kwok_catalog_json
from tests.cluster.harness import (
    deployment,
    eventually,
    namespace,
    prepared_client,
    running,
    unique,
)
from tests.cluster.test_controller import clean_pool, pool_body, settings
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster

KARPENTER_PY = Path(sys.executable).parent / "karpenter-py"
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """The controller's kwok catalog, for the viewer's prices."""
    path = tmp_path / "kwok.json"
    path.write_text(json.dumps(kwok_catalog_json()))
    return path


class Pane:
    """A tmux server of its own (``-L``) running one command in a wide window."""

    def __init__(self, command: list[str]) -> None:
        self.socket = f"karpy-viewer-{uuid.uuid4().hex[:8]}"
        # The shell keeps the pane open after the viewer exits, so a failure shows its output.
        self.command = [
            "sh",
            "-c",
            # COLUMNS/LINES from the test run would override the pane's size.
            f"unset COLUMNS LINES; {shlex.join(command)}; echo viewer exited $?; sleep 3600",
        ]

    async def tmux(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "tmux", "-L", self.socket, *args, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await proc.communicate()
        return out.decode()

    async def start(self) -> None:
        await self.tmux("new-session", "-d", "-x", "320", "-y", "50", *self.command)
        # A detached session may take the server's default size: make it wide enough for
        # the reason column.
        await self.tmux("resize-window", "-x", "320", "-y", "50")

    async def text(self) -> str:
        return await self.tmux("capture-pane", "-p")

    async def stop(self) -> None:
        await self.tmux("kill-server")

    async def wait_for(self, check: re.Pattern[str], what: str, within: float = 90) -> str:
        """The pane's text once ``check`` matches it."""

        async def shown() -> str:
            text = await self.text()
            return text if check.search(text) else ""

        try:
            return str(await eventually(shown, within=within, interval=0.5, what=what))
        except AssertionError:
            raise AssertionError(f"{what}; the pane:\n{await self.text()}") from None


def totals(text: str, pool: str) -> tuple[int, int, str]:
    """The pool's totals row: nodes, pods and the CPU cell (bar, percentage, amounts)."""
    m = re.search(rf"^\s*{re.escape(pool)}\s+(\d+)\s+(\d+)\s+(\S+\s+\d+% \S+)", text, re.M)
    assert m is not None, text
    return int(m.group(1)), int(m.group(2)), m.group(3)


def node_rows(text: str, pool: str) -> list[str]:
    """Rows of the node table of ``pool`` (a node's name, then its NodePool)."""
    return [line for line in text.splitlines() if re.match(rf"^\s*\S+\s+{re.escape(pool)}\s", line)]


async def scale(client: KubeClient, ns: str, name: str, replicas: int) -> None:
    # A merge patch of spec.replicas carries no resourceVersion: it cannot conflict.
    await client.patch(
        DEPLOYMENTS,
        name,
        {"spec": {"replicas": replicas}},
        namespace=ns,
        patch_type=PatchType.MERGE,
    )


@contextlib.contextmanager
def tmux_available() -> Iterator[None]:
    assert shutil.which("tmux"), "tmux is needed to run the viewer as a person would"
    yield


async def test_viewer_in_tmux_follows_a_deployment_scaling_out_and_in(
    client: KubeClient, catalog: Path, cluster: ClusterHandle
) -> None:
    pool = unique("viewer")
    body = pool_body(pool)
    body["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    await client.create(NODEPOOLS, body)
    pane = Pane(
        [
            str(KARPENTER_PY),
            "viewer",
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "--instance-types",
            str(catalog),
            "--filter",
            pool,
        ]
    )
    async with namespace(client) as ns:
        web = deployment("web", ns, pool, replicas=2, cpu="1", memory="1Gi")
        pinned = deployment("pinned", ns, pool, replicas=1, cpu="1", memory="1Gi")
        pinned["spec"]["template"]["metadata"]["annotations"] = DO_NOT_DISRUPT
        try:
            with tmux_available():
                await pane.start()
            async with running(App(settings(), client)):
                await pane.wait_for(re.compile(r"sort: name"), "the viewer to list the cluster")
                await client.create(DEPLOYMENTS, web)
                await client.create(DEPLOYMENTS, pinned)
                small = await pane.wait_for(
                    re.compile(rf"^\s*{re.escape(pool)}\s+\d+\s+3\s", re.M),
                    "3 pods on the pool's nodes in the totals",
                )
                nodes_small, pods_small, cpu_small = totals(small, pool)
                assert pods_small == 3
                assert len(node_rows(small, pool)) == nodes_small >= 1

                await scale(client, ns, "web", 8)
                large = await pane.wait_for(
                    re.compile(rf"^\s*{re.escape(pool)}\s+\d+\s+9\s", re.M),
                    "9 pods on the pool's nodes in the totals",
                )
                nodes_large, pods_large, cpu_large = totals(large, pool)
                assert pods_large == 9
                assert nodes_large > nodes_small
                assert len(node_rows(large, pool)) == nodes_large
                assert cpu_large != cpu_small  # the bar and amounts moved

                # The pinned pod's node is left alone, with the decision's words.
                reason = await pane.wait_for(
                    re.compile(r"has annotation karpenter\.sh/do-not-disrupt"),
                    "the pinned pod's node to show why it is left alone",
                    within=60,
                )
                assert re.search(
                    rf"pod {re.escape(ns)}/pinned-\S+ has annotation "
                    r"karpenter\.sh/do-not-disrupt: \"true\"",
                    reason,
                ), reason

                await scale(client, ns, "web", 1)
                after = await pane.wait_for(
                    re.compile(rf"^\s*{re.escape(pool)}\s+\d+\s+2\s", re.M),
                    "2 pods on the pool's nodes in the totals",
                )
                assert totals(after, pool)[1] == 2
                await pane.tmux("send-keys", "q")
        finally:
            await pane.stop()
            for name in ("web", "pinned"):
                with contextlib.suppress(NotFoundError):
                    await client.delete(DEPLOYMENTS, name, namespace=ns)
            await clean_pool(client, lambda: App(settings(), client), pool)


async def test_viewer_once_prints_the_cluster_after_the_informers_listed(
    client: KubeClient, catalog: Path, cluster: ClusterHandle
) -> None:
    pool = unique("viewer")
    await client.create(NODEPOOLS, pool_body(pool))
    async with namespace(client) as ns:
        try:
            async with running(App(settings(), client)):
                await client.create(DEPLOYMENTS, deployment("web", ns, pool, replicas=2))

                async def printed() -> str:
                    buf = io.StringIO()
                    args = [
                        "viewer",
                        "--once",
                        "--kubeconfig",
                        str(cluster.kubeconfig_path),
                        "--instance-types",
                        str(catalog),
                        "--filter",
                        pool,
                    ]
                    with redirect_stdout(buf):
                        code = await asyncio.to_thread(cli_main, args)
                    assert code == 0
                    text = buf.getvalue()
                    return text if re.search(rf"^{re.escape(pool)}\s+\d+\s+2\s", text, re.M) else ""

                text = str(await eventually(printed, within=90, interval=1, what="2 pods printed"))
            assert "\x1b[" not in text  # not a terminal: plain text
            nodes, pods, _ = totals(text, pool)
            assert pods == 2
            assert len(node_rows(text, pool)) == nodes >= 1
        finally:
            await clean_pool(client, lambda: App(settings(), client), pool)
