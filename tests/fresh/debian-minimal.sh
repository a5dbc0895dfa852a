#!/usr/bin/env bash
# Proves README command 1 (`bash launchers/start.sh`) on a machine that has nothing: builds a minimal
# Debian bookworm root with debootstrap, copies a clean clone of this repository in, runs start.sh in
# a chroot (only /proc, /dev, /sys bound; servers and dashboard on loopback), counts what came up,
# stops everything, unmounts, checks, deletes. Run as root on Debian/Ubuntu; not part of CI.
#
#   sudo bash tests/fresh/debian-minimal.sh [--keep]
#
# Last line: `fresh dashboard_healthy=<0|1> servers_healthy=<n> minutes=<m>` (want 1 and 4).
# The 4 CPU demo servers take about 4 GiB each: check `free -g` first.
#
# Environment: FRESH_DIR (work folder, default /var/tmp/specscope-fresh), MIRROR (Debian mirror),
# FRESH_WHEELS (a folder of wheels copied into the root and given to pip as --find-links; default
# /opt/wheels when it exists: the torch==2.13.0+cpu wheel, for machines that cannot reach PyTorch's
# CPU index; a user's machine fetches it from that index instead), FRESH_MINUTES (default 90),
# FRESH_MIN_GIB (GiB of available memory to wait for, up to 30 min, else stop before start.sh; default 18).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
# shellcheck source=tests/fresh/chroot.sh
source "$here/chroot.sh"

keep=0
[ "${1:-}" = --keep ] && keep=1
[ "$(id -u)" = 0 ] || { echo "debian-minimal.sh: run as root (debootstrap and chroot need it)" >&2; exit 2; }
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }

began=$(date +%s)
work=${FRESH_DIR:-/var/tmp/specscope-fresh}
root="$work/debian-root"
log="$work/start.log"
wheels=${FRESH_WHEELS:-/opt/wheels}
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
session=""
mkdir -p "$work"

finish() {
  chroot_stop "$root" /specscope "$session" || true
  if [ "$keep" = 1 ]; then chroot_unmount "$root" || true; else chroot_remove "$root" || true; fi
}
trap finish EXIT

chroot_remove "$root"  # a root left over from an interrupted run
fresh_log "debootstrap bookworm (minbase) into $root"
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates,bash \
  bookworm "$root" "${MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1
fresh_log "root ready after $(( $(date +%s) - began )) s; copying a clean clone of $repo"
git clone -q --no-hardlinks "$repo" "$root/specscope"
CHROOT_ENV=(PORT="$port")
if [ -d "$wheels" ]; then
  mkdir -p "$root/wheels"
  cp "$wheels"/*.whl "$root/wheels/"
  CHROOT_ENV+=(PIP_FIND_LINKS=/wheels)
  fresh_log "pip finds local wheels in /wheels (copied from $wheels): $(ls "$root/wheels" | tr '\n' ' ')"
fi
chroot_mount "$root"

# launchers/install.sh first on its own (start.sh runs it again and finds everything in place), so
# the wait for memory comes right before the servers start.
install_began=$(date +%s)
# shellcheck disable=SC2046
chroot "$root" /usr/bin/env -i $(chroot_env) /bin/bash -c 'cd /specscope && bash launchers/install.sh' \
  >"$work/install.log" 2>&1 || fresh_log "install.sh failed (start.sh goes on; see $work/install.log)"
fresh_log "install.sh took $(( ($(date +%s) - install_began) / 60 )) min: $(tail -n 1 "$work/install.log")"
wait_memory "${FRESH_MIN_GIB:-18}" 30 || exit 1
started=$(date +%s)
fresh_log "running 'bash launchers/start.sh' in the chroot (dashboard on 127.0.0.1:$port, log $log)"
session=$(chroot_start "$root" /specscope "$log" bash launchers/start.sh --server.address 127.0.0.1 \
  --server.headless true)
dashboard=$(wait_dashboard "$session" "$port" "${FRESH_MINUTES:-90}")
servers=$(healthy_servers "$root" /specscope)
fresh_log "start.sh: dashboard_healthy=$dashboard after $(( ($(date +%s) - started) / 60 )) min; last lines:"
tail -n 15 "$log" >&2
minutes=$(python3 -c "print(round(($(date +%s) - $began) / 60, 1))")
finish
trap - EXIT
echo "fresh dashboard_healthy=$dashboard servers_healthy=$servers minutes=$minutes"
