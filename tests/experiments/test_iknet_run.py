"""experiments.iknet_run / iknet_notes: the IKNet experiment around iknet_table."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from experiments import iknet_notes, iknet_run
from experiments.iknet_notes import iknet_tables
from experiments.iknet_run import IKNetRun, kept_rows, preset, robot_data, run_robot


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    torch.set_num_threads(1)
    settings = IKNetRun(
        steps={"digit_arm": 3}, train_size={"digit_arm": 128}, batch=64, samples=3,
        temperatures=(0.5,), families=("iknet", "mlp"), solvers=True,
        work=str(tmp_path_factory.mktemp("runs")),
    )  # fmt: skip
    lines: list[str] = []
    rows, curve = run_robot("digit_arm", settings, log=lines.append, timing=False)
    return settings, rows, curve, lines


def test_rows_of_every_family_temperature_and_solver(experiment):
    settings, rows, curve, lines = experiment
    methods = [(r["method"], r.get("temperature")) for r in rows]
    assert methods[:3] == [("IKNet", 1.0), ("IKNet", 0.5), ("MLP", 1.0)]
    assert [m for m, _ in methods[3:]] == [f"torchik {s}" for s in iknet_run.SOLVERS]
    assert all(r["steps"] == 3 and r["train_size"] == 128 for r in rows[:3])
    assert rows[2]["diversity"] == 0.0  # the MLP is deterministic
    assert min(r["mean_cm"] for r in rows[3:]) < 1.0  # numerical IK solves
    assert {p["method"] for p in curve} == {"IKNet", "MLP"} and lines


def test_tables_carry_the_settings_into_the_notes(experiment):
    settings, rows, curve, _ = experiment
    main, learning = iknet_tables(rows, curve, [], settings)
    assert "IKNet (small preset)" in main.title and "x 3" in main.title
    assert any("0.003" in note for note in main.notes)  # the learning rate is reported
    assert any("position_only=True" in note for note in main.notes)  # so is the solver call
    assert "IKNet (small, temperature 0.5)" in main.markdown()
    assert len(learning.rows) == len(curve)


def test_kept_rows_keep_other_robots(tmp_path, experiment):
    settings, rows, curve, _ = experiment
    stamp = {"date": "d", "torchik": "t", "load_average_at_start": [0], "command": "c"}
    tables = [{"rows": rows}, {"rows": curve}]
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"stamp": stamp, "tables": tables}))
    kept, kept_curve, notes = kept_rows(path, ["ur5"])
    assert len(kept) == len(rows) and len(kept_curve) == len(curve)
    assert len(notes) == 1 and all(s in notes[0] for s in ("digit_arm", "torchik t", "`c`"))
    assert kept_rows(path, ["digit_arm"]) == ([], [], [])
    # a run that kept rows itself: each kept robot is credited to the run that made its rows
    panda = [{**r, "robot": "panda"} for r in rows]
    earlier = "Rows of panda, ur5 kept from an earlier run of this script (e): `b`."
    newer = {"stamp": stamp, "intro": ["x", earlier], "tables": [{"rows": rows + panda},
                                                                 {"rows": curve}]}  # fmt: skip
    path.write_text(json.dumps(newer))
    kept, _, notes = kept_rows(path, ["ur5"])
    assert len(kept) == 2 * len(rows)
    assert len(notes) == 2 and "panda" in notes[1] and "`b`" in notes[1]  # credited to run b
    assert "digit_arm" in notes[0] and "panda" not in notes[0] and "`c`" in notes[0]


def test_presets_and_data_seeds():
    assert preset("small").hyper_width < preset("default").hyper_width
    with pytest.raises(KeyError):
        preset("huge")
    data = robot_data("digit_arm", IKNetRun(train_size={"digit_arm": 16}))
    assert (len(data.train_set), len(data.val_set), len(data.test_set)) == (16, 500, 1000)
    assert data.robot64.lower.dtype == torch.float64


def test_overrides_replace_preset_fields(tmp_path):
    settings = IKNetRun(preset="small-trig", overrides={"components": 3, "primary_width": 8},
                        steps={"digit_arm": 2}, train_size={"digit_arm": 64}, batch=16,
                        work=str(tmp_path))  # fmt: skip
    data = robot_data("digit_arm", settings)
    model, _, steps = iknet_run.train_model("digit_arm", "iknet", settings, data, lambda _: None)
    assert steps == 2 and model.config.components == 3 and model.config.primary_width == 8
    assert model.config.joint_features == "trig"  # the preset's other fields are kept
    with pytest.raises(TypeError):
        iknet_run.train_model("digit_arm", "iknet", IKNetRun(overrides={"widht": 8}), data, print)


def test_checkpoints_and_resume_pass_through_to_the_engine(tmp_path):
    settings = IKNetRun(preset="small-trig", overrides={"components": 2, "primary_width": 8},
                        steps={"digit_arm": 4}, train_size={"digit_arm": 64}, batch=16,
                        work=str(tmp_path), checkpoint_every=2)  # fmt: skip
    data = robot_data("digit_arm", settings)
    model, first, _ = iknet_run.train_model("digit_arm", "iknet", settings, data, print)
    assert (tmp_path / "digit_arm" / "checkpoint.pt").is_file()
    again = dataclasses.replace(settings, resume=True)
    resumed, second, _ = iknet_run.train_model("digit_arm", "iknet", again, data, print)
    assert len(second.history) == len(first.history)  # nothing trained twice
    for a, b in zip(model.state_dict().values(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    other = dataclasses.replace(again, overrides={"components": 3, "primary_width": 8})
    with pytest.raises(ValueError, match="cannot resume"):  # the engine read the checkpoint
        iknet_run.train_model("digit_arm", "iknet", other, data, print)


def test_weight_decay_and_ema_reach_the_optimiser():
    plain = iknet_run._config(IKNetRun(), steps=100, val_rows=10)
    assert plain.weight_decay == 0.0 and plain.ema_decay is None  # the protocol's
    settings = IKNetRun(weight_decay=0.05, ema_decay=0.999)
    config = iknet_run._config(settings, steps=100, val_rows=10)
    assert (config.weight_decay, config.ema_decay) == (0.05, 0.999)


def test_variants_tables_show_pairs_seen_and_dashes_for_fields_not_recorded():
    rows = [
        {"variant": "a", "preset": "small", "overrides": {"embedding": 8}, "robot": "panda",
         "train_size": 1000, "batch": 16, "steps": 100, "mean_cm": 5.0, "date": "d",
         "command": "run a"},
        {"variant": "b", "preset": "small", "overrides": {}, "robot": "panda",
         "train_size": 10, "batch": 4, "steps": 5, "mean_cm": 6.0, "median_cm": 2.5},
        {"variant": "c", "preset": "small", "overrides": {"target_noise": 0.005},
         "training": {"weight_decay": 0.05}, "replaced": "as read back from the JSON",
         "robot": "panda", "train_size": 10, "batch": 4, "steps": 5, "mean_cm": 4.0},
    ]  # fmt: skip
    main, commands = iknet_notes.variants_tables(rows, paper_cm=3.1)
    assert [r["seen"] for r in main.rows] == [1600, 20, 20]
    text = main.markdown()
    assert '| a | panda | small | {"embedding": 8} |' in text and "3.1 cm" in text
    assert "| b | panda | small | — |" in text and "| 6.00 | 2.50 |" in text
    assert '| c | panda | small | {"target_noise": 0.005, "weight_decay": 0.05} |' in text
    assert [r["command"] for r in commands.rows] == ["run a", None, None]
    assert "| a | `run a` |" in commands.markdown()
