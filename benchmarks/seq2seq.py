"""Seq2seq representation (Neural IK paper, Section 5.5): raw positions vs IKNet's embedding.

The protocol is experiments.seq2seq (what it trains and measures is written there and
into the results file); this script takes the UR5 IKNet (--iknet, else the bundled model if it
is an IKNet, else one trained here) and writes results/seq2seq.{md,json,png}.

    python benchmarks/seq2seq.py                   # -> benchmarks/results/seq2seq.* (~10 min)
    # a quick look elsewhere, under a minute (the default IKNet alone trains for minutes):
    python benchmarks/seq2seq.py --epochs 3 --train-sequences 200 --iknet-steps 300 --out /tmp/s2s
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch
from common import Report, add_common_args, log, wait_for_quiet

import torchik
from experiments import seq2seq as protocol
from experiments.small_iknet import load_or_train_iknet
from torchik.files import save_figure, write_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--train-sequences", type=int, default=2000)
    parser.add_argument("--test-sequences", type=int, default=300)
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--max-move", type=float, default=1.0, help="rad per sequence")
    parser.add_argument("--margin", type=float, default=0.3,
                        help="fraction of each joint range left out at both ends")  # fmt: skip
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=100, help="warm-up steps")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--feedforward", type=int, default=128)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    variants = list(protocol.VARIANTS)
    parser.add_argument("--variants", nargs="+", choices=variants, default=variants,
                        help="inputs to train on (default: all)")  # fmt: skip
    parser.add_argument("--iknet", type=Path, help="IKNet checkpoint (torchik.models.load)")
    parser.add_argument("--iknet-steps", type=int, default=3000)
    parser.add_argument("--iknet-train-size", type=int, default=200_000)
    parser.add_argument("--save-iknet", type=Path, help="save the IKNet trained here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # common sets all cores; this machine is shared
    names = [f.name for f in dataclasses.fields(protocol.Seq2SeqSettings)]
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items()}
    settings = protocol.Seq2SeqSettings(**{k: v for k, v in values.items() if k in names})
    # the stamp first: its date, load at start and duration cover the training, not the writing
    report = Report("seq2seq", "Seq2seq representation: raw positions vs IKNet embedding (UR5)")
    report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    iknet, what = load_or_train_iknet(torchik.load_robot("ur5"), args.iknet, args.iknet_steps,
                                      args.iknet_train_size, save=args.save_iknet)  # fmt: skip
    robot = torchik.load_robot("ur5", dtype=torch.float64)
    runs = protocol.seq2seq_runs(robot, iknet, settings, log=log)
    report.intro = protocol.seq2seq_notes(robot, settings, what)
    report.tables = list(protocol.seq2seq_tables(runs, settings.epochs))
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        save_figure(protocol.seq2seq_figure(runs), args.out / "seq2seq.png", dpi=110)
        report.intro.append("Curves: `seq2seq.png` next to this file.")
    except ImportError as err:
        report.intro.append(f"no plot: {err}")
    md, js = report.write(args.out)
    payload = json.loads(js.read_text())  # + every run's history (NaN, at epoch 0, as null)
    clean = lambda row: {k: None if v != v else v for k, v in row.items()}  # noqa: E731
    payload["histories"] = {n: [[clean(r) for r in h] for h in run.histories]
                            for n, run in runs.items()}  # fmt: skip
    write_text(js, json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
