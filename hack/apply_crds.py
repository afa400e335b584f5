"""Apply manifests/crds/*.yaml to a cluster (server-side apply) and wait until each is Established.

    .venv/bin/python hack/apply_crds.py .cluster/kubeconfig

``make cluster-up`` runs it after starting the local control plane, as ``make kind-up`` applies
the CRDs to its kind cluster, so that ``karpenter-py controller`` finds its kinds at once. Uses
the project's own client: no kubectl needed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import yaml

from karpenter_py.kube import KubeClient, Resource, load_kubeconfig

REPO = Path(__file__).resolve().parents[1]
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
FIELD_MANAGER = "karpenter-py-hack"
TIMEOUT_S = 60.0


def _established(crd: dict[str, object]) -> bool:
    status = crd.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(
        isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
        for c in conditions or []
    )


def read_crds(crd_dir: Path) -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(crd_dir.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc
    ]


async def apply_crds(kubeconfig: str, docs: list[dict[str, Any]]) -> list[str]:
    config = load_kubeconfig([kubeconfig])
    async with KubeClient(config) as client:
        for doc in docs:
            await client.apply(CRDS, doc, field_manager=FIELD_MANAGER)
        names = [str(doc["metadata"]["name"]) for doc in docs]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT_S
        pending = list(names)
        while pending:
            pending = [n for n in pending if not _established(await client.get(CRDS, n))]
            if pending and loop.time() > deadline:
                raise TimeoutError(f"CRDs not Established after {TIMEOUT_S:.0f}s: {pending}")
            if pending:
                await asyncio.sleep(0.2)
    return names


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: apply_crds.py KUBECONFIG [CRD_DIR]", file=sys.stderr)
        return 2
    crd_dir = Path(argv[1]) if len(argv) == 2 else REPO / "manifests" / "crds"
    names = asyncio.run(apply_crds(argv[0], read_crds(crd_dir)))
    print(f"[cluster] CRDs applied and Established: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
