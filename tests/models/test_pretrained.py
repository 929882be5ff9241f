"""The pretrained models bundled with torchik: they load, sample within the limits, keep the
accuracy stated in ``accuracy.json`` (and the README) on held-out targets, and their samples
refine into exact solutions; the ``make demo`` script runs."""

from __future__ import annotations

import pytest
import torch

from torchik import load_robot, solve_ik
from torchik.learn import evaluate_model
from torchik.learn.data import decode_pose
from torchik.models import FEW_PASSES, FEW_PASSES_BF16, PRETRAINED, load_pretrained
from torchik.models.pretrained import evaluate, held_out_targets, measured_accuracy

BOUND = 1.5  # raw errors on 100 targets may exceed the 1000-target measurement by this factor


def test_every_listed_model_is_bundled_and_measured():
    assert set(measured_accuracy()) == set(PRETRAINED)


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(ValueError, match="available: panda, ur5"):
        load_pretrained("nope")


def test_map_location_is_a_device_torchik_runs_on_a_dict_or_a_callable():
    """A meta ``map_location`` (torch: "Cannot copy out of meta tensor"), an unknown device or
    another kind of value is refused in one line naming it; the kinds ``torch.load`` takes
    still load."""
    cases = [
        ("meta", ValueError, "map_location 'meta' cannot run torchik"),
        ("banana", ValueError, "map_location 'banana' is not a device"),
        (torch.device("meta"), ValueError, "cannot run torchik"),
        (3, TypeError, "map_location must be a device, a dict or a callable, got int 3"),
    ]
    from importlib import resources

    from torchik.models import load

    path = resources.files("torchik.models.pretrained").joinpath("snake2.pt")
    for where, error, match in cases:
        for loader in (lambda m: load_pretrained("snake2", map_location=m),
                       lambda m: load(str(path), map_location=m)):  # fmt: skip
            with pytest.raises(error, match=match) as caught:
                loader(where)
            assert "\n" not in str(caught.value)
    for where in (None, "cpu", torch.device("cpu"), {"cpu": "cpu"}, lambda storage, _: storage):
        assert load_pretrained("snake2", map_location=where).target_mean.device.type == "cpu"


@pytest.mark.parametrize("name", sorted(PRETRAINED))
def test_loads_and_samples_within_limits(name):
    model = load_pretrained(name)
    assert not model.training and model.target_mean.dtype == torch.float32
    target = held_out_targets(load_robot(model.spec.robot), model.spec.targets, 8, seed=1)
    q = model.sample(target, 16, generator=torch.Generator().manual_seed(0))
    assert q.shape == (8, 16, model.spec.dof) and torch.isfinite(q).all()
    assert (q >= model.lower).all() and (q <= model.upper).all()


@pytest.mark.parametrize("name", sorted(PRETRAINED))
def test_raw_accuracy_within_the_stated_bound(name):
    stated = measured_accuracy()[name]["accuracy"]
    measured = evaluate(load_pretrained(name), n_targets=100, n_samples=10)
    for key, value in stated.items():
        assert measured[key] <= BOUND * value, (key, measured[key], value)


@pytest.fixture(scope="module")
def panda_reference() -> dict[str, float]:
    """The Panda model's own sampler (32 midpoint steps, 64 passes), 200 held-out targets."""
    return evaluate(load_pretrained("panda", sampler="own"), n_targets=200, n_samples=10)


def test_flow_matching_models_load_with_few_pass_samplers(tmp_path):
    """``load_pretrained`` gives a flow-matching model the sampler fitted to it and its
    bfloat16 variant, else ``FEW_PASSES`` and ``FEW_PASSES_BF16``; ``"float32"`` no bfloat16
    one; ``"own"`` neither; the other families have none. A saved model does not keep them
    (a fitted sampler suits the weights it was fitted to)."""
    from torchik.models import load
    from torchik.models.pretrained import fitted_sampler

    fitted = {name: (fitted_sampler(name), fitted_sampler(name, bf16=True))
              for name in ("panda", "panda_position")}  # fmt: skip
    expected = {**fitted, "ur5": (FEW_PASSES, FEW_PASSES_BF16),
                "digit_arm": (FEW_PASSES, FEW_PASSES_BF16)}  # fmt: skip
    for name in PRETRAINED:
        pair = expected.get(name, (None, None))
        for mode, want in (("fast", pair), ("float32", (pair[0], None)), ("own", (None, None))):
            model = load_pretrained(name, sampler=mode)
            got = tuple(getattr(model, a, None) for a in ("default_sampler",
                                                          "default_sampler_bf16"))  # fmt: skip
            assert got == want, (name, mode)
    assert fitted["panda"][0].passes == 7 and fitted["panda"][1].mixed
    load_pretrained("ur5").save(tmp_path / "ur5.pt")
    assert load(tmp_path / "ur5.pt").default_sampler is None
    with pytest.raises(ValueError, match="sampler must be one of"):
        load_pretrained("ur5", sampler="fitted")


def test_the_default_sampler_is_the_one_a_call_names_otherwise(monkeypatch):
    """Without a sampler in the call the model samples with its default (the same samples
    as naming it): the bfloat16 one where bfloat16 is fast, else the float32 one; one named
    in the call wins; ``integrate`` follows the same rule."""
    from torchik.models import fm

    model, own = load_pretrained("panda"), load_pretrained("panda", sampler="own")
    target = held_out_targets(load_robot("panda"), "pose", 3, seed=4)

    def draw(m, **options):
        return m.sample(target, 5, generator=torch.Generator().manual_seed(0), **options)

    for fast, default in ((False, model.default_sampler), (True, model.default_sampler_bf16)):
        monkeypatch.setattr(fm, "bf16_is_fast", lambda device, fast=fast: fast)
        assert torch.equal(draw(model), draw(own, sampler=default))
        assert torch.equal(draw(model, sampler=FEW_PASSES), draw(own, sampler=FEW_PASSES))
        x, context = torch.randn(3, 2, model.size), model.normalize_target(target)[:, None]
        torch.testing.assert_close(
            model.integrate(x, context), own.integrate(x, context, None, default), rtol=0, atol=0
        )
    assert not torch.equal(draw(model), draw(own))
    # steps without a sampler: the config's sampler with those steps, as before the defaults
    assert torch.equal(draw(model, steps=4), draw(own, steps=4))


def test_bf16_is_fast_only_on_matrix_units(monkeypatch):
    from torchik.models import fm

    assert not fm.bf16_is_fast("meta")
    amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
    assert fm.bf16_is_fast("cpu") == bool(amx and torch.backends.mkldnn.is_available())
    fm._bf16_is_fast.cache_clear()  # oneDNN capped below AMX: bfloat16 emulated
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    try:
        assert not fm.bf16_is_fast("cpu")
    finally:
        fm._bf16_is_fast.cache_clear()
    if torch.cuda.is_available():
        assert fm.bf16_is_fast("cuda") == (torch.cuda.get_device_capability()[0] >= 8)


@pytest.mark.parametrize("sampler", [FEW_PASSES, FEW_PASSES_BF16], ids=["float32", "bf16"])
def test_fewer_passes_keep_the_accuracy_they_replace(panda_reference, sampler):
    """12 passes instead of 64 within 10 % of the mean errors on the same targets and noise
    (measured: position 0.95 and 0.95, rotation 0.97 and 0.995 of the reference's; on 1000
    targets and two noise seeds see ``benchmarks/results/fm_samplers.md``)."""
    fast = evaluate(load_pretrained("panda"), n_targets=200, n_samples=10,
                    sample_options={"sampler": sampler})  # fmt: skip
    for key in ("position_mean_mm", "rotation_mean_deg"):
        assert fast[key] <= 1.1 * panda_reference[key], (key, fast[key], panda_reference[key])


@pytest.mark.parametrize("name", ["panda", "panda_position", "ur5", "digit_arm"])
def test_samples_stay_diverse(name):
    """Accuracy from a model that collapsed onto one solution per target would not count:
    the mean pairwise joint distance of 20 samples per target (measured 1.4 rad for the
    Digit arm to 5.5 for the UR5) stays well above zero."""
    model = load_pretrained(name)
    robot = load_robot(model.spec.robot, dtype=torch.float64)
    target = held_out_targets(robot, model.spec.targets, 20, seed=3)
    assert evaluate_model(model, target, robot, 20, 0).diversity > 0.5


def test_refined_panda_samples_are_exact():
    model, robot = load_pretrained("panda"), load_robot("panda", dtype=torch.float64)
    target = held_out_targets(robot, "pose", 3, seed=7)
    seeds = model.sample(target, 20, generator=torch.Generator().manual_seed(0))
    pose = decode_pose(target.double())
    result = solve_ik(robot, pose, seeds=seeds.double(), early_stop=False, tol_rotation=0.01)
    best = result.best()  # every pose solved to 1 mm and 0.01 rad
    assert best.success.all()
    assert best.position_error.max() <= 1e-3 and best.rotation_error.max() <= 0.01
    assert result.success.double().mean() >= 0.5  # most samples refine into a solution
    _, keep = result.distinct()
    assert (keep.sum(-1) >= 2).all()  # several different solutions per pose


def test_demo_prints_the_table_and_saves_pictures(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from torchik.demo import main

    main(["--poses", "2", "--samples", "10", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "refined ok" in out and "saved" in out
    pictures = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    assert sorted(pictures) == ["panda_errors.png", "panda_raw_samples.png", "panda_refined.png"]
    assert min(pictures.values()) > 1000


def test_training_text_sums_the_chunks_of_a_continued_model():
    from torchik.models.pretrained import (
        measured_accuracy,
        trained_on,
        training_chunks,
        training_text,
    )

    entry = measured_accuracy()["panda"]  # continued twice on a GPU (train_pretrained --init)
    chunks = training_chunks(entry)
    assert len(chunks) == 3 and chunks[-1]["steps"] == entry["recipe"]["steps"]
    total = sum(c["steps"] for c in chunks)
    assert f"{total} steps x 8192" in training_text(entry) and "in 3 chunks on H100" in (
        training_text(entry)
    )
    one = measured_accuracy()["snake2"]
    assert training_text(one) == "20k pairs, 2000 steps x 512, 0.4 min on 1 torch thread"
    assert trained_on(entry) == "H100 80GB HBM3" and trained_on(one) == "1 torch thread"
