"""Fitted few-pass samplers: the sampler's explicit grid, weights and scales, the fit itself,
and the bundled Panda model's fitted sampler against the one it replaces."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from torchik import load_robot
from torchik.learn import ProblemSpec, evaluate_model
from torchik.models import FEW_PASSES, FlowMatching, FMConfig, FMSampler, load_pretrained
from torchik.models.fm import bf16_is_fast
from torchik.models.fm_fit import SamplerFit, fit_sampler
from torchik.models.pretrained import fitted_sampler, fitted_samplers, held_out_targets


@pytest.mark.parametrize(
    "bad",
    [{"steps": 2, "times": (0.0, 1.0)}, {"steps": 2, "times": (0.0, 0.6, 0.9)},
     {"steps": 2, "times": (0.0, 0.6, 0.5, 1.0)}, {"steps": 2, "times": (0.0, 0.7, 0.7)},
     {"steps": 2, "scales": (1.0,)}, {"steps": 2, "scales": (1.0, 0.0)},
     {"steps": 2, "solver": "dpm2m", "weights": (0.0, 0.0, 0.0)},
     {"steps": 2, "solver": "euler", "weights": (0.0, 0.0)},
     {"steps": 1, "solver": "dpm2m", "weights": (math.nan,)}],
)  # fmt: skip
def test_explicit_grid_weights_and_scales_are_validated(bad):
    with pytest.raises(ValueError):
        FMSampler(**bad)


def test_a_sampler_survives_json():
    sampler = FMSampler(3, "dpm2m", 1.0, 0.5, (0.0, 0.5, 0.9, 1.0), (0.0, 0.0, 0.0), (1, 2, 1))
    assert FMSampler(**dataclasses.asdict(sampler)) == sampler
    assert sampler.scales == (1.0, 2.0, 1.0)  # lists and ints become tuples of floats


def _model(**config) -> FlowMatching:
    torch.manual_seed(0)
    spec = ProblemSpec.from_robot(load_robot("panda"), targets="pose")
    return FlowMatching(spec, FMConfig(width=16, blocks=1, embedding=8, **config)).double()


def test_the_schedule_written_out_samples_as_the_schedule():
    """An explicit grid equal to schedule 2's, DPM-Solver++(2M)'s own weights and unit scales
    give the schedule's samples (float64)."""
    from torchik.models.fm_fit import _dpm2m_weights

    model = _model().eval()
    schedule = FMSampler(6, "dpm2m", 2.0)
    grid = schedule.grid()
    written = FMSampler(6, "dpm2m", times=tuple(grid), weights=tuple(_dpm2m_weights(grid)),
                        scales=(1.0,) * 6)  # fmt: skip
    x = torch.randn(4, 5, model.size, generator=torch.Generator().manual_seed(1)).double()
    context = torch.randn(4, 1, 9, generator=torch.Generator().manual_seed(2)).double()
    with torch.no_grad():
        expected = model.integrate(x, context, sampler=schedule)
        torch.testing.assert_close(model.integrate(x, context, sampler=written), expected,
                                   rtol=0.0, atol=1e-12)  # fmt: skip
        doubled = FMSampler(6, "dpm2m", 2.0, scales=(2.0,) * 6)
        assert not torch.allclose(model.integrate(x, context, sampler=doubled), expected)


@pytest.mark.parametrize("solver", ["dpm2m", "euler"])
def test_the_fit_lowers_its_loss_and_leaves_the_model_alone(solver):
    model = _model(steps=8)
    robot = load_robot("panda", dtype=torch.float64)
    before = [p.detach().clone() for p in model.parameters()]
    fit = SamplerFit(steps=3, solver=solver, targets=16, samples=4, iters=40, batch=16, lr=0.05)
    fitted = fit_sampler(model, robot, fit)
    first, last = sum(fitted.losses[:5]) / 5, sum(fitted.losses[-5:]) / 5
    assert last < first, fitted.losses
    sampler = fitted.sampler
    assert sampler.steps == 3 and len(sampler.times) == 4 and len(sampler.scales) == 3
    assert len(sampler.weights) == (3 if solver == "dpm2m" else 0)
    assert sampler.times != tuple(FMSampler(3, solver, 2.0).grid())  # it moved
    assert fitted.teacher == model.config.sampler and fitted.fit == fit
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(p.requires_grad for p in model.parameters())


def test_fit_settings_are_validated():
    for bad in ({"steps": 0}, {"solver": "midpoint"}, {"samples": 1}, {"lr": 0.0}):
        with pytest.raises(ValueError):
            SamplerFit(**bad)


@pytest.fixture(scope="module")
def panda_held_out():
    """The Panda pose model (its own sampler by default), float64 FK, the 1000 held-out
    targets of ``benchmarks/results/fm_samplers.md`` and :data:`FEW_PASSES`' errors there (10
    samples per target, the first noise seed)."""
    model = load_pretrained("panda", sampler="own")
    robot = load_robot("panda", dtype=torch.float64)
    target = held_out_targets(robot, "pose", 1000)
    with torch.no_grad():
        few = evaluate_model(model, target, robot, 10, 2026, {"sampler": FEW_PASSES})
    return model, robot, target, few


def _keeps_the_accuracy(panda_held_out, sampler) -> None:
    """Mean position and rotation errors within 10 % of :data:`FEW_PASSES`', diversity (mean
    pairwise joint distance of a target's samples) not below 90 % of it."""
    model, robot, target, few = panda_held_out
    with torch.no_grad():
        new = evaluate_model(model, target, robot, 10, 2026, {"sampler": sampler})
    assert new.position_mean <= 1.1 * few.position_mean, (new.position_mean, few.position_mean)
    assert new.rotation_mean <= 1.1 * few.rotation_mean, (new.rotation_mean, few.rotation_mean)
    assert new.diversity >= 0.9 * few.diversity, (new.diversity, few.diversity)


@pytest.mark.slow
def test_the_bundled_fitted_sampler_keeps_the_accuracy_it_replaces(panda_held_out):
    """The Panda pose model's fitted sampler, 7 passes, against :data:`FEW_PASSES` (12) on
    the 1000 held-out targets x 10 samples of the table, where the mean errors' tail is tamed
    (:func:`_keeps_the_accuracy`)."""
    record = fitted_samplers()["panda"]
    fitted = fitted_sampler("panda")
    assert fitted is not None and fitted.passes < FEW_PASSES.passes
    assert record["fit"]["seed"] != 2026  # fitted on other targets than the held-out ones
    _keeps_the_accuracy(panda_held_out, fitted)


@pytest.mark.slow
@pytest.mark.skipif(
    not bf16_is_fast("cpu"),
    reason="the bfloat16 default serves where bfloat16 is fast (a CPU with AMX, a GPU); "
    "emulated here, its 10 000 samples would take about 40 s",
)
def test_the_bfloat16_default_keeps_the_accuracy_it_replaces(panda_held_out):
    """Its bfloat16 variant, the Panda model's default from ``load_pretrained`` where
    bfloat16 is fast, likewise."""
    low = fitted_sampler("panda", bf16=True)
    assert low == load_pretrained("panda").default_sampler_bf16
    _keeps_the_accuracy(panda_held_out, low)


def test_a_fitted_sampler_saves_and_loads(tmp_path):
    from torchik.models.fm_fit import FittedSampler, load_sampler, save_sampler

    sampler = FMSampler(2, "dpm2m", times=(0.0, 0.6, 1.0), weights=(0.0, 0.0), scales=(1.1, 0.9))
    fitted = FittedSampler(sampler, SamplerFit(steps=2), FEW_PASSES, [3.0, 2.0, 1.0])
    save_sampler(fitted, tmp_path / "s.json", model="m.pt")
    assert load_sampler(tmp_path / "s.json") == sampler
    record = json.loads((tmp_path / "s.json").read_text())
    assert record["loss_first_last"] == [3.0, 1.0] and record["model"] == "m.pt"
    for bad in ("[1, 2]", '{"sampler": {"steps": 0}}', "not json", '{"steps": 2, "nope": 1}'):
        (tmp_path / "bad.json").write_text(bad)
        with pytest.raises(ValueError, match="not a sampler written by fit_sampler"):
            load_sampler(tmp_path / "bad.json")


def test_every_bundled_fitted_sampler_is_for_a_bundled_fm_model_and_fit_elsewhere():
    """The measured accuracy of each: ``benchmarks/results/fm_samplers*.md``."""
    from torchik.models.pretrained import PRETRAINED, TEST_SEED

    records = fitted_samplers()
    assert "panda" in records
    for name, record in records.items():
        assert name in PRETRAINED and load_pretrained(name).family == "fm"
        sampler = fitted_sampler(name)
        assert sampler is not None and sampler.passes < FEW_PASSES.passes and sampler.times
        assert record["fit"]["seed"] != TEST_SEED and FMSampler(**record["teacher"])
        low = fitted_sampler(name, bf16=True)
        assert low is not None and low.mixed and low.times == sampler.times


def test_the_fit_refuses_another_family_or_another_robot():
    from torchik.models import MLP

    panda = load_robot("panda", dtype=torch.float64)
    with pytest.raises(TypeError, match="takes a flow-matching model, not MLP"):
        fit_sampler(MLP(ProblemSpec.from_robot(panda), MLP.tiny_config()), panda)
    with pytest.raises(ValueError, match="the model is for robot 'panda'"):
        fit_sampler(_model(), load_robot("ur5", dtype=torch.float64))
