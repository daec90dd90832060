#!/usr/bin/env bash
# Every server the tests use, on 127.0.0.1, from Debian's packages (installed when missing,
# after an `apt-get update`; through sudo when not root):
#   PostgreSQL 5432 with database `test`      SHEDLOCK_TEST_PG_URL
#   a PostgreSQL primary 5441 and its         SHEDLOCK_TEST_PG_PRIMARY_URL,
#     streaming standby 5442 (failover tests) SHEDLOCK_TEST_PG_STANDBY_URL
#   MariaDB 3306 with database `test`         SHEDLOCK_TEST_MYSQL_URL
#   Redis 6379                                SHEDLOCK_TEST_REDIS_URL
#   three RedLock masters 6380-6382           SHEDLOCK_TEST_REDLOCK_URLS
#   a Sentinel set: master `shedlock` 6390,   SHEDLOCK_TEST_REDIS_SENTINEL_URLS (the sentinels),
#     its replica 6391, sentinels 26379-26381 SHEDLOCK_TEST_REDIS_SENTINEL_MASTER (its name)
#   a Redis Cluster 7000-7005 (3 masters,     SHEDLOCK_TEST_REDIS_CLUSTER_URL
#     a replica each)
#   a three-server ZooKeeper ensemble         SHEDLOCK_TEST_ZK_URL, SHEDLOCK_TEST_ZK_DIR
#   a three-member etcd cluster               SHEDLOCK_TEST_ETCD_URL, SHEDLOCK_TEST_ETCD_DIR
#   chromedriver 4444 driving Chromium        SHEDLOCK_TEST_WEBDRIVER_URL
# plus openssl (the Redis TLS tests make a certificate) and curl. No protoc: shedlock-etcd
# declares its gRPC messages by hand and has no build script.
#
# A server that already answers on its port is reused and never stopped here.
#
# By hand (a development session):
#   eval "$(bash .ci/services.sh start)"   # starts what is not running; prints the exports
#   bash .ci/services.sh status            # each server, and what `start` started
#   bash .ci/services.sh stop              # stops what `start` started, and only that
#   bash .ci/services.sh skipped           # what the last `cargo test` skipped, counted
#
# Sourced by .ci/run: `services_start` starts them the same way, exports the variables, and
# adds the stop of each server it started to run's `cleanup` list (stopped at its exit).

# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=.ci/redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis.sh"
# shellcheck source=.ci/zookeeper.sh
source "$(dirname "${BASH_SOURCE[0]}")/zookeeper.sh"
# shellcheck source=.ci/etcd.sh
source "$(dirname "${BASH_SOURCE[0]}")/etcd.sh"
# shellcheck source=.ci/postgres-standby.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres-standby.sh"

# The stop command of each server started, run by .ci/run at its exit; the stand-alone `start`
# keeps them in $SERVICES_STATE for `stop`.
if ! declare -p cleanup >/dev/null 2>&1; then cleanup=(); fi
SERVICES_STATE=${SERVICES_STATE:-${XDG_RUNTIME_DIR:-${TMPDIR:-/tmp}}/shedlock-services-$(id -u).state}

pg_ready() { pg_isready -h 127.0.0.1 -p 5432 -q; }
pg_root() { psql -h 127.0.0.1 -U root -d postgres -v ON_ERROR_STOP=1 -tAc "$1"; }

ensure_postgres() {
  local installed=0 version
  if ! command -v pg_ctlcluster >/dev/null; then
    apt_install postgresql postgresql-client
    installed=1
  fi
  # shellcheck disable=SC2012 # the clusters' versions: plain numbers
  version=$(ls /etc/postgresql | sort -V | tail -n1)
  if pg_ready; then
    echo "PostgreSQL already serves on 5432, reused"
  else
    log "starting PostgreSQL $version"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    cleanup+=("as_root pg_ctlcluster --skip-systemctl-redirect $version main stop")
    wait_for PostgreSQL pg_ready
  fi
  if ! pg_root 'SELECT 1' >/dev/null 2>&1; then
    if [ "$installed" = 0 ]; then
      echo "PostgreSQL does not let the role root in from 127.0.0.1 without a password; as its" \
        "administrator: CREATE ROLE root SUPERUSER LOGIN, and a 'host all root 127.0.0.1/32" \
        "trust' line in pg_hba.conf (or set SHEDLOCK_TEST_PG_URL to a role of yours)" >&2
      return 1
    fi
    # A cluster this script just installed is the tests' own: a superuser `root` that may
    # log in from 127.0.0.1 without a password (the URL holds none).
    log "letting the role root into PostgreSQL from 127.0.0.1"
    as_root runuser -u postgres -- psql -q -c "DO \$\$ BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'root') THEN
        CREATE ROLE root SUPERUSER LOGIN;
      END IF; END \$\$"
    as_root sed -i '1i host all root 127.0.0.1/32 trust' "/etc/postgresql/$version/main/pg_hba.conf"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
    wait_for "PostgreSQL (role root)" pg_root 'SELECT 1'
  fi
  # The test database may be missing on a fresh machine.
  pg_root "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 \
    || pg_root "CREATE DATABASE test" >/dev/null
}

# `mysqladmin ping` succeeds while the server runs, even when it refuses the user.
mariadb_up() { mysqladmin -h 127.0.0.1 -P 3306 ping; }
mariadb_root() { mysql -h 127.0.0.1 -P 3306 -u root "$@"; }

ensure_mariadb() {
  local installed=0
  if ! command -v mariadbd >/dev/null && [ ! -x /usr/sbin/mariadbd ]; then
    apt_install mariadb-server
    installed=1
  fi
  if mariadb_up >/dev/null 2>&1; then
    echo "MariaDB already serves on 3306, reused"
  else
    log "starting MariaDB"
    # Its socket's directory, made by Debian's service scripts where they run.
    [ -d /run/mysqld ] || as_root install -d -o mysql -g mysql /run/mysqld
    # As the mysql user, whether or not the configuration says so (mariadbd refuses root).
    as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd \
      -- --user=mysql || true
    cleanup+=("mysqladmin -h 127.0.0.1 -P 3306 -u root shutdown")
    wait_for MariaDB mariadb_up
  fi
  if ! mariadb_root -e 'SELECT 1' >/dev/null 2>&1; then
    if [ "$installed" = 0 ]; then
      echo "MariaDB does not let root in from 127.0.0.1 without a password; as its" \
        "administrator: CREATE USER 'root'@'127.0.0.1'; GRANT ALL PRIVILEGES ON *.* TO" \
        "'root'@'127.0.0.1' WITH GRANT OPTION (or set SHEDLOCK_TEST_MYSQL_URL to a user of yours)" >&2
      return 1
    fi
    # A server this script just installed is the tests' own: root may log in from 127.0.0.1
    # without a password (the URL holds none). Debian's root logs in on the socket as root.
    log "letting root into MariaDB from 127.0.0.1"
    as_root mysql -u root -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
      GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION"
  fi
  mariadb_root -e "CREATE DATABASE IF NOT EXISTS test"
}

webdriver_ready() { curl -sf "$1/status"; }

# The dashboard's browser tests: Debian's Chromium driven by its chromedriver.
ensure_chromedriver() {
  if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
    apt_install chromium chromium-driver
  fi
  if [ -n "${SHEDLOCK_TEST_WEBDRIVER_URL:-}" ] && webdriver_ready "$SHEDLOCK_TEST_WEBDRIVER_URL" >/dev/null 2>&1; then
    echo "a WebDriver server already answers at $SHEDLOCK_TEST_WEBDRIVER_URL, reused"
    return 0
  fi
  export SHEDLOCK_TEST_WEBDRIVER_URL=http://127.0.0.1:4444
  if webdriver_ready "$SHEDLOCK_TEST_WEBDRIVER_URL" >/dev/null 2>&1; then
    echo "chromedriver already serves on 4444, reused"
    return 0
  fi
  log "starting chromedriver"
  nohup chromedriver --port=4444 >/dev/null 2>&1 </dev/null &
  cleanup+=("stop_pid $! chromedriver")
  wait_for chromedriver webdriver_ready "$SHEDLOCK_TEST_WEBDRIVER_URL"
}

# Stops process $1 if it still is the program $2 (a pid may have been reused since).
stop_pid() {
  if [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; then kill "$1" 2>/dev/null || true; fi
}

# Starts (or reuses) every server and exports every SHEDLOCK_TEST_* variable; each server it
# starts adds its stop to `cleanup`.
services_start() {
  if ! command -v curl >/dev/null; then apt_install curl; fi
  ensure_postgres
  ensure_postgres_standby
  ensure_mariadb
  ensure_redis
  ensure_zookeeper
  ensure_etcd
  ensure_chromedriver
  export SHEDLOCK_TEST_PG_URL=${SHEDLOCK_TEST_PG_URL:-postgres://root@127.0.0.1:5432/test}
  export SHEDLOCK_TEST_MYSQL_URL=${SHEDLOCK_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}
  export SHEDLOCK_TEST_REDIS_URL=${SHEDLOCK_TEST_REDIS_URL:-redis://127.0.0.1:6379}
  export SHEDLOCK_TEST_REDLOCK_URLS=${SHEDLOCK_TEST_REDLOCK_URLS:-redis://127.0.0.1:6380,redis://127.0.0.1:6381,redis://127.0.0.1:6382}
}

# The `export` lines of every variable services_start sets.
services_exports() {
  local var
  for var in SHEDLOCK_TEST_PG_URL SHEDLOCK_TEST_PG_PRIMARY_URL SHEDLOCK_TEST_PG_STANDBY_URL \
    SHEDLOCK_TEST_MYSQL_URL SHEDLOCK_TEST_REDIS_URL \
    SHEDLOCK_TEST_REDLOCK_URLS SHEDLOCK_TEST_REDIS_SENTINEL_URLS \
    SHEDLOCK_TEST_REDIS_SENTINEL_MASTER SHEDLOCK_TEST_REDIS_CLUSTER_URL SHEDLOCK_TEST_ZK_URL SHEDLOCK_TEST_ZK_DIR \
    SHEDLOCK_TEST_ETCD_URL SHEDLOCK_TEST_ETCD_DIR SHEDLOCK_TEST_WEBDRIVER_URL; do
    # Single quotes (a quote inside as '\''), readable and safe for `eval`.
    if [ -n "${!var:-}" ]; then printf "export %s='%s'\n" "$var" "${!var//\'/\'\\\'\'}"; fi
  done
}

# Adds what this run started to the state file (a second `start` that reuses everything adds
# nothing, and `stop` still stops what the first started).
services_save() {
  local step
  [ "${#cleanup[@]}" -gt 0 ] || return 0
  for step in "${cleanup[@]}"; do echo "$step"; done >> "$SERVICES_STATE"
}

# Stops what the stand-alone `start` started (last started, first stopped), and forgets it.
services_stop() {
  local steps=() i
  if [ ! -s "$SERVICES_STATE" ]; then
    echo "nothing to stop: no server was started by .ci/services.sh start" >&2
    return 0
  fi
  mapfile -t steps < "$SERVICES_STATE"
  for ((i = ${#steps[@]} - 1; i >= 0; i--)); do
    echo "stopping: ${steps[i]}" >&2
    eval "${steps[i]}" || true
  done
  rm -f "$SERVICES_STATE"
}

services_status() {
  local port id
  up() { if "$@" >/dev/null 2>&1; then echo up; else echo down; fi; }
  echo "PostgreSQL 5432: $(up pg_ready)"
  echo "PostgreSQL primary $PG_PAIR_PRIMARY_PORT: $(up pg_pair_ready "$PG_PAIR_PRIMARY_PORT")"
  echo "PostgreSQL standby $PG_PAIR_STANDBY_PORT: $(up pg_pair_ready "$PG_PAIR_STANDBY_PORT")"
  echo "MariaDB 3306: $(up mariadb_up)"
  for port in 6379 "${REDLOCK_PORTS[@]}" "$SENTINEL_MASTER_PORT" "$SENTINEL_REPLICA_PORT"; do
    echo "Redis $port: $(up redis-cli -p "$port" ping)"
  done
  for port in "${SENTINEL_PORTS[@]}"; do echo "sentinel $port: $(up sentinel_ready "$port")"; done
  for port in "${CLUSTER_PORTS[@]}"; do echo "Redis Cluster node $port: $(up cluster_ok "$port")"; done
  for id in "${zk_servers[@]}"; do echo "ZooKeeper server $id ($(zk_port "$id")): $(zk_mode "$id")"; done
  for id in "${etcd_members[@]}"; do
    echo "etcd member $id ($(etcd_client_port "$id")): $(etcd_health "$id")"
  done
  echo "chromedriver 4444: $(up webdriver_ready http://127.0.0.1:4444)"
  if [ -s "$SERVICES_STATE" ]; then
    echo "started by .ci/services.sh start (stopped by its stop):"
    sed 's/^/  /' "$SERVICES_STATE"
  else
    echo "started by .ci/services.sh start: nothing (what runs is left alone by its stop)"
  fi
}

# One line: how many tests the last `cargo test` that skipped any skipped, for which reasons,
# and how to run them (from the tally shedlock_conformance::env::skip writes).
services_skipped() {
  local root dir tally
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  dir=${CARGO_TARGET_DIR:-$root/target}/shedlock-skipped
  # A tally a week old is no run anyone still asks about.
  find "$dir" -type f -mtime +7 -delete 2>/dev/null || true
  # shellcheck disable=SC2012 # names are pids and start times
  tally=$(ls -t "$dir" 2>/dev/null | head -n1) || true
  if [ -z "$tally" ]; then
    echo "no skipped test tallied in $dir: no cargo test here has skipped one"
    return 0
  fi
  # Fields: reason, test binary, test. A test counts once however often it skipped; each
  # reason is cut before its parenthesis.
  awk -F '\t' -v when="$(date -r "$dir/$tally" '+%F %T')" '
    {
      test = $2 "\t" $3
      if (!(test in tests)) { tests[test] = 1; n++ }
      reason = $1; sub(/ \(.*/, "", reason); sub(/;.*/, "", reason)
      if (!((reason, test) in seen)) {
        seen[reason, test] = 1
        if (!(reason in count)) order[++reasons] = reason
        count[reason]++
      }
    }
    END {
      line = ""
      for (i = 1; i <= reasons; i++) line = line (i > 1 ? ", " : "") order[i] ": " count[order[i]]
      printf "%d tests skipped by the cargo test of %s (%s); to run them: eval \"$(bash .ci/services.sh start)\", then cargo test again\n", n, when, line
    }' "$dir/$tally"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case ${1:-} in
    start)
      # Whatever happens, what was started is remembered for `stop`.
      trap services_save EXIT
      # Progress on stderr, so that stdout holds only the exports for `eval`; the servers
      # started inherit stderr, never the pipe of the `$(…)` around this script.
      services_start >&2
      services_exports
      ;;
    stop) services_stop ;;
    status) services_status ;;
    skipped) services_skipped ;;
    *) echo "usage: $0 start | stop | status | skipped" >&2; exit 2 ;;
  esac
fi
