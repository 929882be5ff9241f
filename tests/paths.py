"""Paths the tests share: the repository, the test data, the shared fixtures beside the checkout."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SHARED = REPO.parent / "shared"
ROBOT_FILES = REPO / "src" / "torchik" / "description" / "robots"
