#!/usr/bin/env bash
# Installs SpecScope, brings up the CPU demo servers when there is no GPU, and runs the dashboard
# on http://localhost:8501. Stop the demo servers afterwards with: .venv/bin/specscope stop --all
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${SPECSCOPE_SKIP_INSTALL:-0}" = 1 ] || bash launchers/install.sh
if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
  .venv/bin/specscope demo
fi
exec .venv/bin/python -m streamlit run app/main.py --server.port "${PORT:-8501}" "$@"
