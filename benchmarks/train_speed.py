"""Training throughput (samples/s) of every learned family, today's engine against an earlier one.

``python benchmarks/train_speed.py [--device cpu|cuda] [--threads 2] [--baseline REF]``

Each case is a fresh process that trains one model with :func:`torchik.train.train` for
``--warmup`` steps (compilation, allocator, caches) and then ``--steps`` timed steps: samples/s is
``steps x batch / seconds`` of those. ``before`` runs the same script against the ``src/`` of the
git revision ``--baseline`` (extracted with ``git archive``), so both engines are measured in
the same run on the same machine. Families run at their default sizes (IKNet at its ``small``
preset); the flow on full Panda poses, the others on Panda positions; 20 000 fixed pairs, or an
:class:`torchik.learn.FKStream` for the ``stream`` modes. Writes
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
# the case's sizes stay here: the `before` process imports an older torchik
GPU_SIZES = {"flow": {"transforms": 8, "width": 512}, "iknet": "paper"}


# ---------------------------------------------------------------------------- one case
def _config(family: str, cls, size: str):
    if size == "paper" and family == "iknet":
        return cls.Config.paper()
    if size == "paper" and family == "fm":  # the bundled Panda model's recipe
        from torchik.models import load_pretrained

        return load_pretrained("panda").config
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

    try:
        from torchik.checks import check_threads
    except ImportError:  # the `before` revision's torchik has no torchik.checks
        threads = int(case["threads"])
    else:
        threads = check_threads("--threads", case["threads"])
    torch.set_num_threads(threads)
    robot = torchik.load_robot("panda")
    targets = "pose" if case["family"] in ("flow", "fm") else "position"
    cls = families()[case["family"]]
    torch.manual_seed(0)
    data = torchik.make_dataset(robot, 20_000, targets=targets, seed=0)
    model = cls(data.spec, _config(case["family"], cls, case["size"]))
    mode, total = case["mode"], case["warmup"] + case["steps"]
    settings = dict(steps=total, batch_size=case["batch"], log_every=total, val_every=0)
    settings.update(checkpoint_every=0, progress=False, device=case["device"])
    if mode != "before":
        settings.update(compile="compile" in mode or "graphs" in mode,
                        precision="bf16" if "bf16" in mode else "fp32")  # fmt: skip
    if "graphs" in mode:  # torch.compile's CUDA graphs of the loss and its backward
        settings["compile_mode"] = "reduce-overhead"
    if "capture" in mode:  # the whole step in one CUDA graph (the eager step off CUDA)
        settings["cuda_graph"] = True
    source = data
    if "stream" in mode:
        source = torchik.learn.FKStream(robot, targets=targets, seed=0, device=case["device"])
        settings["stats_rows"] = 20_000
    marks: dict[int, tuple[float, float]] = {}

    def clock(step: int, metrics: dict) -> None:
        if step in (case["warmup"], total):
            if case["device"] == "cuda":
                torch.cuda.synchronize()
            marks[step] = (time.perf_counter(), time.process_time())

    flops = _flops(model, data, case["device"])
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
        "mflop_per_sample": flops / 1e6,
        "tflops": flops * samples / (wall1 - wall0) / 1e12,
    }


def _flops(model, data, device: str) -> float:
    """Matrix-product operations per sample of a training step (the model moved to ``device``
    and back to the CPU after: ``train`` moves it itself)."""
    from experiments.train_speed import FLOP_ROWS, matmul_flops

    param = next(model.parameters())
    model.to(device).train()
    q, target = (x[:FLOP_ROWS].to(device, param.dtype) for x in (data.q, data.target))
    flops = matmul_flops(model, q, target)  # what it draws is forgotten: train() seeds again
    model.to("cpu")
    return flops


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

    from experiments.train_speed import FAMILIES, OPTIONS

    parser = argparse.ArgumentParser(prog="train_speed.py", description=__doc__.splitlines()[0])
    default = [f for f in FAMILIES if f != "fm"]  # fm on request: the baseline predates it
    parser.add_argument("--families", nargs="+", default=default, choices=FAMILIES)
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
        help="families with compile or graphs modes (compilation takes minutes per family on "
        "a CPU)",
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

    from experiments.train_speed import speed_intro, speed_table

    name = f"train_speed{'_' + args.suffix if args.suffix else ''}"
    report = common.Report(name, "Training throughput")  # stamps the start (load, time)
    report.stamp["torch_threads"] = f"{args.threads} in each case's process"
    report.intro = speed_intro(args.repeats, args.steps, args.warmup, args.baseline)
    table = speed_table(args.device, args.threads, args.batch)
    report.tables.append(table)
    with tempfile.TemporaryDirectory() as tmp:
        baseline = _extract(args.baseline, Path(tmp)) if "before" in args.modes else None
        for family in args.families:
            _measure_family(args, family, baseline, table)
            paths = report.write(args.out)  # after every family: a run cut short keeps them
    for path in paths:
        common.log(f"wrote {path}")
    return 0


def _measure_family(args, family: str, baseline: Path | None, table) -> None:
    """Every mode of one family, ``--repeats`` rounds in turn (load from other jobs hits the
    modes alike); the fastest run of each mode is kept."""
    import common

    from experiments.train_speed import speed_key

    compiles = [m for m in args.modes if "compile" in m or "graphs" in m]
    modes = [m for m in args.modes if m not in compiles or family in args.compile_families]
    key = speed_key(args.device, args.threads)
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


if __name__ == "__main__":
    sys.path[:0] = [str(HERE), str(REPO)]  # common, experiments (the worker too)
    raise SystemExit(main())
