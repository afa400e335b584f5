"""The ``karpenter-py`` entry point: subcommand wiring for crds and controller, ``python -m``."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

import karpenter_py.manager
from karpenter_py.cli.main import main


def test_crds_calls_run_crds_with_the_output_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[Path] = []

    def run_crds(out_dir: Path) -> int:
        calls.append(out_dir)
        return 0

    fake = types.ModuleType("karpenter_py.cli.crds")
    fake.run_crds = run_crds  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "karpenter_py.cli.crds", fake)
    assert main(["crds", "--out", str(tmp_path / "crds")]) == 0
    assert main(["crds"]) == 0
    assert calls == [tmp_path / "crds", Path("manifests/crds")]


def test_crds_writes_the_generated_definitions(tmp_path: Path) -> None:
    out = tmp_path / "crds"
    assert main(["crds", "--out", str(out)]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written
    assert all(name.endswith(".yaml") for name in written)


def test_controller_without_a_manager_run_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(karpenter_py.manager, "run", raising=False)
    assert main(["controller"]) == 2
    assert "controller is not available" in capsys.readouterr().err


def test_controller_runs_the_manager_with_its_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_run(argv: list[str]) -> int:
        seen.append(argv)
        return 7

    monkeypatch.setattr(karpenter_py.manager, "run", fake_run, raising=False)
    assert main(["controller", "--batch-idle-duration", "2s"]) == 7
    assert seen == [["--batch-idle-duration", "2s"]]


def test_entry_point_passes_controller_flags_to_settings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from karpenter_py.__main__ import main as entry

    assert entry(["controller", "--batch-idle-duration=abc"]) == 2
    assert 'batch-idle-duration="abc": not a duration' in capsys.readouterr().err


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "karpenter_py", "plan", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "--instance-types" in result.stdout
