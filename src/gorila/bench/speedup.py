"""``gorila bench speedup``: time to a target loss for each worker count, with the ideal line."""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from gorila.algos.lstsq.config import LstsqConfig
from gorila.algos.lstsq.run import train
from gorila.bench.machine_limit import map_limits
from gorila.config import MODES, RunConfig
from gorila.metrics import plot_speedup

FIELDS = ("workers", "time_to_target_s", "train_time_s", "cpu_time_s", "updates", "bytes_pushed",
          "bytes_pulled", "bytes_per_round_measured", "bytes_per_round_analytic", "speedup", "efficiency",
          "machine_limit", "final_loss")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gorila bench speedup", description=__doc__)
    parser.add_argument("--algo", default="lstsq", choices=["lstsq"], help="workload")
    parser.add_argument("--workers", default="1,2,4,8", help="comma-separated worker counts")
    parser.add_argument("--mode", default="sync", choices=MODES, help="update rule")
    parser.add_argument("--n", type=int, default=250_000,
                        help="rows: at the default, ~10 ms of map per round for one worker, so a round's "
                             "fixed costs stay small; data beyond the last-level cache makes the map "
                             "memory-bound, and the machine limit shows how well the cores share that")
    parser.add_argument("--d", type=int, default=100, help="features")
    parser.add_argument("--condition", type=float, default=100.0,
                        help="condition number of the features (higher: more rounds to the target)")
    parser.add_argument("--tol", type=float, default=1e-6, help="target: suboptimality shrunk by this factor")
    parser.add_argument("--limit-rounds", type=int, default=None,
                        help="gradients per process when measuring the machine's limit (bare processes, same "
                             "map; default: as many as the first run's updates, so both cover the same work)")
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.workers.split(",")]
    if args.limit_rounds is not None and args.limit_rounds < 1:
        parser.error(f"--limit-rounds: must be >= 1, got {args.limit_rounds}")
    out = args.out or Path("bench-out") / f"speedup-{args.algo}-{args.mode}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    cfg = LstsqConfig(n=args.n, d=args.d, condition=args.condition, tol=args.tol, iterations=100_000, log_every=50)
    rows = []
    for m in counts:
        run = RunConfig(algo="lstsq", mode=args.mode, workers=m, runtime="ray", address=args.address,
                        run_dir=out / f"workers-{m}")
        s = train(run, cfg)
        t = s["time_to_target_s"] if s["time_to_target_s"] is not None else float("nan")
        rounds = max(s["updates"], 1)
        rows.append({"workers": m, "time_to_target_s": t, "train_time_s": s["train_time_s"],
                     "cpu_time_s": s["cpu_time_s"], "updates": s["updates"], "bytes_pushed": s["bytes_pushed"],
                     "bytes_pulled": s["bytes_pulled"], "bytes_per_round_measured": s["bytes_pushed"] / rounds,
                     "bytes_per_round_analytic": s["bytes_per_round_analytic"], "final_loss": s["final_loss"]})
    base = rows[0]["time_to_target_s"] * rows[0]["workers"]  # T(1), scaled if the first count is not 1
    limits = map_limits(cfg, RunConfig().seed, counts, args.limit_rounds or max(rows[0]["updates"], 1))
    for r in rows:
        r["speedup"] = base / r["time_to_target_s"]
        r["efficiency"] = r["speedup"] / r["workers"]
        r["machine_limit"] = limits[r["workers"]]
    with open(out / "speedup.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    plot_speedup([r["workers"] for r in rows], [r["speedup"] for r in rows], out / "speedup.png",
                 title=f"lstsq n={args.n} d={args.d}, {args.mode}: speedup T(1)/T(m)",
                 efficiency=[r["efficiency"] for r in rows], limit=[r["machine_limit"] for r in rows])
    print("limit: T(1)/T(m) of the same map in m bare processes at once (no Ray, no server), this run")
    print(f"{'workers':>7} {'T (s)':>8} {'CPU (s)':>8} {'speedup':>8} {'eff.':>6} {'limit':>6} "
          f"{'bytes/round':>12} {'analytic':>10}")
    for r in rows:
        print(f"{r['workers']:>7} {r['time_to_target_s']:8.2f} {r['cpu_time_s']:8.2f} {r['speedup']:8.2f} "
              f"{r['efficiency']:6.2f} {r['machine_limit']:6.2f} {r['bytes_per_round_measured']:12.0f} "
              f"{r['bytes_per_round_analytic']:10d}")
    print(f"wrote {out / 'speedup.csv'} and {out / 'speedup.png'}")
    return 0
