#!/usr/bin/env bash
# Train several recipes of scripts/train_pretrained.py side by side on one GPU, in one call of
# about 9 minutes (issue 13). Run from the repository root:
#   OUT=/some/dir bash scripts/gpu_pretrained.sh [RUNS_FILE...]
# A RUNS_FILE has one training a line, "LABEL NAME FLAGS..." (flags of train_pretrained.py added
# to "NAME --gpu"); without it, the four bundled arm models (their --gpu recipes) train.
# scripts/iknet_ablation.runs is the IKNet ablation. Each training measures its speed under
# the shared load first and sets its steps so that its whole schedule runs in FIT minutes; the
# models, accuracy.json files and logs end up in $OUT/pretrained.tgz.part-aa, -ab, ... (15 MB
# pieces: cat them, then tar xzf); files of MAX_MB (default 60) MiB or more stay behind (the
# paper-size IKNet's 400 MB). DEVICE, FIT and EXTRA (flags for every training) change the
# defaults; a dry run on the CPU: DEVICE=cpu FIT=0.3 EXTRA='--config {...}' bash ...
set -u
OUT=${OUT:-/tmp/gpu_pretrained}
WORK=${WORK:-/tmp/gpu_pretrained_work}
DEVICE=${DEVICE:-cuda}
FIT=${FIT:-7}
EXTRA=${EXTRA:-}
PY=${PY:-python3}
MAX_MB=${MAX_MB:-60}
mkdir -p "$OUT" "$WORK"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  $PY -c "import torch; print('torch', torch.__version__)"; } > "$WORK/machine.txt"
cat "$WORK/machine.txt"
echo "DEVICE=$DEVICE FIT=$FIT MAX_MB=$MAX_MB EXTRA='$EXTRA' OUT=\$OUT bash $0 $*" > "$WORK/command.txt"
RUNS=$WORK/runs.txt
if [ $# -gt 0 ]; then
  cat "$@" > "$RUNS"
else
  printf '%s\n' "panda panda" "panda_position panda_position" "ur5 ur5" \
    "digit_arm digit_arm" > "$RUNS"
fi
cap=$(awk "BEGIN {print $FIT + 1}")
# the last resort stays inside the device tool's 10-minute call
kill_after=$(awk "BEGIN {k = int(60 * $FIT + 150); print (k > 560 ? 560 : k)}")
labels=()
while read -r label name flags; do
  [ -z "$label" ] || [ "${label:0:1}" = "#" ] && continue
  labels+=("$label")
  # shellcheck disable=SC2086  # FLAGS and EXTRA are lists of flags
  timeout -s INT "$kill_after" $PY scripts/train_pretrained.py "$name" --gpu --device "$DEVICE" \
    --threads 3 --fit-minutes "$FIT" --minutes "$cap" --out "$WORK/$label" $flags $EXTRA \
    > "$WORK/$label.log" 2>&1 &
done < "$RUNS"
wait
for label in "${labels[@]}"; do
  echo "== $label: $(grep -E 'steps fit in' "$WORK/$label.log")"
  $PY - "$WORK/$label/accuracy.json" <<'PY' || tail -5 "$WORK/$label.log"
import json, sys
for name, e in json.load(open(sys.argv[1])).items():
    print(name, e["recipe"]["steps"], "steps", e["train_seconds"], "s", e["accuracy"],
          e.get("iknet_table", ""))
PY
done
echo "left behind (>= $MAX_MB MiB):"; find "$WORK" -type f -size +"$((MAX_MB - 1))"M
(cd "$WORK" && find . -type f -size -"$MAX_MB"M -print0 | tar czf "$WORK.tgz" --null -T -)
split -b 15M "$WORK.tgz" "$OUT/pretrained.tgz.part-"
ls -l "$OUT"
