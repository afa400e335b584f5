"""When a NodeClaim expires: creation time + expireAfter, with Never turning it off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from karpenter_py.controllers.nodeclaim.expiration import expires_at, seconds_until_expiry
from karpenter_py.model.api.nodeclaim import NodeClaim
from tests import factories

CREATED = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def claim(expire_after: str | None, created: datetime | None = CREATED) -> NodeClaim:
    return factories.nodeclaim(
        "nc",
        expire_after=expire_after,
        created=None if created is None else created.isoformat().replace("+00:00", "Z"),
    )


@pytest.mark.parametrize(
    ("expire_after", "expected"),
    [
        (None, CREATED + timedelta(hours=720)),  # upstream's default
        ("720h", CREATED + timedelta(hours=720)),
        ("1h30m", CREATED + timedelta(minutes=90)),
        ("45s", CREATED + timedelta(seconds=45)),
        ("Never", None),
    ],
)
def test_expiry_time(expire_after: str | None, expected: datetime | None) -> None:
    assert expires_at(claim(expire_after)) == expected


def test_no_creation_time_means_no_expiry_yet() -> None:
    assert expires_at(claim("1h", created=None)) is None


@pytest.mark.parametrize(
    ("now", "remaining"),
    [
        (CREATED, 3600.0),
        (CREATED + timedelta(minutes=59, seconds=30), 30.0),
        (CREATED + timedelta(hours=1), 0.0),
        (CREATED + timedelta(hours=2), -3600.0),
    ],
)
def test_seconds_until_expiry(now: datetime, remaining: float) -> None:
    assert seconds_until_expiry(claim("1h"), now) == remaining
