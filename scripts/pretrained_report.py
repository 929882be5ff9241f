"""The README's table and the time-to-accuracy plot of the bundled models, from
``src/torchik/models/pretrained/accuracy.json`` (run through
``scripts/train_pretrained.py table`` and ``... curves``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/ is not installed

from torchik.files import save_figure  # noqa: E402
from torchik.models.pretrained import trained_on, training_chunks, training_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _num(x: float) -> str:
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def markdown_table(out: Path) -> str:
    """The accuracy table of the README, from ``<out>/accuracy.json``."""
    lines = [
        "| name | target | family | training | size | position mean / median (mm) "
        "| best of 10 (mm) | rotation mean / median (deg) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in json.loads((out / "accuracy.json").read_text()).items():
        r, a = e["recipe"], e["accuracy"]
        rot = a.get("rotation_mean_deg"), a.get("rotation_median_deg")
        lines.append(
            f"| `{name}` | {r['targets']} | {r['family']} | {training_text(e)} | "
            f"{e['size_mb']:.2f} MB | "
            f"{_num(a['position_mean_mm'])} / {_num(a['position_median_mm'])} | "
            f"{_num(a['best_of_n_mm'])} | "
            + ("—" if rot[0] is None else f"{_num(rot[0])} / {_num(rot[1])}")
            + " |"
        )
    return "\n".join(lines)


CPU_ARCHIVE = ROOT / "scripts" / "pretrained_cpu.json"
"""The CPU-trained arm models these GPU ones replaced: their recipes, accuracy and curves."""


def _plot_panel(ax: Any, entries: dict[str, Any], xlabel: str, title: str) -> None:
    for name, e in entries.items():
        offset, points = 0.0, []  # a model trained in chunks: one line, the chunks end to end
        for chunk in training_chunks(e):
            points += [(offset + row[0], row[2]) for row in chunk["curve"]]
            offset += chunk["train_seconds"]
        if points:
            seconds, error = zip(*points, strict=True)
            ax.plot([s / 60 for s in seconds], error, label=f"{name} ({e['recipe']['family']})")
    ax.set(xlabel=xlabel, ylabel="validation error (mm)", yscale="log", title=title)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")


def plot_curves(out: Path, png: Path) -> Path:
    """Validation error (1 raw sample per target, 8 integration steps for fm) against training
    time: the CPU runs of :data:`CPU_ARCHIVE` (one thread) beside the GPU runs whose curves
    ``accuracy.json`` stores (the GPU named from their recorded machine), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bundled = json.loads((out / "accuracy.json").read_text())
    gpu = {k: e for k, e in bundled.items() if e.get("recipe", {}).get("device") == "cuda"}
    cpu = json.loads(CPU_ARCHIVE.read_text())["models"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0), dpi=120, sharey=True)
    _plot_panel(left, cpu, "training time, one CPU thread (min)", "CPU (earlier recipes)")
    where = " / ".join(sorted({trained_on(e) for e in gpu.values()})) or "a GPU"
    _plot_panel(right, gpu, f"training time on {where} (min)", "GPU (bundled)")
    fig.suptitle("Time to accuracy: mean error of 1 raw sample, 1000 validation targets")
    fig.tight_layout()
    save_figure(fig, png)
    return png


IKNET_INTRO = (
    "The bundled position models on the Neural IK table's protocol "
    "(`experiments.iknet.iknet_table`): the 1000 test targets of `benchmarks/iknet.py` (FK of "
    "joints uniform within the limits, seed 3: the same targets as its IKNet rows), 100 raw "
    "samples per target, no refinement, FK in float64. Sampled with the models' own settings "
    "(fm: 32 midpoint steps); the goal of issue 13 for the best torchik model: Digit <= 0.5, "
    "UR5 <= 0.7, Franka <= 1.0 cm mean and >= 99 % within 2 cm."
)


def iknet_report(names: list[str], out_dir: Path, threads: int = 1, samples: int = 100) -> Path:
    """The Neural IK table's rows of the bundled position models ``names`` (``samples`` per
    target), written as the stamped report ``<out_dir>/pretrained_iknet.md`` (and ``.json``);
    returns the markdown's path."""
    import torch

    import torchik
    from experiments.iknet import iknet_table
    from experiments.iknet_run import PAPER_CM, SEEDS, row_fields
    from experiments.report import Report
    from experiments.table import Column, Table
    from torchik.checks import check_threads
    from torchik.learn import make_dataset

    torch.set_num_threads(check_threads("--threads", threads))
    report = Report(
        "pretrained_iknet", "Bundled models on the Neural IK table", intro=[IKNET_INTRO]
    )
    cm = "{:.2f}".format
    pct = "{:.2%}".format
    table = Table("Bundled models, Neural IK protocol, raw samples", [
        Column("robot", "robot"), Column("family", "family"), Column("mean_cm", "mean (cm)", cm),
        Column("median_cm", "median (cm)", cm), Column("acc_2cm", "within 2 cm", pct),
        Column("acc_1cm", "within 1 cm", pct), Column("best10_cm", "best of 10 (cm)", cm),
        Column("diversity", "diversity (rad)", cm), Column("inside_limits", "in limits", pct),
        Column("paper_cm", "paper's IKNet (cm)", cm),
    ])  # fmt: skip
    for name in names:
        model = torchik.models.load_pretrained(name, sampler="own")  # as accuracy.json
        robot = torchik.load_robot(model.spec.robot, dtype=torch.float64)
        targets = make_dataset(torchik.load_robot(model.spec.robot), 1000, seed=SEEDS["test"])
        row = iknet_table(robot, model, targets.target, n_samples=samples, seed=SEEDS["sample"],
                          timing=False)  # fmt: skip
        paper = PAPER_CM.get(model.spec.robot, float("nan"))
        table.add(f"`{name}`", robot=model.spec.robot, family=model.family, paper_cm=paper,
                  **row_fields(row))  # fmt: skip
        print(name, table.rows[-1], flush=True)
    report.tables = [table]  # the stamp was taken at the start: its duration is the run's
    return report.write(out_dir)[0]


ABLATION_INTRO = (
    "Issue 13's IKNet ablation on the Franka (position of `panda_hand`, the Neural IK paper's "
    '"Franka", paper 3.1 cm): variants of `scripts/iknet_ablation.runs` trained side by side '
    "on one GPU in one call (`scripts/gpu_pretrained.sh`), each for the same wall time "
    "(`--fit-minutes`: its steps are set from its measured speed under the shared load), then "
    "measured by the Neural IK protocol (`--iknet-table`: the 1000 test targets of "
    '`benchmarks/iknet.py`, 100 raw samples each, FK in float64). "paper" is '
    "`IKNetConfig.paper()` (hypernetwork 4 x 1024 with batch norm, primary networks 3 layers of "
    '256, K = 50), "public" the defaults (3 x 1024, 2 layers, no normalisation). Training: '
    "AdamW, warm-up then cosine to 1 %, EMA of the weights 0.9995, grad clip 1."
)


def ablation_report(run_dir: Path, out_dir: Path, name: str = "iknet_ablation") -> Path:
    """The ablation table of a ``gpu_pretrained.sh`` call whose runs used ``--iknet-table``
    (``<run_dir>/<label>/accuracy.json``, ``machine.txt``, ``runs.txt``), written as
    ``<out_dir>/<name>.md`` (and ``.json``) with the run's machine as its stamp."""
    from experiments.report import Report
    from experiments.table import Column, Table

    cm, pct, num = "{:.2f}".format, "{:.1%}".format, "{:,}".format
    table = Table("IKNet on the Franka, Neural IK protocol, raw samples", [
        Column("config", "config"), Column("data", "data"), Column("batch", "batch"),
        Column("steps", "steps", num), Column("train_s", "train (s)", "{:.0f}".format),
        Column("parameters", "parameters", num), Column("mean_cm", "mean (cm)", cm),
        Column("median_cm", "median (cm)", cm), Column("acc_10cm", "< 10 cm", pct),
        Column("acc_2cm", "< 2 cm", pct), Column("best10_cm", "best of 10 (cm)", cm),
        Column("best100_cm", "best of 100 (cm)", cm), Column("diversity", "diversity (rad)", cm),
        Column("curve", "validation (mm) at steps"),
    ])  # fmt: skip
    for path in sorted(run_dir.glob("*/accuracy.json")):
        for e in json.loads(path.read_text()).values():
            if "iknet_table" not in e:
                continue
            r = e["recipe"]
            data = "stream" if r["stream"] else f"{r['train_pairs']:,} fixed"
            curve = ", ".join(f"{c[2]:.0f} @ {c[1]}" for c in e.get("curve", []))
            table.add(path.parent.name, config=json.dumps(r["config"]), data=data,
                      batch=r["batch_size"], steps=r["steps"], train_s=e["train_seconds"],
                      parameters=e["parameters"], curve=curve, **e["iknet_table"])  # fmt: skip
    table.rows.sort(key=lambda row: row["mean_cm"])
    lines = (run_dir / "machine.txt").read_text().splitlines()
    command = run_dir / "command.txt"  # written by gpu_pretrained.sh
    stamp = {"date": lines[0], "gpu": lines[2] if len(lines) > 2 else "?",
             "torch": lines[-1].removeprefix("torch "),
             "command": command.read_text().strip() if command.exists() else "not recorded",
             "side_by_side": sum(1 for _ in run_dir.glob("*/accuracy.json")),
             "written_by": f"scripts/pretrained_report.py --ablation {run_dir.name}"}  # fmt: skip
    report = Report(name, "IKNet ablation on the Franka (issue 13)", intro=[ABLATION_INTRO],
                    tables=[table], stamp=stamp, measured_here=False)  # fmt: skip
    return report.write(out_dir)[0]


def prefix_report(
    out_dir: Path, robot: str = "panda", steps: int = 6000, checkpoint: Path | None = None,
    targets: int = 200, samples: int = 20, train_threads: int = 0, preset: str = "small",
) -> Path:  # fmt: skip
    """IKNet's error taken apart (:mod:`experiments.iknet_prefix`): the IKNet ``preset``
    trained ``steps`` as ``benchmarks/iknet.py`` trains it on ``robot``, or the model of
    ``checkpoint``; ``samples`` raw samples for each of ``targets`` protocol test targets.
    Written as ``<out_dir>/iknet_prefix.md`` (``iknet_prefix_<preset>.md`` for another preset,
    and ``.json``); returns the markdown's path."""
    import torch

    import torchik
    from experiments.iknet import iknet_test_targets
    from experiments.iknet_prefix import INTRO, prefix_rows, prefix_table
    from experiments.iknet_run import SEEDS, IKNetRun, robot_data, train_model
    from experiments.report import Report

    name = "iknet_prefix" if preset == "small" else f"iknet_prefix_{preset}"
    report = Report(name, "IKNet's error taken apart: prefixes and last joints")
    if checkpoint is not None:
        model = torchik.models.load(checkpoint)
        origin = f"Model: `{checkpoint.name}` ({type(model).__name__}), loaded."
    else:
        settings = IKNetRun(preset=preset, steps={robot: steps}, train_threads=train_threads)
        model, result, _ = train_model(robot, "iknet", settings, robot_data(robot, settings),
                                       lambda line: print(line, flush=True))  # fmt: skip
        origin = (f"Model: IKNet, preset {preset!r}, trained {steps} steps "
                  f"({result.seconds:.0f} s) as `benchmarks/iknet.py` trains it.")  # fmt: skip
    model = model.eval()
    robot64 = torchik.load_robot(model.spec.robot, dtype=torch.float64)
    x = iknet_test_targets(robot64, model.spec.link, targets).double()
    with torch.no_grad():
        gen = torch.Generator().manual_seed(SEEDS["sample"])
        q = model.sample(x.float(), samples, generator=gen).double().reshape(-1, robot64.dof)
    rows = prefix_rows(robot64, q, x.repeat_interleave(samples, dim=0), model.spec.link,
                       torch.Generator().manual_seed(SEEDS["solver"]))  # fmt: skip
    title = f"{model.spec.robot}, {targets} test targets x {samples} samples"
    report.intro, report.tables = [INTRO, origin], [prefix_table(rows, title)]
    return report.write(out_dir)[0]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description="The Neural IK table of bundled models, the IKNet ablation of a GPU run, or "
        "IKNet's error taken apart (--prefix)"
    )
    parser.add_argument("names", nargs="*", help="bundled position models, e.g. digit_arm ur5")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ablation", type=Path, help="the ablation table of this GPU run dir")
    parser.add_argument("--prefix", action="store_true", help="IKNet's error taken apart")
    parser.add_argument("--robot", default="panda", help="with --prefix: the robot")
    parser.add_argument("--steps", type=int, default=6000, help="with --prefix: training steps")
    parser.add_argument("--checkpoint", type=Path, help="with --prefix: this model instead")
    parser.add_argument("--preset", default="small", help="with --prefix: the IKNet preset")
    args = parser.parse_args()
    if args.ablation is not None:
        print(ablation_report(args.ablation, args.out))
    elif args.prefix:
        print(prefix_report(args.out, args.robot, args.steps, args.checkpoint,
                            train_threads=args.threads, preset=args.preset))  # fmt: skip
    elif args.names:
        print(iknet_report(args.names, args.out, args.threads))
    else:
        parser.error("name bundled models, or --ablation RUN_DIR, or --prefix")
