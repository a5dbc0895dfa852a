#!/usr/bin/env bash
# Measure the bundled per-prompt demo: the baseline and ngram K=4 on the mixed prompt set (coding,
# chat and summarisation prompts), into data/results and data/requests as specscope-cpu-mixed.
#   bash data/measure_mixed.sh
# As data/measure_own.sh: an otherwise idle machine, 3 interleaved repeats on a fresh server per
# cell, Poisson arrivals at 2/s; a stopped run resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPECSCOPE_HOME="${SPECSCOPE_HOME:-$PWD/.specscope/measure-own}"
specscope=.venv/bin/specscope python=.venv/bin/python
[ -x "$specscope" ] || specscope=specscope python=python3
run=specscope-cpu-mixed
"$specscope" bench --preset cpu-smollm2 --methods none,ngram --k 4 --concurrency 1 \
  --prompts data/prompts/mixed.jsonl --output-len 64 --restart-each-cell \
  --repeats 3 --request-rate 2 --run-id "$run"
cp "$SPECSCOPE_HOME/results/$run.parquet" data/results/
cp "$SPECSCOPE_HOME/requests/$run.parquet" data/requests/
"$python" data/build_bundled.py > /dev/null  # marks the host bundled:<host>
