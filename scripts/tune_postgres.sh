#!/usr/bin/env bash
# Two `torchik tune` workers on one study in a real PostgreSQL server: start a throwaway server
# from the system's packages (initdb, pg_ctl), run two workers with the same command (as on two
# machines), then check that the study's trials are neither lost nor duplicated.
#
#   bash scripts/tune_postgres.sh             # TRIALS=8 PORT=54329 PY=.venv/bin/python
#
# Needs PostgreSQL's server binaries on PATH (Debian: apt-get install postgresql; add
# /usr/lib/postgresql/*/bin to PATH) and SQLAlchemy's default PostgreSQL driver in the venv
# (pip install "psycopg[binary]").
# The server runs as an unprivileged user when this runs as root (initdb refuses root); it is
# stopped and its folder deleted on exit.
set -euo pipefail

PY=${PY:-.venv/bin/python}
TRIALS=${TRIALS:-8}
PORT=${PORT:-54329}
for tool in initdb pg_ctl; do
    command -v "$tool" >/dev/null || { echo "tune_postgres: $tool not found (install postgresql)" >&2; exit 1; }
done
"$PY" -c "import psycopg" 2>/dev/null || { echo "tune_postgres: $PY lacks psycopg (pip install 'psycopg[binary]')" >&2; exit 1; }

WORK=$(mktemp -d /tmp/tune_postgres.XXXXXX)
chmod 755 "$WORK"
AS=()
if [ "$(id -u)" = 0 ]; then
    DB_USER=$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)
    chown "$DB_USER" "$WORK"
    AS=(runuser -u "$DB_USER" --)
fi
stop() {
    "${AS[@]}" pg_ctl -D "$WORK/db" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap stop EXIT

"${AS[@]}" initdb -D "$WORK/db" -U tune --auth=trust >"$WORK/initdb.log" 2>&1
"${AS[@]}" pg_ctl -D "$WORK/db" -l "$WORK/server.log" -w \
    -o "-p $PORT -k $WORK -c listen_addresses=127.0.0.1" start >/dev/null
"${AS[@]}" createdb -h 127.0.0.1 -p "$PORT" -U tune optuna
URL="postgresql://tune@127.0.0.1:$PORT/optuna"
echo "$(pg_ctl --version) on port $PORT"

ARGS=(tune --model cvae --robot planar:1,1,1 --preset tiny --steps 60 --val-every 20
      --batch-size 64 --train-size 500 --val-size 100 --trials "$TRIALS" --storage "$URL"
      --study two_workers --quiet)
start=$(date +%s)
"$PY" -m torchik "${ARGS[@]}" --out "$WORK/worker_a" >"$WORK/a.log" 2>&1 & A=$!
"$PY" -m torchik "${ARGS[@]}" --out "$WORK/worker_b" >"$WORK/b.log" 2>&1 & B=$!
wait "$A" || { cat "$WORK/a.log" >&2; exit 1; }
wait "$B" || { cat "$WORK/b.log" >&2; exit 1; }
echo "two workers finished in $(( $(date +%s) - start )) s"

"$PY" - "$URL" "$TRIALS" <<'EOF'
import sys
from collections import Counter

import optuna

url, trials = sys.argv[1], int(sys.argv[2])
study = optuna.load_study(study_name="two_workers", storage=url)
all_trials = study.get_trials(deepcopy=False)
numbers = [t.number for t in all_trials]
states = Counter(t.state.name for t in all_trials)
workers = Counter(t.user_attrs.get("sampler_seed") for t in all_trials)
settings = Counter(tuple(sorted(t.params.items())) for t in all_trials)
print(f"trials {len(all_trials)}, states {dict(states)}, per worker {sorted(workers.values())}")
problems = []
if sorted(numbers) != list(range(len(numbers))):
    problems.append(f"trial numbers not 0..n-1 without gaps or repeats: {sorted(numbers)}")
if states.get("RUNNING") or states.get("WAITING"):
    problems.append("trials left running or waiting")
if not trials <= states["COMPLETE"] + states["PRUNED"] + states["FAIL"] <= trials + 1:
    problems.append(f"expected {trials} finished trials (one more at most), got {dict(states)}")
if len(workers) != 2:
    problems.append(f"expected trials from 2 workers, got {dict(workers)}")
if max(settings.values()) > 1:
    problems.append("two trials ran the same settings")
if problems:
    sys.exit("tune_postgres: FAILED: " + "; ".join(problems))
print("ok: no trial lost, none duplicated")
EOF
