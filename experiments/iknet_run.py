"""The IKNet paper's whole experiment: train IKNet (and other families) per robot, then its table.

:func:`experiments.iknet.iknet_table` measures one model; this module runs the protocol of
``benchmarks/iknet.py`` around it: per robot a training set (the paper's sizes), 500 validation
and 1000 test targets from other seeds, a fixed number of training steps (or a budget in minutes
turned into steps by timing a few), every family's rows at temperature 1 (and IKNet's at the
``temperatures``), torchik's numerical solvers on the same targets, and the validation curve.

Example:
    >>> settings = IKNetRun(steps={"digit_arm": 2}, train_size={"digit_arm": 64}, batch=32,
    ...                     samples=2, temperatures=(), work=str(getfixture("tmp_path")))
    >>> rows, curve = run_robot("digit_arm", settings, timing=False)
    >>> [row["method"] for row in rows], len(curve) > 0
    (['IKNet'], True)
"""

from __future__ import annotations

import dataclasses
import json
import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch

from experiments.iknet import iknet_table, sampler_rows
from experiments.table import fmt_time

__all__ = [
    "IKNetRun",
    "LABELS",
    "PAPER_CM",
    "PRESETS",
    "ROBOTS",
    "SEEDS",
    "RobotData",
    "kept_rows",
    "robot_data",
    "row_fields",
    "run_robot",
    "train_model",
]

ROBOTS = {"digit_arm": 20_000, "ur5": 1_000_000, "panda": 1_000_000}
"""Robot -> the paper's training-set size (the end links are torchik's defaults)."""
PAPER_CM = {"digit_arm": 2.3, "ur5": 2.8, "panda": 3.1}
"""The paper's mean distances (cm) of IKNet samples."""
SEEDS = {"train": 1, "val": 2, "test": 3, "model": 0, "sample": 4, "solver": 5}
"""Seeds of the data sets, the model, its sampling and the numerical solvers."""
LABELS = {
    "iknet": "IKNet",
    "mlp": "MLP",
    "rnn": "RNN (GRU)",
    "mdn": "multivariate GMM",
    "cvae": "cVAE",
    "inn": "INN",
    "flow": "flow (NSF)",
}
"""Family -> row label (the Neural IK paper's names for its baselines)."""
SOLVERS: dict[str, dict[str, Any]] = {
    "lm, 1 start": dict(method="lm", num_seeds=1, seed_pool=0, restarts=False),
    "dls, 1 start": dict(method="dls", num_seeds=1, seed_pool=0, restarts=False),
    "lm, default seeding": dict(method="lm"),
}
"""Numerical rows: torchik.solve_ik options (position only, 1 mm)."""


def _presets() -> dict[str, Any]:
    from torchik.models import IKNetConfig

    mid = IKNetConfig(hyper_width=512, hyper_depth=3, embedding=64, primary_width=128,
                      components=20)  # fmt: skip
    return {"small": IKNetConfig.small(), "small-trig": IKNetConfig.small(joint_features="trig"),
            "mid": mid, "default": IKNetConfig(), "paper": IKNetConfig.paper()}  # fmt: skip


PRESETS = ("small", "small-trig", "mid", "default", "paper")
"""IKNet presets: ``small`` (CPU), ``small-trig`` (the same, the primary networks also reading
the cosine and sine of the joints drawn before), ``mid``, ``default`` (the public code's sizes),
``paper``."""


def preset(name: str) -> Any:
    """The :class:`torchik.models.IKNetConfig` of a preset of :data:`PRESETS`."""
    return _presets()[name]


@dataclass
class IKNetRun:
    """Settings of the experiment (the flags of ``benchmarks/iknet.py``).

    Attributes:
        preset: IKNet preset (:data:`PRESETS`).
        overrides: fields of the preset's :class:`~torchik.models.IKNetConfig` replaced.
        minutes: training budget per robot when ``steps`` has no entry for it.
        steps: robot -> training steps (instead of ``minutes``).
        train_size: robot -> training pairs (default: :data:`ROBOTS`).
        batch, lr, grad_clip: the optimiser's settings (AdamW, warm-up then cosine decay).
        weight_decay, ema_decay: AdamW's decoupled weight decay and the weights' moving average
            (:class:`~torchik.train.TrainConfig`; the protocol: 0 and none).
        train_threads: torch threads while training (0: keep the current number).
        samples: raw samples per test target.
        temperatures: IKNet's extra rows at these sampling temperatures.
        families: families to train (``"iknet"`` and those of :data:`LABELS`).
        family_minutes: budget of each non-IKNet family (default: ``steps``, else ``minutes``).
        work: folder of the training runs (checkpoints).
        checkpoint_every: save a resumable checkpoint every so many steps (0: at the end only).
        resume: continue a run from its checkpoint in ``work`` (if there is one).
        model_seed: seeds the model's initialisation and the batch order (the data sets keep
            theirs).
        solvers: add torchik's numerical solvers on the same targets.
    """

    preset: str = "small"
    overrides: dict[str, Any] = field(default_factory=dict)
    minutes: float = 6.0
    steps: dict[str, int] = field(default_factory=dict)
    train_size: dict[str, int] = field(default_factory=dict)
    batch: int = 256
    lr: float = 3e-3
    grad_clip: float = 0.3
    weight_decay: float = 0.0
    ema_decay: float | None = None
    train_threads: int = 0
    samples: int = 100
    temperatures: tuple[float, ...] = (0.25,)
    families: tuple[str, ...] = ("iknet",)
    family_minutes: float | None = None
    work: str = "/tmp/torchik-iknet-bench"
    checkpoint_every: int = 0
    resume: bool = False
    model_seed: int = SEEDS["model"]
    solvers: bool = False


class RobotData(NamedTuple):
    """A robot's float64 copy and its training, validation and test sets."""

    robot64: Any
    train_set: Any
    val_set: Any
    test_set: Any
    size: int


def robot_data(name: str, settings: IKNetRun) -> RobotData:
    """The data sets of a bundled robot (joints uniform within limits, seeds :data:`SEEDS`)."""
    from torchik.learn import make_dataset
    from torchik.robot import load_robot

    robot, robot64 = load_robot(name), load_robot(name, dtype=torch.float64)
    size = settings.train_size.get(name, ROBOTS[name])
    train_set = make_dataset(robot, size, seed=SEEDS["train"])
    val_set = make_dataset(robot, 500, seed=SEEDS["val"])
    test_set = make_dataset(robot, 1000, seed=SEEDS["test"])
    return RobotData(robot64, train_set, val_set, test_set, size)


def row_fields(row: Any) -> dict[str, Any]:
    """A protocol row's values as the table's keys (unset runtimes and the counts left out)."""
    skip = ("samples", "targets")
    return {k: v for k, v in row.as_dict().items() if v is not None and k not in skip}


def _make_model(family: str, spec: Any, settings: IKNetRun) -> Any:
    from torchik.models import IKNet, families

    torch.manual_seed(settings.model_seed)
    if family == "iknet":
        return IKNet(spec, dataclasses.replace(preset(settings.preset), **settings.overrides))
    cls = families()[family]
    return cls(spec, cls.Config())


def _config(settings: IKNetRun, steps: int, val_rows: int) -> Any:
    from torchik.train import TrainConfig

    return TrainConfig(
        steps=steps, batch_size=settings.batch, lr=settings.lr,
        warmup_steps=min(200, steps // 10), min_lr_ratio=0.02, grad_clip=settings.grad_clip,
        log_every=max(1, steps // 50), val_every=max(1, steps // 12),
        val_targets=val_rows, checkpoint_every=settings.checkpoint_every, seed=settings.model_seed,
        weight_decay=settings.weight_decay, ema_decay=settings.ema_decay,
    )  # fmt: skip


def _steps(name: str, family: str, model: Any, settings: IKNetRun, data: RobotData, log) -> int:
    from torchik.train import steps_for_minutes

    if name in settings.steps and (family == "iknet" or settings.family_minutes is None):
        log(f"{name} {family}: {settings.steps[name]} steps")
        return settings.steps[name]
    minutes = settings.minutes if family == "iknet" else settings.family_minutes
    minutes = minutes or settings.minutes
    probe = _config(settings, 1000, len(data.val_set))
    steps = steps_for_minutes(model, data.train_set, probe, minutes, margin=1.0)
    log(f"{name} {family}: {steps} steps fit in {minutes} min")
    return steps


def train_model(
    name: str, family: str, settings: IKNetRun, data: RobotData, log: Callable[[str], None]
) -> tuple:
    """Train ``family`` on robot ``name``'s training set as the protocol does; returns the
    model, the :class:`~torchik.train.TrainResult` and the steps run."""
    from torchik.train import train

    model = _make_model(family, data.train_set.spec, settings)
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.train_threads or threads)
    try:
        steps = _steps(name, family, model, settings, data, log)
        config = _config(settings, steps, len(data.val_set))
        out_dir = Path(settings.work) / (name if family == "iknet" else f"{name}-{family}")
        result = train(model, data.train_set, data.val_set, config, out_dir=out_dir,
                       robot=data.robot64, resume=settings.resume)  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return result.model, result, steps


def _curve(name: str, result: Any, method: str) -> list[dict[str, Any]]:
    rows = [r for r in result.history if not math.isnan(r["val_position_error"])]
    return [
        {"method": method, "robot": name, "step": int(r["step"]), "seconds": r["seconds"],
         "val_mean_cm": r["val_position_error"] * 100.0, "loss": r["loss"]}
        for r in rows
    ]  # fmt: skip


def _train_and_evaluate(
    name: str, family: str, settings: IKNetRun, data: RobotData, log, timing: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    model, result, steps = train_model(name, family, settings, data, log)
    log(f"{name} {family}: trained {fmt_time(result.seconds)}; evaluating")
    row: dict[str, Any] = {
        "family": family, "method": LABELS.get(family, family), "robot": name,
        "link": model.spec.link, "train_size": data.size, "steps": steps,
        "batch": settings.batch, "train_s": result.seconds, "paper_cm": PAPER_CM[name],
        "parameters": sum(p.numel() for p in model.parameters()),
    }  # fmt: skip
    if family == "iknet":
        row["generated_per_target"] = model.generated_size
    rows = []
    temperatures = (1.0, *settings.temperatures) if family == "iknet" else (1.0,)
    for i, temperature in enumerate(temperatures):
        table_row = iknet_table(data.robot64, model, data.test_set.target,
                                n_samples=settings.samples, seed=SEEDS["sample"],
                                temperature=temperature, timing=timing and i == 0)  # fmt: skip
        rows.append({**row, "temperature": temperature, **row_fields(table_row)})
        keys = ("temperature", "mean_cm", "acc_2cm", "best10_cm")
        log(f"{name} {family}: {json.dumps({k: rows[-1][k] for k in keys})}")
    return rows, _curve(name, result, row["method"])


def solver_rows(name: str, data: RobotData, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """torchik's numerical solvers (:data:`SOLVERS`) on the same test targets (1 mm)."""
    from torchik.ik import solve_ik

    target, link = data.test_set.target.double(), data.test_set.spec.link

    def solver(options: dict[str, Any]) -> Callable[[], torch.Tensor]:
        def solve() -> torch.Tensor:  # the best slot per target, same seeds at every call
            gen = torch.Generator().manual_seed(SEEDS["solver"])
            return solve_ik(data.robot64, target, link, position_only=True, generator=gen,
                            num_threads=1, **options).best().q  # fmt: skip

        return solve

    solvers = {f"torchik {label}": solver(options) for label, options in SOLVERS.items()}
    rows = []
    spec = data.test_set.spec
    for label, row in sampler_rows(data.robot64, solvers, data.test_set.target, spec).items():
        rows.append({"method": label, "robot": name, "paper_cm": PAPER_CM[name], **row_fields(row)})
        log(f"{name} {label}: {row.mean_cm:.3f} cm, {row.acc_1cm:.3f} < 1 cm")
    return rows


def run_robot(
    name: str,
    settings: IKNetRun,
    data: RobotData | None = None,
    log: Callable[[str], None] = lambda message: None,
    timing: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every family's rows (and the solvers') on one bundled robot, and the validation curve.

    Args:
        name: a robot of :data:`ROBOTS`.
        settings: the experiment's settings.
        data: the robot's data sets (default: :func:`robot_data`).
        log: receives progress lines.
        timing: time the sampling (the table's runtime columns).

    Returns:
        The table rows (dicts of :class:`IKNetRow` fields and the training facts) and the
        validation curve's points (``step``, ``seconds``, ``val_mean_cm``, ``loss``).
    """
    data = data or robot_data(name, settings)
    rows, curve = [], []
    for family in settings.families:
        try:
            family_rows, points = _train_and_evaluate(name, family, settings, data, log, timing)
        except Exception as err:  # one family failing keeps the others' rows
            traceback.print_exc()
            family_rows = [{"method": LABELS.get(family, family), "robot": name,
                            "status": f"failed: {type(err).__name__}: {err}"[:200]}]  # fmt: skip
            points = []
        rows += family_rows
        curve += points
    if settings.solvers:
        rows += solver_rows(name, data, log)
    return rows, curve


_KEPT = "Rows of {} kept from an earlier run of this script"


def kept_rows(path: Path, robots: list[str]) -> tuple[list[dict], list[dict], list[str]]:
    """Rows and curve points of the robots not in ``robots`` from an earlier results JSON,
    and intro lines naming the run each kept robot's rows come from: that run, or the one
    its own intro names for the rows it kept in turn."""
    old = json.loads(Path(path).read_text())
    main, learning = old["tables"][0]["rows"], old["tables"][1]["rows"]
    rows = [r for r in main if r.get("robot") not in robots]
    curve = [r for r in learning if r.get("robot") not in robots]
    kept = sorted({r["robot"] for r in rows}, key=list(ROBOTS).index)
    own, notes = list(kept), []
    head, tail = _KEPT.split("{}")
    for line in old.get("intro", []):
        if not line.startswith(head) or tail not in line:
            continue
        named = line[len(head) : line.index(tail)].split(", ")
        still = [r for r in named if r in kept]
        own = [r for r in own if r not in named]
        if still:
            notes.append(_KEPT.format(", ".join(still)) + line[line.index(tail) + len(tail) :])
    if own:
        stamp = old["stamp"]
        notes.insert(0, _KEPT.format(", ".join(own)) + (
            f" ({stamp['date']}, torchik {stamp['torchik']}, load "
            f"{stamp['load_average_at_start']} at its start): `{stamp['command']}`."
        ))  # fmt: skip
    return rows, curve, notes
