"""The RL driver: place shards, services and workers, run them in chunks, evaluate, checkpoint, stop.

An algorithm describes itself as an :class:`RLPlan`; :func:`run_rl` does the rest the same way for
every algorithm::

    plan = RLPlan(algo="dqn", env_id="CartPole-v1", network_fn=..., policy_fn=..., spec=ServerSpec(...),
                  workers=lambda services: [WorkerSpec("bundle", factory, count=2)])
    summary = run_rl(run, train, plan)
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from torch import nn

from gorila.algos.registry import ALGORITHMS
from gorila.checkpoint import CheckpointTimer, load_checkpoint, save_checkpoint
from gorila.config import RunConfig
from gorila.envs.evaluation import human_normalized
from gorila.envs.make import is_atari
from gorila.metrics import RunLogger, plot_learning_curve
from gorila.nets import FlatParams
from gorila.params import ServerSpec, ShardStats, merge_stats
from gorila.rl.config import TrainConfig
from gorila.rl.evaluator import Evaluator
from gorila.runtime import WorkerFactory, make_runtime

COLUMNS = ("env_steps", "updates", "eval_return", "train_return", "env_steps_per_s", "updates_per_s",
           "eval_version", "pushes_rejected", "loss", "worker_restarts")


@dataclass(frozen=True)
class WorkerSpec:
    """A group of ``count`` workers built by ``factory(worker_id, shard_endpoints)``."""

    name: str
    factory: WorkerFactory
    count: int


@dataclass(frozen=True)
class RLPlan:
    """What an algorithm's builder hands the driver.

    ``services`` are started first (e.g. replay shards); ``workers(services)`` then receives their
    endpoints by name and returns the worker groups. Training workers' reports carry cumulative
    ``env_steps``, ``episodes``, ``recent_returns`` and optionally ``loss``,
    ``pushes_rejected_outlier``. ``config`` is written to ``config.json`` as the resolved config.
    """

    algo: str
    env_id: str
    network_fn: Callable[[], nn.Module]
    policy_fn: Callable[[nn.Module], Callable[[np.ndarray], np.ndarray]]
    spec: ServerSpec
    workers: Callable[[dict[str, list]], list[WorkerSpec]]
    processes: int  # training workers plus services: what the CPUs are shared among
    services: tuple[WorkerSpec, ...] = ()
    steps_per_call: int = 50
    config: dict = field(default_factory=dict)


class _Counters:
    """Cumulative counts over workers that may restart (a restarted worker counts from zero again)."""

    def __init__(self, base_env_steps: int = 0):
        self.base_env_steps = base_env_steps
        self.lost: dict[tuple[str, int], dict[str, float]] = {}
        self.last: dict[tuple[str, int], dict[str, Any]] = {}
        self.restarts = 0

    def update(self, group: str, reports: list[dict[str, Any]]) -> None:
        for k, report in enumerate(reports):
            key = (group, k)
            before = self.last.get(key)
            if before is not None and before.get("pid") != report.get("pid"):
                self.restarts += 1
                lost = self.lost.setdefault(key, {})
                for name in ("env_steps", "episodes", "pushes_rejected_outlier"):
                    lost[name] = lost.get(name, 0) + before.get(name, 0)
            self.last[key] = report

    def total(self, name: str) -> float:
        return (sum(r.get(name, 0) for r in self.last.values())
                + sum(lost.get(name, 0) for lost in self.lost.values()))

    @property
    def env_steps(self) -> int:
        return int(self.base_env_steps + self.total("env_steps"))

    def recent_return(self) -> float | None:
        returns = [x for r in self.last.values() for x in r.get("recent_returns", [])]
        return float(np.mean(returns)) if returns else None

    def mean(self, name: str) -> float | None:
        values = [r[name] for r in self.last.values() if r.get(name) is not None]
        return float(np.mean(values)) if values else None


def command_seconds() -> float:
    """Seconds since this process started: time to target counts Ray's start-up too."""
    return time.time() - psutil.Process().create_time()


def run_rl(run: RunConfig, train: TrainConfig, plan: RLPlan,
           on_chunk: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Train until the target, the step budget or the time limit; returns ``summary.json``'s dict.

    ``on_chunk(groups)`` (tests, tools) is called after every chunk with the worker groups by name.
    """
    run_dir = Path(train.resume) if train.resume else run.resolved_run_dir(plan.env_id)
    target = train.target_for(plan.env_id)  # run-dir and env problems surface before Ray starts
    eval_epsilon = train.eval_epsilon if train.eval_epsilon is not None else ALGORITHMS[plan.algo].eval_epsilon
    initial = FlatParams(plan.network_fn()).get()
    runtime = make_runtime(run.runtime, run.address, call_timeout_s=train.call_timeout_s)
    try:
        if run.runtime == "ray":
            runtime.plan(plan.processes + run.shards + 1)  # + shards + the evaluator
        shards = runtime.start_shards(plan.spec, initial)
        meta: dict[str, Any] = {}
        if train.resume:
            arrays, meta = load_checkpoint(run_dir / "checkpoints")
            shards.load_state_dict(arrays)
        services = {s.name: runtime.start_workers(s.factory, s.count, [], name=s.name) for s in plan.services}
        specs = plan.workers({name: group.endpoints() for name, group in services.items()})
        groups = {w.name: runtime.start_workers(w.factory, w.count, shards.endpoints, name=w.name) for w in specs}
        evaluator = runtime.start_workers(
            functools.partial(Evaluator, env_id=plan.env_id, network_fn=plan.network_fn, policy_fn=plan.policy_fn,
                              episodes=train.eval_episodes, epsilon=eval_epsilon, seed=run.seed,
                              noop_max=train.eval_noop_max, timeout_s=train.call_timeout_s),
            1, shards.endpoints, name="evaluator")
        config = {"algo": plan.algo, "run": asdict(run), "train": asdict(train), plan.algo: plan.config,
                  "rule": asdict(plan.spec.rule), "target_return": target,
                  "eval_epsilon": eval_epsilon}
        with RunLogger(run_dir, config, COLUMNS, total=train.total_steps, unit="env steps",
                       description=f"{plan.algo} {plan.env_id} {run.mode}", resume=bool(train.resume)) as logger:
            loop = _Loop(run, train, plan, target, shards, groups, evaluator, logger, meta, run_dir)
            loop.on_chunk = on_chunk
            result = loop.execute()
            summary = loop.summary(result, runtime, services)
            summary["eval_epsilon"] = eval_epsilon
            logger.close(summary)
        _plot(run_dir)
        return summary
    finally:
        runtime.shutdown()


class _Loop:
    """One training run's bookkeeping between the driver's calls."""

    def __init__(self, run, train, plan, target, shards, groups, evaluator, logger, meta, run_dir):
        self.run_config, self.train, self.plan, self.target = run, train, plan, target
        self.shards, self.groups, self.evaluator, self.logger = shards, groups, evaluator, logger
        self.run_dir = run_dir
        self.counters = _Counters(int(meta.get("env_steps", 0)))
        self.elapsed_before = float(meta.get("train_time_s", 0.0))
        self.best_eval = meta.get("best_eval_return")
        self.time_to_target = meta.get("time_to_target_s")
        self.last_eval: dict[str, Any] = {}
        self.evaluations: list[dict[str, Any]] = []
        self.on_chunk: Callable[[dict[str, Any]], None] | None = None
        self.checkpoints = 0
        self.stats = ShardStats()  # the servers' counters at the last logged chunk

    def execute(self) -> dict[str, Any]:
        train = self.train
        start = time.perf_counter()
        timer = CheckpointTimer(train.checkpoint_every_s)
        eval_pending, last_eval_at = None, -np.inf
        stop_reason = "total_steps"
        while True:
            now = time.perf_counter()
            if eval_pending is None and now - last_eval_at >= train.eval_every_s:
                eval_pending, last_eval_at = self.evaluator.start_steps(1)[0], now
            pending = {name: group.start_steps(self.plan.steps_per_call) for name, group in self.groups.items()}
            for name, group_pending in pending.items():
                self.counters.update(name, [p.result(train.call_timeout_s) for p in group_pending])
            if eval_pending is not None and eval_pending.ready():
                self._record_eval(eval_pending.result(train.call_timeout_s))
                eval_pending = None
            if self.on_chunk is not None:
                self.on_chunk(self.groups)
            elapsed = self.elapsed_before + time.perf_counter() - start
            self._log(elapsed)
            if timer.due():
                self.checkpoint(elapsed)
            if self.time_to_target is not None and train.stop_at_target:
                stop_reason = "target"
                break
            if self.counters.env_steps >= train.total_steps:
                break
            if train.time_limit_s is not None and elapsed >= train.time_limit_s:
                stop_reason = "time_limit"
                break
        if eval_pending is not None and stop_reason != "target":
            self._record_eval(eval_pending.result(train.call_timeout_s))
        elapsed = self.elapsed_before + time.perf_counter() - start
        self.checkpoint(elapsed)
        return {"train_time_s": elapsed, "stop_reason": stop_reason}

    def _record_eval(self, report: dict[str, Any]) -> None:
        if not report:
            return
        self.last_eval = report
        self.evaluations.append({"env_steps": self.counters.env_steps, **report})
        score = report["eval_return"]
        self.best_eval = score if self.best_eval is None else max(self.best_eval, score)
        self.logger.message(f"eval {score:8.1f} (min {report['eval_min']:.1f}) at version {report['eval_version']}, "
                            f"{self.counters.env_steps} env steps")
        if self.target is not None and score >= self.target and self.time_to_target is None:
            self.time_to_target = command_seconds()
            self.logger.message(f"target {self.target} reached after {self.time_to_target:.1f} s")

    def _log(self, elapsed: float) -> None:
        stats = merge_stats(self.shards.stats())
        self.stats = stats
        env_steps = self.counters.env_steps
        self.logger.log(env_steps, {
            "env_steps": env_steps, "updates": stats.updates,
            "eval_return": self.last_eval.get("eval_return"), "train_return": self.counters.recent_return(),
            "env_steps_per_s": env_steps / max(elapsed, 1e-9), "updates_per_s": stats.updates / max(elapsed, 1e-9),
            "eval_version": self.last_eval.get("eval_version"), "pushes_rejected": stats.pushes_rejected,
            "loss": self.counters.mean("loss"), "worker_restarts": self.counters.restarts})
        self.last_eval = {}

    def checkpoint(self, elapsed: float) -> None:
        meta = {"env_steps": self.counters.env_steps, "train_time_s": elapsed, "best_eval_return": self.best_eval,
                "time_to_target_s": self.time_to_target, "updates": self.stats.updates}
        path = save_checkpoint(self.run_dir / "checkpoints", self.shards.state_dict(), meta)
        self.checkpoints += 1
        self.logger.message(f"checkpoint {path.name}: {meta['env_steps']} env steps, {meta['updates']} updates")

    def summary(self, result: dict[str, Any], runtime, services) -> dict[str, Any]:
        stats = merge_stats(self.shards.stats())
        cpu = runtime.cpu_seconds() + self.shards.cpu_seconds() + sum(
            r.get("cpu_s", 0.0) for r in self.counters.last.values())
        train_time = result["train_time_s"]
        final = self.evaluations[-1]["eval_return"] if self.evaluations else None
        out = {
            "algo": self.plan.algo, "env": self.plan.env_id, "mode": self.run_config.mode, "runtime": self.run_config.runtime,
            "workers": {name: len(g.reports()) for name, g in self.groups.items()},
            "shards": self.run_config.shards, "wall_time_s": command_seconds(), "train_time_s": train_time,
            "cpu_time_s": cpu, "env_steps": self.counters.env_steps,
            "env_steps_per_s": self.counters.env_steps / max(train_time, 1e-9),
            "updates": stats.updates, "updates_per_s": stats.updates / max(train_time, 1e-9),
            "pushes_counted": stats.pushes_counted, "pushes_accepted": stats.pushes_accepted,
            "pushes_rejected": stats.pushes_rejected, "pushes_rejected_stale": stats.pushes_rejected_stale,
            "pushes_rejected_nonfinite": stats.pushes_rejected_nonfinite,
            "pushes_rejected_outlier": int(self.counters.total("pushes_rejected_outlier")),
            "bytes_pushed": stats.bytes_in, "bytes_pulled": stats.bytes_out,
            "final_eval_return": final, "best_eval_return": self.best_eval,
            "target_return": self.target, "time_to_target_s": self.time_to_target,
            "stop_reason": result["stop_reason"], "worker_restarts": self.counters.restarts,
            "evaluations": self.evaluations, "staleness_histogram": stats.as_dict()["staleness"],
        }
        if is_atari(self.plan.env_id) and final is not None:
            out["final_human_normalized"] = human_normalized(self.plan.env_id, final)
        return out


def _plot(run_dir: Path) -> None:
    csv_path = run_dir / "metrics.csv"
    plot_learning_curve(csv_path, "env_steps", ["eval_return", "train_return"], run_dir / "learning_curve.png",
                        title=json.loads((run_dir / "config.json").read_text()).get("algo", "") + " learning curve")
