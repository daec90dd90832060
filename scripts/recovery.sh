#!/usr/bin/env bash
# Crash-recovery figures (docs/RELIABILITY.md, "Crash recovery"): a holder SIGKILLed mid-run and
# the whole fleet killed mid-run, on every store whose URL is set, with 3 s heartbeat leases
# against a 60 s lock_at_most_for; then the heartbeat's store cost in paused time.
#   source /tmp/env.sh   # SHEDLOCK_TEST_PG_URL, SHEDLOCK_TEST_MYSQL_URL, …
#   bash scripts/recovery.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
cargo test -q -p shedlock-harness --test recovery_faults -- --nocapture --test-threads 1 >"$out" 2>&1 \
  || { cat "$out"; exit 1; }
grep '^recovery:\|recovery: ' "$out" | sed 's/.*recovery: /recovery: /'
cargo test -q -p shedlock-core --test recovery -- --nocapture a_running_job_renews 2>&1 | grep '^heartbeat:'
cargo test -q -p shedlock --test recovery_zookeeper -- --nocapture 2>&1 | grep "^recovery:"
rm -f "$out"
