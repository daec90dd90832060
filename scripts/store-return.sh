#!/usr/bin/env bash
# Back to work after the store returns (docs/RELIABILITY.md, "Back after an outage"): per store,
# three instances run one locked per-second job through TCP proxies this script's program
# controls; the proxies cut every connection and refuse new ones for 7 s (the store is down as
# the instances see it; nobody's server is stopped), then listen again. Prints, per store and
# per return phase (0.3 s and 0.9 s after a tick), the time from "the store accepts
# connections" to the first tick, and the ticks lost or doubled after the return. Exit status
# 1 when a tick after the return was lost or ran twice.
#   source /tmp/shedlock-env.sh   # SHEDLOCK_TEST_PG_URL, _MYSQL_URL, _REDIS_URL, _REDLOCK_URLS, _ZK_URL, _ETCD_URL
#   bash scripts/store-return.sh                 # every store whose URL is set
#   bash scripts/store-return.sh postgres mysql  # some; --down-secs 10, --phases 0.5 also work
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p shedlock-bench --bin store_return
exec "${CARGO_TARGET_DIR:-target}/debug/store_return" "$@"
