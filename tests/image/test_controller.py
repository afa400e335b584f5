"""The controller from the image provisions a pending pod on the local control plane.

The amd64 root filesystem runs ``karpenter-py controller`` (the image's entrypoint) as 65532 on
the host network, with the kwok cloud provider and leader election on, as the Deployment in
manifests/ runs it; only the kubeconfig is added to the test's copy of the file system.
"""

from __future__ import annotations

import contextlib
import subprocess
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.kube import NODECLAIMS, NODEPOOLS, PODS, KubeClient
from tests import imagetool
from tests.cluster.harness import (
    claims_of,
    eventually,
    force_delete_pool,
    free_port,
    namespace,
    nodepool,
    prepared_client,
    unique,
)
from tests.clusterfixture import ClusterHandle

pytestmark = pytest.mark.cluster


@pytest.fixture
async def client(cluster: ClusterHandle) -> AsyncIterator[KubeClient]:
    async with prepared_client(cluster) as c:
        yield c


@contextlib.contextmanager
def controller(
    runner: imagetool.Runner, cluster: ClusterHandle, log: Path, health_port: int
) -> Iterator[subprocess.Popen[bytes]]:
    conf = runner.rootfs / "etc" / "karpenter-test" / "kubeconfig"
    conf.parent.mkdir(exist_ok=True)
    conf.write_bytes(cluster.kubeconfig_path.read_bytes())
    conf.chmod(0o644)
    env = {
        "CLOUD_PROVIDER": "kwok",
        "KUBECONFIG": "/etc/karpenter-test/kubeconfig",
        "LEADER_ELECTION_NAME": unique("karpy-image"),
        "LEADER_ELECTION_NAMESPACE": "default",
        "METRICS_PORT": str(free_port()),
        "HEALTH_PROBE_PORT": str(health_port),
        "BATCH_IDLE_DURATION": "500ms",
        "BATCH_MAX_DURATION": "3s",
    }
    proc = runner.popen(list(imagetool.SPEC["entrypoint"]), env=env, log=log)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def pending_pod(name: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": pool},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "app",
                    "image": "pause",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


async def test_controller_from_the_image_provisions_a_pending_pod(
    client: KubeClient, cluster: ClusterHandle, amd64: imagetool.Runner, tmp_path: Path
) -> None:
    pool = unique("image-pool")
    await client.create(
        NODEPOOLS,
        nodepool(
            pool,
            requirements=[
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
        ),
    )
    log = tmp_path / "controller.log"
    health = free_port()
    try:
        async with namespace(client, "karpy-image") as ns:
            with controller(amd64, cluster, log, health) as proc:
                await client.create(PODS, pending_pod("web", pool), namespace=ns)

                async def bound() -> str | None:
                    assert proc.poll() is None, (
                        f"controller exited {proc.returncode}:\n{log.read_text()[-4000:]}"
                    )
                    pod = await client.get(PODS, "web", namespace=ns)
                    return str(pod["spec"].get("nodeName") or "") or None

                node = await eventually(
                    bound, within=90, interval=0.5, what="the pod bound to a new node"
                )
                claims = await claims_of(client, pool)
                assert [c["status"].get("nodeName") for c in claims] == [node]
                assert ready(health)
                assert proc.poll() is None
                # Delete the claim while the controller runs: its finalizer removes the node.
                await client.delete(NODECLAIMS, claims[0]["metadata"]["name"])

                async def gone() -> bool:
                    return not await claims_of(client, pool)

                await eventually(gone, within=60, interval=0.5, what="the NodeClaim to be deleted")
            log_text = log.read_text()
            assert "Traceback" not in log_text
    finally:
        await force_delete_pool(client, pool)
