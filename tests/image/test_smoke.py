"""The image's file system runs the CLI: amd64 natively, arm64 under qemu-user-static, as the
image's user (65532), with the image's environment (tests/imagetool.py says how: crun or runc,
whichever can run here, else chroot)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import imagetool
from tests.imagetool import REPO_ROOT, SPEC

DEMO = f"{SPEC['examples_dir']}/demo.yaml"


@pytest.fixture(scope="module")
def host_plan() -> str:
    """What this tree's CLI prints for the bundled example: the image must print the same."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "karpenter_py",
            "plan",
            "-f",
            str(REPO_ROOT / "examples" / "demo.yaml"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return proc.stdout


def python_argv(arch: str, *args: str) -> list[str]:
    # Under qemu the entry script's shebang is not followed (no binfmt_misc): name the python.
    if arch in imagetool.QEMU:
        return [f"/usr/bin/python{SPEC['python']}", SPEC["entry_script"], *args]
    return ["karpenter-py", *args]


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_version(arch: str, request: pytest.FixtureRequest) -> None:
    runner: imagetool.Runner = request.getfixturevalue(arch)
    proc = runner.run(python_argv(arch, "--version"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0,
        f"karpenter-py {imagetool.version()}\n",
        "",
    )
    tried = "; ".join(f"{name}: {why}" for name, why in runner.why_not.items())
    print(f"{arch} ran with {runner.how}" + (f" ({tried})" if tried else ""))


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_plan_on_the_bundled_example(
    arch: str, request: pytest.FixtureRequest, host_plan: str
) -> None:
    runner: imagetool.Runner = request.getfixturevalue(arch)
    proc = runner.run(python_argv(arch, "plan", "-f", DEMO), timeout=300)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == host_plan
    assert (
        proc.stdout.splitlines()[0]
        == "18 pending pods: 15 on new nodes, 2 on existing nodes, 1 unschedulable"
    )


CHECK_IMPORTS = """
import importlib, os, pathlib, ssl, sys, zoneinfo, socket, pwd
dynload = pathlib.Path(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "lib-dynload")
failed = []
for so in sorted(dynload.glob("*.so")):
    try:
        importlib.import_module(so.name.split(".")[0])
    except Exception as e:
        failed.append(f"{so.name}: {e}")
for name in ["frozenlist._frozenlist", "multidict._multidict", "yarl._quoting_c", "propcache._helpers_c",
             "aiohttp._http_parser", "pydantic_core._pydantic_core", "orjson", "uvloop.loop", "yaml._yaml",
             "cryptography.hazmat.bindings._rust", "karpenter_py.manager.app"]:
    try:
        importlib.import_module(name)
    except Exception as e:
        failed.append(f"{name}: {e}")
print("failed", failed)
print("cas", len(ssl.create_default_context().get_ca_certs()) > 100)
print("tz", zoneinfo.ZoneInfo("Europe/Paris").key)
print("user", os.getuid(), os.getgid(), pwd.getpwuid(os.getuid()).pw_name, os.path.expanduser("~"))
print("https", socket.getservbyname("https"))
print("pyc", sys.flags.dont_write_bytecode, importlib.util.cache_from_source("/x/y.py").endswith(".cpython-311.pyc"))
"""


def test_every_extension_module_loads_and_the_os_files_work(amd64: imagetool.Runner) -> None:
    proc = amd64.run([f"/usr/bin/python{SPEC['python']}", "-c", CHECK_IMPORTS])
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines() == [
        "failed []",
        "cas True",
        "tz Europe/Paris",
        "user 65532 65532 nonroot /home/nonroot",
        "https 443",
        "pyc 1 True",
    ]
