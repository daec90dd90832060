#!/usr/bin/env bash
# What a change to the scheduler costs a store crate: the time to build `shedlock-redis` again
# after the scheduler's tick.rs is touched, before the split of issue 30 (the scheduler inside
# shedlock-core, which every store depends on) and after it (the scheduler in shedlock-runtime,
# which no store depends on). Both trees are built in the same run and the same target dir
# (their crates apart by path, third-party crates built once), each warmed first; the figure is
# the ratio after / before, per target (the library a user compiles, and the crate's tests,
# which use the runtime as a dev-dependency).
#
#   bash shedlock-bench/build_after_scheduler_change.sh [BEFORE_REV]   # default: 7303e3c
#
# Needs a few GiB under ${TMPDIR:-/tmp} for the target dir; removes its worktrees at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

before_rev=${1:-7303e3c}
work=$(mktemp -d "${TMPDIR:-/tmp}/shedlock-split-build.XXXXXX")
trap 'git worktree remove --force "$work/before" >/dev/null 2>&1 || true
  git worktree remove --force "$work/after" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --quiet --detach "$work/before" "$before_rev"
git worktree add --quiet --detach "$work/after" HEAD

export CARGO_TERM_PROGRESS_WHEN=never CARGO_INCREMENTAL=0
seconds() { # dir, tick file, cargo args...: seconds to rebuild after touching the tick file
  local dir=$1 tick=$2; shift 2
  (cd "$dir" && CARGO_TARGET_DIR="$work/target" cargo build --quiet "$@")
  touch "$dir/$tick"
  local start end
  start=$(date +%s.%N)
  (cd "$dir" && CARGO_TARGET_DIR="$work/target" cargo build --quiet "$@")
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

report() { # label, cargo args...
  local label=$1; shift
  local before after
  before=$(seconds "$work/before" shedlock-core/src/scheduler/tick.rs "$@")
  after=$(seconds "$work/after" shedlock-runtime/src/scheduler/tick.rs "$@")
  printf '%-40s before %6.2f s  after %6.2f s  after/before %.3f\n' \
    "$label" "$before" "$after" "$(echo "$after / $before" | bc -l)"
}

report "shedlock-redis (library)" -p shedlock-redis --lib
report "shedlock-redis (library and tests)" -p shedlock-redis --tests
