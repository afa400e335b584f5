"""JSON-lines logging: one object per line with time, level, logger, message and key/values."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter_py.obs.logging import configure_logging, get_logger, level_from_setting


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    buf = io.StringIO()
    yield buf
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)


def lines(buf: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_lines_are_json_with_the_expected_fields(stream):
    configure_logging("info", stream=stream)
    log = get_logger("controller.provisioner", controller="provisioner")
    log.info("created %d nodeclaims", 2, extra={"nodepool": "default", "nodeclaim": "default-abc"})
    (entry,) = lines(stream)
    assert entry["level"] == "INFO"
    assert entry["logger"] == "controller.provisioner"
    assert entry["message"] == "created 2 nodeclaims"
    assert entry["controller"] == "provisioner"
    assert entry["nodepool"] == "default"
    assert entry["nodeclaim"] == "default-abc"
    stamp = datetime.strptime(entry["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60
    assert list(entry)[:4] == ["time", "level", "logger", "message"]


def test_level_is_honoured(stream):
    configure_logging("error", stream=stream)
    log = get_logger("x")
    log.info("hidden")
    log.debug("hidden")
    log.error("shown")
    assert [e["message"] for e in lines(stream)] == ["shown"]


def test_debug_level_and_warn_name(stream):
    configure_logging("debug", stream=stream)
    logging.getLogger("plain.stdlib").debug("d", extra={"pod": "ns/p"})
    logging.getLogger("plain.stdlib").warning("w")
    entries = lines(stream)
    assert [(e["level"], e["message"]) for e in entries] == [("DEBUG", "d"), ("WARN", "w")]
    assert entries[0]["pod"] == "ns/p"


def test_bind_and_reserved_keys(stream):
    configure_logging("info", stream=stream)
    log = get_logger("termination", controller="node.termination").bind(node="n1")
    log.info("evicting", extra={"name": "pod-a", "message": "not the message"})
    (entry,) = lines(stream)
    assert entry["node"] == "n1"
    assert entry["controller"] == "node.termination"
    assert entry["name"] == "pod-a"
    assert entry["message"] == "evicting"  # a field never overrides the log message


def test_exceptions_and_odd_values(stream):
    configure_logging("info", stream=stream)
    log = get_logger("x")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed", extra={"when": datetime(2026, 1, 1, tzinfo=UTC), "ids": {1, 2}})
    (entry,) = lines(stream)
    assert entry["level"] == "ERROR"
    assert "RuntimeError: boom" in entry["error"]
    assert entry["when"].startswith("2026-01-01")


def test_reconfigure_replaces_only_our_handler(stream):
    configure_logging("info", stream=stream)
    configure_logging("info", stream=stream)
    get_logger("x").info("once")
    assert len(lines(stream)) == 1


@pytest.mark.parametrize(("text", "level"), [("debug", 10), ("INFO", 20), ("error", 40)])
def test_level_from_setting(text, level):
    assert level_from_setting(text) == level


def test_unknown_level():
    with pytest.raises(ValueError):
        level_from_setting("loud")


# The AWS SDK and its HTTP stack print request headers (access key id, session token) and
# parameters (launch template user data) at DEBUG: never below INFO, whatever LOG_LEVEL says.
SECRET_BEARING = ("botocore", "aiobotocore", "boto3", "urllib3", "s3transfer")


@pytest.fixture
def restore_levels() -> Iterator[None]:
    names = (*SECRET_BEARING, "botocore.endpoint", "aiohttp.access", "aiohttp.server", "asyncio")
    saved = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize(
    ("setting", "sdk", "asyncio_level"),
    [
        ("debug", logging.INFO, logging.DEBUG),
        ("info", logging.WARNING, logging.WARNING),
        ("error", logging.ERROR, logging.ERROR),
    ],
)
def test_sdk_loggers_never_go_below_info(
    stream: io.StringIO, restore_levels: None, setting: str, sdk: int, asyncio_level: int
) -> None:
    configure_logging(setting, stream=stream)
    assert {
        name: logging.getLogger(name).getEffectiveLevel() for name in SECRET_BEARING
    } == dict.fromkeys(SECRET_BEARING, sdk)
    assert logging.getLogger("botocore.endpoint").getEffectiveLevel() == sdk
    assert logging.getLogger("asyncio").getEffectiveLevel() == asyncio_level
    logging.getLogger("botocore.endpoint").debug("Making request: X-Amz-Security-Token: tok")
    assert lines(stream) == []
