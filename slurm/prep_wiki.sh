#!/usr/bin/env bash
# The batch data preprocessing job: the Beam pipeline (data_prep.build) on one
# allocated node with as many worker processes as CPUs given to the task.
#   sbatch --cpus-per-task=32 slurm/prep_wiki.sh --input 'dumps/enwiki-*-multistream.xml.bz2' \
#       --tokenizer models/bert-base-uncased/vocab.txt --output data/enwiki-bert-uncased-256 --num-shards 256
# Arguments are data_prep.build flags. For corpora larger than one node, run the
# same command outside Slurm against a Flink or Spark cluster instead (the output
# must be on a filesystem every worker sees):
#   python -m data_prep.build ... --runner FlinkRunner --flink_master HOST:8081 --environment_type LOOPBACK
#   python -m data_prep.build ... --runner SparkRunner --spark_master_url spark://HOST:7077
#SBATCH --job-name=tacl-prep
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=16
#SBATCH --time=24:00:00
#SBATCH --output=%x-%j.out
set -euo pipefail
# shellcheck disable=SC1091
source "${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(pwd)}}/slurm/_env.sh"
WORKERS=${SLURM_CPUS_PER_TASK:-1}
echo "job ${SLURM_JOB_ID:-?}: data_prep.build with $WORKERS worker process(es) on $(hostname)"
exec python -m data_prep.build "$@" --direct_num_workers "$WORKERS" \
  --direct_running_mode "$([[ $WORKERS -gt 1 ]] && echo multi_processing || echo in_memory)"
