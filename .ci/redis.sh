# Redis for the tests, sourced by .ci/run: the server on 6379 (started if not running) and three
# independent masters on 6380-6382 for RedLock, nothing on disk; openssl for the TLS tests,
# which start their own TLS server. Each start registers its stop
# in run's `cleanup` list. Runs stand-alone too: `bash .ci/redis.sh start|stop`.

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
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
  # shedlock-redis's TLS tests start their own `redis-server --tls-port` (Debian's is built
  # with TLS) with a certificate they make with the openssl command.
  if ! command -v openssl >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
  fi
  if ! redis-cli -p 6379 ping >/dev/null 2>&1; then
    log "starting Redis on 6379"
    redis_start_server 6379
    cleanup+=("redis_stop_server 6379")
  fi
  wait_for "Redis 6379" redis-cli -p 6379 ping
  local port
  for port in "${REDLOCK_PORTS[@]}"; do
    if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
      redis_start_server "$port"
      cleanup+=("redis_stop_server $port")
    fi
    wait_for "Redis $port (RedLock master)" redis-cli -p "$port" ping
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
