#!/usr/bin/env bash
# A three-server ZooKeeper ensemble on 127.0.0.1 for the tests: client ports 2181-2183, peer
# ports 2881-2883, election ports 3881-3883, each server with its own data dir and myid under
# one temporary directory. ZooKeeper comes from Debian's `zookeeper` package (3.8, on Java).
#
# Sourced by .ci/services.sh (which .ci/run sources): `ensure_zookeeper` reuses an ensemble
# that already serves on those ports, or installs ZooKeeper if needed, starts the servers, waits
# until the ensemble serves and registers its stop in the `cleanup` array; either way it exports
# SHEDLOCK_TEST_ZK_URL and SHEDLOCK_TEST_ZK_DIR (the latter when the ensemble's directory is
# known).
#
# By hand (a development session):
#   eval "$(bash .ci/zookeeper.sh start)"   # prints the two exports
#   bash .ci/zookeeper.sh status            # mode of each server (leader / follower / down)
#   bash .ci/zookeeper.sh stop-server 2     # the fault tests stop and start single servers
#   bash .ci/zookeeper.sh start-server 2
#   bash .ci/zookeeper.sh stop              # all three, and removes the directory

# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

zk_servers=(1 2 3)

zk_port() { echo $((2180 + $1)); }

zk_classpath() {
  local cp=/usr/share/java/zookeeper.jar
  # Server logs go to each server's server.log (slf4j-simple ships with ZooKeeper's slf4j).
  [ -f /usr/share/java/slf4j-simple.jar ] && cp+=:/usr/share/java/slf4j-simple.jar
  echo "$cp"
}

# Writes the configuration of server $1 into $SHEDLOCK_TEST_ZK_DIR/zk$1.
zk_configure() {
  local id=$1 dir=$SHEDLOCK_TEST_ZK_DIR/zk$1
  mkdir -p "$dir/data"
  echo "$id" > "$dir/data/myid"
  {
    # tickTime 500 ms: sessions of 1 s (2 ticks) to 60 s are accepted, so tests can use
    # short session timeouts. syncLimit and initLimit leave room for a loaded 2-core machine.
    echo "tickTime=500"
    echo "initLimit=20"
    echo "syncLimit=10"
    echo "maxSessionTimeout=60000"
    echo "dataDir=$dir/data"
    echo "clientPort=$(zk_port "$id")"
    echo "clientPortAddress=127.0.0.1"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=srvr,ruok,mntr,wchp"
    for peer in "${zk_servers[@]}"; do
      echo "server.$peer=127.0.0.1:$((2880 + peer)):$((3880 + peer))"
    done
  } > "$dir/zoo.cfg"
}

# Starts server $1 in the background (its pid in zk$1/pid), unless it runs.
zk_start_server() {
  local id=$1 dir=$SHEDLOCK_TEST_ZK_DIR/zk$1
  if ci_node_running "$dir"; then return 0; fi
  # Small heaps: three JVMs share the machine with the builds and the tests.
  nohup java -Xms32m -Xmx192m -XX:+UseSerialGC -Xss512k \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS" \
    -Dzookeeper.jmx.log4j.disable=true \
    -cp "$(zk_classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
    >> "$dir/server.log" 2>&1 < /dev/null &
  echo $! > "$dir/pid"
}

# Stops server $1 (SIGTERM, then SIGKILL after 10 s) and waits until it is gone.
zk_stop_server() {
  ci_node_stop "$SHEDLOCK_TEST_ZK_DIR/zk$1"
}

# Prints "leader", "follower", "standalone" or "down" for server $1.
zk_mode() {
  local reply
  reply=$( { exec 3<>"/dev/tcp/127.0.0.1/$(zk_port "$1")" && printf srvr >&3 && cat <&3; } 2>/dev/null) || true
  case $reply in
    *"Mode: "*) sed -n 's/^Mode: //p' <<< "$reply" ;;
    *) echo down ;;
  esac
}

# True once a quorum serves: a leader and at least one follower.
zk_serving() {
  local modes="" id
  for id in "${zk_servers[@]}"; do modes+=" $(zk_mode "$id")"; done
  [[ $modes == *leader* && $modes == *follower* ]]
}

zk_status() {
  local id
  for id in "${zk_servers[@]}"; do echo "server $id ($(zk_port "$id")): $(zk_mode "$id")"; done
}

zk_start_all() {
  if ! command -v java >/dev/null || [ ! -f /usr/share/java/zookeeper.jar ]; then
    apt_install zookeeper
  fi
  local id
  if [ -z "${SHEDLOCK_TEST_ZK_DIR:-}" ]; then
    for id in "${zk_servers[@]}"; do
      if [ "$(zk_mode "$id")" != down ]; then
        echo "a ZooKeeper server already answers on 127.0.0.1:$(zk_port "$id"); stop it, or set SHEDLOCK_TEST_ZK_DIR to the directory of the ensemble it belongs to" >&2
        return 1
      fi
    done
  fi
  SHEDLOCK_TEST_ZK_DIR=${SHEDLOCK_TEST_ZK_DIR:-$(mktemp -d /tmp/shedlock-zk.XXXXXX)}
  export SHEDLOCK_TEST_ZK_DIR
  for id in "${zk_servers[@]}"; do
    zk_configure "$id"
    zk_start_server "$id"
  done
  if ci_wait_until zk_serving; then
    export SHEDLOCK_TEST_ZK_URL=127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183
    return 0
  fi
  echo "the ZooKeeper ensemble did not come up; logs in $SHEDLOCK_TEST_ZK_DIR/zk*/server.log" >&2
  return 1
}

zk_stop_all() {
  ci_stop_all "${SHEDLOCK_TEST_ZK_DIR:-}" zk_stop_server "${zk_servers[@]}"
}

# For .ci/services.sh: reuse or start, wait, export; what it starts is stopped by the command
# it adds to `cleanup` (which names the ensemble's directory, so it runs anywhere).
ensure_zookeeper() {
  if zk_serving; then
    # Reused, never stopped here. The fault tests need its directory: the one given, or the
    # one of a running ensemble this script started earlier.
    SHEDLOCK_TEST_ZK_DIR=${SHEDLOCK_TEST_ZK_DIR:-$(ci_find_dir '/tmp/shedlock-zk.*' zk "${zk_servers[@]}")}
    export SHEDLOCK_TEST_ZK_URL=127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183
    if [ -n "$SHEDLOCK_TEST_ZK_DIR" ]; then
      export SHEDLOCK_TEST_ZK_DIR
      echo "ZooKeeper already serves: $SHEDLOCK_TEST_ZK_URL (servers in $SHEDLOCK_TEST_ZK_DIR), reused"
    else
      unset SHEDLOCK_TEST_ZK_DIR
      echo "ZooKeeper already serves: $SHEDLOCK_TEST_ZK_URL, reused; its directory is unknown, so the tests that stop its servers skip (set SHEDLOCK_TEST_ZK_DIR)" >&2
    fi
    return 0
  fi
  log "starting a three-server ZooKeeper ensemble"
  zk_start_all
  cleanup+=("SHEDLOCK_TEST_ZK_DIR=$(printf %q "$SHEDLOCK_TEST_ZK_DIR") zk_stop_all")
  echo "ZooKeeper is up: $SHEDLOCK_TEST_ZK_URL (servers in $SHEDLOCK_TEST_ZK_DIR)"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  ci_main zk server SHEDLOCK_TEST_ZK_URL SHEDLOCK_TEST_ZK_DIR ensemble "$@"
fi
