#!/usr/bin/env bash
# Re-measure SpecScope's own bundled CPU results and put them in data/results and data/requests.
#   bash data/measure_own.sh [SET ...]      # default: code-editing open-chat summarisation
# Run it on an otherwise idle machine: every row records the CPU other processes took from the
# server's core, and the bundled-data test refuses rows that failed a hygiene check. Each cell runs
# 3 times (interleaved) on a fresh server, requests arriving at random (Poisson, 2/s) so they do not
# start in lockstep waves; a stopped run resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPECSCOPE_HOME="${SPECSCOPE_HOME:-$PWD/.specscope/measure-own}"
specscope=.venv/bin/specscope python=.venv/bin/python
[ -x "$specscope" ] || specscope=specscope python=python3
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(code-editing open-chat summarisation)
for name in "${sets[@]}"; do
  run="specscope-cpu-$name"
  "$specscope" bench --preset cpu-smollm2 --methods none,ngram,suffix --k 2,4 --concurrency 1,4 \
    --prompts "data/prompts/$name.jsonl" --num-prompts 8 --output-len 64 --restart-each-cell \
    --repeats 3 --request-rate 2 --run-id "$run"
  cp "$SPECSCOPE_HOME/results/$run.parquet" data/results/
  cp "$SPECSCOPE_HOME/requests/$run.parquet" data/requests/
done
"$python" data/build_bundled.py > /dev/null  # marks the host bundled:<host>
