"""torchik.models.checkpoint: what ``check_checkpoint`` refuses beyond the layout and the hash
(a degenerate normalisation, weights that are all float16) and the warning of a format 1 file,
which has no hash to verify; ``torchik solve`` on such files."""

from __future__ import annotations

import json
import math

import pytest
import torch

import torchik
from torchik import models
from torchik.cli import main
from torchik.cli.common import _print_records
from torchik.learn import make_dataset
from torchik.models.checkpoint import MIN_STD, check_checkpoint, content_hash
from torchik.models.mlp import MLP


@pytest.fixture(scope="module")
def ckpt() -> dict:
    data = make_dataset(torchik.load_robot("snake2"), 64, seed=0)
    torch.manual_seed(0)
    model = MLP(data.spec, MLP.tiny_config())
    model.set_normalization(data.q, data.target)
    return model.checkpoint()


def _stamped(ckpt: dict, **state) -> dict:
    bad = {**ckpt, "state_dict": {**ckpt["state_dict"], **state}}
    return {**bad, "sha256": content_hash(bad)}  # a correctly hashed file


def test_a_degenerate_normalisation_is_refused_at_load(ckpt, tmp_path, capsys):
    """The issue's file: correctly hashed, ``target_std`` 0: it loaded and sampled NaN, and
    ``torchik solve --format json`` printed a bare ``NaN`` (not JSON)."""
    std = torch.zeros_like(ckpt["state_dict"]["target_std"])
    torch.save(_stamped(ckpt, target_std=std), tmp_path / "zero.pt")
    with pytest.raises(ValueError, match=f"'target_std' holds 0, below {MIN_STD:g}: a standard"):
        models.load(tmp_path / "zero.pt")
    argv = ["solve", "snake2", "--position", "0.1", "0.1", "--model", str(tmp_path / "zero.pt")]
    assert main([*argv, "--format", "json"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("torchik: error: ") and "target_std" in err and "\n" not in err
    q_std = ckpt["state_dict"]["q_std"].clone()
    q_std[1] = -1.0
    with pytest.raises(ValueError, match="'q_std' holds -1"):
        check_checkpoint(_stamped(ckpt, q_std=q_std))
    check_checkpoint(_stamped(ckpt, q_std=q_std.clamp_min(1e-6).float()))  # the floor is fine


def test_json_records_never_hold_a_bare_nan(capsys):
    _print_records([{"q": math.nan, "error": math.inf, "ok": 1.5, "list": [math.nan]}], "json")
    assert json.loads(capsys.readouterr().out) == [
        {"q": None, "error": None, "ok": 1.5, "list": [None]}
    ]


def test_weights_all_float16_are_refused(ckpt):
    """They loaded, then ``sample`` raised torch's dtype RuntimeError; ``save(half=True)``
    (float16 parameters, float32 buffers) still loads in float32."""
    half = {k: v.half() if v.is_floating_point() else v for k, v in ckpt["state_dict"].items()}
    with pytest.raises(ValueError, match="the weights are float16: a torchik model holds"):
        check_checkpoint(_stamped(ckpt, **half))
    mixed = {k: v.double() for k, v in list(ckpt["state_dict"].items())[:1]}
    with pytest.raises(ValueError, match="the weights are float32, float64"):
        check_checkpoint(_stamped(ckpt, **mixed))


def test_a_format_1_checkpoint_loads_with_a_warning(ckpt, tmp_path, capsys):
    old = {k: v for k, v in ckpt.items() if k != "sha256"} | {"format_version": 1}
    torch.save(old, tmp_path / "v1.pt")
    with pytest.warns(UserWarning, match="no content hash: damage to it cannot be detected; re"):
        models.load(tmp_path / "v1.pt")
    argv = ["solve", "snake2", "--position", "0.1", "0.1", "--model", str(tmp_path / "v1.pt")]
    assert main([*argv, "-n", "2"]) in (0, 3)
    err = capsys.readouterr().err
    assert "torchik: warning: a format 1 checkpoint has no content hash" in err
    assert "warnings.warn" not in err  # one line, not Python's two
