"""Protocol "Neural IK table" (iknet): IKNet on the Digit arm, UR5 and Franka, position targets.

Each robot: joints uniform within limits, a training set (Digit 20k; UR5 and Franka as large as
asked), 500 validation and 1000 test targets from other seeds (disjoint), a fixed number of
training steps (or a budget in minutes turned into steps by timing a few). Then 100 samples per test
target: mean +- std distance of every sample, accuracy at 10 / 2 / 1 cm, best of 10 and of 100,
runtime per target (batch of 1000 targets), diversity (mean pairwise joint distance, wrapped on
full-turn joints), and the validation error against training time. ``--sizes`` adds the Franka
table of parameters, generated weights, memory and speed per preset.

``--families`` trains other learned models (MLP, RNN, multivariate GMM, cVAE, INN, flow) with the
same data, targets and metrics (``--family-minutes`` gives each the same wall-time budget), and
``--solvers`` adds the numerical solvers on the same test targets (one uniform random start per
target, as the paper ran IKPy, and torchik's default seeding); ``--no-iknet`` leaves IKNet out, and
``--name`` picks the results file, so that the baselines can be a separate run.

    .venv/bin/python benchmarks/iknet.py --steps digit_arm=10000 ur5=12000 panda=12000 --sizes
    .venv/bin/python benchmarks/iknet.py --no-iknet --families mlp rnn mdn cvae inn flow \
        --family-minutes 3 --solvers --name iknet_baselines
    .venv/bin/python benchmarks/iknet.py --robots digit_arm --minutes 1 --out /tmp/iknet
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from common import (
    Column,
    Report,
    Table,
    add_common_args,
    fmt_time,
    log,
    read_chain,
    try_import,
    wait_for_quiet,
    write_urdf_variant,
)

from torchik import load_robot, solve_ik
from torchik.data import make_dataset
from torchik.models import IKModel, IKNet, IKNetConfig, families
from torchik.protocols.iknet import (
    iknet_metrics,
    iknet_sizes,
    iknet_table,
    sampler_rows,
    training_step_seconds,
)
from torchik.train import TrainConfig, train

ROBOTS = {"digit_arm": 20_000, "ur5": 1_000_000, "panda": 1_000_000}
"""Robot -> the paper's training-set size (the end links are torchik's defaults)."""
PAPER_CM = {"digit_arm": 2.3, "ur5": 2.8, "panda": 3.1}
"""The paper's mean distances (cm) of IKNet samples."""
PRESETS = {
    "small": IKNetConfig.small(),
    "mid": IKNetConfig(
        hyper_width=512, hyper_depth=3, embedding=64, primary_width=128, components=20
    ),
    "default": IKNetConfig(),
    "paper": IKNetConfig.paper(),
}
SEEDS = {"train": 1, "val": 2, "test": 3, "model": 0, "sample": 4, "solver": 5}
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
SOLVERS = {
    "lm, 1 start": dict(method="lm", num_seeds=1, seed_pool=0, restarts=False),
    "dls, 1 start": dict(method="dls", num_seeds=1, seed_pool=0, restarts=False),
    "lm, default seeding": dict(method="lm"),
}
"""Numerical rows: torchik.solve_ik options (position only, 1 mm)."""
CM = 100.0  # the curve's validation error, m -> cm


def _cm(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


# ---------------------------------------------------------------------------- training
def seconds_per_step(model: IKModel, data, batch: int) -> float:
    """Seconds of a training step, on a throwaway copy of the model."""
    probe = copy.deepcopy(model).train()
    probe.set_normalization(data.q, data.target)
    return training_step_seconds(probe, data.q[:batch], data.target[:batch], min_run_time=0.5)


def _fields(row) -> dict[str, Any]:
    """A protocol row's values as the table's keys (unset runtimes and the counts left out)."""
    skip = ("samples", "targets")
    return {k: v for k, v in row.as_dict().items() if v is not None and k not in skip}


def _make_model(family: str, spec, args) -> IKModel:
    torch.manual_seed(SEEDS["model"])
    if family == "iknet":
        return IKNet(spec, PRESETS[args.preset])
    cls = families()[family]
    return cls(spec, cls.Config())


def _train(name: str, family: str, args, robot, train_set, val_set) -> tuple[IKModel, Any, int]:
    model = _make_model(family, train_set.spec, args)
    minutes = args.minutes if family == "iknet" else args.family_minutes
    if name in args.steps and (family == "iknet" or args.family_minutes is None):
        steps = args.steps[name]
        log(f"{name} {family}: {steps} steps")
    else:
        minutes = minutes or args.minutes
        step_s = seconds_per_step(model, train_set, args.batch)
        steps = max(50, int(minutes * 60 / step_s))
        log(f"{name} {family}: {step_s * 1000:.0f} ms/step -> {steps} steps in {minutes} min")
    config = TrainConfig(
        steps=steps,
        batch_size=args.batch,
        lr=args.lr,
        warmup_steps=min(200, steps // 10),
        min_lr_ratio=0.02,
        grad_clip=args.grad_clip,
        log_every=max(1, steps // 50),
        val_every=max(1, steps // 12),
        val_targets=len(val_set),
        checkpoint_every=0,
        seed=SEEDS["model"],
    )
    out_dir = Path(args.work) / (name if family == "iknet" else f"{name}-{family}")
    threads = torch.get_num_threads()
    torch.set_num_threads(args.train_threads or threads)
    try:
        result = train(model, train_set, val_set, config, out_dir=out_dir, robot=robot)
    finally:
        torch.set_num_threads(threads)
    return result.model, result, steps


# ---------------------------------------------------------------------------- evaluation
def _evaluate(model: IKModel, robot64, test_set, n: int, temperature: float, timing: bool):
    """The protocol's row of ``n`` raw samples per test target (float32 samples, as drawn)."""
    row = iknet_table(robot64, model, test_set.target, n_samples=n, seed=SEEDS["sample"],
                      temperature=temperature, timing=timing)  # fmt: skip
    return _fields(row)


def _curve(name: str, result, method: str = "IKNet") -> list[dict[str, float]]:
    rows = [r for r in result.history if not math.isnan(r["val_position_error"])]
    return [
        {
            "method": method,
            "robot": name,
            "step": int(r["step"]),
            "seconds": r["seconds"],
            "val_mean_cm": r["val_position_error"] * CM,
            "loss": r["loss"],
        }
        for r in rows
    ]


def _train_and_evaluate(name, family, args, data) -> tuple[list[dict], list[dict]]:
    robot64, train_set, val_set, test_set, size = data
    model, result, steps = _train(name, family, args, robot64, train_set, val_set)
    log(f"{name} {family}: trained {result.seconds:.0f} s; evaluating")
    row = {
        "family": family,
        "method": LABELS.get(family, family),
        "robot": name,
        "link": model.spec.link,
        "train_size": size,
        "steps": steps,
        "batch": args.batch,
        "train_s": result.seconds,
        "paper_cm": PAPER_CM[name],
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    if family == "iknet":
        row["generated_per_target"] = model.generated_size
    rows = []
    temperatures = (1.0, *args.temperatures) if family == "iknet" else (1.0,)
    for i, temperature in enumerate(temperatures):
        rows.append({**row, "temperature": temperature})
        rows[-1] |= _evaluate(model, robot64, test_set, args.samples, temperature, i == 0)
        keys = ("temperature", "mean_cm", "acc_2cm", "best10_cm")
        log(f"{name} {family}: {json.dumps({k: rows[-1][k] for k in keys})}")
    return rows, _curve(name, result, row["method"])


def _solver_rows(name: str, robot64, test_set) -> list[dict[str, Any]]:
    """torchik's numerical solvers on the same test targets (position only, 1 mm)."""
    target = test_set.target.double()

    def solver(options):
        def solve():  # the best slot per target, from the same seeds at every call
            gen = torch.Generator().manual_seed(SEEDS["solver"])
            return solve_ik(robot64, target, test_set.spec.link, position_only=True,
                            generator=gen, **options).best().q  # fmt: skip

        return solve

    solvers = {f"torchik {label}": solver(options) for label, options in SOLVERS.items()}
    rows = []
    for label, row in sampler_rows(robot64, solvers, test_set.target, test_set.spec).items():
        rows.append({"method": label, "robot": name, "paper_cm": PAPER_CM[name], **_fields(row)})
        log(f"{name} {label}: {row.mean_cm:.3f} cm, {row.acc_1cm:.3f} < 1 cm")
    rows.append(_ikpy_row(name, robot64, test_set))
    return rows


def _ikpy_row(name: str, robot64, test_set, n: int = 200) -> dict[str, Any]:
    """IKPy from one uniform random start per target (the paper's baseline), first ``n``."""
    row = {"method": "IKPy, 1 start", "robot": name, "paper_cm": PAPER_CM[name]}
    ikpy_chain, reason = try_import("ikpy.chain")
    if ikpy_chain is None:
        return row | {"status": f"missing: {reason}"}
    import tempfile
    import warnings

    from ik import ROBOTS as IK_ROBOTS
    from ik import ikpy_chain_for

    from torchik.robots import bundled_urdf

    case = IK_ROBOTS.get(name)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{name}-bundled.urdf"
        src.write_text(bundled_urdf(name))
        urdf = write_urdf_variant(src, Path(tmp) / f"{name}.urdf", case.limits if case else None)
        spec = read_chain(urdf, test_set.spec.link)
        chain, active = ikpy_chain_for(ikpy_chain.Chain, spec)
    robot_names = load_robot(name).joint_names
    cols = [spec.joint_names.index(j) for j in robot_names]
    gen = torch.Generator().manual_seed(SEEDS["solver"])
    lower, upper = robot64.lower, robot64.upper
    starts = lower + (upper - lower) * torch.rand(n, len(lower), generator=gen, dtype=torch.float64)
    out = torch.empty(n, len(lower), dtype=torch.float64)
    start_time = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n):
            init = [0.0] * len(chain.links)
            for k, c in enumerate(cols):
                init[active[c]] = starts[i, k].item()
            goal = test_set.target[i].double().numpy()
            sol = chain.inverse_kinematics(goal, initial_position=init)
            out[i] = torch.tensor([sol[active[c]] for c in cols])
    seconds = time.perf_counter() - start_time
    row |= _fields(iknet_metrics(robot64, out[:, None], test_set.target[:n], test_set.spec))
    log(f"{name} IKPy: {row['mean_cm']:.3f} cm on {n} targets")
    return row | {"runtime_1_s": seconds / n, "targets": n}


def run_robot(name: str, args) -> tuple[list[dict[str, Any]], list[dict[str, float]]]:
    robot, robot64 = load_robot(name), load_robot(name, dtype=torch.float64)
    size = args.train_size.get(name, ROBOTS[name])
    log(f"{name}: making {size} training pairs")
    train_set = make_dataset(robot, size, seed=SEEDS["train"])
    val_set = make_dataset(robot, 500, seed=SEEDS["val"])
    test_set = make_dataset(robot, 1000, seed=SEEDS["test"])
    data = (robot64, train_set, val_set, test_set, size)
    rows, curve = [], []
    for family in args.families:
        try:
            family_rows, points = _train_and_evaluate(name, family, args, data)
        except Exception as err:  # one family failing keeps the others' rows
            traceback.print_exc()
            family_rows = [{"method": LABELS.get(family, family), "robot": name,
                            "status": f"failed: {type(err).__name__}: {err}"[:200]}]  # fmt: skip
            points = []
        rows += family_rows
        curve += points
    if args.solvers:
        rows += _solver_rows(name, robot64, test_set)
    return rows, curve


# ---------------------------------------------------------------------------- report
def _tables(rows, curve, sizes, args) -> list[Table]:
    title = f"IKNet ({args.preset} preset)" if "iknet" in args.families else "Baselines"
    main = Table(
        f"{title}, position targets, 1000 test targets x {args.samples}",
        [
            Column("robot", "robot"),
            Column("parameters", "parameters", lambda x: f"{x / 1e6:.2f} M"),
            Column("train_size", "train pairs"),
            Column("steps", "steps"),
            Column("train_s", "train time", fmt_time),
            Column("mean_cm", "mean (cm)", _cm),
            Column("std_cm", "std (cm)", _cm),
            Column("median_cm", "median (cm)", _cm),
            Column("paper_cm", "paper mean (cm)", _cm),
            Column("acc_10cm", "< 10 cm", _pct),
            Column("acc_2cm", "< 2 cm", _pct),
            Column("acc_1cm", "< 1 cm", _pct),
            Column("best10_cm", "best of 10 (cm)", _cm),
            Column("best100_cm", "best of 100 (cm)", _cm),
            Column("runtime_1_s", "time/target, 1 sample", fmt_time),
            Column("runtime_100_s", "time/target, 100 samples", fmt_time),
            Column("diversity", "diversity (rad)", lambda x: "—" if math.isnan(x) else f"{x:.3f}"),
        ],
        references=(),
    )
    for row in rows:
        temperature = row.get("temperature", 1.0)
        label = "" if temperature == 1.0 else f", temperature {temperature:g}"
        method = row["method"]
        if row.get("family") == "iknet":
            method = f"IKNet ({args.preset}{label})"
        main.add(method, **{k: v for k, v in row.items() if k != "method"})
    main.notes += [
        "Distances are over every sample (1000 targets x samples); accuracy = fraction of samples "
        "within the threshold; best of N = mean over targets of the smallest of the first N.",
        "Runtime: sampling for a batch of 1000 targets divided by 1000 (CPU, all cores); "
        "train time: wall time of the training loop including its periodic validation "
        "(500 targets, 1 sample each).",
        "Diversity: mean pairwise joint-space distance between samples of one target (rad), "
        "differences wrapped on full-turn joints.",
        f"Training: AdamW lr {args.lr}, batch {args.batch}, grad-norm clip {args.grad_clip}, "
        f"warm-up then cosine decay, {args.train_threads or 'all'} torch thread(s) while "
        "training; steps as listed (a fixed number, so that load from other jobs on the shared "
        "machine changes the time, not the model); weights of the best validation error kept.",
        "Rows without a temperature are raw samples of the model's density (the protocol). "
        "'temperature t' rows draw the same components with every scale multiplied by t "
        "(sample(..., temperature=t)): not the learned density, shown to separate the error of "
        "the component means from the spread of the components.",
    ]
    if any(r.get("family", "iknet") != "iknet" for r in rows):
        main.notes.append(
            "Other learned models: the family's default configuration (torchik.models), the "
            "same data, optimiser, schedule and validation as IKNet, trained for the same "
            f"wall-time budget ({args.family_minutes} min on {args.train_threads or 'all'} "
            "thread(s); steps as listed). The MLP is deterministic: its 100 samples are one "
            "prediction, so best-of-N equals the mean and its diversity is 0."
        )
    if args.solvers:
        main.notes.append(
            "Numerical rows: torchik.solve_ik(position_only=True), float64, success at 1 mm, "
            "on the same 1000 test targets; 'lm, 1 start' / 'dls, 1 start' start each target from "
            "one uniform random configuration without restarts (as the paper ran IKPy), "
            "'lm, default seeding' is what a user gets by default (2 slots, nearest-of-256 seeds, "
            "restarts); one solution per target, so best-of-N and diversity are empty. Runtime: "
            "the whole batch (median of 3) divided by 1000. IKPy: chain.inverse_kinematics from "
            "one uniform random start, position only, first 200 targets, Python loop."
        )
    tables = [main]
    learning = Table(
        "Validation mean distance against training time",
        [
            Column("robot", "robot"),
            Column("step", "step"),
            Column("seconds", "seconds", lambda x: f"{x:.0f}"),
            Column("val_mean_cm", "val mean (cm), 1 sample", _cm),
            Column("loss", "train loss", lambda x: f"{x:.3f}"),
        ],
        references=(),
    )
    for row in curve:
        method = row.get("method", "IKNet")
        method = f"IKNet ({args.preset})" if method == "IKNet" else method
        learning.add(method, **{k: v for k, v in row.items() if k != "method"})
    tables.append(learning)
    if sizes:
        tables.append(_size_table(sizes, args.batch))
    return tables


def _size_table(sizes, batch: int) -> Table:
    table = Table(
        f"Franka (panda_hand): sizes, memory and speed per preset (training batch {batch})",
        [
            Column("parameters", "parameters", lambda x: f"{x / 1e6:.2f} M"),
            Column("head_parameters", "of which heads", lambda x: f"{x / 1e6:.2f} M"),
            Column("generated_per_target", "generated weights / target", lambda x: f"{x:,}"),
            Column("generated_mib_per_1000", "MiB / 1000 targets", lambda x: f"{x:.0f}"),
            Column("saved_mib", "saved for backward (MiB)", lambda x: f"{x:.0f}"),
            Column("state_mib", "weights+grads+AdamW (MiB)", lambda x: f"{x:.0f}"),
            Column("step_s", "train step", fmt_time),
            Column("sample_per_target_s", "sample / target (1000 x 1)", fmt_time),
        ],
        references=(),
    )
    for row in sizes:
        table.add(row["preset"], **row)
    table.notes.append(
        "Generated weights are float32, one set per target, shared by all samples of a target "
        "(batched matrix products over (targets, samples, features)). Saved for backward: the "
        "distinct storages autograd keeps for one training step's backward (activations and "
        "generated weights, parameters excluded); weights+grads+AdamW: 4 float32 copies."
    )
    return table


def _kept(path: Path, robots: list[str]) -> tuple[list[dict], list[dict], str]:
    """Rows and curve points of the robots not in ``robots`` from an earlier results JSON,
    and an intro line naming that run."""
    old = json.loads(Path(path).read_text())
    main, learning = old["tables"][0]["rows"], old["tables"][1]["rows"]
    rows = [r for r in main if r.get("robot") not in robots]
    curve = [r for r in learning if r.get("robot") not in robots]
    kept = sorted({r["robot"] for r in rows}, key=list(ROBOTS).index)
    if not kept:
        return [], [], ""
    stamp = old["stamp"]
    note = (
        f"Rows of {', '.join(kept)} kept from an earlier run of this script ({stamp['date']}, "
        f"torchik {stamp['torchik']}, load {stamp['load_average_at_start']} at its start): "
        f"`{stamp['command']}`."
    )
    return rows, curve, note


def _parse_sizes(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = int(float(value))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--robots", nargs="*", default=list(ROBOTS), choices=list(ROBOTS))
    parser.add_argument("--preset", default="small", choices=list(PRESETS))
    parser.add_argument("--minutes", type=float, default=6.0, help="training budget per robot")
    parser.add_argument("--train-size", nargs="*", default=[], metavar="ROBOT=N")
    parser.add_argument(
        "--steps", nargs="*", default=[], metavar="ROBOT=N", help="steps instead of --minutes"
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--grad-clip", type=float, default=0.3)
    parser.add_argument(
        "--train-threads",
        type=int,
        default=0,
        help="torch threads while training (0: all cores); timings always use all cores",
    )
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--temperatures", type=float, nargs="*", default=[0.25])
    parser.add_argument("--sizes", action="store_true", help="add the Franka size table")
    parser.add_argument("--size-presets", nargs="*", default=list(PRESETS))
    parser.add_argument("--work", default="/tmp/torchik-iknet-bench", help="checkpoints")
    parser.add_argument("--note", action="append", default=[], help="a line for the intro")
    parser.add_argument(
        "--families", nargs="*", default=[], choices=[f for f in LABELS if f != "iknet"],
        help="other learned models to train and evaluate the same way",
    )  # fmt: skip
    parser.add_argument(
        "--family-minutes", type=float, default=None,
        help="training budget of each --families model (default: --steps, else --minutes)",
    )  # fmt: skip
    parser.add_argument("--no-iknet", action="store_true", help="leave IKNet out")
    parser.add_argument("--solvers", action="store_true", help="add the numerical solvers")
    parser.add_argument("--name", default="iknet", help="results file name")
    parser.add_argument(
        "--keep-from", type=Path, metavar="JSON",
        help="keep the rows of the robots not run now from an earlier run's results JSON",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.train_size, args.steps = _parse_sizes(args.train_size), _parse_sizes(args.steps)
    args.families = ([] if args.no_iknet else ["iknet"]) + args.families
    waited = wait_for_quiet(args.wait_idle)
    report = Report(args.name, 'IKNet, the "Neural IK table" protocol (iknet)')
    report.stamp["waited_for_quiet_s"] = waited
    report.intro = [
        f"Model: IKNet, preset {args.preset!r}: {asdict(PRESETS[args.preset])}.",
        "Position-only targets, joints uniform within limits; test targets from another seed. "
        "The paper's numbers (Digit arm 2.3 cm, UR5 2.8 cm, Franka 3.1 cm mean) come from "
        "GPU training on 20k / 1M / 1M pairs; these rows are a few CPU minutes each.",
        *args.note,
    ]
    rows, curve = [], []
    intro = list(report.intro)

    def write(sizes: list) -> Path:
        # kept rows are read at every write, so a run beside this one can fill the file first
        kept_rows, kept_curve = [], []
        if args.keep_from is not None and Path(args.keep_from).exists():
            kept_rows, kept_curve, note = _kept(args.keep_from, args.robots)
            report.intro = [*intro, note] if note else intro
        report.tables = _tables(kept_rows + rows, kept_curve + curve, sizes, args)
        return report.write(args.out)[0]

    for name in args.robots:
        robot_rows, points = run_robot(name, args)
        rows += robot_rows
        curve += points
        write([])  # partial results survive a later failure
    presets = args.size_presets if args.sizes else []
    md = write([{"preset": p, **iknet_sizes(PRESETS[p], args.batch)} for p in presets])
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
