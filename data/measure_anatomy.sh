#!/usr/bin/env bash
# Measure the bundled step anatomy of the CPU demo (where a speculative step goes: verify, draft,
# overhead), into data/results and data/requests as specscope-cpu-anatomy and its drafter run.
#   bash data/measure_anatomy.sh
# The baseline, ngram and draft_model at K=2 and 4 on the copy prompt set (ngram drafts on most steps
# when the answer copies the prompt, so its step is the verify cost), then the draft model served alone
# (its TPOT is one drafting pass). 3 interleaved repeats, Poisson arrivals at 2/s, concurrency 1; an
# otherwise idle machine; a stopped run resumes where it stopped. About 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPECSCOPE_HOME="${SPECSCOPE_HOME:-$PWD/.specscope/measure-own}"
specscope=.venv/bin/specscope python=.venv/bin/python
[ -x "$specscope" ] || specscope=specscope python=python3
run=specscope-cpu-anatomy
"$specscope" anatomy --measure --preset cpu-smollm2 --methods ngram,draft_model --k 2,4 --concurrency 1 \
  --prompts data/anatomy/copy.jsonl --output-len 48 --repeats 3 --request-rate 2 --run-id "$run"
for id in "$run" "$run-drafter-draft_model"; do
  cp "$SPECSCOPE_HOME/results/$id.parquet" data/results/
  cp "$SPECSCOPE_HOME/requests/$id.parquet" data/requests/
done
"$python" data/build_bundled.py > /dev/null  # marks the host bundled:<host>
