"""kubeconfig ``exec`` users: load_config builds an ExecTokenSource that runs a real plugin."""

import asyncio
import json
import logging
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from karpenter_py.aio.clock import FakeClock
from karpenter_py.kube import ConfigError, KubeError, TransportError, load_config
from karpenter_py.kube.execauth import ExecPluginError, ExecTokenSource
from tests.unit.kube.fakeplugin import T0, Plugin, exec_stanza, make_plugin, write_kubeconfig

EXPIRY = "2026-01-01T00:15:00Z"  # T0 + 15 min, like `aws eks get-token`
V1 = "client.authentication.k8s.io/v1"


def cred(api_version: str = V1, status: dict[str, Any] | None = None) -> str:
    """What a plugin prints; ``status=None`` leaves it out."""
    doc: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential"}
    if status is not None:
        doc["status"] = status
    return json.dumps(doc)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.fromisoformat(T0))


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    return make_plugin(tmp_path / "plugin", expiry=EXPIRY)


def source_of(tmp_path: Path, plugin: Plugin, clock: FakeClock, **exec_kw: Any) -> ExecTokenSource:
    kc = write_kubeconfig(tmp_path / "kubeconfig", {"exec": exec_stanza(plugin, **exec_kw)})
    cfg = load_config(kc, clock=clock)
    assert isinstance(cfg.token_source, ExecTokenSource)
    return cfg.token_source


# ----------------------------------------------------------------------------- loading


def test_load_config_builds_a_token_source_without_running_the_plugin(tmp_path, plugin, clock):
    kc = write_kubeconfig(tmp_path / "kubeconfig", {"exec": exec_stanza(plugin)})
    cfg = load_config(kc, clock=clock)
    assert isinstance(cfg.token_source, ExecTokenSource)
    assert cfg.token is None
    assert cfg.token_file is None
    assert cfg.token_source.command == str(plugin.path)
    assert plugin.runs == 0  # loading is start-up file I/O only; the plugin runs on first use


def test_relative_command_resolves_against_the_kubeconfig_directory(tmp_path, clock):
    plugin = make_plugin(tmp_path / "bin", expiry=EXPIRY)
    source = source_of(tmp_path, plugin, clock, command="./bin/fake-credential-plugin")
    assert source.command == str(tmp_path / "bin" / "fake-credential-plugin")


def test_explicit_credentials_take_precedence_over_exec(tmp_path, plugin):
    # client-go: a token, basic auth or client certificate wins; exec is not even started.
    kc = write_kubeconfig(tmp_path / "kc", {"token": "static", "exec": exec_stanza(plugin)})
    cfg = load_config(kc)
    assert cfg.token == "static"
    assert cfg.token_source is None


@pytest.mark.parametrize(
    ("exec_cfg", "match"),
    [
        ({"command": "aws"}, r"'eks-user'.*exec plugin 'aws': apiVersion None"),
        (
            {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1alpha1"},
            "v1alpha1' is not one of",
        ),
        ({"apiVersion": "client.authentication.k8s.io/v1"}, "exec needs a command"),
        (
            {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1", "args": "x"},
            "args must be a list",
        ),
        (
            {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1", "env": [{}]},
            "env entries",
        ),
        ("aws eks get-token", "exec must be a mapping"),
        (
            {
                "command": "aws",
                "apiVersion": "client.authentication.k8s.io/v1",
                "interactiveMode": "Always",
            },
            "needs a terminal",
        ),
    ],
)
def test_malformed_exec_is_a_config_error(tmp_path, exec_cfg, match):
    with pytest.raises(ConfigError, match=match):
        load_config(write_kubeconfig(tmp_path / "kc", {"exec": exec_cfg}))


def test_auth_provider_is_refused_with_a_pointer_to_exec(tmp_path):
    user = {"auth-provider": {"name": "gcp", "config": {"access-token": "x"}}}
    with pytest.raises(ConfigError, match=r"auth-provider 'gcp'.*removed.*exec credential plugin"):
        load_config(write_kubeconfig(tmp_path / "kc", user))


# ----------------------------------------------------------------------------- fetching and caching


@pytest.mark.parametrize(
    "api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
)
async def test_token_is_cached_until_near_expiry_then_refreshed(
    tmp_path, plugin, clock, api_version
):
    source = source_of(tmp_path, plugin, clock, api_version=api_version, args=["eks"])
    assert await source() == "eks-1"  # args and env reach the plugin
    assert "eks-1" not in repr(source)
    clock.step(13 * 60 + 59)  # 61 s before expiry: still good
    assert await source() == "eks-1"
    assert plugin.runs == 1
    clock.step(2)  # 59 s before expiry: refresh
    assert await source() == "eks-2"
    assert await source() == "eks-2"
    assert plugin.runs == 2


async def test_short_lived_tokens_refresh_at_half_life_not_every_call(tmp_path, plugin, clock):
    plugin.set(expiry="2026-01-01T00:00:40Z")  # 40 s lifetime < the 60 s margin
    source = source_of(tmp_path, plugin, clock)
    assert await source() == "tok-1"
    clock.step(19)
    assert await source() == "tok-1"
    clock.step(1)
    assert await source() == "tok-2"
    assert plugin.runs == 2


async def test_concurrent_callers_share_one_plugin_run(tmp_path, plugin, clock):
    plugin.set(expiry=EXPIRY, sleep=0.2)
    source = source_of(tmp_path, plugin, clock)
    tokens = await asyncio.gather(*(source() for _ in range(20)))
    assert set(tokens) == {"tok-1"}
    assert plugin.runs == 1


async def test_without_expiry_the_token_lasts_until_the_server_rejects_it(tmp_path, plugin, clock):
    plugin.set()  # no expirationTimestamp
    source = source_of(tmp_path, plugin, clock)
    assert await source() == "tok-1"
    clock.step(365 * 86400)
    assert await source() == "tok-1"
    source.invalidate("some-older-token")  # a late 401 for another token changes nothing
    assert await source() == "tok-1"
    source.invalidate("tok-1")
    assert await source() == "tok-2"
    assert plugin.runs == 2


async def test_the_plugin_does_not_block_the_event_loop(tmp_path, plugin, clock):
    plugin.set(expiry=EXPIRY, sleep=0.5)
    source = source_of(tmp_path, plugin, clock)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async with asyncio.TaskGroup() as tg:
        ticker = tg.create_task(tick())
        assert await source() == "tok-1"
        ticker.cancel()
    assert ticks >= 20  # the loop kept running for (most of) the plugin's 0.5 s


# ----------------------------------------------------------------------------- failures


async def test_nonzero_exit_is_an_error_naming_the_command(tmp_path, plugin, clock):
    plugin.set(exit=3, stderr="ExpiredToken: the security token included in the request")
    source = source_of(tmp_path, plugin, clock)
    with pytest.raises(ExecPluginError) as info:
        await source()
    msg = str(info.value)
    assert str(plugin.path) in msg
    assert "exited with 3: ExpiredToken" in msg
    # A TransportError (so a KubeError): reflectors and leader election back off and retry.
    assert isinstance(info.value, TransportError)
    assert issubclass(ExecPluginError, KubeError)


@pytest.mark.parametrize(
    ("ctl", "match"),
    [
        ({"stdout": "not json"}, "output is not JSON"),
        ({"stdout": ""}, "output is not JSON"),
        ({"stdout": '{"kind": "Status"}'}, "output is not an ExecCredential"),
        ({"stdout": cred(api_version="v1")}, "answered in 'v1', asked for '" + V1 + "'"),
        ({"stdout": cred(status=None)}, "ExecCredential has no status"),
        ({"stdout": cred(status={})}, "status has no token"),
        ({"cert": True}, "client certificate; only token credentials"),
        ({"expiry": "tomorrow"}, "'tomorrow' is not RFC 3339"),
    ],
)
async def test_unusable_output_is_an_error_naming_the_command(tmp_path, plugin, clock, ctl, match):
    plugin.set(**ctl)
    source = source_of(tmp_path, plugin, clock)
    with pytest.raises(ExecPluginError, match=match) as info:
        await source()
    assert str(plugin.path) in str(info.value)


async def test_missing_command_shows_the_install_hint(tmp_path, plugin, clock):
    source = source_of(
        tmp_path,
        plugin,
        clock,
        command="karpy-no-such-plugin",
        installHint="install the AWS CLI: https://aws.amazon.com/cli/",
    )
    with pytest.raises(
        ExecPluginError, match=r"'karpy-no-such-plugin': command not found \(install"
    ):
        await source()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_hung_plugin_times_out_and_is_killed(tmp_path, plugin):
    plugin.set(expiry=EXPIRY, sleep=30, pidfile=str(tmp_path / "pid"))
    source = ExecTokenSource(exec_stanza(plugin), timeout=0.5)
    with pytest.raises(ExecPluginError, match=r"no credential within 0\.5s"):
        await source()
    assert not alive(int((tmp_path / "pid").read_text()))


async def test_a_cancelled_fetch_kills_the_plugin(tmp_path, plugin):
    plugin.set(expiry=EXPIRY, sleep=30, pidfile=str(tmp_path / "pid"))
    source = ExecTokenSource(exec_stanza(plugin))
    async with asyncio.TaskGroup() as tg:
        fetch = tg.create_task(source())
        # The pid file is written by another process: no Event crosses that boundary, so poll.
        while not (tmp_path / "pid").exists():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        fetch.cancel()
    assert fetch.cancelled()
    assert not alive(int((tmp_path / "pid").read_text()))


async def test_failed_refresh_keeps_a_still_valid_token_then_gives_up_at_expiry(
    tmp_path, plugin, clock, caplog
):
    source = source_of(tmp_path, plugin, clock)
    assert await source() == "tok-1"
    plugin.set(exit=1, stderr="sts unreachable")
    clock.step(14 * 60 + 30)  # inside the refresh window, 30 s before expiry
    with caplog.at_level(logging.WARNING, logger="karpenter_py.kube.execauth"):
        assert await source() == "tok-1"
    assert "keeping the previous token" in caplog.text
    assert "sts unreachable" in caplog.text
    assert plugin.runs == 2
    assert await source() == "tok-1"  # within retry_after: the plugin is not re-run
    assert plugin.runs == 2
    clock.step(31)  # expired now
    with pytest.raises(ExecPluginError, match="sts unreachable"):
        await source()
    assert plugin.runs == 3
    plugin.set(expiry="2026-01-01T00:30:00Z")
    clock.step(5)  # after retry_after the plugin runs again and recovers
    assert await source() == "tok-4"
