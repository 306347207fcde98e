"""``gorila bench speedup``: time to a target loss for each worker count, with the ideal line
(``--algo a3c|apex|dqn|impala``: env steps per second and time to CartPole's target instead, by
:mod:`gorila.bench.rl_speedup`).

Each count runs ``--repeats`` times, interleaved (1, 2, 1, 2, ...), so that a slow spell of a
shared host falls on every count alike; the figures are medians, and each single run is kept
in ``runs.csv`` and drawn as a faint dot. One Ray instance serves every run.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from dataclasses import replace
from pathlib import Path

from gorila import validate
from gorila.agents.lstsq.builder import make_plan
from gorila.agents.lstsq.config import LstsqConfig
from gorila.bench.machine_limit import map_limits
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser, count_list
from gorila.config import RunConfig
from gorila.driver.loop import run as run_plan
from gorila.metrics import plot_speedup
from gorila.params.rule import MODES

RL_ALGOS = ("a3c", "apex", "dqn", "impala")
RUN_FIELDS = ("workers", "repeat", "time_to_target_s", "train_time_s", "cpu_time_s", "updates", "bytes_pushed",
              "bytes_pulled", "bytes_per_round_measured", "bytes_per_round_analytic", "machine_limit",
              "final_loss")
FIELDS = ("workers", "repeats", "time_to_target_s", "time_to_target_min_s", "time_to_target_max_s",
          "cpu_time_s", "updates", "bytes_per_round_measured", "bytes_per_round_analytic", "speedup",
          "efficiency", "machine_limit")


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = command_parser("gorila bench speedup", __doc__)
    parser.add_argument("--algo", default="lstsq", choices=["lstsq", *RL_ALGOS],
                        help="workload: lstsq's time to a target loss, or an RL algorithm's env steps/s and time "
                             "to its target against its acting workers (A3C workers, DQN's and Ape-X's actors)")
    parser.add_argument("--workers", type=count_list, default="1,2,4,8", help="comma-separated worker counts")
    parser.add_argument("--mode", default="sync", choices=MODES, help="update rule")
    parser.add_argument("--n", type=int, default=25_000,
                        help="rows. The default (with --d 400: 40 MB of rows, ~5 ms of map per round for one "
                             "worker) keeps a round's fixed costs small beside the map; with much more data "
                             "the cores queue for the memory bandwidth they share, and the machine limit drops")
    parser.add_argument("--d", type=int, default=400, help="features")
    parser.add_argument("--condition", type=float, default=100.0,
                        help="condition number of the features (higher: more rounds to the target)")
    parser.add_argument("--tol", type=float, default=1e-6, help="target: suboptimality shrunk by this factor")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per worker count, interleaved; the figures are their medians")
    parser.add_argument("--log-every", type=int, default=1000,
                        help="updates between the driver's progress reads: each read is a few Ray calls "
                             "with the workers paused, a cost of the monitoring, not of the parallel work")
    parser.add_argument("--limit-rounds", type=int, default=None,
                        help="gradients per process when measuring the machine's limit (bare processes, same "
                             "map; default: as many as the first run's updates, so both cover the same work)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for bench.json, the CSVs and the PNG (default: bench-out/speedup-<time>)")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    rl = parser.add_argument_group("RL workloads (--algo a3c|apex|dqn|impala)")
    rl.add_argument("--env", default="CartPole-v1", help="Gymnasium env id")
    rl.add_argument("--total-steps", type=int, default=200_000,
                    help="a run stops at its target or after this many env steps")
    rl.add_argument("--target", type=float, default=None,
                    help="the return that counts as solved (default: the env's reward threshold)")
    rl.add_argument("--limit-seconds", type=float, default=5.0,
                    help="how long the bare processes of the machine limit act for, at each count")
    args = parser.parse_args(argv)
    validate.integer("repeats", args.repeats, low=1)
    validate.integer("total_steps", args.total_steps, low=1)
    validate.number("limit_seconds", args.limit_seconds, low=0.1)
    if args.limit_rounds is not None:
        validate.integer("limit_rounds", args.limit_rounds, low=1)
    return args


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    if args.algo in RL_ALGOS:
        from gorila.bench import rl_speedup

        return rl_speedup.main(args)
    # Checks --n, --d, --condition, --tol and --log-every before anything starts.
    cfg = LstsqConfig(n=args.n, d=args.d, condition=args.condition, tol=args.tol, iterations=100_000,
                      log_every=args.log_every)
    from gorila.runtime import make_runtime

    out = bench_dir(args.out, f"speedup-{args.algo}-{args.mode}")
    barrier = RunConfig(algo="lstsq", mode=args.mode).rule(num_workers=1).barrier
    runs = []
    holder = make_runtime("ray", args.address)  # one Ray for all runs: each train() joins it
    try:
        for repeat in range(args.repeats):
            batch = [_run(args, cfg, m, repeat, out) for m in args.workers]
            limits = map_limits(cfg, RunConfig().seed, args.workers, args.limit_rounds or max(batch[0]["updates"], 1),
                                synchronized=barrier)
            for r in batch:
                r["machine_limit"] = limits[r["workers"]]
            runs += batch
    finally:
        holder.shutdown()
    rows = _medians(args.workers, runs)
    _write_csv(out / "runs.csv", RUN_FIELDS, runs)
    _write_csv(out / "speedup.csv", FIELDS, rows)
    base = _t1(rows)
    plot_speedup([r["workers"] for r in rows], [r["speedup"] for r in rows], out / "speedup.png",
                 title=f"lstsq n={args.n} d={args.d}, {args.mode}: speedup T(1)/T(m), median of {args.repeats}",
                 efficiency=[r["efficiency"] for r in rows], limit=[r["machine_limit"] for r in rows],
                 runs=[(r["workers"], base / r["time_to_target_s"]) for r in runs])
    meeting = ", meeting at a barrier every round as sync must" if barrier else ""
    print(f"median of {args.repeats} interleaved runs per count; limit: T(1)/T(m) of the same map in m bare "
          f"processes at once (no Ray, no server{meeting}), measured after each repeat")
    print(f"{'workers':>7} {'T (s)':>8} {'min-max (s)':>13} {'CPU (s)':>8} {'speedup':>8} {'eff.':>6} "
          f"{'limit':>6} {'bytes/round':>12} {'analytic':>10}")
    for r in rows:
        spread = f"{r['time_to_target_min_s']:.2f}-{r['time_to_target_max_s']:.2f}"
        print(f"{r['workers']:>7} {r['time_to_target_s']:8.2f} {spread:>13} {r['cpu_time_s']:8.2f} "
              f"{r['speedup']:8.2f} {r['efficiency']:6.2f} {r['machine_limit']:6.2f} "
              f"{r['bytes_per_round_measured']:12.0f} {r['bytes_per_round_analytic']:10d}")
    print(f"wrote {out / 'speedup.csv'}, {out / 'runs.csv'} and {out / 'speedup.png'}")
    write_bench_json(out, "speedup", vars(args),
                     [{**r, "limit": r["machine_limit"], "ratio": r["speedup"] / r["machine_limit"]} for r in rows],
                     workers=[r["workers"] for r in rows], speedup=[r["speedup"] for r in rows],
                     limit=[r["machine_limit"] for r in rows])
    return 0


def _run(args: argparse.Namespace, cfg: LstsqConfig, workers: int, repeat: int, out: Path) -> dict:
    run = RunConfig(algo="lstsq", mode=args.mode, runtime="ray", address=args.address,
                    run_dir=out / f"workers-{workers}-run-{repeat}")
    s = run_plan(run, make_plan(run, replace(cfg, workers=workers)))
    rounds = max(s["updates"], 1)
    return {"workers": workers, "repeat": repeat,
            "time_to_target_s": s["train_time_to_target_s"] if s["reached_target"] else float("nan"),
            "train_time_s": s["train_time_s"], "cpu_time_s": s["cpu_time_s"], "updates": s["updates"],
            "bytes_pushed": s["bytes_pushed"], "bytes_pulled": s["bytes_pulled"],
            "bytes_per_round_measured": s["bytes_pushed"] / rounds,
            # Synchronous rounds move m*d floats each way (the seed's analytic count).
            "bytes_per_round_analytic": workers * cfg.d * 4, "final_loss": s["final_loss"]}


def _medians(counts: list[int], runs: list[dict]) -> list[dict]:
    rows = []
    for m in counts:
        mine = [r for r in runs if r["workers"] == m]
        times = [r["time_to_target_s"] for r in mine]
        rows.append({"workers": m, "repeats": len(mine), "time_to_target_s": statistics.median(times),
                     "time_to_target_min_s": min(times), "time_to_target_max_s": max(times),
                     **{k: statistics.median(r[k] for r in mine)
                        for k in ("cpu_time_s", "updates", "bytes_per_round_measured", "machine_limit")},
                     "bytes_per_round_analytic": mine[0]["bytes_per_round_analytic"]})
    base = _t1(rows)
    for r in rows:
        r["speedup"] = base / r["time_to_target_s"]
        r["efficiency"] = r["speedup"] / r["workers"]
    return rows


def _t1(rows: list[dict]) -> float:
    """T(1): the first count's median time, scaled to one worker if that count is not 1."""
    return rows[0]["time_to_target_s"] * rows[0]["workers"]


def _write_csv(path: Path, fields: tuple[str, ...], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
