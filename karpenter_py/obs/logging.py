"""JSON-lines structured logging on stdout, shaped like upstream Karpenter's zap output.

One JSON object per line: ``time`` (RFC 3339, UTC, milliseconds), ``level`` (``DEBUG``, ``INFO``,
``WARN``, ``ERROR``), ``logger``, ``message``, then the record's key/values (``controller``,
``nodeclaim``, ``nodepool``, ``pod``, ...) and ``error`` with the traceback when one is attached.

Plain stdlib loggers work (``logging.getLogger(__name__).info("x", extra={"pod": "a/b"})``);
:func:`get_logger` adds bound context and accepts keys that would clash with ``LogRecord``
attributes (``name``, ``message``, ...)::

    log = get_logger("controller.provisioner", controller="provisioner")
    log.info("created nodeclaim", extra={"nodeclaim": name, "nodepool": pool})
    log.bind(nodeclaim=name).debug("launched")
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime
from typing import IO, Any, Final

__all__ = [
    "BoundLogger",
    "JsonFormatter",
    "configure_logging",
    "get_logger",
    "level_from_setting",
]

LEVELS: Final[Mapping[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_LEVEL_NAMES: Final[Mapping[int, str]] = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARN",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "FATAL",
}
# Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_ATTRS: Final = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys() | {"message", "asctime"}
)
_FIELDS_ATTR: Final = "_karpy_fields"  # where BoundLogger puts its key/values on the record
_HANDLER_MARK: Final = "_karpy_json_handler"


def level_from_setting(level: str) -> int:
    """``LOG_LEVEL`` (debug|info|error, any case) to a stdlib level; ValueError otherwise."""
    try:
        return LEVELS[level.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r} (debug|info|error)") from None


def _timestamp(created: float) -> str:
    stamp = datetime.fromtimestamp(created, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object (no newline; the handler adds it)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _timestamp(record.created),
            "level": _LEVEL_NAMES.get(record.levelno, record.levelname),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and key != _FIELDS_ATTR and not key.startswith("_"):
                entry.setdefault(key, value)
        fields = getattr(record, _FIELDS_ATTR, None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                entry.setdefault(str(key), value)
        if record.exc_info and record.exc_info[0] is not None:
            entry["error"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["error"] = record.exc_text
        if record.stack_info:
            entry["stacktrace"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False, separators=(",", ":"))


# Loggers that would print secrets at DEBUG: the AWS SDK and its HTTP stack write request
# headers (the Authorization header names the access key id, X-Amz-Security-Token carries the
# session token) and request parameters and bodies (launch template user data).
SECRET_BEARING_LOGGERS: Final = ("botocore", "aiobotocore", "boto3", "urllib3", "s3transfer")
_NOISY_LOGGERS: Final = ("aiohttp.access", "aiohttp.server", "asyncio")


def configure_logging(level: str | int = "info", *, stream: IO[str] | None = None) -> None:
    """Send every log record to ``stream`` (default stdout) as JSON lines at ``level``.

    Idempotent: calling it again replaces the handler it installed before (tests, reloads).
    Noisy third-party loggers are held at WARN unless ``level`` is debug; the
    ``SECRET_BEARING_LOGGERS`` too, and at debug they stay at INFO: no level lets them print
    a secret.
    """
    numeric = level if isinstance(level, int) else level_from_setting(level)
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, _HANDLER_MARK, False):
            root.removeHandler(existing)
    handler = logging.StreamHandler(stream if stream is not None else sys.stdout)
    handler.setFormatter(JsonFormatter())
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(numeric)
    quiet = logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(numeric, quiet))
    for name in SECRET_BEARING_LOGGERS:
        logging.getLogger(name).setLevel(max(numeric, quiet, logging.INFO))


class BoundLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger carrying key/values that go into every line it writes.

    ``extra`` passed to a call is merged over the bound values (it does not replace them, unlike
    the stdlib adapter), and any key is allowed, ``name`` included.
    """

    def __init__(self, logger: logging.Logger, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(logger, dict(fields or {}))

    @property
    def fields(self) -> Mapping[str, Any]:
        return dict(self.extra or {})

    def bind(self, **fields: Any) -> BoundLogger:
        """A logger with more context; this one is unchanged."""
        return BoundLogger(self.logger, {**(self.extra or {}), **fields})

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        call_extra = kwargs.pop("extra", None) or {}
        kwargs["extra"] = {_FIELDS_ATTR: {**(self.extra or {}), **call_extra}}
        return msg, kwargs


def get_logger(name: str, **fields: Any) -> BoundLogger:
    """A :class:`BoundLogger` for ``name`` with ``fields`` bound (e.g. ``controller="x"``)."""
    return BoundLogger(logging.getLogger(name), fields)
