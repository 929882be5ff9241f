"""The posterior report's whole experiment: train every family per arm, then its tables.

:func:`experiments.posterior.posterior_table` measures given models; this module runs the
protocol of ``benchmarks/posterior.py`` around it. Planar arms with N = 4, 6, 8, 10 unit links and
θ ~ N(0, 0.2²), and the rail arm with its prior N(0, diag(0.25, 0.5, 0.5, 0.5)²). Ground truth:
:func:`experiments.posterior.posterior_truth` (rejection sampling, the radius widened for
targets short of samples, each target's radius recorded). Each registered family is trained with
:func:`torchik.train.train` on prior samples (``make_dataset(..., sampler="normal",
targets="planar")``) for ``steps`` steps or ``minutes`` minutes. The "prior" row ignores the
target (an upper reference).

Example:
    >>> settings = PosteriorRun(families=("mlp",), targets=2, samples=20, steps=2, train_size=64,
    ...                         batch=32, preset="tiny")
    >>> rows, info = run_arm("4", settings)
    >>> [row["method"] for row in rows], info["arm"]
    (['ground truth (2nd draw)', 'prior', 'mlp'], '4')
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from experiments.posterior import posterior_table, posterior_truth
from experiments.table import Column, Table, fmt_sci, fmt_time

__all__ = [
    "ARMS",
    "FAMILIES",
    "INTRO",
    "arm_problem",
    "PosteriorRun",
    "arm_setup",
    "default_families",
    "posterior_tables",
    "run_arm",
    "scope_note",
]

ARMS = ("4", "6", "8", "10", "rail")
"""The report's arms: planar arms of N unit links, and the rail arm."""
FAMILIES = ("cvae", "inn", "flow", "mdn", "iknet", "mlp")
"""The families in the table's order (other registered families follow)."""
SEEDS = {"train": 1, "val": 2, "model": 0}
"""Seeds of the training data and the models (the protocol's own: experiments.posterior)."""

INTRO = (
    "Planar arms with N = 4, 6, 8, 10 unit links and θ ~ N(0, 0.2²), and the rail arm with its "
    "prior N(0, diag(0.25, 0.5, 0.5, 0.5)²). Test targets are the end points of prior draws. "
    "Ground truth: ``torchik.learn.rejection_sample_widening`` (radius ``--radius``; a target"
    " short of samples after ``--max-draws`` draws is sampled again with twice the radius: each "
    "target's radius is recorded), ``2 × --samples`` accepted per target: the first half is the "
    "reference, the second an independent draw that gives the finite-sample floor of every "
    "metric. Each registered model family is trained with ``torchik.train.train`` on prior "
    'samples (``make_dataset(..., sampler="normal", targets="planar")``) for ``--steps`` steps or'
    " ``--minutes`` minutes, then draws ``--samples`` samples per target. Metrics per target, "
    "averaged: MMD² to the reference (IMQ kernels, bandwidths 0.05, 0.2, 0.9, biased estimator), "
    "re-simulation error (mean squared end-point distance), convex-hull area of the 97th "
    'percentile of re-simulated end points, diversity (mean pairwise joint distance). The "prior"'
    " row ignores the target (an upper reference)."
)
"""The protocol in words (the results' intro; ``--x`` are the script's flags)."""


@dataclass
class PosteriorRun:
    """Settings of the experiment (the flags of ``benchmarks/posterior.py``).

    Attributes:
        families: families to train (default: :func:`default_families`).
        targets, samples: test targets, and samples per target.
        radius: base acceptance radius of the rejection sampling.
        max_draws: draws per widening round; threads: threads of the rejection sampling.
        steps, minutes: training budget per model (``steps`` wins when set).
        train_size, batch, lr: training pairs and optimiser.
        preset: ``"tiny"``, ``"small"`` (where the family has one) or ``"default"`` configs.
    """

    families: tuple[str, ...] | None = None
    targets: int = 100
    samples: int = 1000
    radius: float = 0.01
    max_draws: int = 1 << 24
    threads: int = 1
    steps: int | None = None
    minutes: float = 2.0
    train_size: int = 100_000
    batch: int = 512
    lr: float = 1e-3
    preset: str = "small"


def default_families() -> tuple[str, ...]:
    """Every registered family, :data:`FAMILIES` first."""
    from torchik.models import families

    known = families()
    return (*[f for f in FAMILIES if f in known], *sorted(set(known) - set(FAMILIES)))


def arm_problem(name: str) -> str:
    """The :func:`torchik.tune.objective.problem_robot` name of an arm: ``"4"`` is
    ``"planar:1,1,1,1"`` (unit links), ``"rail"`` is ``"rail_arm"``."""
    return "rail_arm" if name == "rail" else "planar:" + ",".join(["1"] * int(name))


def arm_setup(name: str) -> tuple[Any, Any, list[float]]:
    """``(closed-form arm, generic robot, prior std)`` of ``"4"``, ``"6"``, ... or ``"rail"``."""
    from torchik.tune.objective import problem_robot

    robot, arm, std = problem_robot(arm_problem(name))
    return arm, robot, list(std)


def _make_model(cls: Any, spec: Any, preset: str) -> Any:
    if preset == "tiny":
        config = cls.tiny_config()
    elif preset == "small" and hasattr(cls.Config, "small"):
        config = cls.Config.small()
    else:
        config = cls.Config()
    torch.manual_seed(SEEDS["model"])
    return cls(spec, config)


def _config(settings: PosteriorRun, steps: int, val_rows: int) -> Any:
    from torchik.train import TrainConfig

    return TrainConfig(
        steps=steps, batch_size=settings.batch, lr=settings.lr,
        warmup_steps=min(200, steps // 10), min_lr_ratio=0.02, log_every=max(1, steps // 20),
        val_every=max(1, steps // 5), val_targets=val_rows, checkpoint_every=0,
        seed=SEEDS["model"], progress=False,
    )  # fmt: skip


def _train_family(cls: Any, robot: Any, train_set: Any, val_set: Any, settings: PosteriorRun):
    from torchik.train import steps_for_minutes, train

    model = _make_model(cls, train_set.spec, settings.preset)
    steps = settings.steps
    if steps is None:
        probe = _config(settings, 1000, len(val_set))
        steps = steps_for_minutes(model, train_set, probe, settings.minutes, margin=1.0)
    config = _config(settings, steps, len(val_set))
    result = train(model, train_set, val_set, config, robot=robot)
    parameters = sum(p.numel() for p in model.parameters())
    return result.model, {"steps": steps, "train_s": result.seconds, "parameters": parameters}


def _fit_all(robot: Any, train_set: Any, val_set: Any, settings: PosteriorRun, families: tuple):
    from torchik.models import families as registered

    registry, models, fits = registered(), {"prior": None}, {}
    for family in families:
        if family not in registry:
            fits[family] = {"status": "not available yet: family not registered"}
            continue
        try:
            models[family], fits[family] = _train_family(registry[family], robot, train_set,
                                                         val_set, settings)  # fmt: skip
        except Exception as err:  # a model still being written: keep the other rows
            traceback.print_exc()
            fits[family] = {"status": f"failed: {type(err).__name__}: {err}"[:200]}
    return models, fits


def run_arm(
    name: str, settings: PosteriorRun, log: Callable[[str], None] = lambda message: None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Ground truth, training and the posterior rows of one arm.

    Args:
        name: an arm of :data:`ARMS`.
        settings: the experiment's settings.
        log: receives progress lines.

    Returns:
        The rows (``method``, ``arm``, the fit's ``steps``/``train_s``/``parameters`` and the
        metrics ``mmd``, ``resim``, ``hull``, ``diversity``) and the ground truth's facts.
    """
    from torchik.learn import make_dataset

    arm, robot, std = arm_setup(name)
    families = settings.families or default_families()
    log(f"arm {name}: ground truth for {settings.targets} targets")
    truth = posterior_truth(arm, std, settings.targets, settings.samples, settings.radius,
                            max_draws=settings.max_draws, threads=settings.threads)  # fmt: skip
    info = {**truth.info, "arm": name}
    log(f"arm {name}: {info}")
    kind: dict[str, Any] = {"sampler": "normal", "std": std if name == "rail" else 0.2}
    kind["targets"] = "planar"
    train_set = make_dataset(robot, settings.train_size, seed=SEEDS["train"], **kind)
    val_set = make_dataset(robot, 500, seed=SEEDS["val"], **kind)
    models, fits = _fit_all(robot, train_set, val_set, settings, families)
    table = posterior_table(arm, models, truth=truth)
    rows = [{"method": m, "arm": name, **fits.get(m, {}), **r} for m, r in table.rows.items()]
    rows += [{"method": m, "arm": name, **fit} for m, fit in fits.items() if m not in models]
    order = ["ground truth (2nd draw)", "prior", *families]
    rows.sort(key=lambda r: order.index(r["method"]))
    for row in rows[2:]:
        log(f"arm {name}: {row}")
    return rows, info


def posterior_tables(rows: list[dict[str, Any]], infos: list[dict[str, Any]], samples: int):
    """The ground-truth table (one row per arm's ``info``) and the metrics table of ``rows``."""
    truth = Table(
        "Ground truth by rejection sampling",
        [
            Column("arm", "arm"),
            Column("targets", "targets"),
            Column("accepted", "accepted / target"),
            Column("radius_base", "radius ε"),
            Column("at_base_radius", "targets at ε", lambda x: f"{100 * x:.0f} %"),
            Column("radius_median", "median radius", lambda x: f"{x:.3g}"),
            Column("radius_max", "max radius", lambda x: f"{x:.3g}"),
            Column("rate_median", "median acceptance", fmt_sci),
            Column("rate_min", "min acceptance", fmt_sci),
            Column("draws_max", "draws (max)", fmt_sci),
            Column("seconds", "time", fmt_time),
            Column("targets_x_accepted_per_s", "targets × accepted / s", lambda x: f"{x:.3g}"),
        ],
    )
    for info in infos:
        truth.add("rejection", **info)
    main = Table(
        f"Posterior metrics, {samples} samples per target (means over targets)",
        [
            Column("arm", "arm"),
            Column("steps", "steps"),
            Column("train_s", "train time", fmt_time),
            Column("mmd", "MMD²", lambda x: f"{x:.4f}"),
            Column("resim", "re-sim error", fmt_sci),
            Column("hull", "hull area (97 %)", fmt_sci),
            Column("diversity", "diversity", lambda x: f"{x:.3f}"),
        ],
    )
    for row in rows:
        row = dict(row)
        main.add(row.pop("method"), row.pop("status", "ok"), **row)
    return [truth, main]


def scope_note(settings: PosteriorRun, arms: list[str]) -> str:
    """What a run of these settings is: the full protocol, its CPU-scale table, or a smoke test."""
    every_arm = set(arms) >= set(ARMS)
    s = settings
    budget = f"{s.steps} steps" if s.steps else f"{s.minutes} min"
    scope = (
        f"{s.targets} targets, arms {', '.join(arms)}, preset {s.preset}, training "
        f"budget {budget} per model on the CPU, {s.train_size} training pairs"
    )
    if s.targets >= 1000 and every_arm:
        return f"Full protocol run ({scope})."
    if s.targets >= 100 and every_arm:
        return (
            f"**Protocol table at CPU scale** ({scope}): the protocol's 100 test targets (its "
            "final table asks 1000) and every arm; the models are trained for minutes, so the "
            "learned rows are far from converged and only their ordering should be read."
        )
    return f"**Small run** ({scope}): a smoke test of the protocol, not its table."
