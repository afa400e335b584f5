"""Bearer tokens from kubeconfig ``exec`` credential plugins (``client.authentication.k8s.io``).

The stanza is checked here and turned into a command line and environment by
``kubernetes_asyncio``'s ``ExecProvider``. The plugin (``aws eks get-token``,
``gke-gcloud-auth-plugin``, ``kubelogin``, ...) then runs as an asyncio subprocess, so the event
loop never blocks, under a timeout, with stdin closed (never interactive) and
``KUBERNETES_EXEC_INFO`` set. We do not use ``ExecProvider.run`` itself: on timeout or
cancellation it leaves the plugin process running (nothing holds it to kill it), and it reads all
of stdout before stderr, which deadlocks on a chatty plugin. Here the process is always killed and
reaped, however the wait ends.

Its ``ExecCredential.status.token`` is cached the way client-go caches it:

* with an ``expirationTimestamp``: until shortly before it (``refresh_before``, default 60 s,
  but never more than half the token's lifetime, so short-lived tokens do not re-run the plugin
  on every request);
* without one: until the apiserver answers 401 for that token (:meth:`ExecTokenSource.invalidate`,
  called by the client).

Concurrent callers share one plugin run. If a refresh fails while the cached token has not yet
expired, the old token keeps being used (with a warning) and the plugin is retried at most every
``retry_after`` seconds; with no usable token the failure is raised as :class:`ExecPluginError`,
a :class:`TransportError`, so callers back off and retry as for any unreachable apiserver.

Not supported: plugins that answer with a client certificate instead of a token (refused with a
clear error), ``interactiveMode: Always`` (refused: a controller has no terminal) and
``provideClusterInfo`` (the plugin gets no ``spec.cluster``; a warning is logged).

kubernetes_asyncio is imported lazily, when an exec user is loaded: it drags in the whole
generated client (~0.5 s of start-up), which only users of exec plugins should pay for.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from karpenter_py.aio.clock import Clock, RealClock
from karpenter_py.kube.errors import TransportError

log = logging.getLogger(__name__)

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
REFRESH_BEFORE = 60.0  # seconds before expirationTimestamp to fetch a new token
RUN_TIMEOUT = 30.0  # seconds a plugin may take (a hung plugin must not hang every request)
RETRY_AFTER = 5.0  # seconds between plugin runs after a failure


class ExecPluginError(TransportError):
    """The credential plugin failed: it did not start, exited non-zero, timed out, or printed no
    usable ``ExecCredential``. No request was sent; retry with backoff like a transport error."""


class ExecTokenSource:
    """Awaitable bearer token from one kubeconfig ``exec`` stanza (see the module docstring).

    ``await source()`` returns a current token (running the plugin only when needed);
    ``source.invalidate(token)`` says the apiserver rejected ``token`` (401).
    Raises :class:`ValueError` for a malformed stanza, :class:`ExecPluginError` when running it.
    """

    def __init__(
        self,
        exec_config: Mapping[str, Any],
        *,
        base: Path | None = None,
        clock: Clock | None = None,
        refresh_before: float = REFRESH_BEFORE,
        timeout: float = RUN_TIMEOUT,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        spec = _normalize(exec_config, base)
        self.command: str = spec["command"]
        self._install_hint = str(exec_config.get("installHint") or "").strip()
        self._clock: Clock = clock if clock is not None else RealClock()
        self._refresh_before = refresh_before
        self._timeout = timeout
        self._retry_after = retry_after
        # Lazy: see the module docstring. ExecProvider validates the stanza once more itself and
        # yields the argv, the environment (ours plus the stanza's env) and the apiVersion.
        from kubernetes_asyncio.config.config_exception import ConfigException
        from kubernetes_asyncio.config.exec_provider import ExecProvider
        from kubernetes_asyncio.config.kube_config import ConfigNode

        try:
            provider = ExecProvider(ConfigNode("exec", spec))
        except ConfigException as e:
            raise ValueError(str(e)) from e
        self._api_version = str(provider.api_version)
        self._argv = [str(a) for a in provider.args]
        info = {"apiVersion": self._api_version, "kind": "ExecCredential"}
        self._env = {
            **provider.env,
            "KUBERNETES_EXEC_INFO": json.dumps({**info, "spec": {"interactive": False}}),
        }
        self._lock = asyncio.Lock()
        self._token: str | None = None
        self._expiry: datetime | None = None
        self._refresh_at: datetime | None = None  # None with a token: valid until a 401
        self._failure: str | None = None
        self._failed_at = float("-inf")  # clock.monotonic() of the last failed run

    def __repr__(self) -> str:  # never print the token
        return f"ExecTokenSource(command={self.command!r})"

    async def __call__(self) -> str:
        token = self._cached()
        if token is not None:
            return token
        async with self._lock:
            token = self._cached()  # another caller may have refreshed while we waited
            if token is not None:
                return token
            if (
                self._failure is not None
                and self._clock.monotonic() - self._failed_at < self._retry_after
            ):
                return self._fallback(self._failure)
            try:
                status = await self._run()
                token = self._store(status)
            except ExecPluginError as e:
                self._failure, self._failed_at = str(e), self._clock.monotonic()
                if self._usable():
                    log.warning("keeping the previous token: %s", e)
                return self._fallback(str(e))
            self._failure = None
            return token

    def invalidate(self, token: str) -> None:
        """The apiserver answered 401 for ``token``: fetch a new one on the next call.

        Only the token that was rejected is dropped, so late 401s for an older token do not
        throw away a fresh one."""
        if token == self._token:
            self._token = self._expiry = self._refresh_at = None
            self._failure = None

    # ------------------------------------------------------------------ internals

    def _cached(self) -> str | None:
        if self._token is None:
            return None
        if self._refresh_at is not None and self._clock.now() >= self._refresh_at:
            return None
        return self._token

    def _usable(self) -> bool:
        """A token we may still send while the plugin is failing: present and not expired."""
        return self._token is not None and (
            self._expiry is None or self._clock.now() < self._expiry
        )

    def _fallback(self, failure: str) -> str:
        if self._token is not None and self._usable():
            return self._token
        raise ExecPluginError(failure)

    async def _run(self) -> Mapping[str, Any]:
        """Run the plugin once; the parsed ``ExecCredential.status``."""
        what = f"exec credential plugin {self.command!r}"
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv,
                env=self._env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except FileNotFoundError as e:
            hint = f" ({self._install_hint})" if self._install_hint else ""
            raise ExecPluginError(f"{what}: command not found{hint}") from e
        except OSError as e:
            raise ExecPluginError(f"{what}: cannot run: {e}") from e
        try:
            async with asyncio.timeout(self._timeout):
                stdout, stderr = await proc.communicate()
        except TimeoutError as e:
            raise ExecPluginError(f"{what}: no credential within {self._timeout:g}s") from e
        finally:
            if proc.returncode is None:  # timed out or cancelled: never leave it running
                proc.kill()
                await proc.wait()  # reap (were we cancelled again, the child watcher reaps it)
        if proc.returncode != 0:
            err = stderr.decode(errors="replace").strip()[-1000:]
            raise ExecPluginError(f"{what} exited with {proc.returncode}: {err or '(no stderr)'}")
        try:
            cred = json.loads(stdout)
        except ValueError as e:
            raise ExecPluginError(f"{what}: output is not JSON: {e}") from e
        if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
            raise ExecPluginError(f"{what}: output is not an ExecCredential")
        if cred.get("apiVersion") != self._api_version:
            raise ExecPluginError(
                f"{what}: answered in {cred.get('apiVersion')!r}, asked for {self._api_version!r}"
            )
        status = cred.get("status")
        if not isinstance(status, dict):
            raise ExecPluginError(f"{what}: ExecCredential has no status")
        return status

    def _store(self, status: Mapping[str, Any]) -> str:
        what = f"exec credential plugin {self.command!r}"
        token = status.get("token")
        if not isinstance(token, str) or not token:
            if status.get("clientCertificateData"):
                raise ExecPluginError(
                    f"{what} returned a client certificate; only token credentials are supported"
                )
            raise ExecPluginError(f"{what}: ExecCredential.status has no token")
        expiry: datetime | None = None
        raw_expiry = status.get("expirationTimestamp")
        if raw_expiry:
            try:
                expiry = datetime.fromisoformat(str(raw_expiry))
            except ValueError as e:
                raise ExecPluginError(
                    f"{what}: expirationTimestamp {raw_expiry!r} is not RFC 3339"
                ) from e
            if expiry.tzinfo is None:
                raise ExecPluginError(
                    f"{what}: expirationTimestamp {raw_expiry!r} has no time zone"
                )
        self._token, self._expiry = token, expiry
        if expiry is None:
            self._refresh_at = None
        else:
            lifetime = (expiry - self._clock.now()).total_seconds()
            margin = min(self._refresh_before, max(lifetime, 0.0) / 2)
            self._refresh_at = expiry - timedelta(seconds=margin)
        return token


def _normalize(exec_config: Mapping[str, Any], base: Path | None) -> dict[str, Any]:
    """Check a kubeconfig ``exec`` stanza and return it in the shape ExecProvider expects."""
    command = exec_config.get("command")
    if not isinstance(command, str) or not command:
        raise ValueError("exec needs a command")
    api_version = exec_config.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise ValueError(
            f"exec plugin {command!r}: apiVersion {api_version!r} is not one of "
            f"{', '.join(API_VERSIONS)}"
        )
    if "/" in command and base is not None and not Path(command).is_absolute():
        command = str(base / command)  # like kubectl: relative to the kubeconfig file
    args = exec_config.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise ValueError(f"exec plugin {command!r}: args must be a list of strings")
    env: list[dict[str, str]] = []
    for item in exec_config.get("env") or []:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ValueError(f"exec plugin {command!r}: env entries need a name and a value")
        value = item.get("value")
        env.append({"name": item["name"], "value": "" if value is None else str(value)})
    if exec_config.get("interactiveMode") == "Always":
        raise ValueError(
            f"exec plugin {command!r} needs a terminal (interactiveMode: Always), "
            "which karpenter-py never has"
        )
    if exec_config.get("provideClusterInfo"):
        log.warning("exec plugin %r asks for cluster info, which is not provided", command)
    return {
        "command": command,
        "apiVersion": api_version,
        "args": [str(a) for a in args],
        "env": env,
    }
