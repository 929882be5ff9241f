"""A bounded sample of crafted checkpoints through every entry point (see fuzz_checkpoints.py;
``make fuzz`` runs the long version)."""

from __future__ import annotations

import pytest

from tests.fuzz.checkpoints import KINDS, crafted, run

SEEDS = range(50)  # 50 crafted files: every mutation kind, every family


def test_the_sample_covers_every_mutation_kind():
    kinds = {crafted(seed)[0].split("/")[1].split("+")[0] for seed in SEEDS}
    assert kinds == set(KINDS)


@pytest.mark.parametrize(
    "entry", ["models.load", "read_checkpoint", "cli solve --model", "cli eval --model"]
)
def test_crafted_checkpoints_are_refused_in_one_line_or_load_intact(entry):
    findings = [o for o in run(SEEDS, [entry]) if o.finding]
    assert not findings, "\n".join(f"{o.seed} {o.file}: {o.result} {o.message}" for o in findings)


def test_crafted_training_checkpoints_are_refused_on_resume():
    findings = [o for o in run(SEEDS, ["train(resume=True)"]) if o.finding]
    assert not findings, "\n".join(f"{o.seed} {o.file}: {o.result} {o.message}" for o in findings)


def test_damaged_data_sets_are_refused_with_a_value_error(tmp_path):
    import torch

    from tests.fuzz.checkpoints import _data
    from torchik.learn import load_dataset

    _data().save(tmp_path / "d.pt")
    blob = torch.load(tmp_path / "d.pt", weights_only=True)
    damaged = {"q": [1.0, 2.0], "target": None, "spec": [], "meta": 3}
    for key, value in damaged.items():
        torch.save({**blob, key: value}, tmp_path / f"{key}.pt")
        try:
            load_dataset(tmp_path / f"{key}.pt")
        except ValueError as err:
            assert f"{key}.pt" in str(err)
        else:
            assert key == "meta", f"a data set with a damaged {key!r} loaded"


def test_bundled_models_carry_a_hash_and_20_flipped_bytes_are_refused(tmp_path):
    import random
    from importlib import resources

    import torch

    from torchik.models import PRETRAINED, load

    for name in PRETRAINED:
        with resources.as_file(resources.files("torchik.models.pretrained") / f"{name}.pt") as path:
            blob = path.read_bytes()
            assert torch.load(path, weights_only=True)["format_version"] == 2
    rng = random.Random(0)
    for seed in range(10):  # (without a hash, 187 of 200 such copies of snake2 loaded damaged)
        data = bytearray(blob)
        for _ in range(20):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        (tmp_path / f"{seed}.pt").write_bytes(bytes(data))
        try:
            load(tmp_path / f"{seed}.pt")
        except ValueError:
            continue
        raise AssertionError(f"flipped file {seed} loaded")


@pytest.mark.parametrize("seed", [91013, 91538, 92393])
def test_a_flipped_zip_header_is_refused_not_leaked(seed):
    """Seeds of a 3 000-file campaign whose flipped bytes made zipfile ask for a zip version,
    encryption or compression it lacks (NotImplementedError leaked from the damage check)."""
    entries = ["models.load", "read_checkpoint", "train(resume=True)"]
    findings = [o for o in run(range(seed, seed + 1), entries) if o.finding]
    assert not findings, "\n".join(f"{o.seed} {o.file}: {o.result} {o.message}" for o in findings)
