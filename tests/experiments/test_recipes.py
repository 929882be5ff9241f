"""experiments.recipes: the flow-vs-flow-matching comparison on Panda positions."""

from __future__ import annotations

import torch

from experiments.recipes import RecipeRun, recipe_tables, run_recipes, scope_note


def test_rows_curves_and_tables():
    torch.set_num_threads(1)
    args = RecipeRun(recipes=("flow", "fm"), steps=4, batch=16, targets=6, samples=3,
                     val_targets=6, fm_steps=(2,), equal_seconds=True)  # fmt: skip
    lines: list[str] = []
    rows, curves = run_recipes(args, lines.append)
    methods = [r["method"] for r in rows]
    assert methods[:4] == ["uniform joints (no model)", "flow", "fm", "fm, 2 ODE steps"]
    assert methods[4] == "fm, the flow's training seconds" and len(rows) == 5
    assert rows[0]["mean_cm"] > 20  # uniform joints miss by tens of centimetres
    assert all(0.0 <= r["acc_1cm"] <= 1.0 and r["diversity"] > 0 for r in rows)
    assert {c["method"] for c in curves} >= {"flow", "fm"} and lines
    main, curve = recipe_tables(rows, curves, args)
    assert "6 held-out targets × 3 raw samples" in main.title
    assert len(main.rows) == 5 and len(curve.rows) == len(curves)
    assert "4 steps of batch 16" in scope_note(args)
