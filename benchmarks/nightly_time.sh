#!/usr/bin/env bash
# Command 1's time after pip (issue 27 item 19): the first nightly on an empty store (train + promote the nine
# families, score the nightly matrix with an empty graph cache, report), then a nightly with champions (the graph
# cache warm), each timed with /usr/bin/time (wall, and the user + sys CPU of the job and its Dask workers), with the
# job's own phase lines (tilecast.progress) kept in the logs.
#   bash benchmarks/nightly_time.sh <empty dir> [<commit>]   (a copy of the commit, default HEAD, is made there: git
#   archive); the phase lines give wall and CPU-seconds (since tilecast.progress has them); `uptime` before and after
set -euo pipefail
out="${1:?usage: nightly_time.sh <empty dir> [<commit>]}"
rev="${2:-HEAD}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out/tree" && git -C "$repo" archive "$rev" | tar -x -C "$out/tree" && mkdir -p "$out/tree/mlruns"
if [ -n "${PROGRESS_FROM:-}" ]; then cp "$PROGRESS_FROM" "$out/tree/src/tilecast/progress.py"; fi  # CPU-s in old trees
cd "$out/tree"
export PYTHONPATH="$out/tree/src" MPLBACKEND=Agg
for n in first second; do
  day=$([ "$n" = first ] && echo 2026-01-01 || echo 2026-01-02)
  echo "$n nightly: load before: $(uptime)"
  /usr/bin/time -f "$n nightly: wall %e s, user %U s, sys %S s, max RSS %M KB" -o "$out/$n.time" \
    python jobs/nightly.py date="$day" > "$out/$n.log" 2>&1
  cat "$out/$n.time"
  echo "$n nightly: load after: $(uptime)"
  grep "tilecast.progress" "$out/$n.log" | sed 's/^\[[^]]*\]\[tilecast.progress\]\[INFO\] - /  /' | grep -v '\.\.\.$'
done
