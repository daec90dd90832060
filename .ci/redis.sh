# shellcheck shell=bash
# Redis for the tests, sourced by .ci/services.sh (which .ci/run sources): the server on 6379,
# three independent masters on 6380-6382 for RedLock, and a Sentinel set: master `shedlock` on
# 6390, its replica on 6391 and three sentinels on 26379-26381, and a Redis Cluster of three
# masters and three replicas on 7000-7005 (each started if nothing answers on its port,
# reused otherwise), nothing on disk; openssl for the TLS tests, which start their own TLS
# server. Each start registers its stop in the `cleanup` list. The Sentinel set and the
# cluster are for tests that leave them as they found them (the conformance suites); the
# failover tests start servers of their own. Runs stand-alone too:
# `bash .ci/redis.sh start|stop` (the three RedLock masters only).

# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REDLOCK_PORTS=(6380 6381 6382)
SENTINEL_MASTER_PORT=6390
SENTINEL_REPLICA_PORT=6391
SENTINEL_PORTS=(26379 26380 26381)
SENTINEL_MASTER_NAME=shedlock
CLUSTER_PORTS=(7000 7001 7002 7003 7004 7005)
REDIS_DIR=${REDIS_DIR:-${TMPDIR:-/tmp}/shedlock-redis}

# Starts one daemonized redis-server on `port`, in memory only, with pid and log under
# REDIS_DIR; "${@:2}" are more arguments (`--replicaof host port`).
redis_start_server() {
  local port=$1
  mkdir -p "$REDIS_DIR"
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis-$port.pid" --logfile "$REDIS_DIR/redis-$port.log" \
    "${@:2}"
}

# Starts one daemonized sentinel on `port` watching the Sentinel master (quorum 2, down after
# 1 s without an answer), its configuration (which it rewrites) written to REDIS_DIR first.
redis_start_sentinel() {
  local port=$1 conf="$REDIS_DIR/sentinel-$1.conf"
  mkdir -p "$REDIS_DIR"
  cat > "$conf" <<CONF
port $port
bind 127.0.0.1
daemonize yes
dir $REDIS_DIR
pidfile $REDIS_DIR/redis-$port.pid
logfile $REDIS_DIR/redis-$port.log
sentinel monitor $SENTINEL_MASTER_NAME 127.0.0.1 $SENTINEL_MASTER_PORT 2
sentinel down-after-milliseconds $SENTINEL_MASTER_NAME 1000
sentinel failover-timeout $SENTINEL_MASTER_NAME 5000
CONF
  redis-server "$conf" --sentinel
}

# The sentinel on `port` names the master and knows its replica and the two other sentinels.
sentinel_ready() {
  local info
  info=$(redis-cli -p "$1" sentinel master "$SENTINEL_MASTER_NAME") || return 1
  grep -qx 'num-slaves' <<<"$info" && [ "$(grep -A1 -x 'num-slaves' <<<"$info" | tail -n1)" -ge 1 ] \
    && [ "$(grep -A1 -x 'num-other-sentinels' <<<"$info" | tail -n1)" -ge 2 ]
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
  ensure_redis_sentinel
  ensure_redis_cluster
}

# The cluster's state as a node on `port` sees it: `ok` once every slot is served.
cluster_ok() {
  redis-cli -p "$1" cluster info | grep -q '^cluster_state:ok'
}

# The cluster: six nodes, made three masters with a replica each; SHEDLOCK_TEST_REDIS_CLUSTER_URL
# names it.
ensure_redis_cluster() {
  local stop port started=0 nodes=()
  stop="REDIS_DIR=$(printf %q "$REDIS_DIR") redis_stop_server"
  for port in "${CLUSTER_PORTS[@]}"; do
    nodes+=("127.0.0.1:$port")
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      echo "Redis $port (cluster node) already serves, reused"
      continue
    fi
    log "starting Redis $port (cluster node)"
    # A node starts from its own cluster configuration: an old one would name another cluster.
    rm -f "$REDIS_DIR/nodes-$port.conf"
    redis_start_server "$port" --cluster-enabled yes --cluster-config-file "nodes-$port.conf" \
      --cluster-node-timeout 1000 --dbfilename "dump-$port.rdb"
    cleanup+=("$stop $port")
    wait_for "Redis $port" redis-cli -p "$port" ping
    started=1
  done
  if [ "$started" = 1 ] || ! cluster_ok "${CLUSTER_PORTS[0]}"; then
    log "making the Redis Cluster (three masters, a replica each)"
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
  fi
  for port in "${CLUSTER_PORTS[@]}"; do
    wait_for "Redis Cluster as $port sees it" cluster_ok "$port"
  done
  export SHEDLOCK_TEST_REDIS_CLUSTER_URL=${SHEDLOCK_TEST_REDIS_CLUSTER_URL:-redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002}
}

# The Sentinel set: master, replica, three sentinels; SHEDLOCK_TEST_REDIS_SENTINEL_URLS and
# SHEDLOCK_TEST_REDIS_SENTINEL_MASTER name it.
ensure_redis_sentinel() {
  local stop port
  stop="REDIS_DIR=$(printf %q "$REDIS_DIR") redis_stop_server"
  if redis-cli -p "$SENTINEL_MASTER_PORT" ping >/dev/null 2>&1; then
    echo "Redis $SENTINEL_MASTER_PORT (Sentinel master) already serves, reused"
  else
    log "starting Redis $SENTINEL_MASTER_PORT (Sentinel master)"
    redis_start_server "$SENTINEL_MASTER_PORT"
    cleanup+=("$stop $SENTINEL_MASTER_PORT")
    wait_for "Redis $SENTINEL_MASTER_PORT" redis-cli -p "$SENTINEL_MASTER_PORT" ping
  fi
  if redis-cli -p "$SENTINEL_REPLICA_PORT" ping >/dev/null 2>&1; then
    echo "Redis $SENTINEL_REPLICA_PORT (Sentinel replica) already serves, reused"
  else
    log "starting Redis $SENTINEL_REPLICA_PORT (replica of $SENTINEL_MASTER_PORT)"
    redis_start_server "$SENTINEL_REPLICA_PORT" --replicaof 127.0.0.1 "$SENTINEL_MASTER_PORT"
    cleanup+=("$stop $SENTINEL_REPLICA_PORT")
    wait_for "Redis $SENTINEL_REPLICA_PORT" redis-cli -p "$SENTINEL_REPLICA_PORT" ping
  fi
  for port in "${SENTINEL_PORTS[@]}"; do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      echo "sentinel $port already serves, reused"
      continue
    fi
    log "starting sentinel $port"
    redis_start_sentinel "$port"
    cleanup+=("$stop $port")
  done
  for port in "${SENTINEL_PORTS[@]}"; do
    wait_for "sentinel $port (master, replica and the other sentinels known)" sentinel_ready "$port"
  done
  export SHEDLOCK_TEST_REDIS_SENTINEL_URLS=${SHEDLOCK_TEST_REDIS_SENTINEL_URLS:-redis://127.0.0.1:26379,redis://127.0.0.1:26380,redis://127.0.0.1:26381}
  export SHEDLOCK_TEST_REDIS_SENTINEL_MASTER=${SHEDLOCK_TEST_REDIS_SENTINEL_MASTER:-$SENTINEL_MASTER_NAME}
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case ${1:-} in
    start) for port in "${REDLOCK_PORTS[@]}"; do redis_start_server "$port"; done ;;
    stop) for port in "${REDLOCK_PORTS[@]}"; do redis_stop_server "$port"; done ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
  esac
fi
