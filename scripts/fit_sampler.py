"""Fit a few-pass sampler to a bundled flow-matching model and bundle it (``samplers.json``).

:func:`torchik.models.fm_fit.fit_sampler` on ``load_pretrained(NAME)`` (default the Panda pose
model) with :class:`~torchik.models.fm_fit.SamplerFit`'s settings (``--steps`` and ``--iters``
override theirs), against the model's own sampler (``--teacher few``: :data:`FEW_PASSES`, more
accurate than their own for the bundled position models); the record (the sampler's fields, the
settings, the teacher, the first and last losses, the machine, the date, the command) is merged
into ``OUT/samplers.json`` (default ``src/torchik/models/pretrained``), where
:func:`torchik.models.pretrained.fitted_sampler` reads it. About 2 minutes on the 2-core
development machine (the bundled Panda sampler's record says 112 s). Its accuracy on the
held-out targets: ``scripts/fm_samplers.py``.

    python scripts/fit_sampler.py --steps 7             # panda, as bundled (default 8 steps)
    python scripts/fit_sampler.py --model ur5 --teacher few
    python scripts/fit_sampler.py --steps 6 --out /tmp/fit   # a try elsewhere
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # experiments/ is not installed

from experiments.report import machine_stamp  # noqa: E402
from torchik.files import write_text  # noqa: E402
from torchik.models import FEW_PASSES, load_pretrained  # noqa: E402
from torchik.models.fm_fit import SamplerFit, fit_sampler  # noqa: E402
from torchik.robot import load_robot  # noqa: E402


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="panda", help="a bundled flow-matching model")
    parser.add_argument("--steps", type=int, default=SamplerFit.steps, help="passes to fit")
    parser.add_argument("--iters", type=int, default=SamplerFit.iters, help="Adam steps")
    parser.add_argument("--teacher", choices=("model", "few"), default="model",
                        help="the sampler to match: the model's own, or FEW_PASSES (more "
                        "accurate than their own for the bundled position models)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--out", type=Path, default=ROOT / "src/torchik/models/pretrained")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_pretrained(args.model, sampler="own")  # the teacher: its own sampler
    if model.family != "fm":
        parser.error(f"{args.model!r} is a {model.family!r} model, not flow matching")
    robot = load_robot(model.spec.robot, dtype=torch.float64)
    fit = SamplerFit(steps=args.steps, iters=args.iters)
    start = time.perf_counter()
    teacher = FEW_PASSES if args.teacher == "few" else None
    fitted = fit_sampler(model, robot, fit, teacher, progress=True)
    stamp = machine_stamp(root=ROOT)
    record = {
        **fitted.record(),
        "seconds": round(time.perf_counter() - start, 1),
        **{key: stamp[key] for key in ("date", "command", "cpu", "torch_threads", "torchik")},
    }
    path = args.out / "samplers.json"
    records = json.loads(path.read_text()) if path.is_file() else {}
    records[args.model] = record
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(records, indent=1) + "\n")
    return path


if __name__ == "__main__":
    print(main())
