"""Make moto's in-process SQS fast enough for tens of thousands of messages.

moto 5.2.5 recomputes every message's visibility on each call, reading the time through
``datetime`` arithmetic (``unix_time``) and re-deriving attribute names with a regex-free but
slow ``camelcase_to_underscores``: a queue of a hundred messages costs milliseconds per call, so
10,000 messages take minutes. :func:`speed_up` swaps both for equivalent, cheaper versions in
``moto.sqs.models`` only (same values: seconds since the epoch; the same name mapping, cached).
Nothing about SQS semantics changes, and every call still goes over HTTP.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from datetime import datetime

import pytest


def _fast_unix_time(slow: Callable[[datetime | None], float]) -> Callable[..., float]:
    def unix_time(dt: datetime | None = None) -> float:
        return time.time() if dt is None else slow(dt)

    return unix_time


def speed_up(monkeypatch: pytest.MonkeyPatch) -> None:
    import moto.sqs.models as sqs_models

    unix_time = _fast_unix_time(getattr(sqs_models, "unix_time"))  # noqa: B009 - not exported

    def unix_time_millis(dt: datetime | None = None) -> float:
        return unix_time(dt) * 1000.0

    monkeypatch.setattr(sqs_models, "unix_time", unix_time)
    monkeypatch.setattr(sqs_models, "unix_time_millis", unix_time_millis)
    monkeypatch.setattr(
        sqs_models,
        "camelcase_to_underscores",
        functools.lru_cache(maxsize=None)(getattr(sqs_models, "camelcase_to_underscores")),  # noqa: B009
    )


@pytest.fixture
def fast_sqs(monkeypatch: pytest.MonkeyPatch) -> None:
    speed_up(monkeypatch)
