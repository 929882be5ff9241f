"""``torchik eval``: metrics of a trained model on a data set, with a warning when the data set
is the one the model was trained on."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import torch

from torchik.cli.common import (
    _NOT_DATA,
    _common,
    _load_model,
    _positive_int,
    _print_records,
    _provenance,
    _require_robot,
    _torch_file,
)
from torchik.files import read_text


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help="metrics of a trained model on a data set")
    p.add_argument("--model", required=True, help="a model file (e.g. runs/x/model.pt)")
    p.add_argument("--data", required=True, help="a file written by 'torchik dataset'")
    p.add_argument("-n", type=_positive_int, default=10, help="samples per target (default 10)")
    p.add_argument("--limit", type=_positive_int, default=1000, help="targets (default 1000)")
    p.add_argument("--robot", help="the robot, if the data's robot is not bundled")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    _common(p)
    p.set_defaults(func=run)


@torch.no_grad()
def _evaluate(model, data, robot, n: int, seed: int) -> dict[str, float]:
    from torchik.learn.evaluate import evaluate_model

    r = evaluate_model(model, data.target, robot, n, seed)
    out: dict[str, float] = {"targets": len(data), "samples per target": n}
    out["position error mean (mm)"] = 1000 * r.position_mean
    out["position error median (mm)"] = 1000 * r.position_median
    out[f"best of {n} position error mean (mm)"] = 1000 * r.best_of[n]
    out |= {f"samples within {round(t * 1000)} mm": a for t, a in r.accuracy.items()}
    if r.rotation_mean is not None:
        out["rotation error mean (deg)"] = math.degrees(r.rotation_mean)
    out["samples outside limits"] = r.fraction_outside_limits
    out["diversity (mean pairwise joint distance)"] = r.diversity
    assert r.seconds is not None  # the samples were drawn (and timed) here
    out["sampling time per target (ms)"] = 1000 * r.seconds / max(1, len(data))
    try:
        target = data.target.to(model.target_mean)
        log_prob = model.log_prob(data.q.to(target), target)
        out["log-likelihood of the data joints"] = log_prob.mean().item()
    except NotImplementedError:
        pass
    return out


def run(args: argparse.Namespace) -> int:
    """``torchik eval``: metrics of a trained model on a data set file."""
    from torchik.learn.data import load_dataset

    data = load_dataset(_torch_file(args.data, _NOT_DATA))
    model = _load_model(args.model, data.spec.robot, torch.device(args.device))
    _warn_if_training_data(args.model, args.data, data)
    _check_same_problem(model.spec, data.spec)
    robot = _require_robot(data.spec, args.robot)
    data = data.subset(slice(0, args.limit))
    results = _evaluate(model, data, robot, args.n, args.seed)
    _print_records([{"metric": k, "value": v} for k, v in results.items()], args.format)
    return 0


def _check_same_problem(model_spec, data_spec) -> None:
    """A ValueError naming the fields in which the model's and the data's specs differ; limits
    agree within 1e-6 (a spec made from a float32 robot holds float32-rounded limits, as the
    bundled pretrained models' do)."""
    ours, theirs = dataclasses.asdict(model_spec), dataclasses.asdict(data_spec)
    differ = [
        f"{key} {ours[key]} vs {theirs[key]}"
        for key in ours
        if not (
            ours[key] == theirs[key]
            or key in ("lower", "upper")
            and len(ours[key]) == len(theirs[key])
            and all(abs(a - b) <= 1e-6 for a, b in zip(ours[key], theirs[key], strict=True))
        )
    ]
    if differ:
        raise ValueError(f"the model and the data are for different problems: {'; '.join(differ)}")


def _warn_if_training_data(model_path: str, data_path: str, data) -> None:
    """A warning on stderr when ``data`` holds the rows the model was trained on (per the
    ``train_data.json`` that ``torchik train`` leaves in the run folder)."""
    record = Path(model_path).parent / "train_data.json"
    if model_path == "pretrained" or not record.is_file():
        return
    trained = json.loads(read_text(record))
    if trained.get("sha256") == _provenance(data_path, data)["sha256"]:
        print(
            f"torchik: warning: {data_path} is the data set this model was trained on "
            f"({trained.get('path')}): these numbers measure fit, not generalisation; evaluate "
            "on a data set made with another --seed",
            file=sys.stderr,
        )
