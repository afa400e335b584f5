"""An async Kubernetes REST client: aiohttp transport, orjson decoding, typed errors.

Objects travel as plain dicts (see ``objects``); there are no generated models on the hot path.
Every request first takes a token from a client-side bucket (KUBE_CLIENT_QPS / KUBE_CLIENT_BURST,
passed in by the caller), is bounded by ``asyncio.timeout``, and maps failures to ``errors``.
Nothing is retried here: whether a 409, 429 or 5xx deserves a retry is the caller's decision
(an eviction 429 means "a PDB said no", not "slow down").
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

import aiohttp
import orjson

from karpenter_py.aio.resource import AsyncResource
from karpenter_py.aio.tokenbucket import TokenBucket
from karpenter_py.kube.config import KubeConfig
from karpenter_py.kube.errors import TransportError, error_from_status, transport_errors
from karpenter_py.kube.objects import KubeObject, ListResult, Page, metadata, name_of, namespace_of
from karpenter_py.kube.resources import EVENTS, PODS, Resource
from karpenter_py.kube.watchstream import WatchStream

log = logging.getLogger(__name__)

# Observer for metrics: (verb, resource, HTTP status or 0 for transport errors, seconds).
RequestObserver = Callable[[str, str, int, float], None]


class PatchType(StrEnum):
    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"  # server-side apply; JSON is valid YAML


def _params(**kw: object) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in kw.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


class KubeClient(AsyncResource):
    """Use as ``async with KubeClient(cfg, qps=..., burst=...) as client:``."""

    def __init__(
        self,
        config: KubeConfig,
        *,
        qps: float = 200.0,
        burst: int = 300,
        timeout: float = 30.0,
        user_agent: str = "karpenter-py",
        max_connections: int = 256,
        token_refresh: float = 60.0,
        observer: RequestObserver | None = None,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self._limiter = TokenBucket(qps=qps, burst=burst)
        self._user_agent = user_agent
        self._max_connections = max_connections
        self._token_refresh = token_refresh
        self._observer = observer
        self._session: aiohttp.ClientSession | None = None
        self._token: str | None = config.token
        self._token_read_at = float("-inf")
        self._request_kw: dict[str, Any] = {}
        if config.tls_server_name:
            self._request_kw["server_hostname"] = config.tls_server_name

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self._session is not None:
            return
        # Loading CA and client certificates is file I/O: keep it off the loop.
        ssl_ctx = await asyncio.to_thread(self.config.ssl_context)
        connector = aiohttp.TCPConnector(
            ssl=ssl_ctx if ssl_ctx is not None else False, limit=self._max_connections
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            # Timeouts are ours (asyncio.timeout per call); watches must not hit aiohttp's 5 min.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout),
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
            auto_decompress=True,
        )

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("KubeClient is not open (use `async with KubeClient(...)`)")
        return self._session

    # ------------------------------------------------------------------ plumbing

    async def _auth_headers(self) -> dict[str, str]:
        cfg = self.config
        if cfg.token_source is not None:
            # Cached by the source; an exec plugin runs (off-loop) only near expiry or after a 401.
            return {"Authorization": f"Bearer {await cfg.token_source()}"}
        if cfg.token_file and time.monotonic() - self._token_read_at >= self._token_refresh:
            # Projected service-account tokens rotate; client-go re-reads the file every minute.
            try:
                text = await asyncio.to_thread(_read_text, cfg.token_file)
            except OSError as e:
                if self._token is None:
                    raise TransportError(f"cannot read token file {cfg.token_file}: {e}") from e
                log.warning("keeping the previous token: cannot read %s: %s", cfg.token_file, e)
            else:
                self._token = text.strip()
            self._token_read_at = time.monotonic()
        if self._token:
            return {"Authorization": f"Bearer {self._token}"}
        if cfg.username is not None:
            basic = base64.b64encode(f"{cfg.username}:{cfg.password or ''}".encode()).decode()
            return {"Authorization": f"Basic {basic}"}
        return {}

    def _rejected(self, headers: Mapping[str, str]) -> None:
        """A 401: tell the token source which token failed, so the next request gets a new one."""
        source = self.config.token_source
        auth = headers.get("Authorization", "")
        if source is not None and auth.startswith("Bearer "):
            source.invalidate(auth.removeprefix("Bearer "))

    def _transport_errors(self, what: str) -> contextlib.AbstractContextManager[None]:
        return transport_errors(what, f"no answer within {self.timeout}s")

    def _observe(self, verb: str, resource: Resource, status: int, started: float) -> None:
        if self._observer is not None:
            self._observer(verb, resource.qualified, status, time.monotonic() - started)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: Resource,
        name: str | None = None,
        namespace: str | None = None,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
    ) -> Any:
        await self._limiter.acquire()
        headers = await self._auth_headers()
        data: bytes | None = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        started = time.monotonic()
        status = 0
        try:
            with self._transport_errors(f"{verb} {resource.qualified}"):
                async with (
                    asyncio.timeout(self.timeout),
                    self.session.request(
                        method,
                        self.config.server + path,
                        params=params,
                        data=data,
                        headers=headers,
                        **self._request_kw,
                    ) as resp,
                ):
                    status = resp.status
                    retry_after = resp.headers.get("Retry-After")
                    raw = await resp.read()
        finally:
            self._observe(verb, resource, status, started)
        if status >= 400:
            if status == 401:
                self._rejected(headers)
            raise error_from_status(
                status,
                raw,
                verb=verb,
                resource=resource.qualified,
                name=name,
                namespace=namespace,
                retry_after=retry_after,
            )
        return orjson.loads(raw) if raw else None

    @staticmethod
    def _namespace(
        resource: Resource, namespace: str | None, body: KubeObject | None = None
    ) -> str | None:
        if not resource.namespaced:
            return None
        ns = namespace or (namespace_of(body) if body is not None else None)
        if not ns:
            raise ValueError(f"{resource.qualified} is namespaced: pass a namespace")
        return ns

    # ------------------------------------------------------------------ reads

    async def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> KubeObject:
        ns = self._namespace(resource, namespace)
        path = resource.path(namespace=ns, name=name, subresource=subresource)
        obj: KubeObject = await self._request(
            "GET", path, verb="get", resource=resource, name=name, namespace=ns
        )
        return obj

    async def list_page(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> Page:
        """One page of a list. ``namespace=None`` lists a namespaced resource across namespaces."""
        params = _params(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            limit=limit,
            # A continue token pins the snapshot; resourceVersion must not be sent with it.
            resourceVersion=None if continue_token else resource_version,
            resourceVersionMatch=None if continue_token else resource_version_match,
            **{"continue": continue_token},
        )
        path = resource.path(namespace=namespace)
        body = await self._request(
            "GET", path, verb="list", resource=resource, namespace=namespace, params=params
        )
        meta = metadata(body)
        items: list[KubeObject] = body.get("items") or []
        for item in items:
            # List items omit apiVersion/kind; watch events carry them. Make both look alike.
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
        remaining = meta.get("remainingItemCount")
        return Page(
            items=items,
            resource_version=str(meta.get("resourceVersion") or ""),
            continue_token=meta.get("continue") or None,
            remaining=int(remaining) if isinstance(remaining, int) else None,
        )

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = 500,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> ListResult:
        """Every item, following ``continue`` tokens; all pages share one snapshot (one RV).

        An expired continue token raises :class:`GoneError`; the caller restarts the list.
        """
        items: list[KubeObject] = []
        rv = ""
        async for page in self.pages(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
        ):
            items.extend(page.items)
            rv = page.resource_version
        return ListResult(items=items, resource_version=rv)

    async def pages(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = 500,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> AsyncIterator[Page]:
        """The pages of one list as they arrive (a caller that consumes each page before the
        next never holds the whole list); the last page has no ``continue_token``."""
        token: str | None = None
        while True:
            page = await self.list_page(
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_token=token,
                resource_version=resource_version,
                resource_version_match=resource_version_match,
            )
            yield page
            if page.continue_token is None:
                return
            token = page.continue_token

    @contextlib.asynccontextmanager
    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        label_selector: str | None = None,
        field_selector: str | None = None,
        deadline_grace: float = 30.0,
    ) -> AsyncIterator[WatchStream]:
        """Open a watch: ``async with client.watch(...) as stream: async for event in stream``.

        The connection is closed when the block exits, however it exits. A non-200 answer raises
        its typed error here (410 -> :class:`GoneError`). The stream itself gives up
        ``deadline_grace`` seconds after ``timeout_seconds`` if the server has not closed it.
        """
        params = _params(
            watch=True,
            resourceVersion=resource_version,
            allowWatchBookmarks=allow_bookmarks,
            timeoutSeconds=timeout_seconds,
            labelSelector=label_selector,
            fieldSelector=field_selector,
        )
        await self._limiter.acquire()
        headers = await self._auth_headers()
        url = self.config.server + resource.path(namespace=namespace)
        started = time.monotonic()
        resp: aiohttp.ClientResponse | None = None
        try:
            with self._transport_errors(f"watch {resource.qualified}"):
                async with asyncio.timeout(self.timeout):
                    resp = await self.session.get(
                        url, params=params, headers=headers, **self._request_kw
                    )
                    self._observe("watch", resource, resp.status, started)
                    if resp.status != 200:
                        if resp.status == 401:
                            self._rejected(headers)
                        raw = await resp.read()
                        raise error_from_status(
                            resp.status,
                            raw,
                            verb="watch",
                            resource=resource.qualified,
                            namespace=namespace,
                            retry_after=resp.headers.get("Retry-After"),
                        )
            deadline = None
            if timeout_seconds is not None:
                deadline = asyncio.get_running_loop().time() + timeout_seconds + deadline_grace
            yield WatchStream(resp, resource=resource.qualified, deadline=deadline)
        finally:
            if resp is not None:
                resp.close()  # sync: a watch connection is never reused, so just drop it

    # ------------------------------------------------------------------ writes

    async def create(
        self,
        resource: Resource,
        body: KubeObject,
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        ns = self._namespace(resource, namespace, body)
        params = _params(fieldManager=field_manager, dryRun="All" if dry_run else None)
        obj: KubeObject = await self._request(
            "POST",
            resource.path(namespace=ns),
            verb="create",
            resource=resource,
            name=name_of(body) or None,
            namespace=ns,
            params=params,
            body=body,
        )
        return obj

    async def update(
        self,
        resource: Resource,
        body: KubeObject,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject:
        """PUT the whole object. With ``metadata.resourceVersion`` set this is an optimistic-lock
        write: a concurrent change makes it fail with :class:`ConflictError`."""
        ns = self._namespace(resource, namespace, body)
        name = name_of(body)
        if not name:
            raise ValueError("update needs metadata.name")
        obj: KubeObject = await self._request(
            "PUT",
            resource.path(namespace=ns, name=name, subresource=subresource),
            verb="update" if subresource is None else f"update/{subresource}",
            resource=resource,
            name=name,
            namespace=ns,
            params=_params(fieldManager=field_manager),
            body=body,
        )
        return obj

    replace = update

    async def update_status(
        self, resource: Resource, body: KubeObject, *, namespace: str | None = None
    ) -> KubeObject:
        return await self.update(resource, body, namespace=namespace, subresource="status")

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: KubeObject | Sequence[KubeObject],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> KubeObject:
        """Merge patch by default; ``PatchType.JSON`` takes a list of operations (a ``test`` op on
        ``/metadata/resourceVersion`` makes it conditional); ``PatchType.APPLY`` is server-side
        apply and needs ``field_manager``."""
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        if patch_type is PatchType.JSON and not isinstance(patch, Sequence):
            raise ValueError("a JSON patch is a list of operations")
        ns = self._namespace(resource, namespace)
        obj: KubeObject = await self._request(
            "PATCH",
            resource.path(namespace=ns, name=name, subresource=subresource),
            verb="patch" if subresource is None else f"patch/{subresource}",
            resource=resource,
            name=name,
            namespace=ns,
            params=_params(fieldManager=field_manager, force=force),
            body=patch,
            content_type=patch_type.value,
        )
        return obj

    async def apply(
        self,
        resource: Resource,
        body: KubeObject,
        *,
        field_manager: str,
        namespace: str | None = None,
        subresource: str | None = None,
        force: bool = True,
    ) -> KubeObject:
        """Server-side apply of a (partial) object: idempotent create-or-update."""
        name = name_of(body)
        if not name:
            raise ValueError("apply needs metadata.name")
        ns = self._namespace(resource, namespace, body)
        return await self.patch(
            resource,
            name,
            body,
            namespace=ns,
            patch_type=PatchType.APPLY,
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> KubeObject:
        """Delete; ``uid``/``resource_version`` are preconditions (409 if they no longer match).
        Returns the object (still present while finalizers run) or a ``Status``."""
        ns = self._namespace(resource, namespace)
        options = _delete_options(uid, resource_version, grace_period_seconds, propagation_policy)
        obj: KubeObject = await self._request(
            "DELETE",
            resource.path(namespace=ns, name=name),
            verb="delete",
            resource=resource,
            name=name,
            namespace=ns,
            body=options,
        )
        return obj

    async def evict(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        """policy/v1 Eviction. A PodDisruptionBudget refusal is :class:`TooManyRequestsError`."""
        eviction: KubeObject = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": _delete_options(uid, None, grace_period_seconds, None),
        }
        if dry_run:
            eviction["deleteOptions"]["dryRun"] = ["All"]
        await self._request(
            "POST",
            PODS.path(namespace=namespace, name=name, subresource="eviction"),
            verb="evict",
            resource=PODS,
            name=name,
            namespace=namespace,
            body=eviction,
        )

    async def create_event(self, event: KubeObject, *, namespace: str | None = None) -> KubeObject:
        """Create a core/v1 Event (build one with :func:`karpenter_py.kube.objects.new_event`)."""
        return await self.create(
            EVENTS, event, namespace=namespace or namespace_of(event) or "default"
        )

    async def version(self) -> KubeObject:
        """``GET /version``: a cheap liveness probe of the apiserver."""
        obj: KubeObject = await self._request("GET", "/version", verb="get", resource=_VERSION)
        return obj


_VERSION = Resource("", "", "version", False, "Info")


def _delete_options(
    uid: str | None, resource_version: str | None, grace: int | None, propagation: str | None
) -> KubeObject:
    options: KubeObject = {"apiVersion": "v1", "kind": "DeleteOptions"}
    preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
    if preconditions:
        options["preconditions"] = preconditions
    if grace is not None:
        options["gracePeriodSeconds"] = grace
    if propagation is not None:
        options["propagationPolicy"] = propagation
    return options


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
