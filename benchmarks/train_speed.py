"""Training throughput (samples/s) of every learned family, today's engine against an earlier one.

``python benchmarks/train_speed.py [--device cpu|cuda] [--threads 2] [--baseline REF]``

Each case is a fresh process that trains one model with :func:`torchik.train.train` for
``--warmup`` steps (compilation, allocator, caches) and then ``--steps`` timed steps: samples/s is
``steps x batch / seconds`` of those. ``before`` runs the same script against the ``src/`` of the
git revision ``--baseline`` (extracted with ``git archive``), so both engines are measured in
the same run on the same machine. Families run at their default sizes (IKNet at its ``small``
preset); the flow on full Panda poses, the others on Panda positions; 20 000 fixed pairs, or an
:class:`torchik.data.FKStream` for the ``stream`` modes. Writes
``benchmarks/results/train_speed{_SUFFIX}.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OPTIONS = ("eager", "compile", "bf16", "stream")
"""A mode is ``before`` (the ``--baseline`` revision) or today's engine with options joined by
``+``, e.g. ``compile+bf16`` (``eager``: none)."""
FAMILIES = ("iknet", "flow", "mlp", "mdn", "rnn", "cvae", "inn")
GPU_SIZES = {  # the GPU cases: the NSF of the IKFlow-style runs, IKNet at paper size
    "flow": {"transforms": 8, "width": 512},
    "iknet": "paper",
}


# ---------------------------------------------------------------------------- one case
def _config(family: str, cls, size: str):
    if size == "paper" and family == "iknet":
        return cls.Config.paper()
    if family == "iknet":
        return cls.Config.small()
    if size == "paper" and family in GPU_SIZES:
        return cls.Config(**GPU_SIZES[family])
    return cls.Config()


def worker(case: dict) -> dict:
    """Train one case in this process; returns samples/s (run with ``--worker JSON``)."""
    import torch

    import torchik
    from torchik.models import families
    from torchik.train import TrainConfig, train

    torch.set_num_threads(case["threads"])
    robot = torchik.load_robot("panda")
    targets = "pose" if case["family"] == "flow" else "position"
    cls = families()[case["family"]]
    torch.manual_seed(0)
    data = torchik.make_dataset(robot, 20_000, targets=targets, seed=0)
    model = cls(data.spec, _config(case["family"], cls, case["size"]))
    mode, total = case["mode"], case["warmup"] + case["steps"]
    settings = dict(steps=total, batch_size=case["batch"], log_every=total, val_every=0)
    settings.update(checkpoint_every=0, progress=False, device=case["device"])
    if mode != "before":
        settings.update(compile="compile" in mode, precision="bf16" if "bf16" in mode else "fp32")
    source = data
    if "stream" in mode:
        source = torchik.data.FKStream(robot, targets=targets, seed=0, device=case["device"])
        settings["stats_rows"] = 20_000
    marks: dict[int, tuple[float, float]] = {}

    def clock(step: int, metrics: dict) -> None:
        if step in (case["warmup"], total):
            if case["device"] == "cuda":
                torch.cuda.synchronize()
            marks[step] = (time.perf_counter(), time.process_time())

    start = time.perf_counter()
    train(model, source, config=TrainConfig(**settings), callback=clock)
    (wall0, cpu0), (wall1, cpu1) = marks[case["warmup"]], marks[total]
    samples = case["steps"] * case["batch"]
    return {
        "samples_per_s": samples / (wall1 - wall0),
        "samples_per_cpu_s": samples / (cpu1 - cpu0),
        "step_ms": 1000 * (wall1 - wall0) / case["steps"],
        "warmup_s": wall0 - start,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def _run_case(case: dict, baseline_src: Path | None) -> dict:
    env = dict(os.environ)
    if case["mode"] == "before":
        env["PYTHONPATH"] = str(baseline_src)
    cmd = [sys.executable, __file__, "--worker", json.dumps(case)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return {"status": f"failed: {done.stderr.strip().splitlines()[-1][:120]}"}
    return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def _extract(ref: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref, "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


# ---------------------------------------------------------------------------- the table
def _parse(argv: list[str] | None) -> argparse.Namespace:
    import common  # noqa: F401 (sets up the results folder and the stamp helpers)

    parser = argparse.ArgumentParser(prog="train_speed.py", description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["before", "eager", "compile", "bf16", "compile+bf16", "stream"],
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation)")
    parser.add_argument("--size", default="default", choices=("default", "paper"))
    parser.add_argument("--baseline", default="34cb197", help="git revision of 'before'")
    parser.add_argument("--suffix", default="", help="results file train_speed_SUFFIX")
    parser.add_argument("--repeats", type=int, default=2, help="runs per case; the best is kept")
    parser.add_argument(
        "--compile-families",
        nargs="+",
        default=["iknet", "flow"],
        help="families with compile modes (compilation takes minutes per family on a CPU)",
    )
    common.add_common_args(parser)
    args = parser.parse_args(argv)
    bad = [m for m in args.modes if m != "before" and not set(m.split("+")) <= set(OPTIONS)]
    if bad:
        parser.error(f"unknown modes {bad}: 'before', or options of {OPTIONS} joined by '+'")
    return args


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "--worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
        return 0
    args = _parse(argv)
    import common

    name = f"train_speed{'_' + args.suffix if args.suffix else ''}"
    report = common.Report(name, "Training throughput")  # stamps the start (load, time)
    report.stamp["torch_threads"] = f"{args.threads} in each case's process"
    table = common.Table(
        f"Training throughput, {args.device}, {args.threads} threads, batch {args.batch}",
        [
            common.Column("family", "family"),
            common.Column("parameters", "parameters", lambda x: f"{x:,}"),
            common.Column("samples_per_s", "samples/s (wall)", lambda x: f"{x:,.0f}"),
            common.Column("samples_per_cpu_s", "samples per CPU-s", lambda x: f"{x:,.0f}"),
            common.Column("step_ms", "ms/step", lambda x: f"{x:.2f}"),
            common.Column("speedup", "× before", lambda x: f"{x:.2f}"),
            common.Column("warmup_s", "warm-up s", lambda x: f"{x:.1f}"),
        ],
    )
    with tempfile.TemporaryDirectory() as tmp:
        baseline = _extract(args.baseline, Path(tmp)) if "before" in args.modes else None
        for family in args.families:
            _measure_family(args, family, baseline, table)
    report.intro = _intro(args)
    report.tables.append(table)
    for path in report.write(args.out):
        common.log(f"wrote {path}")
    return 0


def _measure_family(args, family: str, baseline: Path | None, table) -> None:
    """Every mode of one family, ``--repeats`` rounds in turn (load from other jobs hits the
    modes alike); the fastest run of each mode is kept."""
    import common

    modes = [m for m in args.modes if "compile" not in m or family in args.compile_families]
    key = _speed_key(args)
    best: dict[str, dict] = {}
    for round_ in range(args.repeats):
        for mode in modes:
            if args.wait_idle:
                common.wait_for_quiet(args.wait_idle)
            case = dict(family=family, mode=mode, device=args.device, threads=args.threads)
            case.update(batch=args.batch, steps=args.steps, warmup=args.warmup, size=args.size)
            result = _run_case(case, baseline)
            rate = result.get(key, 0)
            common.log(f"{family} {mode} round {round_ + 1}: {rate:,.0f} ({key})")
            if mode not in best or rate > best[mode].get(key, 0):
                best[mode] = result
    before = best.get("before", {}).get(key)
    for mode in args.modes:
        if mode not in best:
            table.add(mode, "skipped: compile measured for --compile-families only", family=family)
            continue
        result = dict(best[mode])
        speedup = result.get(key, 0) / before if before else None
        table.add(mode, result.pop("status"), family=family, speedup=speedup, **result)


def _speed_key(args) -> str:
    """What the speed-up compares: CPU seconds on a CPU with one thread (other jobs on a shared
    machine stretch the wall clock but hardly the CPU time a step needs), else wall seconds."""
    return "samples_per_cpu_s" if args.device == "cpu" and args.threads == 1 else "samples_per_s"


def _intro(args) -> list[str]:
    return [
        f"Samples per second of `torchik.train.train`: the best of {args.repeats} runs (the "
        f"modes in turn) of {args.steps} timed steps after {args.warmup} untimed ones "
        "(compilation happens there: its seconds are the warm-up column), one fresh process "
        "per case. Panda; the flow on full poses, the other families on positions; 20 000 "
        "fixed pairs, or an `FKStream` (pairs made by FK on the device each step) for `stream`.",
        f"`before` is torchik at git `{args.baseline}` (the loop that read the loss every step, "
        "and IKNet's per-layer slicing of its generated weights) run by the same script; "
        "`eager` today's engine; `compile` with `compile=True`; `bf16` under autocast. The "
        "warm-up of the compiled modes depends on inductor's on-disk cache: minutes when cold "
        "(the first compilation of the IKNet took 3 to 5 minutes here), seconds when warm.",
        "The machine is shared: the load averages in the stamp say how busy it was. With one "
        "CPU thread the `× before` column compares samples per CPU-second (the process's CPU "
        "time over the timed steps), which other jobs hardly change; otherwise wall time.",
    ]


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main())
