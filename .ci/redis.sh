# shellcheck shell=bash
# Redis for the tests, sourced by .ci/services.sh (which .ci/run sources): the server on 6379
# and three independent masters on 6380-6382 for RedLock (each started if nothing answers on
# its port, reused otherwise), nothing on disk; openssl for the TLS tests, which start their
# own TLS server. Each start registers its stop in the `cleanup` list. Runs stand-alone too:
# `bash .ci/redis.sh start|stop` (the three RedLock masters only).

# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REDLOCK_PORTS=(6380 6381 6382)
REDIS_DIR=${REDIS_DIR:-${TMPDIR:-/tmp}/shedlock-redis}

# Starts one daemonized redis-server on `port`, in memory only, with pid and log under REDIS_DIR.
redis_start_server() {
  local port=$1
  mkdir -p "$REDIS_DIR"
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis-$port.pid" --logfile "$REDIS_DIR/redis-$port.log"
}

# Stops the server on `port` that redis_start_server started (by its pid file only).
redis_stop_server() {
  local pidfile="$REDIS_DIR/redis-$1.pid"
  if [ -f "$pidfile" ]; then
    kill "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  fi
}

ensure_redis() {
  if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    apt_install redis-server redis-tools
  fi
  # shedlock-redis's TLS tests start their own `redis-server --tls-port` (Debian's is built
  # with TLS) with a certificate they make with the openssl command.
  if ! command -v openssl >/dev/null; then
    apt_install openssl
  fi
  # Each stop names the pid files' directory, so it runs anywhere.
  local stop
  stop="REDIS_DIR=$(printf %q "$REDIS_DIR") redis_stop_server"
  local port name
  for port in 6379 "${REDLOCK_PORTS[@]}"; do
    name="Redis $port"
    [ "$port" = 6379 ] || name+=" (RedLock master)"
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      echo "$name already serves, reused"
      continue
    fi
    log "starting $name"
    redis_start_server "$port"
    cleanup+=("$stop $port")
    wait_for "$name" redis-cli -p "$port" ping
  done
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case ${1:-} in
    start) for port in "${REDLOCK_PORTS[@]}"; do redis_start_server "$port"; done ;;
    stop) for port in "${REDLOCK_PORTS[@]}"; do redis_stop_server "$port"; done ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
  esac
fi
