"""Fewer network passes for a bundled flow-matching model: samplers against the model's own.

:func:`experiments.fm_samplers.sampler_table` on ``load_pretrained(NAME)`` (default the Panda
pose model): the raw accuracy of each sampler of
:func:`experiments.fm_samplers.default_samplers` on 1000 held-out targets x 10 samples, two
noise seeds, against the model's own sampler (32 midpoint steps), and the time to draw 1000
samples of one target. About 6 minutes on the 2-core development machine.

    python scripts/fm_samplers.py                     # -> benchmarks/results/fm_samplers.*
    python scripts/fm_samplers.py --model ur5         # -> benchmarks/results/fm_samplers_ur5.*
    python scripts/fm_samplers.py --targets 50 --out /tmp/fm   # a quick look elsewhere
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # experiments/ is not installed

from experiments.fm_samplers import default_samplers, sampler_table  # noqa: E402
from experiments.report import Report, machine_stamp  # noqa: E402
from torchik.models import load_pretrained  # noqa: E402
from torchik.models.pretrained import measured_accuracy, training_text  # noqa: E402


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="panda", help="a bundled flow-matching model")
    parser.add_argument("--targets", type=int, default=1000, help="held-out targets")
    parser.add_argument("--samples", type=int, default=10, help="samples per target")
    parser.add_argument("--min-run-time", type=float, default=0.5, help="s measured per timing")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (all cores)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_pretrained(args.model, sampler="own")  # its own sampler is the reference
    intro = [
        f"Model: `torchik.models.load_pretrained({args.model!r}, sampler='own')`, "
        f"family `{model.family}` "
        f"({training_text(measured_accuracy()[args.model])}), float32 on the CPU. Samplers: "
        "`torchik.models.fm.FMSampler`, `model.sample(target, n, sampler=...)`."
    ]
    title = "Flow-matching samplers with fewer passes"
    title += "" if args.model == "panda" else f": {args.model}"
    name = "fm_samplers" if args.model == "panda" else f"fm_samplers_{args.model}"
    report = Report(name, title, intro, stamp=machine_stamp(root=ROOT))
    table = sampler_table(
        model,
        default_samplers(args.model),
        args.targets,
        args.samples,
        min_run_time=args.min_run_time,
    )
    report.tables.append(table)
    return report.write(args.out)[0]


if __name__ == "__main__":
    print(main())
