"""How a failure that will be retried is logged, by what kind of failure it is.

A *transient* failure (the apiserver or the cloud throttled, answered 5xx, or did not answer in
time) is expected: a retry fixes it once the peer recovers, and nothing is lost meanwhile, so it
is one WARN line naming the error. Anything else is a bug or a request that fails the same way on
every retry; it keeps ERROR with the traceback, which is what someone must read to fix it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from karpenter_py.cloudprovider.aws.clients import is_transient_aws_error
from karpenter_py.kube.errors import KubeError

__all__ = ["describe", "is_transient", "log_failure"]


def is_transient(exc: BaseException) -> bool:
    """True when retrying the same work is expected to succeed once the peer recovers: a kube
    error whose class says so (429, 5xx, no answer), an AWS throttling / 5xx / connection error,
    or a timeout or broken connection from anywhere else."""
    if isinstance(exc, KubeError):
        return exc.transient
    return isinstance(exc, TimeoutError | ConnectionError) or is_transient_aws_error(exc)


def describe(exc: BaseException) -> str:
    """``"<type>: <message>"``, or the type alone when the message is empty (a bare timeout)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def log_failure(
    log: logging.Logger, message: str, exc: BaseException, fields: Mapping[str, object]
) -> None:
    """Log ``message`` for a failure the caller retries: WARN with ``error`` (one line) when
    :func:`is_transient`, else ERROR with the traceback. ``fields`` go on the line either way."""
    if is_transient(exc):
        log.warning(message, extra={**fields, "error": describe(exc)})
    else:
        log.error(message, exc_info=exc, extra=dict(fields))
