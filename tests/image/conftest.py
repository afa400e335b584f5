"""Fixtures of the image tests: the OCI layout (built or reused once per session) and each
platform's root filesystem unpacked from it into a session temp dir.

The layout is built (or found in the cache) when collection finishes, as the control plane is
(tests/clusterfixture.py): outside any test's timeout, since a cold build takes minutes. A
failed build is kept and raised by the ``layout`` fixture, so those tests fail, not skip."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests import imagetool

HERE = Path(__file__).resolve().parent


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(Path(str(item.path)).is_relative_to(HERE) for item in session.items):
        with contextlib.suppress(imagetool.ImageError):  # raised again by the fixture
            imagetool.image_layout()


@pytest.fixture(scope="session")
def layout() -> Path:
    return imagetool.image_layout()


@pytest.fixture(scope="session")
def rootfs_amd64(layout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return imagetool.unpack(layout, "amd64", tmp_path_factory.mktemp("rootfs-amd64"))


@pytest.fixture(scope="session")
def rootfs_arm64(layout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return imagetool.unpack(layout, "arm64", tmp_path_factory.mktemp("rootfs-arm64"))


@pytest.fixture(scope="session")
def amd64(rootfs_amd64: Path) -> imagetool.Runner:
    return imagetool.Runner(rootfs_amd64, "amd64")


@pytest.fixture(scope="session")
def arm64(rootfs_arm64: Path) -> imagetool.Runner:
    return imagetool.Runner(rootfs_arm64, "arm64")
