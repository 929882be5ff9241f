#!/usr/bin/env bash
# `make gpu-check`: everything only a GPU machine can check, in one call of at most 8 minutes
# (issue 34's goal): each step has its own limit, cut to what is left of BUDGET (480 s from the
# script's start); a step with under 10 s left does not start and is reported. Run from the
# repository root on the GPU machine, with the Python that holds its CUDA torch and Triton (no
# .venv: such a machine has no package registry):
#
#   OUT=/where/results/go bash scripts/gpu_check.sh            # PY=python3 by default
#   PY=.venv/bin/python bash scripts/gpu_check.sh --dry-run    # here: the same steps, tiny, CPU
#
# Most wanted first, so that a run cut short keeps the most:
# 1. the GPU-relevant tests on the GPU: the kinematics (fused kernels on CUDA tensors), IK,
#    training-engine and flow-matching sampling suites, with every test marked `cuda` (CUDA
#    graph capture, no host syncs) -> $OUT/gpu_tests.xml (each test's time; the device tool
#    brings back 8 files a call: this, the log and three steps' two files each);
# 2. benchmarks/gpu.py: FK paths, IK loops (host, fixed, CUDA graphs), whole-body IK, the
#    bundled model's samples, timed with CUDA events -> $OUT/gpu.md, gpu.json (rewritten after
#    every group of rows);
# 3. on request (STEPS names route): benchmarks/gpu.py's route rows, solve_ik and
#    solve_wholebody at growing sizes by the GPU's captured programs, by the CPU's compiled code
#    whatever the size (torchik.ik.host's limits lifted) and with the defaults ->
#    $OUT/gpu_route.md, whose first line says the HOST_ROWS / HOST_WHOLEBODY_ROWS they call for;
# 4. on request (STEPS names probe): benchmarks/gpu_probe.py, one IK solve under the profiler
#    per loop (kernels, GPU time, host reads) and settings of the fixed loop timed ->
#    $OUT/gpu_probe.md, .json;
# 4b. on request (STEPS names kernels): benchmarks/gpu_probe.py's kernel table, every fused
#    kernel by launch shape and store style (fused.STORES, "rows" among them) -> $OUT/gpu_kernels.md;
# 4c. on request (STEPS names host): benchmarks/gpu_probe.py --only host, cProfile of solve_ik
#    (Panda) and of whole-body IK (the G1's hands; the CPU's compiled code up to
#    HOST_WHOLEBODY_ROWS) at 1 and 1 000 targets, each synchronising line -> $OUT/gpu_probe_host.txt;
# 5. on request (STEPS names wholebody_triton): benchmarks/gpu.py's whole-body rows of the
#    G1's hands at 1 to 4 000 targets: first the CPU's compiled code at each size and at 1 000
#    on 1, 2, 4 and 8 threads (what the program has to beat, and how the CPU's route scales;
#    written before the kernel's compile), then Triton's loop kernel as one captured program
#    (torchik.ik.wholebody.captured) and 1 000 in chunks (the table's first line:
#    HOST_WHOLEBODY_ROWS with FUSED_LOOP on) -> $OUT/gpu_wholebody.md (its G1
#    kernel, 29 joints and two links, took 76-123 s to compile for sm_90 with Triton 3.9 on
#    this project's CPU machines, 74-81 s on the AMD one since it loads its targets by tiles and
#    leaves out the wrapping, 68-74 s since its constants are written in, 59 s (one run) since
#    its legs stay out of its loop: benchmarks/kernel_compile.py; so the step has 180 s);
# 6. benchmarks/train_speed.py on CUDA: the bundled family (fm) and IKNet at the paper's size,
#    batch 4096: eager, and on the on-device stream torch.compile's graphs (fm only), the whole
#    step in one CUDA graph (cuda_graph), the same in bf16 -> $OUT/train_speed_cuda.md, .json
#    (written after each family);
# 7. the rest of the suite with its doctests (tests that need a package the machine lacks skip,
#    saying which).
# TORCHIK_GIT_COMMIT=<commit> names the commit in the results' stamps where the machine's copy of
# the tree carries another commit's git data (a GPU machine's copy does): pass `git rev-parse
# --short HEAD` from the checkout that sent it.
# STEPS picks steps by name (default "tests gpu train_speed suite"; for the IK work, with
# BUDGET=570: STEPS="tests wholebody_triton probe", the suite with rows stores and whole-body
# IK's captured program tested, the program timed at 1-4 000 G1 targets, the fused-restart
# variants of solve_ik timed; then "gpu train_speed host" in a later call). Each step has its own time limit; a failed step is
# reported and the next one still runs; the exit status is 1 if any step failed. Everything
# printed is also in $OUT/gpu_check.log. Copy $OUT's files into benchmarks/results/ afterwards.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-benchmarks/results}
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
STEPS=${STEPS:-tests gpu train_speed suite}  # probe: on request
failed=()
start=$(date +%s)
deadline=$((start + ${BUDGET:-480}))

step() { echo "== $1 ($(($(date +%s) - start)) s)"; }
run() {  # run NAME SECONDS CMD...: a step with its own limit; pytest's 5 (nothing collected) passes
  local name=$1 limit=$2
  shift 2
  case " $STEPS " in *" $name "*) ;; *) echo "(skipped: not in STEPS)"; return ;; esac
  local left=$((deadline - $(date +%s)))
  if [ "$left" -lt 10 ]; then
    echo "(not run: ${left} s left of BUDGET=${BUDGET:-480})"
    failed+=("$name (no time left)")
    return
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  echo "(limit $limit s)"
  timeout "$limit" "$@"
  local code=$?
  if [ "$code" != 0 ] && [ "$code" != 5 ]; then
    failed+=("$name (exit $code)")
  fi
}

step "device"
$PY -c 'import torch, torchik, sys
print("python", sys.version.split()[0], "torch", torch.__version__, "torchik", torchik.__version__)
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "-")
try:
    import triton; print("triton", triton.__version__)
except ImportError:
    print("triton: not installed (the fused kernels are off)")'

gpu_tests=(tests/kinematics tests/ik tests/train/test_engine.py tests/train/test_graph_step.py
  tests/models/test_fm.py tests/experiments/test_gpu.py)
if [ "$DRY" = 1 ]; then
  gpu_tests=(tests/ik/test_fixed.py tests/ik/test_captured.py tests/kinematics/test_fused.py tests/experiments/test_gpu.py)
  rest=(tests/robot/test_configuration.py) doctests=()
  workers=2 quick=(--quick --seconds 0.02) device=cpu batch=64 steps=2 families=(mlp) threads=1
  modes=(eager stream+capture)
else
  rest=(tests) doctests=(--doctest-modules src/torchik experiments)
  workers=12 quick=() device=cuda batch=4096 steps=50 families=(fm iknet) threads=4
  # a fresh process per case: ~17 s each on an H200; torch.compile's graphs for fm only (IKNet
  # compiles for minutes); capture: the whole step in one CUDA graph (TrainConfig.cuda_graph)
  modes=(eager stream+graphs stream+capture stream+capture+bf16)
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv
fi
ignore=()
for t in "${gpu_tests[@]}"; do ignore+=(--ignore "$t"); done

step "tests: kinematics, IK, engine, fm sampling, with the cuda-marked cases"
run tests 300 "$PY" -m pytest -q -rfEs -n "$workers" --dist worksteal -p no:cacheprovider --durations=20 \
  --junitxml "$OUT/gpu_tests.xml" "${gpu_tests[@]}"
# on an H200: 150 s ran out (2026-11-28, at 9c3997c), 240 s at about 97 % (at 700f8e1: 536 tests
# took 258 s on 16 workers in a call of their own); the XML names each test's time. worksteal:
# a worker that runs out of tests takes some of another's (a few take minutes of compiling)

step "kinematics and IK throughput (benchmarks/gpu.py)"
run gpu 120 "$PY" benchmarks/gpu.py "${quick[@]}" --out "$OUT"

step "small solves: the CPU's compiled code against the GPU (benchmarks/gpu.py --only route)"
run route 120 "$PY" benchmarks/gpu.py --only route "${quick[@]}" --name gpu_route --out "$OUT"

step "IK solves profiled, fixed-loop settings (benchmarks/gpu_probe.py)"
run probe 110 "$PY" benchmarks/gpu_probe.py --only solves variants "${quick[@]:0:1}" --out "$OUT"

step "fused kernels by launch shape and store style (benchmarks/gpu_probe.py --only kernels)"
run kernels 90 "$PY" benchmarks/gpu_probe.py --only kernels "${quick[@]:0:1}" \
  --name gpu_kernels --out "$OUT"

step "where the host spends a solve: solve_ik, whole-body IK (benchmarks/gpu_probe.py --only host)"
run host 90 "$PY" benchmarks/gpu_probe.py --only host "${quick[@]:0:1}" --out "$OUT"

step "whole-body IK on Triton's loop kernel (benchmarks/gpu.py --only wholebody_triton)"
run wholebody_triton 180 "$PY" benchmarks/gpu.py --only wholebody_triton "${quick[@]}" \
  --name gpu_wholebody --out "$OUT"

step "training throughput (benchmarks/train_speed.py)"
run train_speed 140 "$PY" benchmarks/train_speed.py --device "$device" --size paper \
  --families "${families[@]}" --modes "${modes[@]}" --batch "$batch" --steps "$steps" \
  --warmup 5 --repeats 1 --threads "$threads" --compile-families fm --suffix "$device" --out "$OUT"

step "the rest of the suite"
run suite 100 "$PY" -m pytest -q -rfE -n "$workers" --dist worksteal -p no:cacheprovider \
  --continue-on-collection-errors "${rest[@]}" "${ignore[@]}" "${doctests[@]}"

step "done"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
echo "all steps passed; results in $OUT"
