"""A small reader of the Prometheus text exposition, so tests assert on what a scrape sees."""

from __future__ import annotations

import re

from karpenter_py.obs.metrics import Metrics

Sample = tuple[str, frozenset[tuple[str, str]]]

_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


def scrape(metrics: Metrics) -> dict[Sample, float]:
    """Every sample of ``metrics.render()``: (name, labels) -> value."""
    body, _ = metrics.render()
    out: dict[Sample, float] = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        assert match is not None, line
        labels = frozenset((m["key"], m["value"]) for m in _LABEL.finditer(match["labels"] or ""))
        out[(match["name"], labels)] = float(match["value"])
    return out


def series(samples: dict[Sample, float], name: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of one exposed name, by label set."""
    return {labels: v for (n, labels), v in samples.items() if n == name}


def value(samples: dict[Sample, float], metric: str, /, **labels: str) -> float | None:
    """One sample's value (labels exactly as given), or None when it was not exported."""
    return samples.get((metric, frozenset(labels.items())))
