"""Spot interruption benchmark: 20 spot nodes interrupted at once, time to replacement.

The real ``karpenter-py controller`` (subprocess, ``CLOUD_PROVIDER=aws``) against moto's server
(benchmarks/awsworld.py) and the local control plane. A Deployment of ``--nodes`` pods, one per
node (required pod anti-affinity on the hostname), runs on spot instances; then one EC2 Spot
Instance Interruption Warning per instance is sent to the interruption queue in one burst. For
each interrupted pod, the clock runs from the send to the moment its replacement (a new pod of
the Deployment) is Running on a node that was not interrupted. Upstream relies on the 2-minute
warning; our target is under 30 s on this machine.

    python benchmarks/interruption.py --out benchmarks/results/interruption.json [--nodes 20]

Output: ``{"nodes", "seconds_to_replaced_p50", "seconds_to_replaced_max", ...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repo root holds benchmarks/ and tests/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.awsworld import EC2NODECLASSES, REGION, AwsWorld, aws_world
from benchmarks.e2e import (
    NODEPOOLS,
    LocalCluster,
    ProcSampler,
    controller_env,
    install_crds,
    start_controller,
    stop_controller,
    wait_nodeclass_ready,
)
from karpenter_py.kube.client import KubeClient
from karpenter_py.kube.config import load_config
from karpenter_py.kube.resources import DEPLOYMENTS, PODS
from tests.cluster.awskubelet import running_kubelet

APP = "interrupted"


def spot_pool() -> dict[str, Any]:
    reqs = [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["9"]},
    ]
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {"nodeClassRef": ref, "requirements": reqs}},
            "disruption": {"consolidateAfter": "Never"},
        },
    }


def one_per_node(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": {"app": APP}},
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        }
                    },
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                },
            },
        },
    }


def spot_warning(instance_id: str, zone: str) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": REGION,
            "resources": [f"arn:aws:ec2:{zone}:instance/{instance_id}"],
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    )


async def app_pods(client: KubeClient) -> list[dict[str, Any]]:
    pods = (await client.list(PODS, namespace="default", label_selector=f"app={APP}")).items
    return [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]


def running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


async def interrupt_all(
    client: KubeClient, world: AwsWorld, nodes: int, limit: float
) -> dict[str, Any]:
    start = time.monotonic()
    pods: list[dict[str, Any]] = []
    while time.monotonic() - start < limit:
        pods = await app_pods(client)
        if len(pods) == nodes and all(running(p) for p in pods):
            break
        await asyncio.sleep(0.5)
    else:
        raise RuntimeError("the spot pods never all ran")
    scale_out = time.monotonic() - start
    original = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    victims = set(original.values())
    instances = await world.instances("running")
    by_node = {i.get("PrivateDnsName"): i for i in instances}
    targets = [by_node[n] for n in victims if n in by_node]
    if len(targets) != nodes:
        raise RuntimeError(f"{len(targets)} instances behind {nodes} nodes")
    bodies = [spot_warning(i["InstanceId"], i["Placement"]["AvailabilityZone"]) for i in targets]
    sent = time.monotonic()
    for chunk in range(0, len(bodies), 10):
        entries = [
            {"Id": str(k), "MessageBody": b} for k, b in enumerate(bodies[chunk : chunk + 10])
        ]
        await world.clients.sqs.send_message_batch(QueueUrl=world.queue_url, Entries=entries)
    replaced_at: dict[str, float] = {}
    while time.monotonic() - sent < limit and len(replaced_at) < nodes:
        for p in await app_pods(client):
            name = p["metadata"]["name"]
            node = p.get("spec", {}).get("nodeName")
            if name in original or name in replaced_at or not running(p) or node in victims:
                continue
            replaced_at[name] = time.monotonic() - sent
        await asyncio.sleep(0.25)
    times = sorted(replaced_at.values())
    return {
        "nodes": nodes,
        "replaced": len(times),
        "seconds_to_replaced_p50": round(statistics.median(times), 2) if times else None,
        "seconds_to_replaced_max": round(times[-1], 2) if len(times) == nodes else None,
        "seconds_to_replaced": [round(t, 2) for t in times],
        "seconds_to_scale_out": round(scale_out, 2),
        "create_fleet_calls": await world.create_fleet_calls(),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="karpy-interruption-"))
    fast = ["--kube-api-qps=500", "--kube-api-burst=1000"]
    cluster = LocalCluster(state_dir=state, controller_manager_args=fast, scheduler_args=fast)
    cluster.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        config = load_config(str(cluster.kubeconfig_path))
        async with aws_world() as world, KubeClient(config) as client:
            await install_crds(client)
            await client.create(EC2NODECLASSES, world.nodeclass())
            await client.create(NODEPOOLS, spot_pool())
            env = controller_env(cluster.kubeconfig_path, world.controller_env())
            proc = await asyncio.to_thread(start_controller, env, state / "controller.log")
            sampler = ProcSampler(proc.pid)
            await wait_nodeclass_ready(client)
            await world.load_types(client)
            async with running_kubelet(world.kubelet(client, poll=0.25)):
                await client.create(DEPLOYMENTS, one_per_node(args.nodes))
                result = await interrupt_all(client, world, args.nodes, args.timeout)
            sampler.sample()
            result["rss_mb"] = round(sampler.p95_rss(), 1)
            result["controller_log"] = str(state / "controller.log")
            return result
    finally:
        if proc is not None:
            stop_controller(proc)
        cluster.stop()
        if not args.keep:
            shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the state dir and log")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["seconds_to_replaced_max"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
