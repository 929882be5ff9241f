"""Few-shot fine-tuning on a perturbed Digit arm (the paper's experiment (b), reduced scale).

The protocols are experiments.finetune (what they train and measure is written there):
(b) an IKNet trained on arm A fine-tuned on 1k pairs of a perturbed arm B against training from
scratch on B; with ``--family-arms N`` also (a), one IKNet for a family of arms against one per
arm on N test arms. ``--family-only`` runs just (a) and writes ``results/finetune_family.md``.
"""

from __future__ import annotations

import argparse
import dataclasses

import torch
from common import Report, add_common_args, log, wait_for_quiet

import torchik
from experiments.finetune import FinetuneSettings, family_table, finetune_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--n-a", type=int, default=20000)
    parser.add_argument("--n-few", type=int, default=1000)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000, help="training steps from scratch")
    parser.add_argument("--finetune-steps", type=int, default=300)
    parser.add_argument("--family-arms", type=int, default=0, help="(a): test arms (0: skip)")
    parser.add_argument("--family-steps", type=int, help="(a): steps per model (--steps)")
    parser.add_argument("--family-chunk", type=int, default=200, help="(a): pairs per arm")
    parser.add_argument("--family-only", action="store_true", help="(a) only: finetune_family")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # common sets all cores; this machine is shared
    if args.family_only:
        args.family_arms = args.family_arms or 6
    names = [f.name for f in dataclasses.fields(FinetuneSettings)]
    settings = FinetuneSettings(**{k: v for k, v in vars(args).items() if k in names})
    arm = torchik.load_robot("digit_arm", dtype=torch.float64)
    family = lambda: family_table(arm, settings, "Digit arm", log)  # noqa: E731
    if args.family_only:
        report = Report("finetune_family", "One model for a family of Digit arms (reduced scale)")
        report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
        report.tables = [family()]
    else:
        title = "Few-shot fine-tuning on a perturbed Digit arm (reduced scale)"
        if args.family_arms:
            title = "Perturbed Digit arms: (b) few-shot fine-tuning, (a) one model for a family"
        report = Report("finetune", title + " (reduced scale)" * bool(args.family_arms))
        report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
        report.tables = [finetune_table(arm, settings, "Digit arm", log)]
        report.tables += [family()] if args.family_arms else []
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
