"""The one driver: place a :class:`~gorila.driver.plan.Plan`, run it in chunks, judge, log,
checkpoint, stop. It is the same for every algorithm and imports none of them::

    summary = run(run_config, plan)       # summary.json's dict

Every worker group runs ``plan.chunk_steps(updates)`` steps at a time and gets its next chunk as
soon as its reports are in, so groups of different speeds (actors and a learner) never wait for
each other at the driver; the plan's evaluation may judge the newest parameters in parallel. Once
every group has finished a chunk the driver logs a row; it checkpoints every
``--checkpoint-every-s`` and stops at the target, the budget, the time limit or a signal (SIGINT,
SIGTERM: see :mod:`gorila.driver.stop`), letting the chunks under way finish first. What it is
doing is shown on a :class:`~gorila.metrics.terminal.Terminal`: the start-up, then progress.
"""

from __future__ import annotations

import collections
import math
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gorila.checkpoint import CheckpointTimer, load_checkpoint, save_checkpoint
from gorila.config import RunConfig
from gorila.core import Runtime, ServiceGroup, ShardGroup, WorkerGroup
from gorila.reply import Pending
from gorila.driver.counters import Counters
from gorila.driver.plan import Plan, Score, WorkerSpec
from gorila.driver.stop import Interrupted, StopSignals
from gorila.errors import WorkerTimeoutError
from gorila.metrics import RunLogger, plot_learning_curve
from gorila.metrics.progress import Limits
from gorila.metrics.terminal import Terminal
from gorila.params import ShardStats, merge_stats
from gorila.params.server import check_shard_state, server_params
from gorila.runtime import make_runtime

#: Summed over every worker (a restarted worker's counts before its restart included).
SUMMED = ("env_steps", "episodes", "pushes_rejected_outlier", "env_failures")
#: How long a row waits for a service's stats: a live service answers at once, one being restarted
#: is left out of the row rather than holding the run up.
SERVICE_PATIENCE_S = 2.0


@dataclass(frozen=True)
class Placed:
    """What a run has placed, and its evaluations so far, as ``on_chunk`` sees it after every row
    (tests, tools)::

        def on_chunk(placed):
            params, versions = placed.shards.pull()
            placed.groups["bundle"].kill(0)        # Ray runtime: crash a worker
            return placed.evaluations[-1]["eval_return"] < 200 if placed.evaluations else None  # False: stop

    ``evaluations`` are the records ``summary.json`` keeps, oldest first (read them, do not change them).
    """

    shards: ShardGroup
    services: dict[str, ServiceGroup]
    groups: dict[str, WorkerGroup]
    evaluations: list[dict[str, Any]]


#: Called after every row; returning False stops the run there (``stop_reason: "on_chunk"``).
OnChunk = Callable[[Placed], bool | None]


def run(run_config: RunConfig, plan: Plan, on_chunk: OnChunk | None = None, *,
        terminal: Terminal | None = None) -> dict[str, Any]:
    """Train ``plan`` until its target, its budget or the time limit; returns ``summary.json``'s dict.

    ``on_chunk(placed)`` (tests, tools) is called after every logged row with what was placed
    (:class:`Placed`); when it returns False the run stops as at its budget, everything saved
    (``stop_reason: "on_chunk"``). ``terminal`` shows the start-up and the progress (default: on
    stderr, times counted from the start of this process).
    With ``--resume`` the shards start from the newest good checkpoint and counting continues.
    SIGINT or SIGTERM stops the run after the chunks under way: everything is saved as at any
    other stop (``stop_reason: "interrupted"``) and :class:`~gorila.driver.stop.Interrupted` is
    raised with the summary.
    """
    terminal = terminal or Terminal()
    startup = {"plan_s": terminal.elapsed()}  # the command's imports and the builder are done
    run_dir = run_config.resolved_run_dir(plan.label)
    initial = plan.initial_params()
    # The learning curve is drawn while the runtime shuts down, which mostly waits on Ray's
    # processes: a run stopped by Ctrl-C ends seconds sooner.
    with StopSignals() as signals, ThreadPoolExecutor(max_workers=1, thread_name_prefix="learning-curve") as plotter:
        with terminal.stage(_runtime_stage(run_config)):
            runtime = make_runtime(run_config.runtime, run_config.address, call_timeout_s=run_config.call_timeout_s,
                                   verbose=terminal.verbose)
        signals.install()  # again: starting Ray installs a SIGTERM handler of its own
        startup["runtime_s"] = terminal.elapsed()
        try:
            shard_processes = plan.spec.num_shards if plan.spec.placement == "process" else 0
            runtime.plan(plan.processes + shard_processes + 1)  # + the shards and the evaluation
            # Every process starts side by side: each waits for no other to be up first.
            shards = runtime.start_shards(plan.spec, initial, wait=False, checkpoints=run_dir / "checkpoints")
            meta: dict[str, Any] = {}
            if run_config.resume is not None:
                skipped: list[str] = []
                arrays, meta = load_checkpoint(run_dir / "checkpoints", skipped)
                for reason in skipped:
                    terminal.line(f"skipping a damaged checkpoint: {reason}")
                check_shard_state(arrays, plan.spec.layout(initial.size), f"the checkpoint in {run_dir}")
                shards.load_state_dict(arrays)
                plan.evaluation.load_state_dict(meta.get("evaluation", {}))
            services = {s.name: runtime.start_services(s.bound(shards.server), s.count, name=s.name, wait=False,
                                                       node_of=s.node_of)
                        for s in plan.services}
            specs = plan.groups({name: group.endpoints() for name, group in services.items()})
            server = shards.server
            if plan.param_cache:
                server, services["param_cache"] = runtime.start_param_caches(server)
            with terminal.stage(f"starting {_processes(plan, specs)}"):
                groups = {w.name: runtime.start_workers(w.factory, w.count, server, name=w.name,
                                                        nice=w.nice, wait=False, node_of=w.node_of) for w in specs}
                plan.evaluation.start(runtime, shards, groups)
                runtime.wait_started()
            startup["processes_s"] = terminal.elapsed()
            unit = plan.budget.unit.replace("_", " ")
            config = {"algo": plan.algo, "run": asdict(run_config), plan.algo: plan.config,
                      "rule": asdict(plan.spec.rule), "run_dir": str(run_dir), "step_unit": unit,
                      "headline": plan.evaluation.columns[0], "target": plan.evaluation.target}
            columns = _columns(plan)
            limits = Limits(plan.budget.total, unit, run_config.time_limit_s)
            signals.arm()  # from here on a signal stops the run with everything saved
            terminal.line(f"{terminal.elapsed():7.1f} s  training until {limits.describe()}")
            tags = _tags(plan, columns)
            with RunLogger(run_dir, config, columns, tags=tags, step_axis=_STEP_AXIS[plan.budget.unit],
                           hparams=_hparams(config), hparam_metrics=[tags[plan.evaluation.columns[0]]],
                           display=terminal.progress(limits, description=f"{plan.algo} {plan.label} {run_config.mode}"),
                           resume=run_config.resume is not None) as logger:
                loop = _Loop(run_config, plan, runtime, shards, services, groups, logger, meta, run_dir, columns,
                             startup, terminal)
                loop.on_chunk, loop.signals = on_chunk, signals
                result = loop.execute()
                summary = loop.summary(result)
                logger.close(summary)
            plotted = plotter.submit(_plot, run_dir, plan, run_config, columns)
        finally:
            runtime.shutdown()
    plotted.result()  # what the plot raised, if anything
    if signals.received is not None:
        raise Interrupted(signals.received, summary)
    return summary


def _runtime_stage(run_config: RunConfig) -> str:
    if run_config.runtime == "local":
        return "local runtime: everything in this process"
    if run_config.address:
        return f"joining the Ray cluster at {run_config.address}"
    return "starting Ray on this machine (127.0.0.1 only, no dashboard)"


def _processes(plan: Plan, specs: list[WorkerSpec]) -> str:
    """What starts side by side, e.g. ``1 parameter shard, 1 replay service, 4 actors, 1 learner``."""
    parts = [_count(plan.spec.num_shards, "parameter shard")]
    parts += [_count(s.count, s.name + " service") for s in plan.services]
    parts += [_count(w.count, w.name) for w in specs]
    return ", ".join(parts)


def _count(n: int, name: str) -> str:
    return f"{n} {name}{'' if n == 1 else 's'}"


#: What TensorBoard's step axis counts, by the budget's unit.
_STEP_AXIS = {"env_steps": "env steps, summed over all actors", "updates": "parameter-server updates"}
_PS_COLUMNS = ("updates", "pushes_rejected", "bytes_pushed", "bytes_pulled")


def _tags(plan: Plan, columns: tuple[str, ...]) -> dict[str, str]:
    """TensorBoard's tag of each column, grouped: ``eval/`` (what the evaluation fills), ``ps/``
    (the parameter server's counters), ``time/`` (rates), ``replay/``, and ``train/`` (the rest)."""
    tags = {}
    for column in columns:
        if column in plan.evaluation.columns:
            tags[column] = "eval/" + column.removeprefix("eval_")
        elif column in _PS_COLUMNS:
            tags[column] = "ps/" + column
        elif column.endswith("_per_s"):
            tags[column] = "time/" + column
        elif column.startswith("replay_"):
            tags[column] = "replay/" + column.removeprefix("replay_")
        else:
            tags[column] = "train/" + column.removeprefix("train_")
    return tags


def _hparams(config: dict[str, Any]) -> dict[str, Any]:
    """The run's settings as TensorBoard hyperparameters: ``section.field`` -> value (paths left out)."""
    sections = {name: config[name] for name in ("run", config["algo"], "rule")}
    return {f"{section}.{key}": value for section, values in sections.items() for key, value in values.items()
            if key not in ("run_dir", "resume")}


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
                 meta: dict[str, Any], run_dir: Path, columns: tuple[str, ...], startup: dict[str, float],
                 terminal: Terminal):
        self.run_config, self.plan, self.runtime, self.shards = run_config, plan, runtime, shards
        self.startup = startup  # seconds from the command's start to each start-up stage
        self.terminal = terminal  # its clock counts from the command's start: time to target includes start-up
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
        self.signals: StopSignals | None = None
        self._network: Any = None  # plan.network_fn()'s FlatParams, built at the first checkpoint
        self.stats = ShardStats()  # the servers' counters at the last logged row
        self.metrics: dict[str, float | None] = {}  # the plan's metrics at the last logged row
        self.service_stats: dict[tuple[str, int], dict[str, Any]] = {}
        self.chunk_size: dict[str, int] = {}  # each group's chunk, when it adapts to chunk_seconds
        self.chunk_started: dict[str, float] = {}
        self.chunk_took: dict[str, float] = {}
        self.chunk_asked: dict[str, int] = {}  # steps per worker of each group's chunk under way
        self.progress_per_step: dict[str, float] = {}  # budget used per worker step, by group
        self.service_restarts = self.items_lost = self.shard_restarts = 0
        self.restarted_in_chunk: set[tuple[str, int]] = set()  # stalled workers restarted, by group and index

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
                    self.chunk_asked[name] = self._chunk_steps(name)
                    running[name] = group.start_steps(self.chunk_asked[name])
            finished |= self._collect(running)
            self._judged(evaluation.after_chunk())
            elapsed = self.elapsed_before + time.perf_counter() - start
            if finished == set(self.groups):
                finished.clear()
                go_on = self.on_chunk is None or self.on_chunk(
                    Placed(self.shards, self.services, self.groups, self.evaluations)) is not False
                self._log(elapsed)
                if not go_on:
                    stop_reason = "on_chunk"
                    break
            if self.signals is not None and self.signals.received is not None:
                stop_reason = "interrupted"
                self.logger.message(f"{signal.Signals(self.signals.received).name}: stopping; saving a final "
                                    "checkpoint and the summary (send it again to quit at once)")
                break
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
        if stop_reason not in ("target", "interrupted"):  # an interrupt does not wait for an evaluation
            self._judged(evaluation.finish())
        elapsed = self.elapsed_before + time.perf_counter() - start
        self._log(elapsed)
        self.checkpoint(elapsed)
        return {"train_time_s": elapsed, "stop_reason": stop_reason}

    def _collect(self, running: dict[str, list[Pending]]) -> set[str]:
        """Wait until at least one group's chunk is complete; take in its reports. Returns the
        groups whose chunks completed (and are no longer running)."""
        timeout_s, stall_s = self.run_config.call_timeout_s, self.run_config.actor_timeout_s
        deadline = time.perf_counter() + timeout_s
        while True:
            ready = {name: [p.ready() for p in pending] for name, pending in running.items()}  # one snapshot
            # Checked on every pass: other groups' chunks keep finishing while one worker hangs.
            if stall_s is not None and self._restart_stalled(ready, stall_s):
                deadline = time.perf_counter() + timeout_s  # restarted workers get the whole time again
            done = {name for name, flags in ready.items() if all(flags)}
            if done:
                break
            waiting = [p for name, pending in running.items() for p, flag in zip(pending, ready[name]) if not flag]
            if self.runtime.wait(waiting, timeout_s if stall_s is None else min(timeout_s, stall_s / 4)):
                continue
            if time.perf_counter() >= deadline:
                raise WorkerTimeoutError(f"no worker group ({', '.join(running)}) finished its chunk within "
                                         f"{timeout_s:.0f} s")
        for name in done:
            self.restarted_in_chunk = {(g, k) for g, k in self.restarted_in_chunk if g != name}
            before = self.progress()
            reports = [p.result(timeout_s) for p in running.pop(name)]
            self.counters.update(name, reports)
            self.chunk_took[name] = time.perf_counter() - self.chunk_started[name]
            self.progress_per_step[name] = (self.progress() - before) / max(self.chunk_asked[name] * len(reports), 1)
        if "first_step_s" not in self.startup:
            self.startup["first_step_s"] = self._first_step_s()
        return done

    def _restart_stalled(self, ready: dict[str, list[bool]], stall_s: float) -> bool:
        """Restart the workers of every group whose chunk has run for ``stall_s`` without them
        finishing (Ray retries their chunk in the new process); whether any was. A worker is
        restarted once per chunk: its retried chunk has ``--call-timeout-s`` (killing a process
        Ray is still starting again would end it for good)."""
        now, restarted = time.perf_counter(), False
        for name, flags in ready.items():
            if now - self.chunk_started[name] < stall_s:
                continue
            for k, flag in enumerate(flags):
                if not flag and (name, k) not in self.restarted_in_chunk:
                    self.groups[name].kill(k)
                    self.restarted_in_chunk.add((name, k))
                    self.logger.message(f"{name} {k} made no progress for {stall_s:g} s: restarting it")
                    restarted = True
        return restarted

    def _chunk_steps(self, group: str) -> int:
        """The plan's chunk size; with ``chunk_seconds``, scaled toward that duration from the
        group's last chunk (at most doubling or halving at once). A chunk never asks for more than
        the budget has left, shared among the group's workers, so a run stops near its budget."""
        steps = self.chunk_size.get(group) or self.plan.chunk_steps(self.stats.updates)
        if self.plan.chunk_seconds is not None and group in self.chunk_took:
            scale = min(2.0, max(0.5, self.plan.chunk_seconds / max(self.chunk_took[group], 1e-6)))
            steps = max(1, round(steps * scale))
        if self.plan.chunk_seconds is not None:
            self.chunk_size[group] = steps
        rate = self.progress_per_step.get(group)
        if rate:  # this group's steps use the budget (actors' env steps; not a learner's updates)
            workers = sum(1 for g, _ in self.counters.last if g == group)
            left = self.plan.budget.total - self.progress()
            steps = min(steps, max(1, math.ceil(left / (rate * workers))))
        return steps

    def _first_step_s(self) -> float:
        """When the first worker began stepping, from the command's start (now, where workers do
        not say: the local runtime steps them as soon as the driver asks)."""
        began = [r["first_step_at"] for r in self.counters.last.values() if r.get("first_step_at")]
        return min(began) - self.terminal.started_at if began else self.terminal.elapsed()

    def _judged(self, score: Score | None) -> None:
        if score is None:
            return
        self.pending_row.update(score.row)
        if score.record:
            self.evaluations.append({self.plan.budget.unit: self.progress(), **score.record})
        if score.message:
            self.logger.message(f"{score.message}, {self.progress():,} {self.plan.budget.unit.replace('_', ' ')}")
        if score.reached and self.time_to_target is None:
            self.time_to_target = self.terminal.elapsed()
            self.train_time_to_target = self.elapsed_before + time.perf_counter() - self.started
            self.logger.message(f"target {self.plan.evaluation.target:.4g} reached after {self.time_to_target:.1f} s")

    def _log(self, elapsed: float) -> None:
        for message in self.shards.restarts():
            self.shard_restarts += 1
            self.logger.message(message)
        stats = self.stats = merge_stats(self.shards.stats())
        if stats.updates and "first_update_s" not in self.startup:
            self.startup["first_update_s"] = self.terminal.elapsed()  # within a row of the first update
        env_steps = self.counters.total("env_steps")
        row = {"env_steps": env_steps, "updates": stats.updates, "train_return": self.counters.recent_return(),
               "loss": self.counters.mean("loss"), "env_steps_per_s": env_steps / max(elapsed, 1e-9),
               "updates_per_s": stats.updates / max(elapsed, 1e-9), "pushes_rejected": stats.pushes_rejected,
               "bytes_pushed": stats.bytes_in, "bytes_pulled": stats.bytes_out,
               "worker_restarts": self.counters.restarts, **self._plan_metrics(), **self.pending_row}
        self.logger.log(self.progress(), {k: v for k, v in row.items() if k in self.columns}, train_s=elapsed)
        self.pending_row = {}

    def _plan_metrics(self) -> dict[str, float | None]:
        """The plan's ``group.key`` metrics as columns ``group_key``: a service's stats summed over
        the group, a worker report's value averaged over the group's workers. Every service's stats
        are read, for its metrics or not: they tell a restarted service."""
        stats = self._service_stats()
        for metric in self.plan.metrics:
            group, key = metric.split(".", 1)
            if group in stats:
                values = [s[key] for s in stats[group] if s.get(key) is not None]
                self.metrics[metric] = float(sum(values)) if values else None
            else:
                values = [r[key] for (g, _), r in self.counters.last.items() if g == group and r.get(key) is not None]
                self.metrics[metric] = float(np.mean(values)) if values else None
        return {metric.replace(".", "_"): value for metric, value in self.metrics.items()}

    def _service_stats(self) -> dict[str, list[dict[str, Any]]]:
        """Every service's stats, asked of all at once. A service that does not answer within
        ``SERVICE_PATIENCE_S`` (its process is being restarted) is represented by the last stats it
        gave, so a service that is down never holds the run up; its restart is noted once it answers."""
        asked = {name: [endpoint.call("stats") for endpoint in group.endpoints()] for name, group in self.services.items()}
        deadline = time.monotonic() + SERVICE_PATIENCE_S
        stats: dict[str, list[dict[str, Any]]] = {}
        for name, pending in asked.items():
            for k, reply in enumerate(pending):
                try:
                    self._note_restart(name, k, reply.result(max(0.0, deadline - time.monotonic())))
                except WorkerTimeoutError:
                    pass
            stats[name] = [self.service_stats[(name, k)] for k in range(len(pending)) if (name, k) in self.service_stats]
        return stats

    def _note_restart(self, name: str, k: int, now: dict[str, Any]) -> None:
        """A service whose process changed was restarted: say so, and what it lost."""
        before = self.service_stats.get((name, k))
        if before is not None and before.get("pid") != now.get("pid"):
            self.service_restarts += 1
            if "size" in before:
                lost = max(0, before["size"] - now.get("restored_size", 0))
                self.items_lost += lost
                came_back = "from its last checkpoint" if now.get("restored") else "empty"
                self.logger.message(f"{name} {k} was restarted and came back {came_back}: {lost:,} rows lost")
            else:  # a service that holds no rows (an inference server)
                self.logger.message(f"{name} {k} was restarted")
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
        arrays = self.shards.state_dict()
        path = save_checkpoint(self.run_dir / "checkpoints", arrays, meta, exports=self._exports(arrays))
        steps = f"{meta['env_steps']:,} env steps, " if self.plan.budget.unit == "env_steps" else ""
        self.logger.message(f"checkpoint {path.name}: {steps}{meta['updates']:,} updates")

    def _exports(self, arrays: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The network's named state_dict (``model``), for use without gorila; none for lstsq."""
        if self.plan.network_fn is None:
            return {}
        if self._network is None:
            from gorila.nets import FlatParams  # torch: only plans with a network get here

            self._network = FlatParams(self.plan.network_fn())
        return {"model": self._network.state_dict(server_params(arrays))}

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
            "shards": self.run_config.shards, "wall_time_from_start_s": self.terminal.elapsed(),
            "train_time_s": train_time,
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
            **({"signal": signal.Signals(self.signals.received).name}
               if self.signals is not None and self.signals.received is not None else {}),
            "service_restarts": self.service_restarts, "items_lost": self.items_lost,
            "shard_restarts": self.shard_restarts, "env_failures": self.counters.total("env_failures"), "pushes_rejected_restarted": stats.pushes_rejected_restarted,
            "pushes_rejected_duplicate": stats.pushes_rejected_duplicate,
            **self.plan.evaluation.summary(), **{m.replace(".", "_"): v for m, v in self.metrics.items()},
            "evaluations": self.evaluations, "staleness_histogram": stats.as_dict()["staleness"],
            **self._histograms(),
        }


def _plot(run_dir: Path, plan: Plan, run_config: RunConfig, columns: tuple[str, ...]) -> None:
    x = "env_steps" if plan.budget.unit == "env_steps" else "updates"
    series = [c for c in (plan.evaluation.columns[0], "train_return") if c in columns]
    title = f"{plan.algo} on {plan.label}: {run_config.mode}, {run_config.runtime} runtime, seed {run_config.seed}"
    plot_learning_curve(run_dir / "metrics.csv", x, series, run_dir / "learning_curve.png", title=title,
                        target=plan.evaluation.target)
