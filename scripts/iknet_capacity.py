"""IKNet variants on a CPU: each variant trained as ``benchmarks/iknet.py`` trains the Franka
(same data, seeds and optimiser; a preset with fields replaced, another data size, batch or
length), then measured by the Neural IK protocol (1000 test targets x 100 raw samples).

Each row goes into ``benchmarks/results/<name>.md`` and ``.json`` (rows of earlier runs kept,
a variant of the same name replaced; each row with its date and command), a figure of the mean
error against the pairs seen (``<name>.png``), and one JSON line to ``--out``.

    .venv/bin/python scripts/iknet_capacity.py --steps 6000 \\
        base='{}' embedding128='{"embedding": 128}' primary128='{"primary_width": 128}'
    .venv/bin/python scripts/iknet_capacity.py --steps 40000 --batch 1024 --threads 2 \\
        --train-size 40960000 --checkpoint-every 2000 --work /work/runs/iknet fresh41M_b1024='{}'

``--add FILE`` puts rows recorded earlier (JSON lines) into the report without training;
``--log VARIANT=DIR/panda/log.csv`` attaches a run's validation curve (the engine's log) to
its row. Rows measured here carry theirs; the figure draws them beside the points.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/ is not installed

from experiments.iknet import iknet_table  # noqa: E402
from experiments.iknet_notes import variants_tables  # noqa: E402
from experiments.iknet_run import PAPER_CM, PRESETS, SEEDS, IKNetRun, robot_data, train_model  # noqa: E402
from experiments.report import Report, command_line  # noqa: E402
from torchik.files import save_figure  # noqa: E402
from torchik.train import read_log  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
TITLE = "IKNet variants at CPU scale (scripts/iknet_capacity.py)"
INTRO = [
    "Each row: the IKNet preset with the fields listed replaced, trained on the robot's "
    "position targets as `benchmarks/iknet.py` trains it (the same data seeds, test targets and "
    "optimiser), with the training pairs, batch and steps listed, on the CPU of the stamp or of "
    "an earlier run (the row's date; its command is in the second table).",
]


def _variant(text: str) -> tuple[str, dict]:
    name, _, overrides = text.partition("=")
    try:
        value = json.loads(overrides or "{}")
    except json.JSONDecodeError as err:
        raise SystemExit(f"variant {text!r}: not NAME=JSON ({err.msg})") from None
    if not isinstance(value, dict):
        raise SystemExit(f"variant {text!r}: the JSON must be an object of IKNetConfig fields")
    return name, value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("variants", nargs="*", type=_variant, help="NAME=JSON of IKNetConfig fields")
    p.add_argument("--preset", default="small-trig", choices=PRESETS)
    p.add_argument("--robot", default="panda")
    p.add_argument("--steps", type=int, default=6000)
    p.add_argument("--train-size", type=int, help="training pairs (default: the protocol's)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW's weight decay")
    p.add_argument("--ema", type=float, help="keep a moving average of the weights, this decay")
    p.add_argument("--threads", type=int, default=1, help="torch threads while training")
    p.add_argument("--out", default="/tmp/iknet_capacity.jsonl", help="JSON lines, appended")
    p.add_argument("--work", default="/tmp/iknet_capacity", help="folder of the checkpoints")
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --work")
    p.add_argument("--seed", type=int, default=SEEDS["model"], help="the model's seed")
    p.add_argument("--name", default="iknet_capacity", help="the report's file name")
    p.add_argument("--results", default=str(RESULTS), help="folder of the report")
    p.add_argument("--add", metavar="JSONL", help="rows recorded earlier, into the report")
    p.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="VARIANT=CSV",
        help="attach the validation curve of a run's log.csv to a row of the report",
    )
    return p


def _measure(args: argparse.Namespace, name: str, overrides: dict) -> dict[str, Any]:
    size = {} if args.train_size is None else {args.robot: args.train_size}
    settings = IKNetRun(preset=args.preset, overrides=overrides, train_size=size,
                        steps={args.robot: args.steps}, batch=args.batch,
                        train_threads=args.threads, work=f"{args.work}/{name}",
                        checkpoint_every=args.checkpoint_every, resume=args.resume,
                        model_seed=args.seed, weight_decay=args.weight_decay,
                        ema_decay=args.ema)  # fmt: skip
    data = robot_data(args.robot, settings)
    model, result, steps = train_model(args.robot, "iknet", settings, data, print)
    row = iknet_table(data.robot64, model, data.test_set.target, n_samples=100,
                      seed=SEEDS["sample"], timing=False)  # fmt: skip
    return {"variant": name, "preset": args.preset, "overrides": overrides, "robot": args.robot,
            "training": _training(args), "train_size": data.size, "batch": args.batch,
            "steps": steps, "train_s": round(result.seconds, 1), "threads": args.threads,
            "seed": args.seed,
            "parameters": sum(q.numel() for q in model.parameters()),
            "curve": _validation_curve(result.history),
            **{k: v for k, v in row.as_dict().items() if v is not None}}  # fmt: skip


def _validation_curve(history: list[dict[str, float]]) -> list[list[float]]:
    """``[step, validation mean (cm)]`` of each validation of a training's history (or of the
    rows of the engine's ``log.csv``, :func:`torchik.train.read_log`)."""
    return [[int(r["step"]), round(100.0 * r["val_position_error"], 3)]
            for r in history if not math.isnan(r["val_position_error"])]  # fmt: skip


def _with_logs(rows: list[dict[str, Any]], logs: list[str]) -> list[dict[str, Any]]:
    """``rows`` with the validation curve of each ``VARIANT=LOG_CSV`` of ``--log`` attached."""
    curves = {}
    for item in logs:
        name, _, path = item.partition("=")
        try:
            history = read_log(Path(path))
            if not history:
                raise ValueError("missing or empty")
            curves[name] = _validation_curve(history)
        except (OSError, KeyError, ValueError) as err:
            raise SystemExit(f"--log {item}: not an engine log.csv ({err})") from None
    unknown = set(curves) - {r["variant"] for r in rows}
    if unknown:
        raise SystemExit(f"--log: no row named {', '.join(sorted(unknown))} in the report")
    return [{**r, "curve": curves[r["variant"]]} if r["variant"] in curves else r for r in rows]


def _training(args: argparse.Namespace) -> dict[str, float]:
    """The optimiser's settings replaced (the protocol's: no weight decay, no average)."""
    replaced = {"weight_decay": args.weight_decay, "ema_decay": args.ema}
    return {k: v for k, v in replaced.items() if v}


def _kept(path: Path) -> list[dict[str, Any]]:
    """The rows of an earlier report (as :func:`_measure` made them)."""
    if not path.is_file():
        return []
    rows = json.loads(path.read_text())["tables"][0]["rows"]
    drop = ("method", "status", "seen")
    return [{"variant": r["method"], **{k: v for k, v in r.items() if k not in drop}} for r in rows]


def _recorded(row: dict[str, Any]) -> dict[str, Any]:
    """A row read back: those recorded before ``--seed`` existed ran with the default seed."""
    return {"seed": SEEDS["model"], **row}


def _write(args: argparse.Namespace, new: list[dict[str, Any]]) -> Path:
    results = Path(args.results)
    names = {r["variant"] for r in new}
    kept = [_recorded(r) for r in _kept(results / f"{args.name}.json")]
    rows = _with_logs([r for r in kept if r["variant"] not in names] + new, args.log)
    report = Report(args.name, TITLE, intro=list(INTRO), measured_here=False)
    report.tables = variants_tables(rows, PAPER_CM.get(args.robot))
    md, _ = report.write(results)
    _plot(rows, PAPER_CM.get(args.robot), results / f"{args.name}.png")
    return md


def _plot(rows: list[dict[str, Any]], paper_cm: float | None, path: Path) -> None:
    """Mean error against pairs seen, one labelled point per row, and beside it the validation
    curves of the rows that have one (skipped without matplotlib)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    curves = [r for r in rows if r.get("curve")]
    fig = Figure(figsize=(12.0 if curves else 7.0, 4.2), layout="constrained")
    axes = fig.subplots(1, 2 if curves else 1, squeeze=False)[0]
    _points(axes[0], rows)
    if curves:
        _curves(axes[1], curves)
    for i, ax in enumerate(axes):
        if paper_cm is not None:
            ax.axhline(paper_cm, color="k", ls="--", lw=1, label=f"paper ({paper_cm} cm)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
        _log_x(ax, minor_labels=i == 0)
    save_figure(fig, path, dpi=100)


def _fresh(row: dict[str, Any]) -> bool:
    """Whether the row's run drew every pair once (a data set at least as large as the pairs
    seen), rather than repeating a smaller one."""
    return row.get("train_size", 0) >= row["steps"] * row["batch"]


def _points(ax: Any, rows: list[dict[str, Any]]) -> None:
    placed: dict[float, int] = {}  # labels at the same x stacked downwards
    for r in sorted(rows, key=lambda r: -r["mean_cm"]):
        x, y = r["steps"] * r["batch"] / 1e6, r["mean_cm"]
        fresh = _fresh(r)
        ax.plot(x, y, "o" if fresh else "s", color="tab:green" if fresh else "tab:blue")
        shift = placed[x] = placed.get(x, -1) + 1
        ax.annotate(r["variant"], (x, y), fontsize=7, xytext=(5, 3 - 9 * shift),
                    textcoords="offset points")  # fmt: skip
    ax.set(xlabel="pairs seen (millions); circles: fresh pairs, squares: repeated",
           ylabel="mean distance, raw samples (cm)", title="IKNet variants (CPU)")  # fmt: skip


def _curves(ax: Any, rows: list[dict[str, Any]]) -> None:
    for r in rows:
        steps, cm = zip(*r["curve"], strict=True)
        ax.plot([s * r["batch"] / 1e6 for s in steps], cm, "-" if _fresh(r) else "--",
                marker=".", label=r["variant"])  # fmt: skip
    ax.set(xlabel="pairs seen (millions); dashed: a fixed set, repeated",
           ylabel="validation mean (cm, 500 targets x 1 sample)",
           title="validation during training")  # fmt: skip


def _log_x(ax: Any, minor_labels: bool) -> None:
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(ScalarFormatter() if minor_labels else NullFormatter())
    ax.grid(alpha=0.3, which="both")


def main() -> int:
    args = _parser().parse_args()
    if not args.variants and not args.add and not args.log:
        raise SystemExit("nothing to do: give variants (NAME=JSON), --add FILE or --log")
    new: list[dict[str, Any]] = []
    if args.add:
        lines = Path(args.add).read_text().splitlines()
        new += [_recorded(json.loads(line)) for line in lines if line]
    if new or (args.log and not args.variants):
        print(f"wrote {_write(args, new)}")
    for name, overrides in args.variants:
        try:
            row = _measure(args, name, overrides)
        except (TypeError, ValueError) as err:
            print(f"variant {name}: {err}", file=sys.stderr)
            return 1
        date = dt.datetime.now(dt.timezone.utc).isoformat(timespec="minutes")[:16]
        row |= {"date": date, "command": command_line()}
        print(json.dumps(row), flush=True)
        with Path(args.out).open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"wrote {_write(args, [row])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
