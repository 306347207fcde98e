"""The one driver: place a :class:`~gorila.driver.plan.Plan`, run it in chunks, judge, log,
checkpoint, stop. It is the same for every algorithm and imports none of them::

    summary = run(run_config, plan)       # summary.json's dict

Every worker group runs ``plan.chunk_steps(updates)`` steps at a time and gets its next chunk as
soon as its reports are in, so groups of different speeds (actors and a learner) never wait for
each other at the driver; the plan's evaluation may judge the newest parameters in parallel. Once
every group has finished a chunk the driver logs a row; it checkpoints every
``--checkpoint-every-s`` and stops at the target, the budget or the time limit, letting the chunks
under way finish first.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from gorila.checkpoint import CheckpointTimer, load_checkpoint, save_checkpoint
from gorila.config import RunConfig
from gorila.core import Pending, Runtime, ServiceGroup, ShardGroup, WorkerGroup
from gorila.driver.counters import Counters
from gorila.driver.plan import Plan, Score
from gorila.errors import WorkerTimeoutError
from gorila.metrics import RunLogger, plot_learning_curve
from gorila.params import ShardStats, merge_stats
from gorila.runtime import make_runtime

#: Summed over every worker (a restarted worker's counts before its restart included).
SUMMED = ("env_steps", "episodes", "pushes_rejected_outlier")


def command_seconds() -> float:
    """Seconds since this process started: time to target counts the start-up too."""
    return time.time() - psutil.Process().create_time()


@dataclass(frozen=True)
class Placed:
    """What a run has placed, as ``on_chunk`` sees it after every row (tests, tools)::

        def on_chunk(placed):
            params, versions = placed.shards.pull()
            placed.groups["bundle"].kill(0)        # Ray runtime: crash a worker
    """

    shards: ShardGroup
    services: dict[str, ServiceGroup]
    groups: dict[str, WorkerGroup]


OnChunk = Callable[[Placed], None]


def run(run_config: RunConfig, plan: Plan, on_chunk: OnChunk | None = None) -> dict[str, Any]:
    """Train ``plan`` until its target, its budget or the time limit; returns ``summary.json``'s dict.

    ``on_chunk(placed)`` (tests, tools) is called after every logged row with what was placed
    (:class:`Placed`).
    With ``--resume`` the shards start from the newest good checkpoint and counting continues.
    """
    startup = {"plan_s": command_seconds()}  # the command's imports and the builder are done
    run_dir = run_config.resolved_run_dir(plan.label)
    initial = plan.initial_params()
    runtime = make_runtime(run_config.runtime, run_config.address, call_timeout_s=run_config.call_timeout_s)
    startup["runtime_s"] = command_seconds()
    try:
        shard_processes = plan.spec.num_shards if plan.spec.placement == "process" else 0
        runtime.plan(plan.processes + shard_processes + 1)  # + the shards and the evaluation
        # Every process starts side by side: each waits for no other to be up first.
        shards = runtime.start_shards(plan.spec, initial, wait=False)
        meta: dict[str, Any] = {}
        if run_config.resume is not None:
            arrays, meta = load_checkpoint(run_dir / "checkpoints")
            shards.load_state_dict(arrays)
            plan.evaluation.load_state_dict(meta.get("evaluation", {}))
        services = {s.name: runtime.start_services(s.factory, s.count, name=s.name, wait=False) for s in plan.services}
        specs = plan.groups({name: group.endpoints() for name, group in services.items()})
        groups = {w.name: runtime.start_workers(w.factory, w.count, shards.server, name=w.name, nice=w.nice,
                                                wait=False) for w in specs}
        plan.evaluation.start(runtime, shards, groups)
        runtime.wait_started()
        startup["processes_s"] = command_seconds()
        config = {"algo": plan.algo, "run": asdict(run_config), plan.algo: plan.config,
                  "rule": asdict(plan.spec.rule), "run_dir": str(run_dir)}
        columns = _columns(plan)
        with RunLogger(run_dir, config, columns, total=plan.budget.total, unit=plan.budget.unit.replace("_", " "),
                       description=f"{plan.algo} {plan.label} {run_config.mode}",
                       resume=run_config.resume is not None) as logger:
            loop = _Loop(run_config, plan, runtime, shards, services, groups, logger, meta, run_dir, columns, startup)
            loop.on_chunk = on_chunk
            result = loop.execute()
            summary = loop.summary(result)
            logger.close(summary)
        _plot(run_dir, plan, columns)
        return summary
    finally:
        runtime.shutdown()


def _columns(plan: Plan) -> tuple[str, ...]:
    """metrics.csv's columns: progress first, then the evaluation's headline (the first four are
    shown beside the progress bar)."""
    rl = plan.budget.unit == "env_steps"
    head = ("env_steps", "updates") if rl else ("updates",)
    headline, *other = plan.evaluation.columns
    return (*head, headline, *(("train_return",) if rl else ()), *other,
            *(("loss", "env_steps_per_s") if rl else ()),
            "updates_per_s", "pushes_rejected", "bytes_pushed", "bytes_pulled", "worker_restarts",
            *(metric.replace(".", "_") for metric in plan.metrics))


class _Loop:
    """One run's bookkeeping between the driver's chunks."""

    def __init__(self, run_config: RunConfig, plan: Plan, runtime: Runtime, shards: ShardGroup,
                 services: dict[str, ServiceGroup], groups: dict[str, WorkerGroup], logger: RunLogger,
                 meta: dict[str, Any], run_dir: Path, columns: tuple[str, ...], startup: dict[str, float]):
        self.run_config, self.plan, self.runtime, self.shards = run_config, plan, runtime, shards
        self.startup = startup  # seconds from the command's start to each start-up stage
        self.services, self.groups = services, groups
        self.logger, self.run_dir, self.columns = logger, run_dir, columns
        self.counters = Counters(SUMMED, base={"env_steps": int(meta.get("env_steps", 0))})
        self.elapsed_before = float(meta.get("train_time_s", 0.0))
        self.time_to_target = meta.get("time_to_target_s")
        self.train_time_to_target = meta.get("train_time_to_target_s")
        self.started = time.perf_counter()
        self.evaluations: list[dict[str, Any]] = []
        self.pending_row: dict[str, float | None] = {}
        self.on_chunk: OnChunk | None = None
        self.stats = ShardStats()  # the servers' counters at the last logged row
        self.metrics: dict[str, float | None] = {}  # the plan's metrics at the last logged row
        self.service_stats: dict[tuple[str, int], dict[str, Any]] = {}
        self.chunk_size: dict[str, int] = {}  # each group's chunk, when it adapts to chunk_seconds
        self.chunk_started: dict[str, float] = {}
        self.chunk_took: dict[str, float] = {}
        self.service_restarts = self.items_lost = 0

    def progress(self) -> int:
        """How far the budget is used: env steps, or server updates."""
        return self.counters.total("env_steps") if self.plan.budget.unit == "env_steps" else self.stats.updates

    def execute(self) -> dict[str, Any]:
        evaluation = self.plan.evaluation
        start = self.started = time.perf_counter()
        timer = CheckpointTimer(self.run_config.checkpoint_every_s)
        stop_reason = "budget"
        self.stats = merge_stats(self.shards.stats())
        running: dict[str, list[Pending]] = {}
        finished: set[str] = set()  # groups that finished a chunk since the last row
        while True:
            evaluation.before_chunk()
            for name, group in self.groups.items():
                if name not in running:
                    self.chunk_started[name] = time.perf_counter()
                    running[name] = group.start_steps(self._chunk_steps(name))
            finished |= self._collect(running)
            self._judged(evaluation.after_chunk())
            elapsed = self.elapsed_before + time.perf_counter() - start
            if finished == set(self.groups):
                finished.clear()
                if self.on_chunk is not None:
                    self.on_chunk(Placed(self.shards, self.services, self.groups))
                self._log(elapsed)
            if timer.due():
                self.checkpoint(elapsed)
            if self.time_to_target is not None and self.plan.stop_at_target:
                stop_reason = "target"
                break
            if self.progress() >= self.plan.budget.total:
                break
            if self.run_config.time_limit_s is not None and elapsed >= self.run_config.time_limit_s:
                stop_reason = "time_limit"
                break
        while running:  # the chunks under way finish, so every worker's counts are in
            self._collect(running)
        if stop_reason != "target":
            self._judged(evaluation.finish())
        elapsed = self.elapsed_before + time.perf_counter() - start
        self._log(elapsed)
        self.checkpoint(elapsed)
        return {"train_time_s": elapsed, "stop_reason": stop_reason}

    def _collect(self, running: dict[str, list[Pending]]) -> set[str]:
        """Wait until at least one group's chunk is complete; take in its reports. Returns the
        groups whose chunks completed (and are no longer running)."""
        timeout_s = self.run_config.call_timeout_s
        while True:
            ready = {name: [p.ready() for p in pending] for name, pending in running.items()}  # one snapshot
            done = {name for name, flags in ready.items() if all(flags)}
            if done:
                break
            waiting = [p for name, pending in running.items() for p, flag in zip(pending, ready[name]) if not flag]
            if not self.runtime.wait(waiting, timeout_s):
                raise WorkerTimeoutError(f"no worker group ({', '.join(running)}) finished its chunk within "
                                         f"{timeout_s:.0f} s")
        for name in done:
            self.counters.update(name, [p.result(timeout_s) for p in running.pop(name)])
            self.chunk_took[name] = time.perf_counter() - self.chunk_started[name]
        if "first_step_s" not in self.startup:
            self.startup["first_step_s"] = self._first_step_s()
        return done

    def _chunk_steps(self, group: str) -> int:
        """The plan's chunk size; with ``chunk_seconds``, scaled toward that duration from the
        group's last chunk (at most doubling or halving at once)."""
        steps = self.chunk_size.get(group) or self.plan.chunk_steps(self.stats.updates)
        if self.plan.chunk_seconds is not None and group in self.chunk_took:
            scale = min(2.0, max(0.5, self.plan.chunk_seconds / max(self.chunk_took[group], 1e-6)))
            steps = max(1, round(steps * scale))
        if self.plan.chunk_seconds is not None:
            self.chunk_size[group] = steps
        return steps

    def _first_step_s(self) -> float:
        """When the first worker began stepping, from the command's start (now, where workers do
        not say: the local runtime steps them as soon as the driver asks)."""
        began = [r["first_step_at"] for r in self.counters.last.values() if r.get("first_step_at")]
        return min(began) - (time.time() - command_seconds()) if began else command_seconds()

    def _judged(self, score: Score | None) -> None:
        if score is None:
            return
        self.pending_row.update(score.row)
        if score.record:
            self.evaluations.append({self.plan.budget.unit: self.progress(), **score.record})
        if score.message:
            self.logger.message(f"{score.message}, {self.progress():,} {self.plan.budget.unit.replace('_', ' ')}")
        if score.reached and self.time_to_target is None:
            self.time_to_target = command_seconds()
            self.train_time_to_target = self.elapsed_before + time.perf_counter() - self.started
            self.logger.message(f"target {self.plan.evaluation.target} reached after {self.time_to_target:.1f} s")

    def _log(self, elapsed: float) -> None:
        stats = self.stats = merge_stats(self.shards.stats())
        if stats.updates and "first_update_s" not in self.startup:
            self.startup["first_update_s"] = command_seconds()  # within a row of the first update
        env_steps = self.counters.total("env_steps")
        row = {"env_steps": env_steps, "updates": stats.updates, "train_return": self.counters.recent_return(),
               "loss": self.counters.mean("loss"), "env_steps_per_s": env_steps / max(elapsed, 1e-9),
               "updates_per_s": stats.updates / max(elapsed, 1e-9), "pushes_rejected": stats.pushes_rejected,
               "bytes_pushed": stats.bytes_in, "bytes_pulled": stats.bytes_out,
               "worker_restarts": self.counters.restarts, **self._plan_metrics(), **self.pending_row}
        self.logger.log(self.progress(), {k: v for k, v in row.items() if k in self.columns})
        self.pending_row = {}

    def _plan_metrics(self) -> dict[str, float | None]:
        """The plan's ``group.key`` metrics as columns ``group_key``: a service's stats summed over
        the group, a worker report's value averaged over the group's workers."""
        stats = {name: group.call("stats") for name, group in self.services.items()
                 if any(m.startswith(name + ".") for m in self.plan.metrics)}
        for name, shards in stats.items():
            self._note_restarts(name, shards)
        for metric in self.plan.metrics:
            group, key = metric.split(".", 1)
            if group in stats:
                values = [s[key] for s in stats[group] if s.get(key) is not None]
                self.metrics[metric] = float(sum(values)) if values else None
            else:
                values = [r[key] for (g, _), r in self.counters.last.items() if g == group and r.get(key) is not None]
                self.metrics[metric] = float(np.mean(values)) if values else None
        return {metric.replace(".", "_"): value for metric, value in self.metrics.items()}

    def _note_restarts(self, name: str, stats: list[dict[str, Any]]) -> None:
        """A service whose process changed was restarted: say so, and what it lost."""
        for k, now in enumerate(stats):
            before = self.service_stats.get((name, k))
            if before is not None and before.get("pid") != now.get("pid"):
                lost = max(0, before.get("size", 0) - now.get("restored_size", 0))
                self.service_restarts += 1
                self.items_lost += lost
                came_back = "from its last checkpoint" if now.get("restored") else "empty"
                self.logger.message(f"{name} {k} was restarted and came back {came_back}: {lost:,} rows lost")
            self.service_stats[(name, k)] = now

    def _histograms(self) -> dict[str, dict[int, int]]:
        """The plan's ``group.key`` histograms (``{value: count}`` in worker reports), summed."""
        out = {}
        for histogram in self.plan.histograms:
            group, key = histogram.split(".", 1)
            total: collections.Counter = collections.Counter()
            for (g, _), report in self.counters.last.items():
                if g == group:
                    total.update({int(k): int(v) for k, v in report.get(key, {}).items()})
            out[histogram.replace(".", "_") + "_histogram"] = dict(sorted(total.items()))
        return out

    def checkpoint(self, elapsed: float) -> None:
        meta = {"env_steps": self.counters.total("env_steps"), "train_time_s": elapsed,
                "time_to_target_s": self.time_to_target, "train_time_to_target_s": self.train_time_to_target,
                "updates": self.stats.updates,
                "evaluation": self.plan.evaluation.state_dict()}
        for name in self.plan.checkpoint_services:
            self.services[name].call("save")
        path = save_checkpoint(self.run_dir / "checkpoints", self.shards.state_dict(), meta)
        self.logger.message(f"checkpoint {path.name}: {meta['env_steps']} env steps, {meta['updates']} updates")

    def summary(self, result: dict[str, Any]) -> dict[str, Any]:
        stats = merge_stats(self.shards.stats())
        cpu_by_kind = {"driver": self.runtime.cpu_seconds(), "parameter shards": self.shards.cpu_seconds()}
        for (group, _), report in self.counters.last.items():
            cpu_by_kind[group] = cpu_by_kind.get(group, 0.0) + report.get("cpu_s", 0.0)
        cpu = sum(cpu_by_kind.values())
        train_time = result["train_time_s"]
        env_steps = self.counters.total("env_steps")
        rl = {"env_steps": env_steps, "env_steps_per_s": env_steps / max(train_time, 1e-9)}
        return {
            "algo": self.plan.algo, "label": self.plan.label, "mode": self.run_config.mode,
            "runtime": self.run_config.runtime, "run_dir": str(self.run_dir),
            "workers": {name: len(g.reports()) for name, g in self.groups.items()},
            "shards": self.run_config.shards, "wall_time_s": command_seconds(), "train_time_s": train_time,
            "cpu_time_s": cpu, "cpu_s_by_process_kind": cpu_by_kind,
            **(rl if self.plan.budget.unit == "env_steps" else {}),
            "updates": stats.updates, "updates_per_s": stats.updates / max(train_time, 1e-9),
            "pushes_counted": stats.pushes_counted, "pushes_accepted": stats.pushes_accepted,
            "pushes_rejected": stats.pushes_rejected, "pushes_rejected_stale": stats.pushes_rejected_stale,
            "pushes_rejected_nonfinite": stats.pushes_rejected_nonfinite,
            "pushes_rejected_outlier": int(self.counters.total("pushes_rejected_outlier")),
            "bytes_pushed": stats.bytes_in, "bytes_pulled": stats.bytes_out,
            "time_to_target_s": self.time_to_target, "train_time_to_target_s": self.train_time_to_target,
            "reached_target": self.time_to_target is not None, "startup": dict(self.startup),
            "stop_reason": result["stop_reason"], "worker_restarts": self.counters.restarts,
            "service_restarts": self.service_restarts, "items_lost": self.items_lost,
            **self.plan.evaluation.summary(), **{m.replace(".", "_"): v for m, v in self.metrics.items()},
            "evaluations": self.evaluations, "staleness_histogram": stats.as_dict()["staleness"],
            **self._histograms(),
        }


def _plot(run_dir: Path, plan: Plan, columns: tuple[str, ...]) -> None:
    x = "env_steps" if plan.budget.unit == "env_steps" else "updates"
    series = [c for c in (plan.evaluation.columns[0], "train_return") if c in columns]
    title = json.loads((run_dir / "config.json").read_text()).get("algo", "") + " learning curve"
    plot_learning_curve(run_dir / "metrics.csv", x, series, run_dir / "learning_curve.png", title=title)
