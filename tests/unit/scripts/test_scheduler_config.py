"""hack/cluster.py's kube-scheduler configuration file: with ``--config`` the scheduler takes
its client connection and leader election from the file, so the file must carry them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clusterfixture import load_cluster_module


def test_no_config_means_no_flag(tmp_path: Path) -> None:
    cluster = load_cluster_module().LocalCluster(state_dir=tmp_path)
    assert cluster._scheduler_config_args(tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_the_file_keeps_the_fields_and_adds_the_kubeconfig(tmp_path: Path) -> None:
    cluster = load_cluster_module().LocalCluster(
        state_dir=tmp_path,
        scheduler_config={
            "clientConnection": {"qps": 500, "burst": 1000},
            "percentageOfNodesToScore": 10,
        },
    )
    path = tmp_path / "kube-scheduler-config.json"
    assert cluster._scheduler_config_args(tmp_path) == [f"--config={path}"]
    assert json.loads(path.read_text()) == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {
            "qps": 500,
            "burst": 1000,
            "kubeconfig": str(tmp_path / "kube-scheduler.kubeconfig"),
        },
        "percentageOfNodesToScore": 10,
    }
