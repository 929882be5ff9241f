"""experiments.tune_run: the report's search reproduced, defaults against the tuned best."""

from __future__ import annotations

import pytest

from experiments.posterior_run import arm_problem
from experiments.tune_run import TuneRun, case_seed, goals, run_arm, scope_note, tune_tables

pytest.importorskip("optuna", reason="the tune extra (Optuna) runs the search")


def test_arm_problems():
    assert arm_problem("4") == "planar:1,1,1,1" and arm_problem("rail") == "rail_arm"


def test_each_study_has_its_own_seed():
    seeds = {
        case_seed(arm, family) for arm in ("4", "6", "10", "rail") for family in ("cvae", "inn")
    }
    assert len(seeds) == 8 and case_seed("4", "cvae") == case_seed("4", "cvae")


def test_default_and_tuned_rows_tables_and_goals(tmp_path):
    args = TuneRun(families=("cvae",), trials=2, steps=4, batch=32, train_size=256,
                   search_targets=2, search_samples=20, final_targets=2, final_samples=20,
                   runs=tmp_path)  # fmt: skip
    lines: list[str] = []
    rows = run_arm("4", args, lines.append)
    assert [r["method"] for r in rows] == ["default", "tuned"] and lines
    assert rows[0]["seed"] == rows[1]["seed"] == case_seed("4", "cvae")
    assert rows[1]["trials"] == 2 and len(rows[1]["curve"]) == 2
    assert all(r["posterior_mismatch"] > 0 for r in rows)
    main, curves = tune_tables([dict(r) for r in rows], args)
    assert main.notes[-1].startswith("arm 4: untuned best") and len(curves.rows) == 1
    assert "2 trials × 4 steps" in scope_note(args)


def test_goals_verdicts():
    rows = [
        {"arm": "rail", "method": "default", "family": "cvae", "posterior_mismatch": 0.1,
         "resimulation": 0.1},
        {"arm": "rail", "method": "tuned", "family": "cvae", "posterior_mismatch": 0.005,
         "resimulation": 0.001},
        {"arm": "4", "method": "default", "family": "inn", "posterior_mismatch": 0.1,
         "resimulation": 0.1},
        {"arm": "4", "method": "tuned", "family": "inn", "posterior_mismatch": 0.06,
         "resimulation": 0.1},
    ]  # fmt: skip
    rail, four = goals(rows)
    assert rail.endswith("met") and "ratio 0.05" in rail
    assert four.endswith("missed") and "ratio 0.60" in four
