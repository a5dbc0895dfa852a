# Helpers the fresh-machine scripts source: mount a root for a chroot, run SpecScope's first README
# command in it, count what came up, and take everything down again.
#
# Safety: only /proc, /dev and /sys of the host are bound (and /etc/ssl/certs read-only); /dev/shm
# gets a fresh tmpfs. Every process whose root is the chroot is stopped, then every mount is
# undone and checked with `mountpoint -q` before the root is deleted: rm -rf through a live /dev
# or /proc bind would destroy the host.

fresh_log() { echo "[fresh $(date -u +%H:%M:%S)] $*" >&2; }

# The environment a command in the chroot gets: a clean one, this host's CA bundle variables (its
# HTTPS traffic to PyPI passes a proxy with its own CA, bound read-only from the host), then the
# caller's CHROOT_ENV entries (VAR=VALUE, no spaces).
CHROOT_ENV=()
chroot_env() {
  echo PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt "${CHROOT_ENV[@]}"
}

chroot_mount() {  # ROOT
  local root=$1
  mkdir -p "$root/proc" "$root/dev" "$root/sys" "$root/etc/ssl/certs"
  for dir in proc dev sys; do
    mount --bind "/$dir" "$root/$dir"
    mount --make-private "$root/$dir"  # nothing mounted below it reaches the host
  done
  mount -t tmpfs -o mode=1777,size=4g specscope-shm "$root/dev/shm"
  mount --bind /etc/ssl/certs "$root/etc/ssl/certs"
  mount -o remount,bind,ro "$root/etc/ssl/certs"
  mount --make-private "$root/etc/ssl/certs"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
}

chroot_pids() {  # ROOT: processes whose root directory is the chroot
  local root proc
  root=$(readlink -f "$1")
  for proc in /proc/[0-9]*; do
    [ "$(readlink "$proc/root" 2>/dev/null)" = "$root" ] && echo "${proc#/proc/}"
  done
  return 0
}

# Runs COMMAND in WORKDIR inside the chroot in its own session, as a container's first process; prints its pid
# (the session's), and writes its exit code to LOG.rc when it ends.
chroot_start() {  # ROOT WORKDIR LOG COMMAND...
  local root=$1 workdir=$2 log=$3 pid
  shift 3
  rm -f "$root/run/specscope-first.pid" "$log.rc"
  mkdir -p "$root/run"
  # shellcheck disable=SC2046,SC2016
  ( setsid --wait chroot "$root" /usr/bin/env -i $(chroot_env) /bin/bash -c \
      'echo $$ >/run/specscope-first.pid; cd "$0" && exec "$@"' "$workdir" "$@" >"$log" 2>&1 </dev/null
    echo $? >"$log.rc" ) >/dev/null 2>&1 &
  for _ in $(seq 100); do
    pid=$(cat "$root/run/specscope-first.pid" 2>/dev/null) && [ -n "$pid" ] && { echo "$pid"; return; }
    sleep 0.1
  done
  fresh_log "the command did not start in $root"; return 1
}

# What `docker stop` does: TERM to the first process, KILL after SECONDS; prints its exit code (137: killed).
chroot_docker_stop() {  # PID LOG SECONDS
  local pid=$1 log=$2 deadline=$(( $(date +%s) + $3 ))
  kill -TERM "$pid" 2>/dev/null || true
  while [ ! -s "$log.rc" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.5; done
  [ -s "$log.rc" ] || { kill -KILL "$pid" 2>/dev/null || true; sleep 1; }
  cat "$log.rc" 2>/dev/null || echo 137
}

# Waits (up to MINUTES) until GIB GiB of memory are available (the demo's 4 servers need about 16);
# returns 1 if they never are, so a crowded machine is not pushed out of memory.
wait_memory() {  # GIB MINUTES
  local deadline=$(( $(date +%s) + $2 * 60 )) available
  while true; do
    available=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
    [ "$available" -ge "$1" ] && return 0
    [ "$(date +%s)" -ge "$deadline" ] && { fresh_log "only $available GiB available (want $1); run again later"; return 1; }
    fresh_log "$available GiB available, waiting for $1"
    sleep 30
  done
}

dashboard_healthy() {  # PORT
  python3 -c "import sys, urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/_stcore/health', timeout=3)" \
    >/dev/null 2>&1
}

# Waits until the dashboard answers, start.sh's session ends, or MINUTES pass; prints 1 or 0.
wait_dashboard() {  # PID PORT MINUTES
  local pid=$1 port=$2 deadline=$(( $(date +%s) + $3 * 60 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if dashboard_healthy "$port"; then echo 1; return; fi
    kill -0 "$pid" 2>/dev/null || { echo 0; return; }
    sleep 5
  done
  echo 0
}

healthy_servers() {  # ROOT WORKDIR: servers `specscope ps` reports healthy
  local root=$1 workdir=$2
  # shellcheck disable=SC2046
  chroot "$root" /usr/bin/env -i $(chroot_env) "$workdir/.venv/bin/specscope" ps --json 2>/dev/null \
    | python3 -c "import json, sys; print(sum(row['status'] == 'healthy' for row in json.load(sys.stdin)))" \
    2>/dev/null || echo 0
}

# Stops the servers by their state files, then the start.sh session, then anything left in the root.
chroot_stop() {  # ROOT WORKDIR SESSION_PID
  local root=$1 workdir=$2 session=$3 pid
  if [ -x "$root$workdir/.venv/bin/specscope" ] && [ -d "$root/proc/self" ]; then
    # shellcheck disable=SC2046
    chroot "$root" /usr/bin/env -i $(chroot_env) "$workdir/.venv/bin/specscope" stop --all >&2 || true
  fi
  if [ -n "$session" ]; then
    kill -TERM -- "-$session" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 -- "-$session" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$session" 2>/dev/null || true
  fi
  for pid in $(chroot_pids "$root"); do kill -KILL "$pid" 2>/dev/null || true; done
  sleep 1
  [ -z "$(chroot_pids "$root")" ] || { fresh_log "processes still run in $root"; return 1; }
}

# Undoes every mount under ROOT and checks; returns 1 (and deletes nothing) if one is still there.
chroot_unmount() {  # ROOT
  local root=$1 dir
  for dir in etc/ssl/certs dev/shm dev sys proc; do
    if mountpoint -q "$root/$dir"; then umount "$root/$dir" || umount -l "$root/$dir" || true; fi
  done
  for dir in etc/ssl/certs dev/shm dev sys proc; do
    if mountpoint -q "$root/$dir"; then fresh_log "$root/$dir is still mounted"; return 1; fi
  done
  if grep -q " $(readlink -f "$root")/" /proc/self/mountinfo; then
    fresh_log "a mount below $root remains"; return 1
  fi
}

chroot_remove() {  # ROOT: unmount, check, then delete
  local root=$1
  [ -d "$root" ] || return 0
  chroot_unmount "$root" || { fresh_log "NOT deleting $root: mounts remain"; return 1; }
  rm -rf --one-file-system "$root"
}
