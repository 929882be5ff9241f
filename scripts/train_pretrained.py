"""Train the pretrained models bundled with torchik, reproducibly, on the CPU.

Usage::

    .venv/bin/python scripts/train_pretrained.py NAME|all [--steps N] [--minutes M]
        [--out DIR]
    .venv/bin/python scripts/train_pretrained.py table   # the README's table, markdown
    .venv/bin/python scripts/train_pretrained.py curves  # docs/img/pretrained_curves.png
    OUT=DIR bash scripts/gpu_pretrained.sh               # the --gpu recipes, one GPU, ~8 min
    .venv/bin/python scripts/train_pretrained.py NAME --gpu --bundle-run RUN/NAME \
        --sample-steps 32 --half                         # bundle what that run trained

Each model has a fixed recipe below (robot, target kind, family, config, training pairs,
steps, seeds). Training uses one torch thread and a fixed number of steps, so the weights do
not depend on the machine's load; ``--minutes`` only caps the wall time (a capped model is
not the published one). The script writes ``<DIR>/<name>.pt`` and merges the recipe, the
training time, the file size and the accuracy of raw samples on held-out targets
(:func:`torchik.models.pretrained.evaluate`, 1000 targets x 10 samples) into
``<DIR>/accuracy.json``; DIR defaults to ``src/torchik/models/pretrained``.

How the families were chosen (mean position error of raw samples, this evaluation, one
thread on a shared 2-core machine): the autoregressive GRU (``rnn``, a 1-D mixture per joint)
beat the full-covariance mixture (``mdn``) at less CPU time on every arm -- panda full pose
85 mm / 31 deg after 8.3 min against 150 mm / 49 deg after 14.4 min (20k steps); ur5 21 mm
(3.5 min) against 161 mm (4.2 min, 8k steps); digit_arm 22 mm (2.1 min) against 33 mm
(2.5 min, 8k steps); snake4 7 mm (1.7 min) against 43 mm (1.3 min, 5k steps). ``mdn`` is kept
for snake2 (3 mm in 0.4 min). IKNet (small) ran at about 5 steps/s on the panda, too slow for
this budget; ``flow`` needs the optional zuko and is not used, so that every bundled model
loads with the base install. The Digit arm's model is now the IKNet (small) of the Neural IK
benchmark (``benchmarks/iknet.py``, 15k steps, 32 min under load): 11 mm mean, half the RNN's
22 mm; ``--checkpoint`` bundles such a model, trained elsewhere by the very same recipe,
without training it again. The Panda model is now conditional flow matching (``fm``) on
fresh FK pairs (``FKStream``) with an EMA of the weights, 70k steps in 31 min on one thread:
28 mm / 9 deg mean (median 17 mm / 4 deg), against the RNN's 85 mm / 31 deg. The Panda
position model (``panda_position``, the same fm recipe on positions, 64k steps in 26 min):
14.6 mm mean (median 11.0 mm, best of 10 4.2 mm). ``--run-dir`` makes a training resumable in
chunks (``--minutes`` ends a chunk with a checkpoint); ``curves`` plots the stored validation
curves (time to accuracy) into ``docs/img/pretrained_curves.png``. The UR5 model is the same
fm recipe too (46k steps, 19 min): 7.3 mm mean / 5.4 mm median, against the RNN's 21 / 10 mm.

The four arm models are now the ``--gpu`` recipes (:data:`GPU_RECIPES`: fm of width 512,
batches of 4096 or 8192 fresh FK pairs made on the GPU, EMA 0.9995), trained side by side on
one H100 by ``scripts/gpu_pretrained.sh`` (``--fit-minutes 7``: each measures its speed under
the shared load and sets its steps so that the whole schedule fits; 32-59k steps in 6 min) and
bundled with ``--bundle-run``: 32 integration steps when sampling (training validated with 8;
Panda full pose 11.3 mm / 2.3 deg at 8 steps, 7.0 mm / 1.7 deg at 32) and float16 parameters
(the same accuracy at half the size). The CPU models they replaced, with their curves, are in
``scripts/pretrained_cpu.json``. ``--init FILE`` continues a model from its weights (a new
schedule; ``accuracy.json`` records the chain as ``continued_from``): the Panda pose model went
on twice more on an H100 (23.6k steps beside five IKNet trainings, then 33.7k alone; 15.9 min
in all) from 7.0 mm / 1.7 deg to 5.6 mm / 1.3 deg. ``--iknet-table`` adds the Neural IK
protocol's row (1000 test targets x 100 samples) of a position model, measured on ``--device``
(``scripts/iknet_ablation.runs``; ``scripts/pretrained_report.py --ablation RUN`` tabulates).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/ is not installed

import torchik  # noqa: E402
from torchik.files import write_text  # noqa: E402
from torchik.learn import FKStream, make_dataset  # noqa: E402
from torchik.models import families  # noqa: E402
from torchik.models.pretrained import evaluate  # noqa: E402
from torchik.train import TrainConfig, TrainingInterrupted, steps_for_minutes, train  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "torchik" / "models" / "pretrained"


@dataclass(frozen=True)
class Recipe:
    """How one pretrained model is made."""

    robot: str
    targets: str
    family: str
    config: dict[str, Any]
    train_pairs: int
    steps: int
    batch_size: int = 512
    lr: float = 2e-3
    data_seed: int = 0
    seed: int = 0
    train: dict[str, Any] = field(default_factory=dict)
    val_pairs: int = 0
    val_seed: int = 2
    stream: bool = False  # fresh pairs by FK every step (FKStream, seeded by data_seed)
    device: str = "cpu"
    init: str = ""  # a model file whose weights start the training ("": from scratch)


_MDN = {"components": 12, "width": 256, "depth": 3, "activation": "silu"}
_RNN = {"hidden": 128, "width": 128, "depth": 1, "components": 8, "activation": "silu"}
_FM = {
    "width": 256, "blocks": 3, "embedding": 32, "activation": "silu", "space": "features",
    "steps": 8, "solver": "midpoint", "time_power": 3.0,
}  # fmt: skip
_IKNET_SMALL = {
    "hyper_width": 256, "hyper_depth": 2, "embedding": 32, "primary_width": 64,
    "primary_layers": 2, "components": 10, "min_scale": 1e-4, "norm": "none",
}  # fmt: skip


def _iknet_bench(robot: str, pairs: int, steps: int) -> Recipe:
    """The recipe of ``benchmarks/iknet.py --preset small --steps ROBOT=STEPS
    --train-threads 1`` (same data and validation seeds, schedule and weights kept; checked
    equal to the last bit after 120 steps), so that its checkpoint can be bundled with
    ``--checkpoint``."""
    train = {
        "warmup_steps": min(200, steps // 10), "min_lr_ratio": 0.02, "grad_clip": 0.3,
        "val_every": max(1, steps // 12), "log_every": max(1, steps // 50),
        "checkpoint_every": 0, "restore_best": True,
    }  # fmt: skip
    return Recipe(
        robot, "position", "iknet", _IKNET_SMALL, pairs, steps, batch_size=256, lr=3e-3,
        data_seed=1, seed=0, train=train, val_pairs=500, val_seed=2,
    )  # fmt: skip


RECIPES: dict[str, Recipe] = {
    "panda": Recipe(
        "panda",
        "pose",
        "fm",
        _FM,
        0,
        70_000,
        lr=3e-3,
        stream=True,
        train={"ema_decay": 0.999, "log_every": 1000},
    ),  # fmt: skip
    "ur5": Recipe(
        "ur5",
        "position",
        "fm",
        _FM,
        0,
        46_000,
        lr=3e-3,
        stream=True,
        val_pairs=1000,
        train={"ema_decay": 0.999, "log_every": 1000, "val_every": 1000, "restore_best": False},
    ),  # fmt: skip
    "digit_arm": _iknet_bench("digit_arm", 20_000, 15_000),
    "panda_position": Recipe(
        "panda",
        "position",
        "fm",
        _FM,
        0,
        64_000,
        lr=3e-3,
        stream=True,
        val_pairs=1000,
        train={"ema_decay": 0.999, "log_every": 1000, "val_every": 1000, "restore_best": False},
    ),  # fmt: skip
    "snake4": Recipe("snake4", "position", "rnn", _RNN, 100_000, 3000),
    "snake2": Recipe("snake2", "position", "mdn", {**_MDN, "components": 6}, 20_000, 2000),
}


_FM_GPU = {**_FM, "width": 512}
_TRAIN_GPU = {
    "ema_decay": 0.9995, "log_every": 1000, "val_every": 1000, "restore_best": False,
    "warmup_steps": 1000, "min_lr_ratio": 0.01,
}  # fmt: skip


def _gpu(robot: str, targets: str, blocks: int, batch_size: int) -> Recipe:
    """The fm recipe for one GPU (issue 13): a wider velocity network, large batches of fresh
    FK pairs made on the GPU; the steps are set by ``--fit-minutes`` and recorded."""
    return Recipe(
        robot, targets, "fm", {**_FM_GPU, "blocks": blocks}, 0, 200_000, batch_size=batch_size,
        lr=2e-3, stream=True, val_pairs=1000, train=_TRAIN_GPU, device="cuda",
    )  # fmt: skip


GPU_RECIPES: dict[str, Recipe] = {
    "panda": _gpu("panda", "pose", 4, 8192),
    "panda_position": _gpu("panda", "position", 3, 4096),
    "ur5": _gpu("ur5", "position", 3, 4096),
    "digit_arm": _gpu("digit_arm", "position", 3, 4096),
}
"""The recipes of ``--gpu`` (``scripts/gpu_pretrained.sh`` trains them in one call)."""


class _TimeUp(Exception):
    pass


def _stop_after(minutes: float | None, resumable: bool):
    """A callback that ends the training after ``minutes``: in a run directory by SIGTERM
    (the engine then saves a resumable checkpoint), otherwise by :class:`_TimeUp`."""
    deadline = None if minutes is None else time.perf_counter() + 60 * minutes
    sent = []

    def callback(step: int, metrics: dict[str, float]) -> None:
        if deadline is None or time.perf_counter() <= deadline or sent:
            return
        if not resumable:
            raise _TimeUp(step)
        sent.append(step)
        signal.raise_signal(signal.SIGTERM)

    return callback


def _curve(history: list[dict[str, float]]) -> list[list[float]]:
    """``[seconds, step, validation error (mm)]`` of each validation step of a run."""
    return [
        [round(row["seconds"], 1), int(row["step"]), round(1000 * row["val_position_error"], 2)]
        for row in history
        if row.get("val_position_error") == row.get("val_position_error")  # not NaN
    ]


def train_one(
    name: str,
    recipe: Recipe,
    minutes: float | None,
    run_dir: Path | None = None,
    fit_minutes: float | None = None,
) -> tuple[Any, dict[str, Any], Recipe]:
    """Train the model ``name``; returns it, the facts of its training and the recipe run.

    With ``run_dir`` the training is resumable: it continues the run saved there, and after
    ``minutes`` (or Ctrl-C, SIGTERM) it saves a checkpoint and exits with status 3; run the
    same command again to go on. With ``fit_minutes`` the number of steps is measured
    (:func:`torchik.train.steps_for_minutes`) so that the whole schedule runs in that time.
    """
    started = time.perf_counter()
    robot = torchik.load_robot(recipe.robot)
    if recipe.stream:
        data = FKStream(robot, targets=recipe.targets, seed=recipe.data_seed)
    else:
        data = make_dataset(
            robot, recipe.train_pairs, targets=recipe.targets, seed=recipe.data_seed
        )
    cls = families()[recipe.family]
    torch.manual_seed(recipe.seed)
    model = cls(data.spec, cls.Config(**recipe.config))
    if recipe.init:  # continue a model trained earlier (same family, robot and sizes)
        model.load_state_dict(torchik.models.load(recipe.init).state_dict())
    settings = {"val_every": 0, "log_every": 500, "restore_best": False, **recipe.train}
    val, fk_robot = None, None
    if recipe.val_pairs:  # validation by FK picks the weights kept (restore_best)
        val = make_dataset(robot, recipe.val_pairs, targets=recipe.targets, seed=recipe.val_seed)
        fk_robot = torchik.load_robot(recipe.robot, dtype=torch.float64)
        settings["val_targets"] = recipe.val_pairs
    config = TrainConfig(
        steps=recipe.steps,
        batch_size=recipe.batch_size,
        lr=recipe.lr,
        seed=recipe.seed,
        device=recipe.device,
        **settings,
    )
    if fit_minutes is not None:
        steps = steps_for_minutes(model, data, config, fit_minutes, started, min_steps=100)
        print(f"{steps} steps fit in the {fit_minutes} min of --fit-minutes")
        config, recipe = (dataclasses.replace(x, steps=steps) for x in (config, recipe))
    start, capped, curve = time.perf_counter(), None, None
    stop = _stop_after(minutes, resumable=run_dir is not None)
    try:
        result = train(
            model, data, val, config, out_dir=run_dir, resume=True, robot=fk_robot, callback=stop
        )
        seconds, curve = result.seconds, _curve(result.history)
    except _TimeUp as up:
        capped, seconds = int(up.args[0]), time.perf_counter() - start
    except TrainingInterrupted as paused:
        print(f"{name}: paused at step {paused.step}; run the same command again to resume")
        raise SystemExit(3) from None
    facts = {"train_seconds": round(seconds, 1), "stopped_at_step": capped}
    if curve:
        facts["curve"] = curve  # [seconds, step, validation error in mm]
    return model.cpu().eval(), facts, recipe


def _size_mb(path: Path) -> float:
    return round(path.stat().st_size / 2**20, 3)


def run(
    name: str,
    overrides: dict[str, Any],
    minutes: float | None,
    out: Path,
    checkpoint: Path | None = None,
    train_seconds: float | None = None,
    run_dir: Path | None = None,
    fit_minutes: float | None = None,
    gpu: bool = False,
    iknet_table: bool = False,
) -> dict[str, Any]:
    recipe = dataclasses.replace((GPU_RECIPES if gpu else RECIPES)[name], **overrides)
    print(f"== {name}: {recipe.family} on {recipe.robot} ({recipe.targets}), {recipe.steps} steps")
    if checkpoint is None:
        model, facts, recipe = train_one(
            name, recipe, minutes, run_dir and run_dir / name, fit_minutes
        )
    else:  # trained elsewhere by this very recipe (e.g. benchmarks/iknet.py)
        model = torchik.models.load(checkpoint).eval()
        if type(model).__name__.lower() != recipe.family or model.spec.robot != recipe.robot:
            raise SystemExit(f"{checkpoint} is not a {recipe.family} model of {recipe.robot}")
        facts = {"train_seconds": train_seconds, "stopped_at_step": None}
        facts["trained_by"] = f"checkpoint {checkpoint.name} of a run with this recipe"
    path = out / f"{name}.pt"
    model.save(path)
    loaded = torchik.models.load(path)
    accuracy = {k: round(v, 2) for k, v in evaluate(loaded).items()}
    params = sum(p.numel() for p in loaded.parameters())
    if iknet_table:
        facts["iknet_table"] = _iknet_row(loaded, recipe.device)
    if recipe.init:
        facts["continued_from"] = _earlier(Path(recipe.init))
    entry = {
        "recipe": dataclasses.asdict(recipe),
        **facts,
        "parameters": params,
        "size_mb": _size_mb(path),
        "accuracy": accuracy,
        "evaluation": "raw samples, 1000 held-out targets x 10 samples (torchik.models.pretrained)",
        "machine": _machine(recipe.device),
        "torch": torch.__version__,
    }
    print(json.dumps(entry, indent=1))
    return entry


def _iknet_row(model: Any, device: str) -> dict[str, Any]:
    """The IKNet table's row of a position model (the Neural IK protocol: its 1000 test
    targets x 100 raw samples), sampled on ``device``, FK in float64."""
    from experiments.iknet import iknet_table

    robot64 = torchik.load_robot(model.spec.robot, dtype=torch.float64)
    row = iknet_table(robot64, model.to(device), timing=False).as_dict()
    model.cpu()
    return {k: round(v, 4) for k, v in row.items() if isinstance(v, float)}


def _earlier(path: Path) -> dict[str, Any]:
    """What is known of the model that a training continued, from the ``accuracy.json``
    beside it (the file name alone otherwise): its steps, batch, training time, accuracy,
    curve and, if it continued another, that one's (the whole chain of chunks)."""
    table = path.parent / "accuracy.json"
    entry = json.loads(table.read_text()).get(path.stem, {}) if table.exists() else {}
    recipe = entry.get("recipe", {})
    keys = ("train_seconds", "accuracy", "sample_steps", "curve", "machine", "continued_from")
    return {"file": path.name, "steps": recipe.get("steps"), "batch_size": recipe.get("batch_size"),
            "lr": recipe.get("lr"), **{k: entry[k] for k in keys if k in entry}}  # fmt: skip


def bundle(
    name: str, run_out: Path, out: Path, sample_steps: int | None, half: bool
) -> dict[str, Any]:
    """Bundle the model ``name`` that a run wrote to ``run_out`` (``<name>.pt`` and its
    ``accuracy.json``, e.g. from ``scripts/gpu_pretrained.sh``): optionally with
    ``sample_steps`` integration steps when sampling and float16 parameters, evaluated again
    here; the run's facts (recipe, curve, time, machine) are kept."""
    facts = json.loads((run_out / "accuracy.json").read_text())[name]
    model = torchik.models.load(run_out / f"{name}.pt")
    if sample_steps is not None:
        config = dataclasses.replace(model.config, steps=sample_steps)
        tuned = type(model)(model.spec, config)
        tuned.load_state_dict(model.state_dict())
        model = tuned
    path = out / f"{name}.pt"
    model.save(path, half=half)
    accuracy = {k: round(v, 2) for k, v in evaluate(torchik.models.load(path)).items()}
    entry = {
        **facts,
        "size_mb": _size_mb(path),
        "accuracy": accuracy,
        "accuracy_as_trained": facts["accuracy"],
        "sample_steps": sample_steps,
        "stored": "float16 parameters" if half else "float32",
    }
    print(json.dumps({k: v for k, v in entry.items() if k != "curve"}, indent=1))
    return entry


def _machine(device: str) -> str:
    """The machine a model trained on, as ``accuracy.json`` records it."""
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
        return f"{name}, {torch.get_num_threads()} torch threads"
    return (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch thread(s)"
    )


def _merge(out: Path, entries: dict[str, Any]) -> None:
    path = out / "accuracy.json"
    table = json.loads(path.read_text()) if path.exists() else {}
    table.update(entries)
    write_text(path, json.dumps(dict(sorted(table.items())), indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=[*RECIPES, "all", "table", "curves"])
    parser.add_argument("--steps", type=int, help="override the recipe's steps (trials)")
    parser.add_argument("--family", help="override the recipe's family (trials)")
    parser.add_argument("--config", type=json.loads, help="override the config, JSON (trials)")
    parser.add_argument("--minutes", type=float, help="cap on the wall time of each model")
    parser.add_argument("--batch-size", type=int, help="override the recipe's batch size")
    parser.add_argument("--lr", type=float, help="override the recipe's learning rate")
    parser.add_argument(
        "--train-pairs", type=int, help="a fixed training set of this size instead of a stream"
    )
    parser.add_argument("--train", type=json.loads, help="TrainConfig settings to add, JSON")
    parser.add_argument("--device", help="train there (default: the recipe's, cpu)")
    parser.add_argument("--gpu", action="store_true", help="the GPU recipe of NAME (cuda)")
    parser.add_argument(
        "--bundle-run", type=Path,
        help="bundle NAME as trained by a run that wrote BUNDLE_RUN/NAME.pt and accuracy.json",
    )  # fmt: skip
    parser.add_argument("--sample-steps", type=int, help="with --bundle-run: ODE steps (fm)")
    parser.add_argument("--half", action="store_true", help="store float16 parameters")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument(
        "--fit-minutes", type=float,
        help="measure the training speed first and set the steps so that the whole schedule "
        "runs in this many minutes (the recipe records the steps run)",
    )  # fmt: skip
    parser.add_argument(
        "--init", help="start from this model file's weights (same family, robot and sizes)"
    )
    parser.add_argument(
        "--iknet-table", action="store_true",
        help="also measure the Neural IK table's row (1000 targets x 100 samples) on --device",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--checkpoint", type=Path,
        help="bundle this checkpoint, trained elsewhere with NAME's recipe, instead of training",
    )  # fmt: skip
    parser.add_argument("--train-seconds", type=float, help="with --checkpoint: its training time")
    parser.add_argument(
        "--run-dir", type=Path,
        help="resumable training in RUN_DIR/NAME: --minutes then ends a chunk (exit status 3) "
        "with a checkpoint, and the same command resumes it",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.name in ("table", "curves"):
        from pretrained_report import markdown_table, plot_curves  # beside this script

        if args.name == "table":
            print(markdown_table(args.out))
        else:
            print(plot_curves(args.out, DEFAULT_OUT.parents[2] / "docs/img/pretrained_curves.png"))
        return
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    recipes = GPU_RECIPES if args.gpu else RECIPES
    names = list(recipes) if args.name == "all" else [args.name]
    if any(name not in recipes for name in names):
        parser.error(f"--gpu has recipes for {', '.join(GPU_RECIPES)} only")
    overrides = {
        "steps": args.steps, "family": args.family, "config": args.config,
        "batch_size": args.batch_size, "lr": args.lr, "device": args.device,
        "train_pairs": args.train_pairs, "stream": None if args.train_pairs is None else False,
        "init": args.init,
    }  # fmt: skip
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if args.checkpoint is not None and len(names) != 1:
        raise SystemExit("--checkpoint needs one model NAME")
    if args.bundle_run is not None:
        entries = {
            n: bundle(n, args.bundle_run, args.out, args.sample_steps, args.half) for n in names
        }
        _merge(args.out, entries)
        return
    for name in names:  # one at a time; the table is updated after each model
        more = {"train": {**recipes[name].train, **args.train}} if args.train else {}
        entry = run(
            name, {**overrides, **more}, args.minutes, args.out, args.checkpoint,
            args.train_seconds, args.run_dir, args.fit_minutes, args.gpu, args.iknet_table,
        )  # fmt: skip
        _merge(args.out, {name: entry})


if __name__ == "__main__":
    main()
