"""Build (or reuse) the helm binary once, after collection and before any test runs, when a test
of this directory is selected: a cold build takes minutes, longer than one test's timeout."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

from tests.helmtool import HelmError, helm_binary

HERE = Path(__file__).resolve().parent


def pytest_collection_finish(session: pytest.Session) -> None:
    if not any(Path(str(item.path)).is_relative_to(HERE) for item in session.items):
        return
    capman = session.config.pluginmanager.getplugin("capturemanager")
    cm = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    with cm:
        try:
            helm_binary(progress=True)
        except HelmError as e:  # the tests then fail on the same (cached) error
            print(f"\n[helm] build FAILED:\n{e}", file=sys.stderr)
