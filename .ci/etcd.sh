#!/usr/bin/env bash
# A three-member etcd cluster on 127.0.0.1 for the tests: client ports 2379, 22379 and 32379,
# peer ports 2380, 22380 and 32380 (members m1, m2, m3), each member with its own data dir
# under one temporary directory. etcd comes from Debian's `etcd-server` package (3.4), etcdctl
# from `etcd-client`.
#
# Sourced by .ci/services.sh (which .ci/run sources): `ensure_etcd` reuses a cluster that
# already serves on those ports, or installs etcd if needed, starts the members, waits until the
# cluster serves and registers its stop in the `cleanup` array; either way it exports
# SHEDLOCK_TEST_ETCD_URL (comma-separated endpoints) and SHEDLOCK_TEST_ETCD_DIR (when the
# cluster's directory is known).
#
# By hand (a development session):
#   eval "$(bash .ci/etcd.sh start)"     # prints the two exports
#   bash .ci/etcd.sh status              # health of each member
#   bash .ci/etcd.sh stop-member 2       # the fault tests stop and start single members
#   bash .ci/etcd.sh start-member 2
#   bash .ci/etcd.sh stop                # all three, and removes the directory

# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

etcd_members=(1 2 3)

# Member 1 on etcd's usual ports, members 2 and 3 on the same ports with a leading 2 and 3.
etcd_client_port() { if [ "$1" = 1 ]; then echo 2379; else echo "${1}2379"; fi; }
etcd_peer_port() { if [ "$1" = 1 ]; then echo 2380; else echo "${1}2380"; fi; }

etcd_endpoints() {
  local id list=()
  for id in "${etcd_members[@]}"; do list+=("http://127.0.0.1:$(etcd_client_port "$id")"); done
  (IFS=,; echo "${list[*]}")
}

etcd_initial_cluster() {
  local id list=()
  for id in "${etcd_members[@]}"; do list+=("m$id=http://127.0.0.1:$(etcd_peer_port "$id")"); done
  (IFS=,; echo "${list[*]}")
}

# Starts member $1 in the background (its pid in m$1/pid), unless it runs. A member started
# again after a stop rejoins with its data dir.
etcd_start_member() {
  local id=$1 dir=$SHEDLOCK_TEST_ETCD_DIR/m$1 state=new
  if ci_node_running "$dir"; then return 0; fi
  [ -d "$dir/data/member" ] && state=existing
  mkdir -p "$dir"
  # Heartbeat 100 ms and election timeout 1 s (etcd's defaults) give leases a minimum TTL
  # of 2 s; a loaded 2-core machine is still within them.
  nohup etcd --name "m$id" --data-dir "$dir/data" \
    --listen-client-urls "http://127.0.0.1:$(etcd_client_port "$id")" \
    --advertise-client-urls "http://127.0.0.1:$(etcd_client_port "$id")" \
    --listen-peer-urls "http://127.0.0.1:$(etcd_peer_port "$id")" \
    --initial-advertise-peer-urls "http://127.0.0.1:$(etcd_peer_port "$id")" \
    --initial-cluster "$(etcd_initial_cluster)" \
    --initial-cluster-token shedlock-test --initial-cluster-state "$state" \
    --heartbeat-interval 100 --election-timeout 1000 \
    --quota-backend-bytes 268435456 --logger zap --log-level warn \
    >> "$dir/server.log" 2>&1 < /dev/null &
  echo $! > "$dir/pid"
}

# Stops member $1 (SIGTERM, then SIGKILL after 10 s) and waits until it is gone.
etcd_stop_member() {
  ci_node_stop "$SHEDLOCK_TEST_ETCD_DIR/m$1"
}

# "healthy" or "down" for member $1 (a member without a quorum is not healthy).
etcd_health() {
  if ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$(etcd_client_port "$1")" \
    --command-timeout 2s endpoint health >/dev/null 2>&1; then
    echo healthy
  else
    echo down
  fi
}

# True once every member is healthy.
etcd_all_healthy() {
  local id
  for id in "${etcd_members[@]}"; do [ "$(etcd_health "$id")" = healthy ] || return 1; done
}

etcd_status() {
  ci_need_dir SHEDLOCK_TEST_ETCD_DIR cluster
  local id
  for id in "${etcd_members[@]}"; do echo "member $id ($(etcd_client_port "$id")): $(etcd_health "$id")"; done
}

etcd_start_all() {
  if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    apt_install etcd-server etcd-client
    # Where the package's own service started (a machine with systemd), it holds port 2379.
    as_root systemctl stop etcd >/dev/null 2>&1 || true
  fi
  local id
  if [ -z "${SHEDLOCK_TEST_ETCD_DIR:-}" ]; then
    for id in "${etcd_members[@]}"; do
      if (exec 3<>"/dev/tcp/127.0.0.1/$(etcd_client_port "$id")") 2>/dev/null; then
        echo "something already listens on 127.0.0.1:$(etcd_client_port "$id"); stop it, or set SHEDLOCK_TEST_ETCD_DIR to the directory of the cluster it belongs to" >&2
        return 1
      fi
    done
  fi
  SHEDLOCK_TEST_ETCD_DIR=${SHEDLOCK_TEST_ETCD_DIR:-$(mktemp -d /tmp/shedlock-etcd.XXXXXX)}
  export SHEDLOCK_TEST_ETCD_DIR
  for id in "${etcd_members[@]}"; do etcd_start_member "$id"; done
  if ci_wait_until etcd_all_healthy; then
    export SHEDLOCK_TEST_ETCD_URL
    SHEDLOCK_TEST_ETCD_URL=$(etcd_endpoints)
    return 0
  fi
  echo "the etcd cluster did not come up; logs in $SHEDLOCK_TEST_ETCD_DIR/m*/server.log" >&2
  return 1
}

etcd_stop_all() {
  ci_stop_all "${SHEDLOCK_TEST_ETCD_DIR:-}" etcd_stop_member "${etcd_members[@]}"
}

# For .ci/services.sh: reuse or start, wait, export; what it starts is stopped by the command
# it adds to `cleanup` (which names the cluster's directory, so it runs anywhere).
ensure_etcd() {
  if command -v etcdctl >/dev/null && etcd_all_healthy; then
    # Reused, never stopped here. The fault tests need its directory: the one given, or the
    # one of a running cluster this script started earlier.
    SHEDLOCK_TEST_ETCD_DIR=${SHEDLOCK_TEST_ETCD_DIR:-$(ci_find_dir '/tmp/shedlock-etcd.*' m "${etcd_members[@]}")}
    export SHEDLOCK_TEST_ETCD_URL
    SHEDLOCK_TEST_ETCD_URL=$(etcd_endpoints)
    if [ -n "$SHEDLOCK_TEST_ETCD_DIR" ]; then
      export SHEDLOCK_TEST_ETCD_DIR
      echo "etcd already serves: $SHEDLOCK_TEST_ETCD_URL (members in $SHEDLOCK_TEST_ETCD_DIR), reused"
    else
      unset SHEDLOCK_TEST_ETCD_DIR
      echo "etcd already serves: $SHEDLOCK_TEST_ETCD_URL, reused; its directory is unknown, so the tests that stop its members skip (set SHEDLOCK_TEST_ETCD_DIR)" >&2
    fi
    return 0
  fi
  log "starting a three-member etcd cluster"
  etcd_start_all
  cleanup+=("SHEDLOCK_TEST_ETCD_DIR=$(printf %q "$SHEDLOCK_TEST_ETCD_DIR") etcd_stop_all")
  echo "etcd is up: $SHEDLOCK_TEST_ETCD_URL (members in $SHEDLOCK_TEST_ETCD_DIR)"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  ci_main etcd member SHEDLOCK_TEST_ETCD_URL SHEDLOCK_TEST_ETCD_DIR cluster "$@"
fi
