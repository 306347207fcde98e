"""A sweep of the simulator over rules and worker counts, and what it writes.

::

    spec = Sweep(work, cluster, calibration.apply_s, modes=("sync", "async"), counts=(1, 2, 4))
    write_outputs(spec, sweep(spec), Path("sim-out"), title="a3c on this machine", settings={...})

Speedup is env steps per second (lstsq: rows) over those of one worker under the same rule and
the same stragglers: the textbook's ``T(1) / T(m)`` for the same work.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gorila.bench.report import write_bench_json
from gorila.metrics import plot_predictions
from gorila.params import UpdateRule
from gorila.sim.calibration import Workload
from gorila.sim.cluster import Cluster
from gorila.sim.model import Prediction, Setup, Stragglers, simulate

STRAGGLED = " + stragglers"
COLUMNS = ("mode", "condition", "workers", "shards", "nodes", "param_cache", "updates_per_s", "gradients_per_s",
           "env_steps_per_s", "speedup", "efficiency", "staleness_mean", "rejected_fraction", "shard_busy",
           "shard_link_busy", "cache_versions_per_s", "cache_reads_per_s", "bytes_per_update")


@dataclass(frozen=True)
class Sweep:
    """What to simulate: every ``mode`` at every count of ``counts`` (1 is added for the
    baseline), without stragglers and, when ``stragglers`` are given, with them too.
    ``rule_knobs`` are ``UpdateRule.for_mode``'s (``max_staleness``, ``aggregate``, ...); each rule
    takes those its mode has (``params.rule.MODE_KNOBS``)."""

    workload: Workload
    cluster: Cluster
    apply_s: Callable[[str, int], float]
    modes: tuple[str, ...]
    counts: tuple[int, ...]
    shards: int = 1
    param_cache: bool = False
    stragglers: Stragglers | None = None
    slow_worker: float = 1.0
    rule_knobs: dict[str, int] = field(default_factory=dict)
    gradients_per_worker: int = 5
    min_gradients: int = 1000
    seed: int = 0

    def rule(self, mode: str, workers: int) -> UpdateRule:
        return UpdateRule.for_mode_knobs(mode, workers, self.rule_knobs)

    def setup(self, mode: str, workers: int, stragglers: Stragglers) -> Setup:
        slice_params = -(-self.workload.params // self.shards)
        return Setup(rule=self.rule(mode, workers), workers=workers, shards=self.shards,
                     workload=self.workload, cluster=self.cluster,
                     apply_s=(self.apply_s(self.workload.optimizer, slice_params),) * self.shards,
                     param_cache=self.param_cache, stragglers=stragglers, slow_worker=self.slow_worker,
                     gradients=max(self.min_gradients, self.gradients_per_worker * workers))


@dataclass(frozen=True)
class Point:
    """One simulated point with its speedup over the 1-worker point of its curve."""

    mode: str
    condition: str
    prediction: Prediction
    speedup: float

    def row(self, sweep: Sweep) -> dict[str, Any]:
        p = self.prediction
        values = {**asdict(p), "mode": self.mode, "condition": self.condition, "shards": sweep.shards,
                  "nodes": sweep.cluster.nodes, "param_cache": "node" if sweep.param_cache else "none",
                  "speedup": self.speedup, "efficiency": self.speedup / p.workers}
        return {k: values[k] for k in COLUMNS}


def sweep(spec: Sweep, progress: Callable[[str], None] = lambda line: None) -> list[Point]:
    conditions = {"": Stragglers()}
    if spec.stragglers is not None:
        conditions[STRAGGLED] = spec.stragglers
    points = []
    for mode in spec.modes:
        for condition, stragglers in conditions.items():
            base = None
            for m in sorted({1, *spec.counts}):
                prediction = simulate(spec.setup(mode, m, stragglers), seed=spec.seed)
                base = base or prediction.env_steps_per_s
                if m in spec.counts:
                    points.append(Point(mode, condition, prediction, prediction.env_steps_per_s / base))
                    progress(_line(mode + condition, points[-1]))
    return points


def _line(label: str, point: Point) -> str:
    p = point.prediction
    return (f"{label:>24} {p.workers:>6} {p.updates_per_s:>11.1f} {p.env_steps_per_s:>12.0f} {point.speedup:>8.2f} "
            f"{p.staleness_mean:>9.2f} {p.rejected_fraction:>8.3f} {p.shard_busy:>6.2f} {p.shard_link_busy:>6.2f} "
            f"{p.cache_versions_per_s:>8.1f} {p.bytes_per_update:>12.3g}")


HEADER = (f"{'rule':>24} {'workers':>6} {'updates/s':>11} {'env steps/s':>12} {'speedup':>8} {'staleness':>9} "
          f"{'rejected':>8} {'shard':>6} {'link':>6} {'cache/s':>8} {'bytes/update':>12}")


def write_outputs(spec: Sweep, points: list[Point], out: Path, title: str, settings: dict[str, Any]) -> None:
    """``predictions.csv``, ``staleness.csv`` (the histograms), ``speedup.png`` and ``bench.json``
    (``workers``, and per curve ``speedup`` and ``staleness_mean``; each row's limit is the ideal
    speedup, its ratio the efficiency)."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [p.row(spec) for p in points]
    with open(out / "predictions.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    with open(out / "staleness.csv", "w", newline="") as f:
        histogram = csv.writer(f)
        histogram.writerow(("mode", "condition", "workers", "staleness", "pushes"))
        for p in points:
            histogram.writerows((p.mode, p.condition, p.prediction.workers, s, n)
                             for s, n in p.prediction.staleness.items())
    curves: dict[str, tuple[list[int], list[float], list[float]]] = {}
    for p in points:
        workers, speedup, staleness = curves.setdefault(p.mode + p.condition, ([], [], []))
        workers.append(p.prediction.workers)
        speedup.append(p.speedup)
        staleness.append(p.prediction.staleness_mean)
    plot_predictions(curves, out / "speedup.png", title)
    write_bench_json(out, "simulate", settings,
                     [{**r, "limit": r["workers"], "ratio": r["efficiency"]} for r in rows],
                     command=["gorila", "simulate", *sys.argv[2:]],
                     workers=sorted({p.prediction.workers for p in points}),
                     speedup={label: c[1] for label, c in curves.items()},
                     staleness_mean={label: c[2] for label, c in curves.items()})
    print(f"wrote {out / 'predictions.csv'}, {out / 'staleness.csv'} and {out / 'speedup.png'}")
