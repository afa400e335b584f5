"""Something held open for the length of an ``async with`` block (a client session, listeners)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class AsyncResource(ABC):
    """``async with thing:`` runs :meth:`open` on entry and :meth:`close` when the block exits,
    however it exits. :meth:`close` must be safe to call on a resource that never opened (or
    opened half-way), so that a failed :meth:`open` may clean up by calling it."""

    @abstractmethod
    async def open(self) -> object:
        """Acquire what the resource holds; what it returns is the caller's to use or ignore."""

    @abstractmethod
    async def close(self) -> None:
        """Release whatever :meth:`open` acquired."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
