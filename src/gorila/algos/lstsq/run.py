"""Train least squares on the parameter server: the builder and the driver loop."""

from __future__ import annotations

import functools
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from gorila.algos.lstsq import data
from gorila.algos.lstsq.config import LstsqConfig
from gorila.algos.lstsq.worker import LstsqWorker
from gorila.config import RunConfig
from gorila.metrics import RunLogger
from gorila.params import ServerSpec, merge_stats
from gorila.runtime import make_runtime

COLUMNS = ("version", "loss", "suboptimality", "distance", "pushes", "bytes_pushed", "bytes_pulled")


def train(run: RunConfig, cfg: LstsqConfig, *, call_timeout_s: float = 600.0,
          on_round=None, logger_options: dict | None = None) -> dict[str, Any]:
    """Run to the target suboptimality (or ``cfg.iterations`` updates); returns ``summary.json``'s dict.

    ``on_round(version, w)`` (tests) sees the parameters after every logged round.
    """
    started = time.perf_counter()
    rule = run.rule()
    data.partition(cfg.n, run.workers)  # refuse too many workers before anything starts
    run_dir = run.resolved_run_dir("synthetic")
    runtime = make_runtime(run.runtime, run.address, call_timeout_s=call_timeout_s)
    try:
        if run.runtime == "ray":
            runtime.plan(run.workers + run.shards)
        spec = ServerSpec(rule=rule, num_shards=run.shards, optimizer=run.optimizer or "sgd", lr=cfg.step_size)
        shards = runtime.start_shards(spec, np.zeros(cfg.d, np.float32))
        factory = functools.partial(LstsqWorker, cfg=cfg, seed=run.seed, num_workers=run.workers,
                                    barrier=rule.barrier, timeout_s=call_timeout_s)
        workers = runtime.start_workers(factory, run.workers, shards.endpoints)
        moments = functools.reduce(lambda a, b: a + b, workers.call("moments"))
        w_star = moments.optimum()
        best = moments.loss(w_star)
        gap0 = moments.loss(np.zeros(cfg.d)) - best
        # Synchronous mode is exact gradient descent: stop exactly at the iteration that reaches
        # the target, not at the end of a logging round.
        exact_stop = (moments.iterations_to(cfg.tol, cfg.step_size, cfg.iterations)
                      if run.mode == "sync" and (run.optimizer or "sgd") == "sgd" else None)
        config = {"run": asdict(run), "lstsq": asdict(cfg), "rule": asdict(rule), "lr": cfg.step_size}
        with RunLogger(run_dir, config, COLUMNS, total=cfg.iterations, unit="updates",
                       description=f"lstsq {run.mode} x{run.workers}", **(logger_options or {})) as logger:
            result = _loop(run, cfg, workers, shards, moments, w_star, best, gap0, exact_stop, logger, on_round)
            stats = merge_stats(shards.stats())
            cpu = runtime.cpu_seconds() + shards.cpu_seconds() + sum(r.get("cpu_s", 0.0) for r in result["reports"])
            summary = {
                "algo": "lstsq", "mode": run.mode, "runtime": run.runtime, "workers": run.workers,
                "shards": run.shards, "n": cfg.n, "d": cfg.d,
                "wall_time_s": time.perf_counter() - started,
                "train_time_s": result["train_time_s"], "time_to_target_s": result["time_to_target_s"],
                "cpu_time_s": cpu, "updates": stats.updates,
                "pushes_counted": stats.pushes_counted, "pushes_accepted": stats.pushes_accepted,
                "pushes_rejected": stats.pushes_rejected,
                "pushes_rejected_stale": stats.pushes_rejected_stale,
                "bytes_pushed": stats.bytes_in, "bytes_pulled": stats.bytes_out,
                # Synchronous rounds move m*d floats each way (the seed's analytic count).
                "bytes_per_round_analytic": run.workers * cfg.d * 4,
                "initial_loss": best + gap0, "final_loss": result["loss"], "optimal_loss": best, "final_distance": result["distance"],
                "reached_target": result["time_to_target_s"] is not None,
                "staleness_histogram": stats.as_dict()["staleness"],
                "run_dir": str(Path(run_dir)),
            }
            logger.close(summary)
        return summary
    finally:
        runtime.shutdown()


def _loop(run, cfg, workers, shards, moments, w_star, best, gap0, exact_stop, logger, on_round) -> dict:
    # Worker steps per server update: every step is one push.
    steps_per_update = {"sync": 1.0, "async": 1.0 / run.workers,
                        "semi-async": run.rule().aggregate / run.workers}[run.mode]
    version, reached = 0, None
    start = time.perf_counter()
    while True:
        horizon = exact_stop if exact_stop and version < exact_stop else cfg.iterations
        todo = max(1, min(cfg.log_every, horizon - version))
        reports = workers.run_steps(max(1, round(todo * steps_per_update)))
        w, versions = shards.pull()
        version = min(versions)
        loss = moments.loss(w)
        distance = float(np.linalg.norm(w - w_star))
        if on_round is not None:
            on_round(version, w)
        stats = merge_stats(shards.stats())
        logger.log(version, {"version": version, "loss": loss, "suboptimality": loss - best,
                             "distance": distance, "pushes": stats.pushes_counted + stats.pushes_accepted
                             + stats.pushes_rejected, "bytes_pushed": stats.bytes_in,
                             "bytes_pulled": stats.bytes_out})
        if loss - best <= cfg.tol * gap0:
            reached = time.perf_counter() - start
            break
        if version >= cfg.iterations:
            break
    return {"loss": loss, "distance": distance, "reports": reports,
            "train_time_s": time.perf_counter() - start, "time_to_target_s": reached}
