#!/usr/bin/env bash
# Checks the Docker image before a release, on a machine that reaches no container registry and cannot run
# containers (no cgroup delegation): builds it from a clean clone with podman from Debian
# (`podman build --isolation=chroot`, on a Debian bookworm base made with debootstrap and passed as BASE), then
# runs the image's CMD (start.sh) in a chroot of the built image as its first process, with the image's
# environment. Only /proc, /dev, /sys are bound; the dashboard and the servers listen on loopback (the CMD's
# --share is replaced by SPECSCOPE_SHARE=1 and --server.address 127.0.0.1, so the log still prints the shared
# addresses, from SPECSCOPE_PUBLIC_URL). Not part of CI. Run as root:
#
#   sudo bash tests/fresh/docker-image.sh
#
# It checks, and prints on its last line: the build's minutes and the image's size; that files .dockerignore
# keeps out (planted in the clone: a token, a model, a venv, a home) and the wheels mounted for the build are
# not in the image (leaks=0); the seconds until the image's HEALTHCHECK command first passes (healthy_s) and
# until the dashboard answers; the demo servers that answer a chat completion after their warm-ups; that the
# log hands out SPECSCOPE_PUBLIC_URL (public_url=1); the exit code of a `docker stop` (TERM to start.sh, KILL
# after 10 s: stop_code=0) and the processes it left (left=0). Then it unmounts, checks and deletes the chroot;
# the image stays (podman rmi localhost/specscope:fresh). The 4 CPU demo servers take about 4 GiB each. Two runs
# at once need a FRESH_DIR each.
#
# Environment: BASE (base image; default python:3.11-slim where it can be pulled, else a Debian bookworm
# minbase root with python3, python3-venv and python3-pip, made once and kept as localhost/specscope-base:bookworm),
# BUILD_ARGS (more podman build arguments, e.g. "--build-arg VLLM=none" for the light image), FRESH_TAG (the
# image's tag; default localhost/specscope:fresh), FRESH_IMAGE (run this image, built before, instead of building),
# FRESH_DIR (default /var/tmp/specscope-fresh), FRESH_WHEELS (a folder of wheels given as the wheels build
# context; default /opt/wheels where it exists, holding torch==2.13.0+cpu for machines that cannot reach
# PyTorch's CPU index), FRESH_MINUTES (60), FRESH_MIN_GIB (GiB of available memory to wait for, up to 30 min;
# default 18), FRESH_WHILE_UP (a command run on the host while the image runs, with DASHBOARD_URL and
# SPECSCOPE_HOME, the chroot's /data, set: e.g. tests/fresh/live_check.py, a Live stream in Chromium),
# FRESH_LOCK (the lock held while the image's servers run; default /tmp/specscope-vllm.lock).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
# shellcheck source=tests/fresh/chroot.sh
source "$here/chroot.sh"

[ "$(id -u)" = 0 ] || { echo "docker-image.sh: run as root (podman build and chroot need it)" >&2; exit 2; }
for tool in podman debootstrap; do
  command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool" >/dev/null; }
done

began=$(date +%s)
work=${FRESH_DIR:-/var/tmp/specscope-fresh}/image
root="$work/image-root"
tag=${FRESH_TAG:-localhost/specscope:fresh}
wheels=${FRESH_WHEELS:-/opt/wheels}
public=http://specscope-demo.example:8501
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
session=""
workdir=/
mkdir -p "$work"

finish() {
  chroot_stop "$root" "$workdir" "$session" || true
  chroot_remove "$root" || true
}
trap finish EXIT
chroot_remove "$root"
chroot_remove "$work/base-root"

base=${BASE:-}
if [ -z "$base" ]; then
  if podman pull -q docker.io/library/python:3.11-slim >/dev/null 2>&1; then
    base=docker.io/library/python:3.11-slim
  elif podman image exists localhost/specscope-base:bookworm; then
    base=localhost/specscope-base:bookworm
  else
    fresh_log "python:3.11-slim cannot be pulled here: building a Debian bookworm stand-in base"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
      bookworm "$work/base-root" "${MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1
    rm -f "$work/base-root"/var/cache/apt/archives/*.deb  # debootstrap's downloads (47 MB), as slim images do
    tar -C "$work/base-root" -c . | podman import -q - localhost/specscope-base:bookworm >/dev/null
    chroot_remove "$work/base-root"
    base=localhost/specscope-base:bookworm
  fi
fi

# A clean clone, plus what a developer's checkout may hold that .dockerignore must keep out of the image.
planted=(.specscope/operator-token home-ci/operator-token .venv-vllm/0.30.0/bin/python .venv/lib/planted.txt
         data/SmolLM2.gguf models/SmolLM2/model.safetensors app/specscope/__pycache__/x.cpython-311.pyc)
rm -rf "$work/context"
git clone -q --no-hardlinks "$repo" "$work/context"
for path in "${planted[@]}"; do mkdir -p "$(dirname "$work/context/$path")"; echo planted >"$work/context/$path"; done
if [ -n "${FRESH_IMAGE:-}" ]; then  # run an image built before, as it is
  tag=$FRESH_IMAGE
  build_minutes=none
else
  build_args=(--format docker --build-arg "BASE=$base" -v /etc/ssl/certs:/etc/ssl/certs:ro
              --build-arg PIP_CERT=/etc/ssl/certs/ca-certificates.crt)
  if [ -d "$wheels" ]; then build_args+=(--build-context "wheels=$wheels"); fi
  # shellcheck disable=SC2206 # BUILD_ARGS: words, as given
  build_args+=(${BUILD_ARGS:-})
  fresh_log "podman build --isolation=chroot ${build_args[*]} (log $work/build.log)"
  build_began=$(date +%s)
  podman build --isolation=chroot "${build_args[@]}" -t "$tag" "$work/context" >"$work/build.log" 2>&1 \
    || { tail -n 30 "$work/build.log" >&2; exit 1; }
  build_minutes=$(python3 -c "print(round(($(date +%s) - $build_began) / 60, 1))")
fi
size_gb=$(python3 -c "print(round($(podman image inspect --format '{{.Size}}' "$tag") / 1e9, 2))")
fresh_log "image $tag: $size_gb GB, built in $build_minutes min"

container=$(podman create "$tag")
mkdir -p "$root"
podman export "$container" | tar -x -C "$root"
podman rm -f "$container" >/dev/null
workdir=$(podman image inspect --format '{{.Config.WorkingDir}}' "$tag")
leaks=0
for path in "${planted[@]}"; do
  grep -qsx planted "$root$workdir/$path" && { fresh_log "in the image: $workdir/$path"; leaks=$((leaks + 1)); }
done
if [ -d "$wheels" ]; then
  for wheel in "$wheels"/*.whl; do
    found=$(find "$root" -xdev -name "$(basename "$wheel")" | head -1)
    [ -n "$found" ] && { fresh_log "in the image: $found"; leaks=$((leaks + 1)); }
  done
fi
fresh_log "$(du -sh "$root$workdir/.venv" | cut -f1) of the image is $workdir/.venv; leaks=$leaks"
mapfile -t image_env < <(podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$tag" | grep .)
mapfile -t command < <(podman image inspect --format '{{json .Config.Cmd}}' "$tag" \
  | python3 -c "import json, sys; print('\n'.join(a for a in json.load(sys.stdin) if a != '--share'))")
mapfile -t health < <(podman image inspect --format '{{json .Config.Healthcheck}}' "$tag" \
  | python3 -c "import json, sys; print('\n'.join(json.load(sys.stdin)['Test'][1:]))")
fresh_log "HEALTHCHECK: ${health[*]}"
CHROOT_ENV=("${image_env[@]}" PORT="$port" SPECSCOPE_SHARE=1 SPECSCOPE_PUBLIC_URL="$public")
chroot_mount "$root"

# The machine's vLLM lock (fd 9, which the image's processes inherit until they are stopped), then the memory.
lock=${FRESH_LOCK:-/tmp/specscope-vllm.lock}
fresh_log "waiting for $lock"
exec 9>"$lock"
flock 9
wait_memory "${FRESH_MIN_GIB:-18}" 30 || exit 1
started=$(date +%s)
fresh_log "running the image's CMD in a chroot: ${command[*]} (dashboard on 127.0.0.1:$port, log $work/start.log)"
session=$(chroot_start "$root" "$workdir" "$work/start.log" "${command[@]}" --server.address 127.0.0.1)
healthy_s=""
deadline=$(( started + ${FRESH_MINUTES:-60} * 60 ))
while [ -z "$healthy_s" ] && [ "$(date +%s)" -lt "$deadline" ] && kill -0 "$session" 2>/dev/null; do
  sleep 5
  # shellcheck disable=SC2046
  if chroot "$root" /usr/bin/env -i $(chroot_env) /bin/bash -c 'cd "$0" && exec "$@"' "$workdir" "${health[@]}" \
      >"$work/health.log" 2>&1; then
    healthy_s=$(( $(date +%s) - started ))
  fi
done
dashboard=$(wait_dashboard "$session" "$port" 1)
fresh_log "HEALTHCHECK passed after ${healthy_s:-never} s: $(tail -n 3 "$work/health.log")"
answering=0
# shellcheck disable=SC2046
for url in $(chroot "$root" /usr/bin/env -i $(chroot_env) "$workdir/.venv/bin/specscope" ps --json \
    | python3 -c "import json, sys; print(' '.join(r['url'] for r in json.load(sys.stdin) if r['status'] == 'healthy'))"); do
  if python3 - "$url" <<'EOF'
import json, sys, urllib.request
url = sys.argv[1]
model = json.load(urllib.request.urlopen(f"{url}/v1/models", timeout=30))["data"][0]["id"]
body = json.dumps({"model": model, "max_tokens": 24, "temperature": 0,
                   "messages": [{"role": "user", "content": "Name three colours."}]}).encode()
request = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
text = json.load(urllib.request.urlopen(request, timeout=120))["choices"][0]["message"]["content"]
print(f"[fresh] {url} answered: {text[:60]!r}", file=sys.stderr)
sys.exit(not text.strip())
EOF
  then answering=$((answering + 1)); fi
done
if grep -q "hand out $public " "$work/start.log"; then public_url=1; else public_url=0; fi
if [ -n "${FRESH_WHILE_UP:-}" ] && [ "$dashboard" = 1 ]; then
  fresh_log "while up: $FRESH_WHILE_UP"
  DASHBOARD_URL="http://127.0.0.1:$port" SPECSCOPE_HOME="$root/data" bash -c "$FRESH_WHILE_UP" || fresh_log "it failed"
fi
fresh_log "the log's last lines:"
tail -n 25 "$work/start.log" >&2
stop_code=$(chroot_docker_stop "$session" "$work/start.log" 10)
left=$(chroot_pids "$root" | wc -l)
fresh_log "docker stop: code $stop_code, $left processes left; the log's last lines:"
tail -n 4 "$work/start.log" >&2
session=""
minutes=$(python3 -c "print(round(($(date +%s) - $began) / 60, 1))")
finish
trap - EXIT
echo "image size_gb=$size_gb build_minutes=$build_minutes leaks=$leaks healthy_s=${healthy_s:-none}" \
     "dashboard_healthy=$dashboard servers_answering=$answering public_url=$public_url stop_code=$stop_code" \
     "left=$left minutes=$minutes"
