"""IKNet sizes at equal steps on a CPU: each variant trained as ``benchmarks/iknet.py`` trains
the Franka (same data, seeds and optimiser), then measured by the Neural IK protocol (1000 test
targets x 100 raw samples). One JSON line per variant (to ``--out``, appended, and stdout).

    .venv/bin/python scripts/iknet_capacity.py --steps 6000 \\
        base='{}' embedding128='{"embedding": 128}' primary128='{"primary_width": 128}'

(The reading of ``benchmarks/results/iknet_trig_long.md`` quotes its numbers.)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from torchik.protocols.iknet import iknet_table
from torchik.protocols.iknet_run import PRESETS, SEEDS, IKNetRun, robot_data, train_model


def _variant(text: str) -> tuple[str, dict]:
    name, _, overrides = text.partition("=")
    try:
        value = json.loads(overrides or "{}")
    except json.JSONDecodeError as err:
        raise SystemExit(f"variant {text!r}: not NAME=JSON ({err.msg})") from None
    if not isinstance(value, dict):
        raise SystemExit(f"variant {text!r}: the JSON must be an object of IKNetConfig fields")
    return name, value


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("variants", nargs="+", type=_variant, help="NAME=JSON of IKNetConfig fields")
    p.add_argument("--preset", default="small-trig", choices=PRESETS)
    p.add_argument("--robot", default="panda")
    p.add_argument("--steps", type=int, default=6000)
    p.add_argument("--train-size", type=int, help="training pairs (default: the protocol's)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=1, help="torch threads while training")
    p.add_argument("--out", default="/tmp/iknet_capacity.jsonl")
    p.add_argument("--work", default="/tmp/iknet_capacity")
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --work")
    args = p.parse_args()
    for name, overrides in args.variants:
        size = {} if args.train_size is None else {args.robot: args.train_size}
        settings = IKNetRun(preset=args.preset, overrides=overrides, train_size=size,
                            steps={args.robot: args.steps}, batch=args.batch,
                            train_threads=args.threads, work=f"{args.work}/{name}",
                        checkpoint_every=args.checkpoint_every, resume=args.resume)  # fmt: skip
        data = robot_data(args.robot, settings)
        try:
            model, result, steps = train_model(args.robot, "iknet", settings, data, print)
        except (TypeError, ValueError) as err:
            print(f"variant {name}: {err}", file=sys.stderr)
            return 1
        row = iknet_table(data.robot64, model, data.test_set.target, n_samples=100,
                          seed=SEEDS["sample"], timing=False)  # fmt: skip
        out = {"variant": name, "preset": args.preset, "overrides": overrides,
               "robot": args.robot, "train_size": data.size, "batch": args.batch,
               "steps": steps, "train_s": round(result.seconds, 1),
               "parameters": sum(q.numel() for q in model.parameters()),
               **{k: v for k, v in row.as_dict().items() if v is not None}}  # fmt: skip
        print(json.dumps(out), flush=True)
        with Path(args.out).open("a") as f:
            f.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
