# shellcheck shell=bash
# What the .ci scripts share (each sources it): progress lines, waiting for a server, Debian
# packages installed when missing; and for .ci/etcd.sh and .ci/zookeeper.sh a three-node
# service for the tests, run from one temporary directory with a subdirectory per node (its pid
# file, data and server.log), and the command line both scripts answer.

# A progress line (.ci/services.sh start sends every such line to stderr).
log() { printf '\n==> %s\n' "$*"; }

# Runs "$@" as root: directly when this is root, through sudo otherwise.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs the Debian packages "$@", after an `apt-get update` (once per script run).
ci_apt_updated=${ci_apt_updated:-}
apt_install() {
  log "installing $* (Debian packages)"
  if [ -z "$ci_apt_updated" ]; then
    as_root apt-get update -qq
    ci_apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Runs the check "$@" every second until it succeeds, then says "$1 is up"; fails after a
# minute. $1 names what is awaited.
wait_for() {
  local name=$1; shift
  for _ in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then echo "$name is up"; return 0; fi
    sleep 1
  done
  echo "$name did not come up" >&2
  return 1
}

# True when the process whose pid is in $1/pid runs.
ci_node_running() {
  [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null
}

# Stops the process whose pid is in $1/pid (SIGTERM, then SIGKILL after 10 s) and waits until
# it is gone.
ci_node_stop() {
  local dir=$1 pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  kill "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/pid"
}

# Runs the check "$@" every half second until it succeeds; fails after a minute.
ci_wait_until() {
  for _ in $(seq 1 120); do
    if "$@"; then return 0; fi
    sleep 0.5
  done
  return 1
}

# Stops every node of a service and removes its directory $1 (nothing to do without one):
# $2 is the function that stops node N, the node numbers follow.
ci_stop_all() {
  local dir=$1 stop=$2 id
  shift 2
  [ -n "$dir" ] || return 0
  for id in "$@"; do "$stop" "$id"; done
  rm -rf "$dir"
}

# The directory of a running three-node service started by a .ci script: the first directory
# matching the glob $1 in which node directory $2N runs for some N of the rest ("" if none).
ci_find_dir() {
  local glob=$1 node=$2 dir id
  shift 2
  for dir in $glob; do
    for id in "$@"; do
      if ci_node_running "$dir/$node$id"; then echo "$dir"; return 0; fi
    done
  done
}

# Exits unless the variable named $1 holds the directory of the service's nodes ($2 says
# whose).
ci_need_dir() {
  [ -n "${!1:-}" ] || { echo "$1: set $1 to the $2 directory" >&2; exit 1; }
}

# The command line of a service script run by hand or by the tests, with these arguments:
# the prefix P of its functions (P_start_all, P_stop_all, P_start_NODE, P_stop_NODE,
# P_status), what it calls a node (NODE), its URL and directory variables, whose directory it
# is (for messages), then the script's own arguments:
#   start          starts the service, prints `export URL_VAR=… DIR_VAR=…` to eval
#   stop           stops every node, removes the directory
#   status         the state of each node
#   start-NODE N   starts node N again (the fault tests stop and start single nodes)
#   stop-NODE N    stops node N
ci_main() {
  local prefix=$1 node=$2 url_var=$3 dir_var=$4 whose=$5
  shift 5
  case ${1:-} in
    start)
      "${prefix}_start_all" >&2
      echo "export $url_var=${!url_var} $dir_var=${!dir_var}"
      ;;
    stop) ci_need_dir "$dir_var" "$whose"; "${prefix}_stop_all" ;;
    "start-$node") ci_need_dir "$dir_var" "$whose"; "${prefix}_start_$node" "${2:?$node number}" ;;
    "stop-$node") ci_need_dir "$dir_var" "$whose"; "${prefix}_stop_$node" "${2:?$node number}" ;;
    status) "${prefix}_status" ;;
    *) echo "usage: $0 start | stop | status | start-$node N | stop-$node N" >&2; exit 2 ;;
  esac
}
