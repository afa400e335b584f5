"""The orchestration queue: a disruption command is carried out replacement-before-delete.

For each accepted :class:`~karpenter_py.controllers.disruption.types.Command`, in one task owned
by the queue's TaskGroup:

1. every candidate's Node gets the ``karpenter.sh/disrupted:NoSchedule`` taint and its NodeClaim
   the status condition ``DisruptionReason`` (True, reason = the command's reason). When that
   fails and the command needs replacements, what was written is undone and the command ends;
   a delete-only command goes on (termination cordons the node anyway);
2. the replacement NodeClaims are created through the shared round
   (``RoundRunner.create``); any failure undoes step 1 and ends the command. A replacement that
   was created stays as ordinary capacity (the next decision counts it, emptiness removes it if
   nothing uses it), so nothing is ever launched twice;
3. only then are the candidates marked for deletion in cluster state (marking earlier would make
   the provisioner launch for their pods as well) and the replacements nominated;
4. every second, until every replacement NodeClaim is ``Initialized``, the candidates get
   ``DisruptionLaunching`` / ``DisruptionWaitingReadiness`` events. A replacement that is deleted
   meanwhile cannot come back: the command is undone;
5. the candidate NodeClaims are deleted (UID precondition; event ``DisruptionTerminating``,
   ``karpenter_nodeclaims_disrupted_total``); node termination drains them as for any delete.

Steps 1 and 5 and the undo write to up to ``WRITE_PARALLELISM`` candidates at once (upstream
writes one after another; a 100-node command spent 2 minutes on that on a busy apiserver).

A command older than clamp(80 ms x queued commands, 10 min, 1 h) while waiting in step 4 is
undone: taints and conditions removed, the deletion marks dropped, and
``karpenter_voluntary_disruption_queue_failures_total`` counts it (as every failed command).

Cancellation (leader loss, shutdown) writes nothing to the API: a replica that lost the Lease must
not act. It drops the in-memory deletion marks; the taints and conditions left behind are exactly
what the next leader's first disruption pass removes (``cleanup_strays`` for nodes neither queued
nor marked for deletion nor being deleted). Candidates already deleted in step 5 terminate as
usual; a replacement already created stays as ordinary capacity.

The API helpers (:func:`set_disrupted_taint`, :func:`set_disruption_reason`) are also what the
controller's hygiene pass uses.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, Final, Protocol

from pydantic import ValidationError

from karpenter_py.aio.clock import Clock
from karpenter_py.aio.tasks import bounded, gather_limited
from karpenter_py.controllers.disruption import events
from karpenter_py.controllers.disruption.types import Candidate, Command
from karpenter_py.controllers.runtime import Deps
from karpenter_py.kube.client import KubeClient, PatchType
from karpenter_py.kube.errors import ConflictError, KubeError, NotFoundError
from karpenter_py.kube.objects import KubeObject, metadata
from karpenter_py.kube.resources import NODECLAIMS, NODES
from karpenter_py.model.api.meta import CONDITION_TRUE
from karpenter_py.model.api.nodeclaim import (
    CONDITION_DISRUPTION_REASON,
    CONDITION_INITIALIZED,
    CONDITION_LAUNCHED,
    NodeClaim,
)
from karpenter_py.model.api.nodepool import NodePool
from karpenter_py.model.core import EFFECT_NO_SCHEDULE, is_disrupted_taint
from karpenter_py.model.labels import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, TAINT_DISRUPTED_KEY
from karpenter_py.scheduling.plan import NewNodeClaim

log = logging.getLogger("karpenter.disruption.queue")

POLL_INTERVAL: Final = 1.0
TIMEOUT_PER_COMMAND: Final = 0.080
MIN_TIMEOUT: Final = 600.0
MAX_TIMEOUT: Final = 3600.0
API_TIMEOUT: Final = 30.0  # bound on any one API call (and on each rollback step)
WRITE_ATTEMPTS: Final = 5  # optimistic-lock retries of one taint or condition write
DELETE_ATTEMPTS: Final = 3
WRITE_PARALLELISM: Final = 20  # candidates written to at once by one command


def command_timeout(queued: int) -> float:
    """Upstream's rule: 80 ms per command in the queue, at least 10 min, at most 1 h."""
    return min(MAX_TIMEOUT, max(MIN_TIMEOUT, TIMEOUT_PER_COMMAND * queued))


class Outcome(StrEnum):
    PENDING = "Pending"
    SUCCEEDED = "Succeeded"  # every candidate NodeClaim deleted
    TAINT_FAILED = "TaintFailed"
    CREATE_FAILED = "ReplacementCreateFailed"
    REPLACEMENT_DELETED = "ReplacementDeleted"
    TIMED_OUT = "TimedOut"
    DELETE_FAILED = "DeleteFailed"  # some candidates could not be deleted (they were restored)
    ERROR = "Error"
    CANCELLED = "Cancelled"


class Rounds(Protocol):
    """What the queue needs of ``launcher.round.RoundRunner``."""

    nomination_seconds: float

    async def create(
        self,
        claims: Sequence[NewNodeClaim],
        nodepools: Mapping[str, NodePool],
        *,
        reason: str = ...,
    ) -> tuple[dict[NewNodeClaim, str], list[BaseException]]: ...


@dataclass(eq=False)
class Entry:
    """One command in the queue, and how far it got (kept in ``history`` once finished)."""

    id: int
    command: Command
    started: float  # clock.monotonic() when the command was accepted
    timeout: float
    replacements: list[str] = field(default_factory=list)  # NodeClaim names created
    tainted: list[str] = field(default_factory=list)  # Node names we tainted
    conditioned: list[str] = field(default_factory=list)  # NodeClaims given DisruptionReason
    deleted: list[str] = field(default_factory=list)  # candidate NodeClaims deleted
    marked: bool = False
    outcome: Outcome = Outcome.PENDING
    detail: str = ""
    # Set once steps 1-3 are over (candidates marked for deletion) or the command ended: the
    # controller's next pass waits for it, so budgets already count these candidates.
    started_event: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    async def wait_started(self) -> None:
        await self.started_event.wait()

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.command.candidates)

    @property
    def nodeclaim_names(self) -> tuple[str, ...]:
        return tuple(c.nodeclaim_name for c in self.command.candidates if c.nodeclaim_name)

    def summary(self) -> dict[str, Any]:
        cmd = self.command
        return {
            "id": self.id,
            "method": cmd.method.name,
            "reason": cmd.reason.value,
            "decision": cmd.decision,
            "candidates": list(self.node_names),
            "replacements": list(self.replacements),
            "deleted": list(self.deleted),
            "outcome": self.outcome.value,
            "detail": self.detail,
            "explanation": cmd.explanation,
        }


class _Abort(Exception):
    """A step failed: undo the command with this outcome."""

    def __init__(self, outcome: Outcome, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


# ----------------------------------------------------------------------------- API helpers


def _taints_of(node: KubeObject) -> list[dict[str, Any]]:
    spec = node.get("spec")
    taints = spec.get("taints") if isinstance(spec, dict) else None
    return [t for t in taints or [] if isinstance(t, dict)]


async def set_disrupted_taint(client: KubeClient, node_name: str, *, present: bool) -> bool:
    """Add (or remove) ``karpenter.sh/disrupted:NoSchedule`` on a Node, other taints untouched.

    A merge patch of ``spec.taints`` carrying the resourceVersion it was computed from (a
    concurrent taint change makes it conflict and it is recomputed). Returns True when the Node
    ends up as asked; removing from a Node that is gone counts as done, adding to one does not.
    API errors are logged and answered with False (never raised).
    """
    try:
        return await _set_disrupted_taint(client, node_name, present=present)
    except (KubeError, TimeoutError) as err:
        log.warning("taint write failed", extra={"node": node_name, "error": str(err)})
        return False


async def _set_disrupted_taint(client: KubeClient, node_name: str, *, present: bool) -> bool:
    for _ in range(WRITE_ATTEMPTS):
        try:
            async with asyncio.timeout(API_TIMEOUT):
                raw = await client.get(NODES, node_name)
        except NotFoundError:
            return not present
        taints = _taints_of(raw)
        if any(is_disrupted_taint(t) for t in taints) == present:
            return True
        if present:
            new = [*taints, {"key": TAINT_DISRUPTED_KEY, "effect": EFFECT_NO_SCHEDULE}]
        else:
            new = [t for t in taints if not is_disrupted_taint(t)]
        patch = {
            "metadata": {"resourceVersion": metadata(raw).get("resourceVersion")},
            "spec": {"taints": new},
        }
        try:
            async with asyncio.timeout(API_TIMEOUT):
                await client.patch(NODES, node_name, patch, patch_type=PatchType.MERGE)
        except ConflictError:
            continue
        except NotFoundError:
            return not present
        return True
    return False


async def set_disruption_reason(
    client: KubeClient,
    clock: Clock,
    nodeclaim_name: str,
    reason: str | None,
    *,
    message: str = "",
) -> bool:
    """Set ``DisruptionReason`` True with ``reason`` on a NodeClaim, or remove it (None).

    Read from the API (the cache may lag behind our own writes) and written through the status
    subresource with the resourceVersion it was computed from. Returns True when the NodeClaim
    ends up as asked; clearing on a NodeClaim that is gone counts as done. API errors are logged
    and answered with False (never raised).
    """
    try:
        return await _set_disruption_reason(client, clock, nodeclaim_name, reason, message)
    except (KubeError, TimeoutError) as err:
        log.warning(
            "condition write failed", extra={"nodeclaim": nodeclaim_name, "error": str(err)}
        )
        return False


async def _set_disruption_reason(
    client: KubeClient, clock: Clock, nodeclaim_name: str, reason: str | None, message: str
) -> bool:
    for _ in range(WRITE_ATTEMPTS):
        try:
            async with asyncio.timeout(API_TIMEOUT):
                raw = await client.get(NODECLAIMS, nodeclaim_name)
        except NotFoundError:
            return reason is None
        try:
            nc = NodeClaim.model_validate(raw)
        except ValidationError as err:
            log.warning(
                "unparsable nodeclaim", extra={"nodeclaim": nodeclaim_name, "error": str(err)}
            )
            return False
        if reason is None:
            changed = nc.status.clear_condition(CONDITION_DISRUPTION_REASON)
        else:
            changed = nc.status.set_condition(
                CONDITION_DISRUPTION_REASON,
                CONDITION_TRUE,
                now=clock.now(),
                reason=reason,
                message=message,
            )
        if not changed:
            return True
        status = nc.status.model_dump(mode="json", by_alias=True)
        patch = {
            "metadata": {"resourceVersion": nc.metadata.resource_version},
            "status": {"conditions": status.get("conditions", [])},
        }
        try:
            async with asyncio.timeout(API_TIMEOUT):
                await client.patch(
                    NODECLAIMS,
                    nodeclaim_name,
                    patch,
                    patch_type=PatchType.MERGE,
                    subresource="status",
                )
        except ConflictError:
            continue
        except NotFoundError:
            return reason is None
        return True
    return False


# ----------------------------------------------------------------------------- the queue


class OrchestrationQueue:
    name = "disruption.queue"

    def __init__(self, deps: Deps, rounds: Rounds, *, poll_interval: float = POLL_INTERVAL) -> None:
        self.deps = deps
        self.rounds = rounds
        self.poll_interval = poll_interval
        self._entries: dict[int, Entry] = {}
        self._ids = itertools.count(1)
        self._tg: asyncio.TaskGroup | None = None
        self._running = asyncio.Event()
        self.history: deque[Entry] = deque(maxlen=100)

    # ------------------------------------------------------------------ what is queued
    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def queued_nodes(self) -> frozenset[str]:
        """Node names of every candidate of a command still in the queue."""
        return frozenset(n for e in self._entries.values() for n in e.node_names)

    def queued_nodeclaims(self) -> frozenset[str]:
        return frozenset(n for e in self._entries.values() for n in e.nodeclaim_names)

    # ------------------------------------------------------------------ running
    async def run(self) -> None:
        """Own the command tasks until cancelled (the disruption controller's TaskGroup runs it)."""
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                self._running.set()
                await asyncio.Event().wait()
        finally:
            self._tg = None
            self._running.clear()

    async def wait_running(self) -> None:
        await self._running.wait()

    def add(self, command: Command) -> Entry:
        """Accept a command; its candidates count as queued from this moment on. Await
        ``Entry.wait_started()`` before deciding again: until the candidates are marked for
        deletion (step 3) the budgets do not count them yet."""
        if self._tg is None:
            raise RuntimeError("the orchestration queue is not running")
        entry = Entry(
            id=next(self._ids),
            command=command,
            started=self.deps.clock.monotonic(),
            timeout=command_timeout(len(self._entries) + 1),
        )
        self._entries[entry.id] = entry
        if self.deps.metrics is not None:
            self.deps.metrics.voluntary_disruption_decisions.labels(**_labels(command)).inc()
        self._tg.create_task(self._run_entry(entry), name=f"disruption-command-{entry.id}")
        return entry

    async def _run_entry(self, entry: Entry) -> None:
        try:
            await self.execute(entry)
        except asyncio.CancelledError:
            # No API writes after losing the Lease: drop what only this process knows; the next
            # leader's hygiene pass removes the taints and conditions.
            if entry.marked:
                kept = [n for n in entry.nodeclaim_names if n not in entry.deleted]
                self.deps.cluster.unmark_for_deletion(*kept)
                entry.marked = False
            entry.outcome = Outcome.CANCELLED
            raise
        except Exception as err:  # one broken command must not take the queue down
            log.exception("disruption command failed", extra={"command": entry.id})
            await self._rollback(entry, Outcome.ERROR, f"{type(err).__name__}: {err}")
        finally:
            self._entries.pop(entry.id, None)
            self.history.append(entry)
            entry.started_event.set()

    # ------------------------------------------------------------------ the steps
    async def execute(self, entry: Entry) -> Outcome:
        """Carry the command out (the five steps); the entry records how far it got."""
        cmd = entry.command
        log.info("starting disruption command", extra=entry.summary())
        try:
            await self._taint(entry)
            await self._launch(entry)
            self._mark(entry)
            entry.started_event.set()
            await self._wait_initialized(entry)
        except _Abort as abort:
            await self._rollback(entry, abort.outcome, abort.detail)
            return entry.outcome
        failed = await self._delete(entry)
        if failed:
            restore = [c for c in cmd.candidates if c.nodeclaim_name in failed]
            await self._rollback(
                entry,
                Outcome.DELETE_FAILED,
                f"could not delete {', '.join(sorted(failed))}",
                candidates=restore,
            )
            return entry.outcome
        entry.outcome = Outcome.SUCCEEDED
        log.info("disruption command done", extra=entry.summary())
        return entry.outcome

    async def _taint(self, entry: Entry) -> None:
        cmd = entry.command
        reason = cmd.reason.value

        async def one(c: Candidate) -> list[str]:
            problems: list[str] = []
            if await set_disrupted_taint(self.deps.client, c.name, present=True):
                entry.tainted.append(c.name)
            else:
                problems.append(f"taint node {c.name}")
            if c.nodeclaim_name and await set_disruption_reason(
                self.deps.client, self.deps.clock, c.nodeclaim_name, reason, message=cmd.explanation
            ):
                entry.conditioned.append(c.nodeclaim_name)
            elif c.nodeclaim_name:
                problems.append(f"set {CONDITION_DISRUPTION_REASON} on {c.nodeclaim_name}")
            return problems

        # Candidates are written side by side: one after another, a 100-node command's 200
        # writes held its deletes back by 20 s on a busy apiserver.
        found = await gather_limited(cmd.candidates, one, limit=WRITE_PARALLELISM)
        problems = [p for ps in found for p in ps]
        if problems and cmd.replacements:
            raise _Abort(Outcome.TAINT_FAILED, "could not " + "; ".join(problems))
        if problems:
            log.warning(
                "tainting failed; deleting anyway (no replacements needed)",
                extra={"command": entry.id, "problems": problems},
            )

    async def _launch(self, entry: Entry) -> None:
        cmd = entry.command
        if not cmd.replacements:
            return
        created, failures = await self.rounds.create(
            cmd.replacements, self.deps.cluster.nodepools, reason=cmd.method.reason_label
        )
        entry.replacements = [created[r] for r in cmd.replacements if r in created]
        if failures or len(created) < len(cmd.replacements):
            why = "; ".join(str(f) for f in failures) or "nodepool not found"
            raise _Abort(
                Outcome.CREATE_FAILED,
                f"created {len(created)} of {len(cmd.replacements)} replacements: {why}",
            )
        log.info(
            "replacements created",
            extra={"command": entry.id, "replacements": entry.replacements},
        )

    def _mark(self, entry: Entry) -> None:
        self.deps.cluster.mark_for_deletion(*entry.nodeclaim_names)
        entry.marked = True
        until = self.deps.clock.now() + timedelta(seconds=self.rounds.nomination_seconds)
        for name in entry.replacements:
            self.deps.cluster.nominate(name, until)

    async def _wait_initialized(self, entry: Entry) -> None:
        if not entry.replacements:
            return
        cmd = entry.command
        names = ", ".join(f"nodeclaim/{n}" for n in entry.replacements)
        while True:
            waiting: list[NodeClaim] = []
            for name in entry.replacements:
                nc = self.deps.cluster.nodeclaims.get(name)
                if nc is None or nc.metadata.deletion_timestamp is not None:
                    raise _Abort(
                        Outcome.REPLACEMENT_DELETED,
                        f"replacement nodeclaim {name} was deleted before it initialized",
                    )
                if not nc.status.is_true(CONDITION_INITIALIZED):
                    waiting.append(nc)
            if not waiting:
                return
            if self.deps.clock.monotonic() - entry.started >= entry.timeout:
                raise _Abort(
                    Outcome.TIMED_OUT,
                    f"replacements not initialized within {entry.timeout:g}s",
                )
            launched = all(nc.status.is_true(CONDITION_LAUNCHED) for nc in waiting)
            for c in cmd.candidates:
                if launched:
                    events.waiting_readiness(self.deps.recorder, c, names)
                else:
                    events.launching(self.deps.recorder, c, names, cmd.reason.value)
            await self.deps.clock.sleep(self.poll_interval)

    async def _delete(self, entry: Entry) -> set[str]:
        """Delete every candidate NodeClaim, up to WRITE_PARALLELISM at once (one by one, a
        100-node command took 110 s to hand its nodes to termination on a busy apiserver);
        the names that could not be deleted."""
        cmd = entry.command
        present = [c for c in cmd.candidates if c.node.nodeclaim is not None]

        async def one(c: Candidate) -> bool:
            nc = c.node.nodeclaim
            assert nc is not None
            ok = await self._delete_one(nc)
            if ok:  # recorded at once: a cancellation must not unmark a deleted candidate
                entry.deleted.append(nc.name)
            return ok

        done = await gather_limited(present, one, limit=WRITE_PARALLELISM)
        order = {c.node.nodeclaim.name: i for i, c in enumerate(present) if c.node.nodeclaim}
        entry.deleted.sort(key=lambda name: order.get(name, len(order)))
        failed: set[str] = set()
        for c, ok in zip(present, done, strict=True):
            nc = c.node.nodeclaim
            assert nc is not None
            if ok:
                events.terminating(self.deps.recorder, c, cmd.reason.value)
                self._count_disrupted(cmd, c, nc)
            else:
                failed.add(nc.name)
        return failed

    async def _delete_one(self, nc: NodeClaim) -> bool:
        for attempt in range(DELETE_ATTEMPTS):
            try:
                async with asyncio.timeout(API_TIMEOUT):
                    await self.deps.client.delete(NODECLAIMS, nc.name, uid=nc.metadata.uid or None)
            except (NotFoundError, ConflictError):
                return True  # gone, or a same-named successor we must not touch
            except (KubeError, TimeoutError) as err:
                log.warning(
                    "deleting candidate nodeclaim failed",
                    extra={"nodeclaim": nc.name, "attempt": attempt + 1, "error": str(err)},
                )
                await self.deps.clock.sleep(self.poll_interval)
                continue
            return True
        return False

    def _count_disrupted(self, cmd: Command, c: Candidate, nc: NodeClaim) -> None:
        if self.deps.metrics is None:
            return
        labels = nc.metadata.labels or {}
        self.deps.metrics.nodeclaims_disrupted.labels(
            reason=cmd.method.reason_label,
            nodepool=labels.get(LABEL_NODEPOOL, c.pool_name),
            capacity_type=labels.get(LABEL_CAPACITY_TYPE, c.capacity_type),
        ).inc()

    # ------------------------------------------------------------------ undo
    async def _rollback(
        self,
        entry: Entry,
        outcome: Outcome,
        detail: str,
        *,
        candidates: Sequence[Candidate] | None = None,
    ) -> None:
        """Untaint, clear the condition, drop the deletion marks (of ``candidates``, default
        all not yet deleted). Each API step is bounded so a hung call cannot pin the command."""
        entry.outcome = outcome
        entry.detail = detail
        log.warning("disruption command failed", extra=entry.summary())
        if self.deps.metrics is not None:
            self.deps.metrics.voluntary_disruption_queue_failures.labels(
                **_labels(entry.command)
            ).inc()
        chosen = (
            list(candidates)
            if candidates is not None
            else [c for c in entry.command.candidates if c.nodeclaim_name not in entry.deleted]
        )
        if entry.marked:
            self.deps.cluster.unmark_for_deletion(*(c.nodeclaim_name for c in chosen))
        await gather_limited(chosen, lambda c: self._undo(entry, c), limit=WRITE_PARALLELISM)

    async def _undo(self, entry: Entry, c: Candidate) -> None:
        if c.name in entry.tainted:
            await bounded(
                set_disrupted_taint(self.deps.client, c.name, present=False),
                within=API_TIMEOUT,
                what=f"untainting {c.name}",
            )
        if c.nodeclaim_name in entry.conditioned:
            await bounded(
                set_disruption_reason(self.deps.client, self.deps.clock, c.nodeclaim_name, None),
                within=API_TIMEOUT,
                what=f"clearing {CONDITION_DISRUPTION_REASON} on {c.nodeclaim_name}",
            )


def _labels(cmd: Command) -> dict[str, str]:
    return {
        "decision": cmd.decision,
        "reason": cmd.method.reason_label,
        "consolidation_type": cmd.method.consolidation_type,
    }
