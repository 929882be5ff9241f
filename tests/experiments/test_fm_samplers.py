"""experiments.fm_samplers: samplers against the model's own, tiny sizes."""

from __future__ import annotations

import pytest

from experiments.fm_samplers import default_samplers, sampler_table
from torchik.models import FEW_PASSES, load_pretrained
from torchik.models.fm import FMSampler


def test_rows_ratios_and_verdicts():
    model = load_pretrained("panda", sampler="own")
    samplers = {"few": FEW_PASSES, "one euler step": FMSampler(1, "euler")}
    table = sampler_table(model, samplers, n_targets=6, n_samples=3, seeds=(0, 1), many=4,
                          min_run_time=0.01)  # fmt: skip
    reference, few, one = table.rows
    assert reference["kept"] == "reference" and reference["worst_ratio"] == pytest.approx(1.0)
    assert reference["passes"] == 64 and few["passes"] == 12 and one["passes"] == 1
    assert len(few["errors"]) == 2 and few["position"].count(" / ") == 1
    assert one["kept"] == "no" and one["worst_ratio"] > 1.1  # one step lands far off
    worst = max(e[k] / r[k] for e, r in zip(few["errors"], reference["errors"], strict=True)
                for k in ("position", "rotation"))  # fmt: skip
    assert few["worst_ratio"] == pytest.approx(worst)
    assert all(row["draw_s"] > 0 for row in table.rows)


def test_the_default_candidates_name_the_presets():
    candidates = default_samplers()
    assert candidates["FEW_PASSES"] == FEW_PASSES
    assert all(isinstance(s, FMSampler) for s in candidates.values())


def test_a_bundled_model_adds_its_fitted_sampler_and_its_start():
    from torchik.models.pretrained import fitted_sampler

    candidates = default_samplers("panda")
    fitted = fitted_sampler("panda")
    assert candidates["fitted, 7 steps"] == fitted
    assert candidates["fitted, 7 steps, bf16 before 0.98"].bf16_until == 0.98
    low = candidates["fitted, 7 steps, bf16 before 0.98, then mixed (its bf16 variant)"]
    assert low == fitted_sampler("panda", bf16=True) and low.mixed
    assert candidates["dpm2m, 7 steps, schedule 2 (the fit's start)"].times == ()
    assert "fitted, 7 steps" not in default_samplers("snake2")


def test_a_model_with_a_default_sampler_is_refused():
    """Its default sampler would stand in for its own as the reference."""
    with pytest.raises(ValueError, match="sampler='own'"):
        sampler_table(load_pretrained("ur5"), {}, n_targets=2, n_samples=2, seeds=(0,))


def test_a_position_model_is_judged_on_position_alone():
    model = load_pretrained("ur5", sampler="own")
    table = sampler_table(model, {"few": FEW_PASSES}, n_targets=4, n_samples=2, seeds=(0,),
                          many=4, min_run_time=0.01)  # fmt: skip
    reference, few = table.rows
    assert reference["rotation"] == few["rotation"] == "—"
    assert few["worst_ratio"] == pytest.approx(few["errors"][0]["position"]
                                               / reference["errors"][0]["position"])  # fmt: skip
