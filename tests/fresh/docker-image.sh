#!/usr/bin/env bash
# Proves the Docker image: builds it from a clean clone with `podman build --isolation=chroot`, then
# runs the image's CMD (start.sh) in a chroot of the built image, since running containers is refused
# on machines without cgroup delegation (only /proc, /dev, /sys bound; dashboard and servers on
# loopback: the CMD's --share is dropped). Counts what came up, stops
# everything, unmounts, checks, deletes the chroot (the image stays). Run as root; not part of CI.
#
#   sudo bash tests/fresh/docker-image.sh
#
# Last line: `image size_gb=<g> build_minutes=<m> dashboard_healthy=<0|1> servers_healthy=<n> minutes=<m>`.
# The 4 CPU demo servers take about 4 GiB each: check `free -g` first.
#
# Environment: BASE (base image; default python:3.11-slim when it can be pulled, else a Debian
# bookworm minbase root with python3, python3-venv and python3-pip imported as a stand-in),
# FRESH_DIR (default /var/tmp/specscope-fresh), FRESH_WHEELS (a wheel folder bound read-only into
# the build and given to pip as find-links; default /opt/wheels when it exists, holding the
# torch==2.13.0+cpu wheel for machines that cannot reach PyTorch's CPU index), FRESH_MINUTES (60),
# FRESH_MIN_GIB (GiB of available memory to wait for, up to 30 min, else stop before the CMD; default 18).
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
tag=localhost/specscope:fresh
wheels=${FRESH_WHEELS:-/opt/wheels}
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
  else
    fresh_log "python:3.11-slim cannot be pulled here: building a Debian bookworm stand-in base"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
      bookworm "$work/base-root" "${MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1
    tar -C "$work/base-root" -c . | podman import -q - localhost/specscope-base:bookworm >/dev/null
    chroot_remove "$work/base-root"
    base=localhost/specscope-base:bookworm
  fi
fi

rm -rf "$work/context"
git clone -q --no-hardlinks "$repo" "$work/context"
build_args=(--build-arg "BASE=$base" -v /etc/ssl/certs:/etc/ssl/certs:ro
            --build-arg PIP_CERT=/etc/ssl/certs/ca-certificates.crt)
if [ -d "$wheels" ]; then
  build_args+=(-v "$wheels:/wheels:ro" --build-arg PIP_FIND_LINKS=/wheels)
fi
fresh_log "podman build --isolation=chroot from $base (log $work/build.log)"
build_began=$(date +%s)
podman build --isolation=chroot "${build_args[@]}" -t "$tag" "$work/context" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log" >&2; exit 1; }
build_minutes=$(python3 -c "print(round(($(date +%s) - $build_began) / 60, 1))")
size_gb=$(python3 -c "print(round($(podman image inspect --format '{{.Size}}' "$tag") / 1e9, 2))")
fresh_log "image $tag: $size_gb GB, built in $build_minutes min"

container=$(podman create "$tag")
mkdir -p "$root"
podman export "$container" | tar -x -C "$root"
podman rm -f "$container" >/dev/null
workdir=$(podman image inspect --format '{{.Config.WorkingDir}}' "$tag")
mapfile -t image_env < <(podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$tag" | grep .)
mapfile -t command < <(podman image inspect --format '{{json .Config.Cmd}}' "$tag" \
  | python3 -c "import json, sys; print('\n'.join(a for a in json.load(sys.stdin) if a != '--share'))")
CHROOT_ENV=("${image_env[@]}" PORT="$port")
chroot_mount "$root"

wait_memory "${FRESH_MIN_GIB:-18}" 30 || exit 1
started=$(date +%s)
fresh_log "running the image's CMD in a chroot: ${command[*]} (dashboard on 127.0.0.1:$port, log $work/start.log)"
session=$(chroot_start "$root" "$workdir" "$work/start.log" "${command[@]}")
dashboard=$(wait_dashboard "$session" "$port" "${FRESH_MINUTES:-60}")
servers=$(healthy_servers "$root" "$workdir")
fresh_log "CMD: dashboard_healthy=$dashboard after $(( ($(date +%s) - started) / 60 )) min; last lines:"
tail -n 15 "$work/start.log" >&2
minutes=$(python3 -c "print(round(($(date +%s) - $began) / 60, 1))")
finish
trap - EXIT
echo "image size_gb=$size_gb build_minutes=$build_minutes dashboard_healthy=$dashboard servers_healthy=$servers minutes=$minutes"
