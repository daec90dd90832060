# shellcheck shell=bash
# A PostgreSQL primary and its streaming standby for the failover tests, sourced by
# .ci/services.sh (which .ci/run sources): a cluster pair of its own beside the shared server
# on 5432, primary on 5441 and standby on 5442 (application_name `standby`, asynchronous until
# a test sets synchronous_standby_names), data and logs under PG_PAIR_DIR, trust for
# 127.0.0.1, user `postgres`, made with Debian's server binaries (initdb, pg_basebackup,
# pg_ctl) and run as the postgres user when this is root (postgres refuses root). Reused when
# both ports answer; otherwise made afresh, and its stop registered in `cleanup`.
#   SHEDLOCK_TEST_PG_PRIMARY_URL, SHEDLOCK_TEST_PG_STANDBY_URL
# The failover tests stop the primary hard and promote the standby, so each starts with
# `reset` (a fresh pair on the same ports). By hand, or from the tests:
#   bash .ci/postgres-standby.sh start          # prints the exports, for eval
#   bash .ci/postgres-standby.sh reset          # a fresh pair (what a failover test does first)
#   bash .ci/postgres-standby.sh stop-primary   # pg_ctl stop -m immediate (a crash)
#   bash .ci/postgres-standby.sh promote        # pg_ctl promote on the standby
#   bash .ci/postgres-standby.sh stop | status

# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PG_PAIR_PRIMARY_PORT=${PG_PAIR_PRIMARY_PORT:-5441}
PG_PAIR_STANDBY_PORT=${PG_PAIR_STANDBY_PORT:-5442}
PG_PAIR_DIR=${PG_PAIR_DIR:-${TMPDIR:-/tmp}/shedlock-pg-pair}

# The newest server binaries Debian installed (/usr/lib/postgresql/<version>/bin).
pg_pair_bin() {
  # shellcheck disable=SC2012 # plain version numbers
  echo "/usr/lib/postgresql/$(ls /usr/lib/postgresql | sort -V | tail -n1)/bin"
}

# Runs "$@" as the owner of the pair's files: the postgres user when this is root.
pg_pair_as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_pair_ready() { pg_isready -h 127.0.0.1 -p "$1" -q; }

pg_pair_sql() {
  psql -h 127.0.0.1 -p "$1" -U postgres -d postgres -v ON_ERROR_STOP=1 -tAc "$2"
}

# The standby streams from the primary (as the primary sees it).
pg_pair_streaming() {
  [ "$(pg_pair_sql "$PG_PAIR_PRIMARY_PORT" \
    "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'standby' AND state = 'streaming'")" = 1 ]
}

# Stops node $1 (primary or standby) with mode $2 (default fast), if it runs.
pg_pair_stop_node() {
  local dir="$PG_PAIR_DIR/$1"
  if [ -f "$dir/postmaster.pid" ]; then
    pg_pair_as_owner "$(pg_pair_bin)/pg_ctl" -D "$dir" -m "${2:-fast}" -w stop >/dev/null 2>&1 || true
  fi
}

# Stops both servers and removes their files.
pg_pair_stop() {
  [ -d "$PG_PAIR_DIR" ] || return 0
  pg_pair_stop_node standby
  pg_pair_stop_node primary
  rm -rf "$PG_PAIR_DIR"
}

# Makes the pair afresh: initdb, the primary started, pg_basebackup -R of it started as the
# standby, and waits until it streams.
pg_pair_create() {
  local bin dir=$PG_PAIR_DIR
  bin=$(pg_pair_bin)
  pg_pair_stop
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
  pg_pair_as_owner "$bin/initdb" -D "$dir/primary" -U postgres --auth=trust -E UTF8 --no-sync \
    >"$dir/initdb.log" 2>&1
  pg_pair_as_owner tee -a "$dir/primary/postgresql.conf" >/dev/null <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PAIR_PRIMARY_PORT
unix_socket_directories = '$dir'
wal_level = replica
max_wal_senders = 5
hot_standby = on
fsync = off
full_page_writes = off
CONF
  pg_pair_as_owner tee "$dir/primary/pg_hba.conf" >/dev/null <<HBA
local all all trust
host all all 127.0.0.1/32 trust
host replication all 127.0.0.1/32 trust
HBA
  pg_pair_as_owner "$bin/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w start >/dev/null
  pg_pair_as_owner "$bin/pg_basebackup" -D "$dir/standby" -R --checkpoint=fast --no-sync \
    -d "host=127.0.0.1 port=$PG_PAIR_PRIMARY_PORT user=postgres application_name=standby"
  echo "port = $PG_PAIR_STANDBY_PORT" | pg_pair_as_owner tee -a "$dir/standby/postgresql.conf" >/dev/null
  pg_pair_as_owner "$bin/pg_ctl" -D "$dir/standby" -l "$dir/standby.log" -w start >/dev/null
  ci_wait_until pg_pair_streaming || { echo "the PostgreSQL standby does not stream" >&2; return 1; }
}

pg_pair_exports() {
  export SHEDLOCK_TEST_PG_PRIMARY_URL=postgres://postgres@127.0.0.1:$PG_PAIR_PRIMARY_PORT/postgres
  export SHEDLOCK_TEST_PG_STANDBY_URL=postgres://postgres@127.0.0.1:$PG_PAIR_STANDBY_PORT/postgres
}

# Starts (or reuses) the pair; registers its stop in `cleanup` when it made it.
ensure_postgres_standby() {
  if [ ! -x "$(pg_pair_bin)/pg_basebackup" ]; then
    apt_install postgresql
  fi
  if pg_pair_ready "$PG_PAIR_PRIMARY_PORT" && pg_pair_ready "$PG_PAIR_STANDBY_PORT"; then
    echo "PostgreSQL primary $PG_PAIR_PRIMARY_PORT and standby $PG_PAIR_STANDBY_PORT already serve, reused"
  else
    log "starting a PostgreSQL primary ($PG_PAIR_PRIMARY_PORT) and its streaming standby ($PG_PAIR_STANDBY_PORT)"
    pg_pair_create
    cleanup+=("PG_PAIR_DIR=$(printf %q "$PG_PAIR_DIR") pg_pair_stop")
    echo "PostgreSQL primary and standby are up"
  fi
  pg_pair_exports
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case ${1:-} in
    start)
      cleanup=()
      ensure_postgres_standby >&2
      printf "export SHEDLOCK_TEST_PG_PRIMARY_URL='%s' SHEDLOCK_TEST_PG_STANDBY_URL='%s'\n" \
        "$SHEDLOCK_TEST_PG_PRIMARY_URL" "$SHEDLOCK_TEST_PG_STANDBY_URL"
      ;;
    reset) pg_pair_create ;;
    stop) pg_pair_stop ;;
    stop-primary) pg_pair_stop_node primary immediate ;;
    promote) pg_pair_as_owner "$(pg_pair_bin)/pg_ctl" -D "$PG_PAIR_DIR/standby" -w promote >/dev/null ;;
    status)
      for port in "$PG_PAIR_PRIMARY_PORT" "$PG_PAIR_STANDBY_PORT"; do
        if pg_pair_ready "$port"; then
          echo "PostgreSQL $port: up, in recovery: $(pg_pair_sql "$port" 'SELECT pg_is_in_recovery()')"
        else
          echo "PostgreSQL $port: down"
        fi
      done
      ;;
    *) echo "usage: $0 start | reset | stop-primary | promote | stop | status" >&2; exit 2 ;;
  esac
fi
