"""Two ``torchik tune`` workers on one study in a real database: runs only where
``TORCHIK_TEST_DATABASE_URL`` names one (e.g. ``postgresql://tune@127.0.0.1:54329/optuna``;
``scripts/tune_postgres.sh`` starts a throwaway PostgreSQL server and runs the same check)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter

import pytest

from tests.paths import REPO

URL = os.environ.get("TORCHIK_TEST_DATABASE_URL")
pytestmark = pytest.mark.skipif(URL is None, reason="TORCHIK_TEST_DATABASE_URL is not set")


def test_two_workers_on_a_database(tmp_path):
    optuna = pytest.importorskip("optuna")
    name = f"test_{uuid.uuid4().hex[:12]}"
    argv = [sys.executable, "-m", "torchik", "tune", "--model", "cvae", "--robot",
            "planar:1,1,1", "--preset", "tiny", "--steps", "30", "--val-every", "10",
            "--batch-size", "64", "--train-size", "300", "--val-size", "50", "--trials", "6",
            "--storage", URL, "--study", name, "--quiet"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    workers = [
        subprocess.Popen([*argv, "--out", str(tmp_path / w)], env=env, stderr=subprocess.PIPE)
        for w in "ab"
    ]
    for proc in workers:
        assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()
    trials = optuna.load_study(study_name=name, storage=URL).get_trials(deepcopy=False)
    states = Counter(t.state.name for t in trials)
    assert sorted(t.number for t in trials) == list(range(len(trials)))  # none lost or doubled
    assert not states["RUNNING"] and 6 <= len(trials) <= 7  # one in flight may overshoot
    assert len({t.user_attrs["sampler_seed"] for t in trials}) == 2
    assert max(Counter(tuple(sorted(t.params.items())) for t in trials).values()) == 1
