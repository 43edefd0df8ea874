#!/usr/bin/env bash
# The main job end to end on the embedded default: generate a small MediaWiki dump
# (no Wikipedia text ships with the project), train a WordPiece vocabulary on it,
# build a sharded masked dataset with the Beam pipeline (DirectRunner, 2 workers),
# print its summary, train a tiny BERT with TaCL through the real deepspeed
# launcher on 2 CPU ranks, export the student as a HF model directory, and compare
# its layer-wise self-similarity with the initial model's.
#   bash scripts/quickstart.sh [--skip-setup] [OUT_DIR]      (default OUT_DIR runs/quickstart in
#                                                           the checkout; an OUT_DIR is relative to
#                                                           the current directory)
# A run replaces what an earlier quickstart wrote in OUT_DIR; a folder that holds
# anything else is refused.
# Environment:
#   PY      the python with tacl-scale installed (default: the checkout's .venv, which the
#           set-up makes; with --skip-setup and no .venv, the active virtualenv's)
#   STEPS   training steps (default 30)
#   MASTER_PORT  the port the 2 training ranks meet on (default 29500, the deepspeed
#                launcher's): another when something else holds that one
set -euo pipefail
source "$(dirname "$0")/usage.sh"
SETUP=1
if [[ "${1:-}" == --skip-setup ]]; then SETUP=0; shift; fi
at_most_one_path "bash scripts/quickstart.sh [--skip-setup] [OUT_DIR]" "$@"
# Resolved before the cd below; the marker says the folder is the quickstart's to replace.
if [[ -n "${1:-}" ]]; then OUT=$(realpath -m -- "$1"); else OUT=$(realpath -m -- "$(dirname "$0")/../runs/quickstart"); fi
MARKER=.tacl-quickstart
# A quickstart's folder from before the marker: its own config file and only its names.
earlier_quickstart() {
  local entry
  [[ -f "$1/bert-tiny.json" ]] || return 1
  for entry in "$1"/* "$1"/.[!.]*; do
    [[ -e "$entry" ]] || continue
    case ${entry##*/} in
      corpus|vocab.txt|build.log|dataset|dataset.build.log|bert-tiny.json|run|train.log|sentences.txt|analysis) ;;
      *) return 1 ;;
    esac
  done
}
if foreign_folder "$OUT" "$MARKER" && ! earlier_quickstart "$OUT"; then
  echo "error: $OUT holds files the quickstart did not write (no $MARKER): name an empty or new folder" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
if (( SETUP )); then bash scripts/setup.sh; fi
if [[ -z ${PY:-} ]]; then
  if [[ -x .venv/bin/python || -z ${VIRTUAL_ENV:-} ]]; then PY=.venv/bin/python; else PY=$VIRTUAL_ENV/bin/python; fi
fi
PY=$(command -v -- "$PY" || echo "$PY")  # a bare name (PY=python) by its path: deepspeed is beside it
# Before anything is written: a python that is not there (no .venv after --skip-setup)
# failed at step 1 with "No such file or directory", the marker already in OUT_DIR.
if ! "$PY" -c "import tacl_scale" 2> /dev/null || [[ ! -x "$(dirname "$PY")/deepspeed" ]]; then
  echo "error: PY=$PY: not a python with tacl-scale installed: run without --skip-setup (scripts/setup.sh" \
       "makes .venv), or set PY to one" >&2
  exit 2
fi
export TOKENIZERS_PARALLELISM=false TRANSFORMERS_VERBOSITY=error HF_HUB_DISABLE_PROGRESS_BARS=1
mkdir -p "$OUT"
echo "written by scripts/quickstart.sh, which replaces what it wrote here when run again" > "$OUT/$MARKER"
echo "== 1/6 generate the sample corpus"
"$PY" -m data_prep.sample_corpus "$OUT/corpus/enwiki-generated-pages-articles.xml.bz2" --articles 60 --overwrite
echo "== 2/6 train a WordPiece vocabulary on it"
"$PY" -m data_prep.train_vocab --input "$OUT/corpus/*.xml.bz2" --vocab-size 4000 --output "$OUT/vocab.txt" --overwrite
echo "== 3/6 build the dataset (Beam DirectRunner, 2 worker processes)"
# Its warnings reappear in the summary below, so the console gets them once; on failure, the whole log.
if ! "$PY" -m data_prep.build --input "$OUT/corpus/*.xml.bz2" --tokenizer "$OUT/vocab.txt" \
  --output "$OUT/dataset" --num-shards 2 --max-seq-len 128 --dupe-factor 5 --validation-fraction 0.1 --overwrite --quiet \
  --direct_num_workers 2 --direct_running_mode multi_processing > "$OUT/build.log" 2>&1; then
  cat "$OUT/build.log" >&2
  exit 1
fi
echo "   built $OUT/dataset (its summary is printed by the next step; the embedded corpus has 60 articles, so"
echo "   every shard holds fewer than the 100 documents a random-B pool wants: its warnings are expected here)"
echo "== 4/6 inspect it"
"$PY" -m data_prep.inspect "$OUT/dataset" -n 2
echo "== 5/6 train TaCL (tiny BERT, 2 CPU ranks, ZeRO-2 through the deepspeed launcher)"
VOCAB_SIZE=$(wc -l < "$OUT/vocab.txt")
cat > "$OUT/bert-tiny.json" <<JSON
{"vocab_size": $VOCAB_SIZE, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 256, "max_position_embeddings": 128}
JSON
rm -rf "$OUT/run"
DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 "$(dirname "$PY")/deepspeed" --num_gpus 2 --master_port "${MASTER_PORT:-29500}" \
  tacl_scale/train.py \
  --recipe tiny-cpu --data "$OUT/dataset" --model "$OUT/bert-tiny.json" --output "$OUT/run" \
  --steps ${STEPS:-30} --save-every 10 --log-every 5 --lr 5e-4 --num-workers 1 2>&1 \
  | tee "$OUT/train.log" | grep -E "^step |exported|error|Error" || true
if [[ ! -f "$OUT/run/export/config.json" ]]; then
  tail -n 15 "$OUT/train.log" >&2
  echo "training failed: its whole log is $OUT/train.log" >&2
  exit 1
fi
echo "== 6/6 self-similarity by layer: initial model vs the TaCL student"
"$PY" - "$OUT" <<'PYCODE'
import itertools, sys
from data_prep.train_vocab import iter_sentences
out = sys.argv[1]
sentences = itertools.islice(iter_sentences([f"{out}/corpus/*.xml.bz2"], "wiki-xml", "en"), 400)
open(f"{out}/sentences.txt", "w", encoding="utf-8").write("\n".join(sentences) + "\n")
PYCODE
# --overwrite: a rerun replaces the earlier report (a used --out is refused without it).
"$PY" -m tacl_scale.analysis selfsim --model "$OUT/run/initial" --model "$OUT/run/export" \
  --sentences "$OUT/sentences.txt" --out "$OUT/analysis" --overwrite \
  --heatmap-sentence "The river flows through the old town."
echo
echo "dataset:      $OUT/dataset   (from tacl_scale.data import PretrainDataset)"
echo "checkpoints:  $OUT/run/checkpoints"
echo "TensorBoard:  tensorboard --logdir $OUT/run/tensorboard"
echo "student (HF): $OUT/run/export   (BertForPreTraining.from_pretrained / AutoModel.from_pretrained)"
echo "analysis:     $OUT/analysis/selfsim_by_layer.png, heatmap_*.png, selfsim.json"
