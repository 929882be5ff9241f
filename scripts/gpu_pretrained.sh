#!/usr/bin/env bash
# Train the GPU recipes of the bundled fm models (scripts/train_pretrained.py --gpu) side by
# side on one GPU, in one call of about 9 minutes (issue 13). Run from the repository root:
#   OUT=/some/dir bash scripts/gpu_pretrained.sh
# Each training measures its speed under the shared load first and sets its steps so that its
# whole schedule runs in FIT minutes; the models, accuracy.json files and logs end up in
# $OUT/pretrained.tgz (split into 15 MB pieces, pretrained.tgz.part-aa, -ab, ...: cat them).
# DEVICE, FIT, NAMES and EXTRA (more flags for every training) change the defaults; a dry run
# on the CPU: DEVICE=cpu FIT=0.3 NAMES=ur5 EXTRA='--config {...}' bash scripts/gpu_pretrained.sh
set -u
OUT=${OUT:-/tmp/gpu_pretrained}
WORK=${WORK:-/tmp/gpu_pretrained_work}
DEVICE=${DEVICE:-cuda}
FIT=${FIT:-7}
NAMES=${NAMES:-panda panda_position ur5 digit_arm}
EXTRA=${EXTRA:-}
PY=${PY:-python3}
mkdir -p "$OUT" "$WORK"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  $PY -c "import torch; print('torch', torch.__version__)"; } > "$WORK/machine.txt"
cat "$WORK/machine.txt"
cap=$(awk "BEGIN {print $FIT + 1}")
kill_after=$(awk "BEGIN {print int(60 * $FIT + 150)}")
for name in $NAMES; do
  # shellcheck disable=SC2086  # EXTRA is a list of flags
  timeout -s INT "$kill_after" $PY scripts/train_pretrained.py "$name" --gpu --device "$DEVICE" \
    --threads 3 --fit-minutes "$FIT" --minutes "$cap" --out "$WORK/$name" $EXTRA \
    > "$WORK/$name.log" 2>&1 &
done
wait
for name in $NAMES; do
  echo "== $name: $(grep -E 'steps/s measured' "$WORK/$name.log")"
  $PY - "$WORK/$name/accuracy.json" <<'PY' || tail -5 "$WORK/$name.log"
import json, sys
for name, e in json.load(open(sys.argv[1])).items():
    print(name, e["recipe"]["steps"], "steps", e["train_seconds"], "s", e["accuracy"])
PY
done
tar czf "$WORK.tgz" -C "$WORK" .
split -b 15M "$WORK.tgz" "$OUT/pretrained.tgz.part-"
ls -l "$OUT"
