"""Fixtures shared by the whole test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_fixtures_dir() -> Path | None:
    """``../shared/fixtures`` beside the repository, or ``None`` where that folder is absent.

    It holds third-party robot descriptions (panda, ur5) that are not committed here.
    """
    path = REPO_ROOT.parent / "shared" / "fixtures"
    return path if path.is_dir() else None
