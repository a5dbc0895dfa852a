#!/usr/bin/env bash
# Measure SpecScope's bundled structured-output result: the json-extraction set on cpu-smollm2,
# none and ngram at K=4, each cell free and constrained to the prompts' JSON schemas, and put it
# in data/results and data/requests.
#   bash data/measure_structured.sh
# Like measure_own.sh: an otherwise idle machine, 3 repeats interleaved, Poisson arrivals at 2/s.
# One server per method holds its free and constrained cells (neither method carries anything from
# one request to the next; suffix decoding would, so it is left out). A stopped run resumes where it
# stopped (the same command again).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/app${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's SpecScope
export SPECSCOPE_HOME="${SPECSCOPE_HOME:-$PWD/.specscope/measure-own}"
specscope=.venv/bin/specscope python=.venv/bin/python
[ -x "$specscope" ] || specscope=specscope python=python3
run=specscope-cpu-structured
"$specscope" bench --preset cpu-smollm2 --methods none,ngram --k 4 --concurrency 1 \
  --prompts data/prompts/json-extraction.jsonl --output-len 32 --structured both \
  --repeats 3 --request-rate 2 --run-id "$run"
cp "$SPECSCOPE_HOME/results/$run.parquet" data/results/
cp "$SPECSCOPE_HOME/requests/$run.parquet" data/requests/
"$python" data/build_bundled.py > /dev/null  # marks the host bundled:<host>
