"""Plots the `fleet` lines of a `shedlock-bench fleet` run: statements per tick and tick-start
latency p99 against the number of instances, a line per job count and database.

Run with: python3 shedlock-bench/plot_fleet.py fleet-run.txt docs/fleet.png
(needs matplotlib: `pip install matplotlib`). Several runs on one plot, each with a label:
python3 shedlock-bench/plot_fleet.py before.txt=before after.txt=after docs/fleet-batch.png
"""

import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLES = {"postgres": "-o", "mysql": "--s", "sqlite": ":^"}
NAMES = {"postgres": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}


def read(path):
    """(db, jobs) -> sorted [(instances, fields)] from the `fleet ` lines of `path`."""
    series = defaultdict(list)
    with open(path) as lines:
        for line in lines:
            if not line.startswith("fleet "):
                continue
            fields = dict(kv.split("=", 1) for kv in line.split()[1:])
            if fields.get("mode", "lock") != "lock":
                continue  # the plot shows the per-run-lock fleet
            series[(fields["db"], int(fields["jobs"]))].append((int(fields["instances"]), fields))
    return {key: sorted(points, key=lambda p: p[0]) for key, points in sorted(series.items())}


def main(sources, target):
    """Plots every `path` or `path=label` of `sources` into `target`."""
    series = {}
    for index, source in enumerate(sources):
        path, _, run = source.partition("=")
        for (db, jobs), points in read(path).items():
            series[(index, run, db, jobs)] = points
    figure, (statements, latency) = plt.subplots(1, 2, figsize=(12, 4.8))
    for (index, run, db, jobs), points in series.items():
        k = [p[0] for p in points]
        label = f"{NAMES.get(db, db)}, M = {jobs}" + (f", {run}" if run else "")
        style = STYLES.get(db, "-") if index == 0 else ":" + STYLES.get(db, "-o")[-1]
        statements.plot(k, [float(p[1]["statements_per_tick"]) for p in points], style, label=label)
        latency.plot(k, [float(p[1]["latency_p99_ms"]) for p in points], style, label=label)
    statements.set(
        title="Statements sent per tick (all instances)",
        xlabel="instances K",
        ylabel="statements per tick",
        yscale="log",
    )
    latency.set(
        title="Tick-start latency p99 (fire time to job start)",
        xlabel="instances K",
        ylabel="ms",
        yscale="log",
    )
    for axes in (statements, latency):
        axes.grid(True, which="both", alpha=0.3)
        axes.set_xticks(sorted({k for points in series.values() for k, _ in points}))
    statements.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(target, dpi=100)


if __name__ == "__main__":
    main(sys.argv[1:-1], sys.argv[-1])
