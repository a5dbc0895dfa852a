#!/usr/bin/env bash
# Measure acceptance over long outputs: the baseline, ngram and draft_model at K=4 on the long-output
# prompt set (its first four prompts), 1024 tokens a request, into data/results and data/requests as
# specscope-cpu-long-output.
#   bash data/measure_long_output.sh
# As data/measure_own.sh: an otherwise idle machine, 3 interleaved repeats, Poisson arrivals at 2/s;
# a stopped run resumes where it stopped. The per-request rows keep vLLM's per-step accepted and
# drafted counts, from which acceptance over the output and the oracle bound are read.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPECSCOPE_HOME="${SPECSCOPE_HOME:-$PWD/.specscope/measure-own}"
specscope=.venv/bin/specscope python=.venv/bin/python
[ -x "$specscope" ] || specscope=specscope python=python3
run=specscope-cpu-long-output
"$specscope" bench --preset cpu-smollm2 --methods none,ngram,draft_model --k 4 --concurrency 1 \
  --prompts data/prompts/long-output.jsonl --num-prompts 4 --output-len 1024 --repeats 3 --request-rate 2 \
  --run-id "$run"
cp "$SPECSCOPE_HOME/results/$run.parquet" data/results/
cp "$SPECSCOPE_HOME/requests/$run.parquet" data/requests/
"$python" data/build_bundled.py > /dev/null  # marks the host bundled:<host>
