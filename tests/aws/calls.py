"""Counting the AWS calls the product makes, as they leave aiobotocore for moto."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def count_loads(
    client: Any, *operations: str, on_load: Callable[[], None] | None = None
) -> dict[str, int]:
    """A dict that counts, per operation of ``client`` (an aiobotocore client), the calls that
    ask for a first page: one per load, since the pages after it carry a ``NextToken``.
    ``on_load`` is called as each counted call leaves."""
    loads = dict.fromkeys(operations, 0)
    service = client.meta.service_model.service_id.hyphenize()

    def counted(params: dict[str, Any], model: Any, **_: Any) -> None:
        if "NextToken" not in params:
            loads[model.name] += 1
            if on_load is not None:
                on_load()

    for operation in operations:
        client.meta.events.register(f"before-parameter-build.{service}.{operation}", counted)
    return loads
