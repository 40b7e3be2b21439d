#!/usr/bin/env bash
# The quickstart at a commit before the shipped reader (default c441681) and now: a first run each (the index
# encoded and saved), then rounds with the index cached, interleaved, the 1-minute load average recorded.
#     bash benchmarks/quickstart_timing.sh [COMMIT]  > benchmarks/results/quickstart_timing.txt
set -u
cd "$(dirname "$0")/.."
BEFORE=${1:-c441681}
ROOT=$PWD
[ -d /tmp/qs-old ] || git worktree add --detach /tmp/qs-old "$BEFORE" >/dev/null 2>&1
export HAYSTACK_TELEMETRY_ENABLED=False
run() { local dir=$1; shift; /usr/bin/time -f "%e s wall %U s user" "$ROOT"/.venv/bin/python $dir/examples/quickstart.py --corpus "$ROOT"/../shared/data/squad-mv/corpus.jsonl "$@" > /dev/null 2>> "$ROOT"/runs/qs_time.log; }
: > runs/qs_time.log
echo "first runs (build caches)" >> "$ROOT"/runs/qs_time.log
echo "old-first" >> "$ROOT"/runs/qs_time.log; (cd /tmp/qs-old && PYTHONPATH=/tmp/qs-old run /tmp/qs-old)
echo "new-first" >> "$ROOT"/runs/qs_time.log; run "$ROOT"
for r in 1 2; do
  echo "round $r load $(cut -d' ' -f1 /proc/loadavg)" >> "$ROOT"/runs/qs_time.log
  echo "old" >> "$ROOT"/runs/qs_time.log; (cd /tmp/qs-old && PYTHONPATH=/tmp/qs-old run /tmp/qs-old)
  echo "new" >> "$ROOT"/runs/qs_time.log; run "$ROOT"
done
grep -v "^Loading\|Batches\|it/s" runs/qs_time.log | grep -E "round|old|new|wall|first"
