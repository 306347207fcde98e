"""``gorila bench speedup --algo a3c|apex|dqn|impala``: env steps per second and time to the target
against the number of acting workers (A3C workers; DQN's, Ape-X's and IMPALA's actors), beside the machine's
limit for the same acting.

Each count runs ``--repeats`` times, interleaved (1, 2, 1, 2, ...), each a real training run
through the builder and the driver on Ray (DQN with its global replay: actors → replay shards →
learners), stopped at the target or after ``--total-steps`` env steps. The limit of ``m`` workers:
``m`` bare processes at once, each stepping the run's envs and the network's forward pass with
random actions (no Ray, no server, no learning), in env steps per second; the run's steps per
second are set beside it::

    gorila bench speedup --algo a3c --workers 1,2,4 --total-steps 200000 --out bench-out/a3c
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing as mp
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gorila.agents.registry import ALGORITHMS
from gorila.agents.rl_config import RLConfig
from gorila.bench.machine_limit import start_one_thread
from gorila.bench.report import bench_dir, write_bench_json
from gorila.config import RunConfig
from gorila.driver.loop import run as run_plan
from gorila.metrics import plot_speedup

#: Which field of the algorithm's config counts its acting workers, and its settings here (DQN's
#: global replay, so that actors can be added without adding learners).
WORKERS_FIELD = {"a3c": "workers", "apex": "actors", "dqn": "actors", "impala": "actors"}
SETTINGS: dict[str, dict[str, Any]] = {"a3c": {}, "apex": {}, "dqn": {"replay": "global", "learners": 1}, "impala": {}}

#: ``gorila bench speedup``'s flags of the lstsq workload, left out of an RL run's bench.json.
LSTSQ_ONLY = ("server", "n", "d", "condition", "tol", "log_every", "limit_rounds")
RUN_FIELDS = ("workers", "repeat", "env_steps", "train_time_s", "env_steps_per_s", "time_to_target_s",
              "env_steps_to_target", "reached_target", "cpu_time_s", "limit_env_steps_per_s")
FIELDS = ("workers", "repeats", "env_steps_per_s", "limit_env_steps_per_s", "ratio", "time_to_target_s",
          "time_to_target_min_s", "time_to_target_max_s", "env_steps_to_target", "reached", "speedup",
          "limit_speedup")


def main(args: argparse.Namespace) -> int:
    """Run the benchmark for ``args`` (``gorila bench speedup``'s flags)."""
    rl = RLConfig(env=args.env, total_steps=args.total_steps, target_return=args.target, eval_every_s=1.0,
                  eval_episodes=5)
    config_class = ALGORITHMS[args.algo].config_classes()[0]
    from gorila.runtime import make_runtime

    out = bench_dir(args.out, f"speedup-{args.algo}-{args.mode}")
    runs = []
    holder = make_runtime("ray", args.address)  # one Ray for all runs: each run joins it
    try:
        for repeat in range(args.repeats):
            for m in args.workers:
                cfg = config_class(**SETTINGS[args.algo], **{WORKERS_FIELD[args.algo]: m})
                runs.append(_run(args, cfg, rl, m, repeat, out))
    finally:
        holder.shutdown()
    cfg = config_class(**SETTINGS[args.algo])
    make_plan = ALGORITHMS[args.algo].plan_fn()
    plan = make_plan(RunConfig(algo=args.algo, mode=args.mode, runtime="local"), cfg, rl)
    envs = getattr(cfg, "envs_per_actor", 1)
    network_fn = plan.network_fn
    assert network_fn is not None, "an RL plan (a3c, apex, dqn: this benchmark's) builds a network"
    limits = {m: env_step_limit(args.env, envs, network_fn, m, args.limit_seconds) for m in args.workers}
    for r in runs:
        r["limit_env_steps_per_s"] = limits[r["workers"]]
    rows = _medians(args.workers, runs, limits)
    _write_csv(out / "runs.csv", RUN_FIELDS, runs)
    _write_csv(out / "speedup.csv", FIELDS, rows)
    plot_speedup([r["workers"] for r in rows], [r["speedup"] for r in rows], out / "speedup.png",
                 title=f"{args.algo} {args.env}, {args.mode}: env steps/s against 1 worker, median of {args.repeats}",
                 limit=[r["limit_speedup"] for r in rows])
    print(f"median of {args.repeats} interleaved runs per count; limit: env steps/s of m bare processes stepping "
          f"{envs} env(s) and the network's forward pass each, random actions, no Ray, no learning")
    print(f"{'workers':>7} {'steps/s':>9} {'limit':>9} {'ratio':>6} {'T target (s)':>13} {'steps to target':>16}")
    for r in rows:
        print(f"{r['workers']:>7} {r['env_steps_per_s']:9.0f} {r['limit_env_steps_per_s']:9.0f} {r['ratio']:6.2f} "
              f"{r['time_to_target_s']:13.2f} {r['env_steps_to_target']:16.0f}")
    print(f"wrote {out / 'speedup.csv'}, {out / 'runs.csv'} and {out / 'speedup.png'}")
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k not in LSTSQ_ONLY}
    write_bench_json(out, "speedup", settings,
                     [{**r, "limit": r["limit_env_steps_per_s"]} for r in rows],
                     workers=[r["workers"] for r in rows], env_steps_per_s=[r["env_steps_per_s"] for r in rows],
                     limit=[r["limit_env_steps_per_s"] for r in rows],
                     time_to_target_s=[r["time_to_target_s"] for r in rows])
    return 0


def _run(args: argparse.Namespace, cfg: Any, rl: RLConfig, workers: int, repeat: int, out: Path) -> dict:
    run = RunConfig(algo=args.algo, mode=args.mode, runtime="ray", address=args.address,
                    run_dir=out / f"workers-{workers}-run-{repeat}")
    make_plan = ALGORITHMS[args.algo].plan_fn()
    s = run_plan(run, make_plan(run, cfg, rl))
    reached = bool(s["reached_target"])
    return {"workers": workers, "repeat": repeat, "env_steps": s["env_steps"], "train_time_s": s["train_time_s"],
            "env_steps_per_s": s["env_steps"] / max(s["train_time_s"], 1e-9),
            "time_to_target_s": s["train_time_to_target_s"] if reached else math.nan,
            "env_steps_to_target": _steps_to_target(s, rl.target()) if reached else math.nan,
            "reached_target": reached, "cpu_time_s": s["cpu_time_s"]}


def _steps_to_target(summary: dict, target: float | None) -> float:
    """The env steps at which the first evaluation that reached ``target`` took its parameters."""
    hits = [e["eval_env_steps"] for e in summary["evaluations"]
            if target is not None and e.get("eval_return", -math.inf) >= target and "eval_env_steps" in e]
    return float(min(hits)) if hits else float(summary["env_steps"])


def _medians(counts: list[int], runs: list[dict], limits: dict[int, float]) -> list[dict]:
    rows = []
    for m in counts:
        mine = [r for r in runs if r["workers"] == m]
        times = [r["time_to_target_s"] for r in mine if r["reached_target"]] or [math.nan]
        rate = statistics.median(r["env_steps_per_s"] for r in mine)
        rows.append({"workers": m, "repeats": len(mine), "env_steps_per_s": rate,
                     "limit_env_steps_per_s": limits[m], "ratio": rate / limits[m],
                     "time_to_target_s": statistics.median(times), "time_to_target_min_s": min(times),
                     "time_to_target_max_s": max(times),
                     "env_steps_to_target": statistics.median(r["env_steps_to_target"] for r in mine),
                     "reached": sum(r["reached_target"] for r in mine)})
    base, limit_base = rows[0]["env_steps_per_s"] / rows[0]["workers"], limits[counts[0]] / counts[0]
    for r in rows:  # against one worker (the first count scaled to one, as the lstsq speedup does)
        r["speedup"], r["limit_speedup"] = r["env_steps_per_s"] / base, r["limit_env_steps_per_s"] / limit_base
    return rows


def _write_csv(path: Path, fields: tuple[str, ...], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _bare_acting(env_id: str, envs: int, network_fn: Callable, seconds: float, seed: int, start: Any,
                 results: Any, timeout_s: float) -> None:
    import gymnasium as gym
    import torch

    from gorila.envs.make import make_env

    bare = [make_env(env_id, seed=seed + i, training=True) for i in range(envs)]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(bare)]
    net, rng = network_fn().eval(), np.random.default_rng(seed)
    space = bare[0].action_space
    if not isinstance(space, gym.spaces.Discrete):
        raise TypeError(f"the bare actors take discrete actions, not {space}")
    n_actions = int(space.n)
    start.wait(timeout_s)  # all start together
    steps, began = 0, time.monotonic()
    while time.monotonic() - began < seconds:
        with torch.no_grad():
            net(torch.as_tensor(np.stack(obs)))
        for i, (env, action) in enumerate(zip(bare, rng.integers(n_actions, size=envs))):
            o, _, terminated, truncated, _ = env.step(int(action))
            obs[i] = env.reset()[0] if terminated or truncated else o
        steps += envs
    results.put(steps / (time.monotonic() - began))


def env_step_limit(env_id: str, envs: int, network_fn: Callable, processes: int, seconds: float,
                   timeout_s: float = 120.0) -> float:
    """Env steps per second of ``processes`` bare processes at once, each stepping ``envs`` envs and
    the network's forward pass for ``seconds`` (the acting a run's workers do, without the rest)."""
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(processes), ctx.Queue()
    procs = start_one_thread(ctx, _bare_acting, [(env_id, envs, network_fn, seconds, 1000 * k, start, results,
                                                  timeout_s) for k in range(processes)])
    try:
        return sum(results.get(timeout=timeout_s + seconds) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout_s)
            if proc.is_alive():
                proc.kill()
