"""User data per AMI family: exact output, including merges with the user's userData."""

from __future__ import annotations

import base64
import dataclasses
import tomllib

import pytest

from karpenter_py.cloudprovider.aws import userdata
from karpenter_py.cloudprovider.aws.userdata import BootstrapOptions, UserDataError

BASE = BootstrapOptions(
    cluster_name="test-cluster",
    endpoint="https://EX.eks.amazonaws.com",
    ca_bundle="Q0E=",
    service_cidr="10.100.0.0/16",
    labels={
        "karpenter.sh/nodepool": "default",
        "karpenter.sh/capacity-type": "spot",
        "team": "a",
        "node-role.kubernetes.io/worker": "",  # kubelet may not set it (NodeRestriction)
    },
    taints=(("karpenter.sh/unregistered", "", "NoExecute"), ("gpu", "true", "NoSchedule")),
)
LABELS_ARG = "karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default,team=a"
TAINTS_ARG = "karpenter.sh/unregistered:NoExecute,gpu=true:NoSchedule"

AL2023_NODECONFIG = f"""--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: test-cluster
    apiServerEndpoint: https://EX.eks.amazonaws.com
    certificateAuthority: Q0E=
    cidr: 10.100.0.0/16
  kubelet:
    flags:
    - --node-labels={LABELS_ARG}
    - --register-with-taints={TAINTS_ARG}
--//--
"""
MIME_HEAD = 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n'

USER_MIME = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo one
--BOUNDARY
Content-Type: text/cloud-config

packages: [jq]
--BOUNDARY--
"""
USER_NODECONFIG = """apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      shutdownGracePeriod: 30s
"""


@pytest.mark.parametrize(
    ("user_data", "expected"),
    [
        pytest.param(None, MIME_HEAD + AL2023_NODECONFIG, id="karpenter-only"),
        pytest.param(
            "#!/bin/bash\necho hi\n",
            MIME_HEAD
            + '--//\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
            + "#!/bin/bash\necho hi\n"
            + AL2023_NODECONFIG,
            id="shell-script-first",
        ),
        pytest.param(
            USER_NODECONFIG,
            MIME_HEAD
            + "--//\nContent-Type: application/node.eks.aws\n\n"
            + USER_NODECONFIG
            + AL2023_NODECONFIG,
            id="user-nodeconfig-own-part",
        ),
        pytest.param(
            USER_MIME,
            MIME_HEAD
            + '--//\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
            + "#!/bin/bash\necho one\n"
            + "--//\nContent-Type: text/cloud-config\n\npackages: [jq]\n"
            + AL2023_NODECONFIG,
            id="user-mime-parts-first",
        ),
    ],
)
def test_al2023_merges(user_data: str | None, expected: str) -> None:
    opts = dataclasses.replace(BASE, user_data=user_data)
    assert userdata.render("AL2023", opts) == expected


def test_al2023_kubelet_config() -> None:
    opts = dataclasses.replace(
        BASE,
        taints=(),
        labels={"a": "b"},
        kubelet={"maxPods": 110, "clusterDNS": ["10.100.0.10"], "cpuCFSQuota": False},
    )
    assert userdata.render("AL2023", opts) == MIME_HEAD + (
        "--//\nContent-Type: application/node.eks.aws\n\n"
        "apiVersion: node.eks.aws/v1alpha1\n"
        "kind: NodeConfig\n"
        "spec:\n"
        "  cluster:\n"
        "    name: test-cluster\n"
        "    apiServerEndpoint: https://EX.eks.amazonaws.com\n"
        "    certificateAuthority: Q0E=\n"
        "    cidr: 10.100.0.0/16\n"
        "  kubelet:\n"
        "    config:\n"
        "      maxPods: 110\n"
        "      clusterDNS:\n"
        "      - 10.100.0.10\n"
        "      cpuCFSQuota: false\n"
        "    flags:\n"
        "    - --node-labels=a=b\n"
        "--//--\n"
    )


AL2_SCRIPT = (
    "#!/bin/bash -xe\n"
    "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n"
    "/etc/eks/bootstrap.sh 'test-cluster' --apiserver-endpoint 'https://EX.eks.amazonaws.com' "
    "--b64-cluster-ca 'Q0E='"
)


@pytest.mark.parametrize(
    ("kubelet", "user_data", "expected"),
    [
        pytest.param(
            {},
            None,
            MIME_HEAD
            + '--//\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
            + AL2_SCRIPT
            + f" --kubelet-extra-args '--node-labels={LABELS_ARG} "
            + f"--register-with-taints={TAINTS_ARG}'\n--//--\n",
            id="plain",
        ),
        pytest.param(
            {"maxPods": 20, "clusterDNS": ["10.100.0.10"]},
            "echo first",
            MIME_HEAD
            + '--//\nContent-Type: text/x-shellscript; charset="us-ascii"\n\necho first\n'
            + '--//\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n'
            + AL2_SCRIPT
            + " --dns-cluster-ip '10.100.0.10' --use-max-pods false"
            + f" --kubelet-extra-args '--node-labels={LABELS_ARG} "
            + f"--register-with-taints={TAINTS_ARG} --max-pods=20'\n--//--\n",
            id="max-pods-dns-and-user-script",
        ),
    ],
)
def test_al2(kubelet: dict[str, object], user_data: str | None, expected: str) -> None:
    opts = dataclasses.replace(BASE, kubelet=kubelet, user_data=user_data)
    assert userdata.render("AL2", opts) == expected


BOTTLEROCKET_KARPENTER = """[settings.kubernetes]
cluster-name = "test-cluster"
api-server = "https://EX.eks.amazonaws.com"
cluster-certificate = "Q0E="

[settings.kubernetes.node-labels]
"karpenter.sh/capacity-type" = "spot"
"karpenter.sh/nodepool" = "default"
team = "a"

[settings.kubernetes.node-taints]
"karpenter.sh/unregistered" = [":NoExecute"]
gpu = ["true:NoSchedule"]
"""


@pytest.mark.parametrize(
    ("user_data", "kubelet", "expected"),
    [
        pytest.param(None, {}, BOTTLEROCKET_KARPENTER, id="karpenter-only"),
        pytest.param(
            # The user's cluster-name and max-pods lose to Karpenter's; other keys stay.
            '[settings.kubernetes]\ncluster-name = "other"\nmax-pods = 5\n'
            "image-gc-high-threshold-percent = 85\n\n[settings.host-containers.admin]\n"
            "enabled = true\n",
            {"maxPods": 110, "clusterDNS": ["10.100.0.10"]},
            '[settings.kubernetes]\ncluster-name = "test-cluster"\nmax-pods = 110\n'
            "image-gc-high-threshold-percent = 85\n"
            'api-server = "https://EX.eks.amazonaws.com"\ncluster-certificate = "Q0E="\n'
            'cluster-dns-ip = "10.100.0.10"\n'
            '\n[settings.kubernetes.node-labels]\n"karpenter.sh/capacity-type" = "spot"\n'
            '"karpenter.sh/nodepool" = "default"\nteam = "a"\n'
            '\n[settings.kubernetes.node-taints]\n"karpenter.sh/unregistered" = [":NoExecute"]\n'
            'gpu = ["true:NoSchedule"]\n'
            "\n[settings.host-containers.admin]\nenabled = true\n",
            id="user-toml-merged",
        ),
    ],
)
def test_bottlerocket(user_data: str | None, kubelet: dict[str, object], expected: str) -> None:
    opts = dataclasses.replace(BASE, user_data=user_data, kubelet=kubelet)
    out = userdata.render("Bottlerocket", opts)
    assert out == expected
    tomllib.loads(out)  # and it is valid TOML


def test_bottlerocket_rejects_bad_toml() -> None:
    with pytest.raises(UserDataError, match="not valid TOML"):
        userdata.render("Bottlerocket", dataclasses.replace(BASE, user_data="[settings"))


def test_custom_is_verbatim_and_windows_unsupported() -> None:
    assert userdata.render("Custom", dataclasses.replace(BASE, user_data="raw\n")) == "raw\n"
    assert userdata.render("Custom", BASE) == ""
    with pytest.raises(UserDataError, match="Windows2022"):
        userdata.render("Windows2022", BASE)


@pytest.mark.parametrize(
    ("key", "settable"),
    [
        ("team", True),
        ("karpenter.sh/nodepool", True),
        ("kubernetes.io/arch", True),
        ("node.kubernetes.io/instance-type", True),
        ("node-role.kubernetes.io/worker", False),
        ("example.k8s.io/x", False),
        ("kubelet.kubernetes.io/x", True),
    ],
)
def test_kubelet_settable(key: str, settable: bool) -> None:
    assert userdata.kubelet_settable(key) is settable


def test_encode_is_base64() -> None:
    assert base64.b64decode(userdata.encode("héllo")).decode() == "héllo"
