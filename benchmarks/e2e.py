"""End-to-end scale-out benchmark: upstream's kind+kwok "Basic" case on the local control plane.

500 pods of 0.9 CPU / 3,100 Mi and 500 of 3.5 CPU / 28 Gi (performance-anchors.md §2.1), a
NodePool like upstream's perf pool (linux, on-demand, under 32 vCPU, kwok catalog), and the real
``karpenter-py controller`` in a subprocess. Measured from the moment the Deployments exist:

* ``seconds_to_first_nodeclaims``: until the first NodeClaims exist (the controller's own share:
  batch window + solve + writes);
* ``seconds_to_nodeclaims``: until the NodeClaim count reaches its final value (later rounds add
  claims when the kube-scheduler binds pods differently from the plan);
* ``seconds_to_running``: until every pod is Running (adds ReplicaSet pod creation, kwok nodes,
  kube-scheduler binding, kwok pod status);
* ``rss_p95_mb`` / ``cpu_avg_cores``: the controller process, sampled from /proc every 0.5 s.

    python benchmarks/e2e.py --out benchmarks/results/e2e.json [--pods-per-deployment 500]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import load_config
from karpenter_py.kube.errors import AlreadyExistsError
from karpenter_py.kube.resources import DEPLOYMENTS, NODECLAIMS, NODES, PODS, Resource

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack"))
LocalCluster: Any = importlib.import_module(
    "cluster"
).LocalCluster  # hack/cluster.py, not a package

CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
KWOKNODECLASSES = Resource(
    "karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", False, "KWOKNodeClass"
)
NODEPOOLS = Resource("karpenter.sh", "v1", "nodepools", False, "NodePool")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def nodepool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {
                            "key": "karpenter.kwok.sh/instance-cpu",
                            "operator": "Lt",
                            "values": ["32"],
                        },
                    ],
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "30s",
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


def deployment(name: str, replicas: int, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }


class ProcSampler:
    """RSS and CPU time of one process, from /proc (no extra dependency)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rss: list[float] = []
        self.cpu: list[tuple[float, float]] = []  # (wall, cpu seconds)

    def sample(self) -> None:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            statm = Path(f"/proc/{self.pid}/statm").read_text().split()
        except OSError:
            return
        self.cpu.append((time.monotonic(), (int(stat[11]) + int(stat[12])) / CLK_TCK))
        self.rss.append(int(statm[1]) * PAGE / 2**20)

    def p95_rss(self) -> float:
        values = sorted(self.rss)
        return values[int(0.95 * (len(values) - 1))] if values else 0.0

    def avg_cores(self, since: float, until: float) -> float:
        window = [c for c in self.cpu if since <= c[0] <= until]
        if len(window) < 2:
            return 0.0
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def setup(client: KubeClient) -> None:
    for f in sorted((REPO / "manifests" / "crds").glob("*.yaml")):
        with contextlib.suppress(AlreadyExistsError):
            await client.create(CRDS, yaml.safe_load(f.read_text()))
    for _ in range(60):
        crds = (await client.list(CRDS)).items
        if sum(1 for c in crds if _established(c)) >= 4:
            break
        await asyncio.sleep(0.5)
    await client.create(
        KWOKNODECLASSES,
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": "default"},
        },
    )
    await client.create(NODEPOOLS, nodepool())


async def measure(
    client: KubeClient, sampler: ProcSampler, total: int, replicas: int, limit: float
) -> dict[str, Any]:
    start = time.monotonic()
    await client.create(DEPLOYMENTS, deployment("small", replicas, "900m", "3100Mi"))
    await client.create(DEPLOYMENTS, deployment("large", replicas, "3500m", "28Gi"))
    counts: list[tuple[float, int]] = []
    running_at = None
    while time.monotonic() - start < limit:
        sampler.sample()
        ncs = (await client.list(NODECLAIMS)).items
        counts.append((time.monotonic() - start, len(ncs)))
        pods = (await client.list(PODS, namespace="default")).items
        running = sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")
        if running >= total:
            running_at = time.monotonic() - start
            break
        await asyncio.sleep(0.5)
    final = counts[-1][1] if counts else 0
    to_nodeclaims = next((t for t, n in counts if n == final), None)
    # The first round's NodeClaims: the controller's own share (batch window + solve + writes).
    first_round = next((t for t, n in counts if n > 0), None)
    nodes = (await client.list(NODES, label_selector="karpenter.sh/nodepool")).items
    return {
        "pods": total,
        "seconds_to_running": None if running_at is None else round(running_at, 2),
        "seconds_to_nodeclaims": None if to_nodeclaims is None else round(to_nodeclaims, 2),
        "seconds_to_first_nodeclaims": None if first_round is None else round(first_round, 2),
        "nodeclaims": final,
        "nodes": len(nodes),
        "rss_p95_mb": round(sampler.p95_rss(), 1),
        "cpu_avg_cores": round(sampler.avg_cores(0, float("inf")), 3),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_controller(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "karpenter_py", "controller"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="karpy-e2e-"))
    fast = ["--kube-api-qps=500", "--kube-api-burst=1000"]
    cluster = LocalCluster(
        state_dir=state,
        controller_manager_args=[*fast, "--concurrent-replicaset-syncs=10"],
        scheduler_args=fast,
    )
    cluster.start()
    proc = None
    try:
        config = load_config(str(cluster.kubeconfig_path))
        async with KubeClient(config) as client:
            await setup(client)
            env = dict(
                os.environ,
                KUBECONFIG=str(cluster.kubeconfig_path),
                DISABLE_LEADER_ELECTION="true",
                HEALTH_PROBE_PORT=str(free_port()),
                METRICS_PORT=str(free_port()),
                LOG_LEVEL="info",
            )
            proc = await asyncio.to_thread(start_controller, env, state / "controller.log")
            sampler = ProcSampler(proc.pid)
            await asyncio.sleep(2.0)  # informers list and sync
            result = await measure(
                client,
                sampler,
                2 * args.pods_per_deployment,
                args.pods_per_deployment,
                args.timeout,
            )
            result["controller_log"] = str(state / "controller.log")
            return result
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        cluster.stop()
        if not args.keep:
            shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods-per-deployment", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--keep", action="store_true", help="keep the cluster state dir and controller log"
    )
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["seconds_to_running"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
