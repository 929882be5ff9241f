"""experiments.pose_notes: the full-pose table's goals and published figures."""

from __future__ import annotations

from experiments.pose_notes import PUBLISHED, annotate, intro, one_pose_goal, raw_goal
from experiments.table import Column, Table


def _tables(mm: float, wall: float) -> list[Table]:
    raw = Table("raw", [Column("pos_mean_mm", "mm")])
    raw.add("model", pos_mean_mm=mm, rot_mean_deg=1.0)
    refined = Table("refined", [])
    refined.add("refined", success_poses=1.0, success_samples=0.9, distinct_min=3,
                distinct_mean=5.0, raw_distinct_mean=9.0)  # fmt: skip
    one = Table("one pose", [])
    for name in ("uniform", "model"):
        one.add(name, wall_s=wall, cpu_s=wall, solutions_min=1000, model=name == "model",
                top_up=True)  # fmt: skip
    return [raw, refined, one, Table("each", [])]


def test_annotate_judges_the_goals():
    good, bad = _tables(2.0, 0.1), _tables(9.0, 0.5)
    annotate(good, "fm")
    annotate(bad, "fm")
    assert good[0].rows[0]["method"] == "model (fm)" and PUBLISHED in good[0].notes
    assert good[0].notes[0].endswith("met") and "**not met** (9.0 mm" in bad[0].notes[0]
    assert good[1].notes[0].count("**not met**") == 1  # per pose met, per sample not
    assert [r["goal"] for r in good[2].rows] == ["met", "met"]
    assert [r["goal"] for r in bad[2].rows] == ["not met", "not met"]


def test_goal_lines_and_intro():
    assert raw_goal({"pos_mean_mm": 3.0, "rot_mean_deg": 1.5}).endswith("met")
    row = {"wall_s": 0.1, "cpu_s": 0.1, "solutions_min": 999}
    assert "**not met**" in one_pose_goal(row)  # 999 of 1000 solutions: the goal is missed
    recipe = {"recipe": {"family": "fm", "train_pairs": 0, "steps": 9, "batch_size": 64,
                         "stream": True, "device": "cuda"},
              "parameters": 3, "train_seconds": 60.0, "machine": "NVIDIA H100, 3 torch threads",
              "continued_from": {"steps": 5, "train_seconds": 30.0}}  # fmt: skip
    lines = intro(10, 5, "the checker", recipe, 2026)
    assert "10" in lines[0] and "2026" in lines[0]  # the poses and their seed
    assert "`fm`" in lines[2] and "the checker" in lines[-1]
    assert all(s in lines[2] for s in ("14 steps", "64", "1.5 min", "2 chunks", "H100"))
