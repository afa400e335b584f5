"""Cluster tests: the `cluster` fixture comes from tests/clusterfixture.py.

If the top-level tests/conftest.py already lists ``pytest_plugins = ["tests.clusterfixture"]``,
this registers nothing (one plugin, one session-wide cluster)."""

from __future__ import annotations

import pytest

from tests import clusterfixture


def pytest_configure(config: pytest.Config) -> None:
    pm = config.pluginmanager
    if not pm.is_registered(clusterfixture) and pm.get_plugin("tests.clusterfixture") is None:
        pm.register(clusterfixture, "tests.clusterfixture")
