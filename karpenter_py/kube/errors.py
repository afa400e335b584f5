"""Typed Kubernetes API errors, mapped from HTTP status (and from watch ERROR events).

Callers branch on the class (``except NotFoundError``) instead of on numbers. Connection-level
failures become :class:`TransportError`, so nothing above ``kube`` ever sees aiohttp's types.
Each class says whether it is :attr:`~KubeError.transient`: a retry of the same request is
expected to succeed once the apiserver recovers (throttling, 5xx, no answer), as opposed to a
request that is wrong and fails the same way every time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import aiohttp
import orjson


class KubeError(Exception):
    """Root of everything the kube client raises."""

    transient: ClassVar[bool] = False


class TransportError(KubeError):
    """The request never got an HTTP answer (connect, TLS, reset, timeout, truncated stream)."""

    transient = True


class KubeTimeoutError(TransportError):
    """A request (or a watch past its deadline) took longer than the client allows."""


@contextlib.contextmanager
def transport_errors(what: str, timed_out: str) -> Iterator[None]:
    """Re-raise a timeout as :class:`KubeTimeoutError` (``"<what>: <timed_out>"``) and a
    connection failure as :class:`TransportError`, both naming ``what`` (``"get nodes"``)."""
    try:
        yield
    except TimeoutError as e:
        raise KubeTimeoutError(f"{what}: {timed_out}") from e
    except (aiohttp.ClientError, OSError) as e:
        raise TransportError(f"{what}: {type(e).__name__}: {e}") from e


class ApiError(KubeError):
    """The apiserver answered with an error status (a ``Status`` object in the body, usually)."""

    status_code: ClassVar[int] = 0

    def __init__(
        self,
        *,
        status: int,
        reason: str = "",
        message: str = "",
        verb: str = "",
        resource: str = "",
        name: str | None = None,
        namespace: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.verb = verb
        self.resource = resource
        self.name = name
        self.namespace = namespace
        self.details: Mapping[str, Any] = details or {}
        target = "/".join(p for p in (namespace, name) if p)
        what = " ".join(p for p in (verb, resource, target) if p)
        why = " ".join(p for p in (str(status), reason) if p)
        super().__init__(f"{what}: {why}: {message}" if message else f"{what}: {why}")


class BadRequestError(ApiError):
    status_code = 400


class UnauthorizedError(ApiError):
    status_code = 401


class ForbiddenError(ApiError):
    status_code = 403


class NotFoundError(ApiError):
    status_code = 404


class ConflictError(ApiError):
    """409: a resourceVersion precondition failed (optimistic lock lost) or the object exists."""

    status_code = 409


class AlreadyExistsError(ConflictError):
    """409 with reason AlreadyExists: a create collided with an existing name."""


class GoneError(ApiError):
    """410: the requested resourceVersion (or continue token) is older than the server keeps.
    The only recovery is a fresh list: :attr:`relist_required` says so explicitly."""

    status_code = 410
    relist_required: ClassVar[bool] = True


class InvalidError(ApiError):
    """422: the object failed validation; :attr:`causes` lists the offending fields."""

    status_code = 422

    @property
    def causes(self) -> list[dict[str, Any]]:
        causes = self.details.get("causes")
        return [c for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []


class TooManyRequestsError(ApiError):
    """429: throttled by priority-and-fairness, or an eviction refused by a PodDisruptionBudget."""

    status_code = 429
    transient = True

    def __init__(self, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the server failed; usually worth retrying with backoff."""

    transient = True


_BY_STATUS: dict[int, type[ApiError]] = {
    cls.status_code: cls
    for cls in (
        BadRequestError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        ConflictError,
        GoneError,
        InvalidError,
        TooManyRequestsError,
    )
}


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # HTTP-date form; the apiserver only sends seconds


def error_from_status(
    status: int,
    body: Mapping[str, Any] | bytes | None,
    *,
    verb: str = "",
    resource: str = "",
    name: str | None = None,
    namespace: str | None = None,
    retry_after: str | None = None,
) -> ApiError:
    """Build the typed error for an HTTP status and its ``Status`` body, decoded or raw bytes
    (raw bytes that are not a ``Status``, a proxy's HTML say, become the message)."""
    if isinstance(body, bytes):
        body = _status_body(body)
    body = body or {}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or "")
    details = body.get("details") if isinstance(body.get("details"), Mapping) else None
    kwargs: dict[str, Any] = {
        "status": status,
        "reason": reason,
        "message": message,
        "verb": verb,
        "resource": resource,
        "name": name,
        "namespace": namespace,
        "details": details,
    }
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExistsError(**kwargs)
    if status == 429:
        secs = _retry_after(retry_after)
        if secs is None and details is not None:
            secs = _retry_after(str(details.get("retryAfterSeconds") or ""))
        return TooManyRequestsError(retry_after=secs, **kwargs)
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    return cls(**kwargs)


def _status_body(raw: bytes) -> Mapping[str, Any]:
    decoded: Any
    try:
        decoded = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        return decoded
    return {"message": raw[:512].decode("utf-8", "replace").strip()}


def error_from_watch_status(status_obj: Mapping[str, Any], *, resource: str = "") -> ApiError:
    """A watch ERROR event carries a ``Status`` object; 410 inside the stream means Gone."""
    code = status_obj.get("code")
    status = int(code) if isinstance(code, int) else 500
    return error_from_status(status, status_obj, verb="watch", resource=resource)
