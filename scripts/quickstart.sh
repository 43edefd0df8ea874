#!/usr/bin/env bash
# The main job end to end on the embedded default: generate a small MediaWiki dump
# (no Wikipedia text ships with the project), train a WordPiece vocabulary on it,
# build a sharded masked dataset with the Beam pipeline (DirectRunner, 2 workers)
# and print its summary with decoded instances.
#   bash scripts/quickstart.sh [--skip-setup] [OUT_DIR]      (default OUT_DIR runs/quickstart)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--skip-setup" ]]; then shift; else bash scripts/setup.sh; fi
OUT=${1:-runs/quickstart}
PY=${PY:-.venv/bin/python}
export TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
echo "== 1/4 generate the sample corpus"
"$PY" -m data_prep.sample_corpus "$OUT/corpus/enwiki-generated-pages-articles.xml.bz2" --articles 60
echo "== 2/4 train a WordPiece vocabulary on it"
"$PY" -m data_prep.train_vocab --input "$OUT/corpus/*.xml.bz2" --vocab-size 4000 --output "$OUT/vocab.txt"
echo "== 3/4 build the dataset (Beam DirectRunner, 2 worker processes)"
"$PY" -m data_prep.build --input "$OUT/corpus/*.xml.bz2" --tokenizer "$OUT/vocab.txt" \
  --output "$OUT/dataset" --num-shards 2 --max-seq-len 128 --dupe-factor 5 --overwrite --quiet \
  --direct_num_workers 2 --direct_running_mode multi_processing
echo "== 4/4 inspect it"
"$PY" -m data_prep.inspect "$OUT/dataset" -n 2
echo
echo "dataset: $OUT/dataset   (read it with: from tacl_scale.data import PretrainDataset)"
