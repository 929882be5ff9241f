"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]

if not torch.cuda.is_available():  # the fused Triton kernels run in Triton's interpreter on
    os.environ.setdefault("TRITON_INTERPRET", "1")  # the CPU; Triton reads this on import


@pytest.fixture(scope="session")
def shared_fixtures_dir() -> Path | None:
    """``../shared/fixtures`` beside the repository, or ``None`` where that folder is absent.

    It holds third-party robot descriptions (panda, ur5) that are not committed here.
    """
    path = REPO_ROOT.parent / "shared" / "fixtures"
    return path if path.is_dir() else None


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread per test: pytest-xdist already runs a process per core, and tiny
    models are faster on one thread than on a pool that competes with the other worker."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
