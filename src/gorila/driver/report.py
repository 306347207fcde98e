"""What a run records: its rows (``metrics.csv``, TensorBoard), the evaluations and the time to
its target, its checkpoints, and ``summary.json``. The chunk loop (:mod:`gorila.driver.loop`)
calls it::

    report = Report(run_config, plan, placed, progress, Outputs(run_dir, logger, terminal, startup), meta)
    report.judged(evaluation.after_chunk())    # a score: its columns go into the next row
    report.row(train_s)                        # once every group has finished a chunk
    report.checkpoint(train_s)                 # the shards, the services the plan names, the exports
                                               # (a score that is the best so far is saved as "best")
    summary = report.summary(runtime, train_s, "budget")

The services' stats for the rows come through :class:`~gorila.driver.service_watch.ServiceWatch`;
the run's logger and its learning curve are in :mod:`gorila.driver.run_log`.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gorila.checkpoint import save_checkpoint
from gorila.config import RunConfig
from gorila.core import Runtime
from gorila.driver.counters import Counters
from gorila.driver.exact import WorkerState
from gorila.driver.normalization import RunStatistics
from gorila.driver.plan import Placed, Plan, Score
from gorila.driver.progress import Progress
from gorila.driver.saved import checkpoint_dir
from gorila.driver.service_watch import ServiceWatch
from gorila.metrics import RunLogger
from gorila.metrics.terminal import Terminal
from gorila.params import merge_stats
from gorila.params.server import server_params


@dataclass(frozen=True)
class Outputs:
    """Where a run's record goes: its directory, its logger (:func:`open_log`), the terminal (whose
    clock counts from the command's start, so that the time to target includes the start-up), and
    the start-up's stages in seconds from that start, which the run adds to (``first_step_s``,
    ``first_update_s``); its end's stages likewise (:meth:`stamp`)::

        out.stamp("last_chunk_s", "every chunk in")     # shutdown["last_chunk_s"]; a line with --verbose
    """

    run_dir: Path
    logger: RunLogger
    terminal: Terminal
    startup: dict[str, float] = field(default_factory=dict)
    shutdown: dict[str, float] = field(default_factory=dict)

    def stamp(self, stage: str, text: str) -> None:
        """The run's end has reached ``stage``: seconds since the start, shown with ``--verbose``."""
        self.shutdown[stage] = self.terminal.stamp(text)


class Report:
    """One run's record between the chunks (see the module doc). ``resumed`` is the meta of the
    checkpoint the run resumed from (``{}`` for a new run): a target reached before stays reached.
    Its ``workers``, once set, add the local runtime's snapshot to every checkpoint
    (:mod:`gorila.driver.exact`)."""

    def __init__(self, run_config: RunConfig, plan: Plan, placed: Placed, progress: Progress, out: Outputs,
                 resumed: dict[str, Any]):
        self.run_config, self.plan, self.placed, self.progress, self.out = run_config, plan, placed, progress, out
        self.workers: WorkerState | None = None  # what a checkpoint adds for an exact resume (the loop sets it)
        # the normalisation statistics a checkpoint saves (the loop sets it)
        self.statistics: RunStatistics | None = None
        self.services = ServiceWatch(placed.services, out.logger.message)
        self.time_to_target: float | None = resumed.get("time_to_target_s")
        self.train_time_to_target: float | None = resumed.get("train_time_to_target_s")
        self.target_version: int | None = resumed.get("target_version")  # the version that reached it
        # The wall time of the run's earlier lives up to the checkpoint, so that the time to target
        # counts from the first start as the training time does (a checkpoint from before this was
        # recorded: its training time, the closest it knows).
        self.wall_before_s = float(resumed.get("wall_time_s", resumed.get("train_time_s", 0.0)))
        self._logged: tuple[int, int] | None = None  # (budget used, updates) at the last row
        self.pending_row: dict[str, float | None] = {}  # the scores' columns since the last row
        self.metrics: dict[str, float | None] = {}  # the plan's metrics at the last row
        self.shard_restarts = 0
        self.eval_latencies: list[float] = []
        self.target_eval_latency: float | None = None  # of the evaluation that first reached the target
        self.train_return: float | None = None  # the mean of the latest 100 episodes, once 100 were played
        self.best_train_return: float | None = resumed.get("best_train_return")
        #: what the ``best`` checkpoint holds: the version and score of the best evaluation so far
        self.best_checkpoint: dict[str, Any] | None = resumed.get("best_checkpoint")
        # the score the best checkpoint holds and its parameters, to save it again if deleted
        self._best_saved: tuple[Score, np.ndarray] | None = None
        self._network: Any = None  # plan.network_fn()'s FlatParams, built at the first checkpoint
        # After a second signal (the chunks under way given up) or with the cluster gone, the summary
        # asks the workers nothing: their counts are those of the reports already in.
        self.hurried = False
        #: the last checkpoint this run saved (``path`` in the run directory, ``progress``), what a resume
        #: continues from
        self.last_checkpoint: dict[str, str] | None = None

    def began_stepping(self) -> None:
        """Note when the first worker began stepping, from the command's start (now, where workers
        do not say: the local runtime steps them as soon as the driver asks); once."""
        if "first_step_s" not in self.out.startup:
            began = [r["first_step_at"] for r in self.progress.counters.last.values() if r.get("first_step_at")]
            terminal = self.out.terminal
            self.out.startup["first_step_s"] = min(began) - terminal.started_at if began else terminal.elapsed()

    def judged(self, score: Score | None) -> None:
        """Take in a judgement of the parameters: its columns for the next row, its record for
        ``summary.json``, and the time to target when it is the first to reach it."""
        if score is None:
            return
        self.pending_row.update(score.row)
        used, unit, train_s = self.progress.used(), self.plan.budget.unit, self.progress.train_s()
        latency = None
        if score.at is not None:  # training seconds from taking the parameters to knowing their score
            latency = train_s - score.at["train_time_s"]
            self.eval_latencies.append(latency)
        if score.record:
            self.placed.evaluations.append({unit: used, **score.record,
                                            **({"eval_latency_s": latency} if latency is not None else {})})
        if score.message:
            self.out.logger.message(f"{score.message}, {used:,} {unit.replace('_', ' ')}")
        if score.params is not None:
            self._save_best(score, score.params)
        if score.reached and self.time_to_target is None:
            self.time_to_target = self.wall_before_s + self.out.terminal.elapsed()
            self.train_time_to_target = train_s
            version = score.row.get("eval_version", score.row.get("version"))
            self.target_version = None if version is None else int(version)
            self.target_eval_latency = latency
            self.out.logger.message(f"target {self.plan.evaluation.target:.4g} reached after "
                                    f"{self.time_to_target:.1f} s")

    def row(self, train_s: float, final: bool = False) -> dict[str, float] | None:
        """Log a row: progress, the servers' counters, the plan's metrics and the scores since the
        last; the ``final`` row only if it has something new (it would repeat the last row).
        Returns the row as logged (``step``, ``time_s`` and the filled columns), None if not."""
        for message in self.placed.shards.restarts():
            self.shard_restarts += 1
            self.out.logger.message(message)
        stats = self.progress.stats = merge_stats(self.placed.shards.stats())
        logged = (self.progress.used(), stats.updates)
        if final and logged == self._logged and not self.pending_row:
            return None
        self._logged = logged
        if stats.updates and "first_update_s" not in self.out.startup:
            self.out.startup["first_update_s"] = self.out.terminal.elapsed()  # within a row of the first update
        counters = self.progress.counters
        env_steps = counters.total("env_steps")
        self._judge_training(counters)
        row = {"env_steps": env_steps, "updates": stats.updates, "train_return": counters.recent_return(),
               "loss": counters.mean("loss"), "env_steps_per_s": env_steps / max(train_s, 1e-9),
               "updates_per_s": stats.updates / max(train_s, 1e-9), "pushes_rejected": stats.pushes_rejected,
               "pushes_rejected_nonfinite": stats.pushes_rejected_nonfinite,
               "bytes_pushed": stats.bytes_in, "bytes_pulled": stats.bytes_out,
               "worker_restarts": counters.restarts + self.plan.evaluation.restarts,
               "env_failures": counters.total("env_failures"), **self._plan_metrics(), **self.pending_row}
        logged_row = {k: v for k, v in row.items() if k in self.out.logger.columns and v is not None}
        # TensorBoard shows an evaluation where its parameters were taken, as the plots do
        at = self.pending_row.get("eval_" + self.plan.budget.unit)
        steps = None if at is None else {c: int(at) for c in self.plan.evaluation.columns}
        self.out.logger.log(self.progress.used(), logged_row, train_s=train_s, steps=steps)
        self.pending_row = {}
        return {"step": self.progress.used(), "time_s": train_s, **logged_row}

    def _judge_training(self, counters: Counters) -> None:
        """The training return over a full window of the latest 100 episodes: its best, and (with
        the plan's ``train_target``) the time to target when it is the first to reach it."""
        train_return = counters.recent_return()
        if train_return is None or not counters.window_full():
            return
        self.train_return = train_return
        # a best of 0.0 is a best: not replaced by a lower return, as `best or -inf` replaced it
        self.best_train_return = (train_return if self.best_train_return is None
                                  else max(train_return, self.best_train_return))
        target = self.plan.train_target
        if target is not None and train_return >= target and self.time_to_target is None:
            self.time_to_target = self.out.terminal.elapsed()
            self.train_time_to_target = self.progress.train_s()
            self.out.logger.message(f"target {target:.4g} reached by the mean training return of the latest "
                                    f"100 episodes ({train_return:.1f}) after {self.time_to_target:.1f} s")

    def _plan_metrics(self) -> dict[str, float | None]:
        """The plan's ``group.key`` metrics as columns ``group_key``: a service's stats summed over
        the group, a worker report's value averaged over the group's workers. Every service's stats
        are read, for its metrics or not: they tell a restarted service."""
        stats = self.services.read()
        for metric in self.plan.metrics:
            group, key = metric.split(".", 1)
            if group in stats:
                values = [s[key] for s in stats[group] if s.get(key) is not None]
                self.metrics[metric] = float(sum(values)) if values else None
            else:
                values = [r[key] for (g, _), r in self.progress.counters.last.items()
                          if g == group and r.get(key) is not None]
                self.metrics[metric] = float(np.mean(values)) if values else None
        return {metric.replace(".", "_"): value for metric, value in self.metrics.items()}

    def checkpoint(self, train_s: float) -> None:
        """Save the services the plan names (each where it lives), then the shards' state with the
        counts a resumed run goes on from, and the exports."""
        meta = {"env_steps": self.progress.counters.total("env_steps"), "train_time_s": train_s,
                "time_to_target_s": self.time_to_target, "train_time_to_target_s": self.train_time_to_target,
                "target_version": self.target_version, "wall_time_s": self.wall_before_s + self.out.terminal.elapsed(),
                "updates": self.progress.stats.updates, "best_checkpoint": self._kept_best(),
                "best_train_return": self.best_train_return,
                "evaluation": self.plan.evaluation.state_dict()}
        for name in self.plan.checkpoint_services:
            self.placed.services[name].save()
        arrays = self.placed.shards.state_dict()
        path = save_checkpoint(checkpoint_dir(self.out.run_dir, "last"),
                               {**arrays, **(self.workers.arrays() if self.workers is not None else {}),
                                **(self.statistics.arrays() if self.statistics is not None else {})}, meta,
                               exports=self._exports(arrays), export_notes=self._export_notes())
        steps = f"{meta['env_steps']:,} env steps, " if self.plan.budget.unit == "env_steps" else ""
        progress = f"{steps}{meta['updates']:,} updates"
        self.last_checkpoint = {"path": str(path.relative_to(self.out.run_dir)), "progress": progress}
        self.out.logger.message(f"checkpoint {path.name}: {progress}")

    def _save_best(self, score: Score, params: np.ndarray) -> dict[str, Any]:
        """The judged parameters (``score.params``) as the run's ``best`` checkpoint (what ``gorila
        eval`` plays by default), with how they were judged, so that the judgement can be played
        again; the checkpoint's entry, now ``best_checkpoint``."""
        arrays = {"shard0.params": params, **score.statistics}
        meta = {**score.best_meta, **(score.at or {})}
        path = save_checkpoint(checkpoint_dir(self.out.run_dir, "best"), arrays, meta, keep=1,
                               exports=self._exports(arrays), export_notes=self._export_notes())
        self.best_checkpoint = {"version": meta.get("version"), "eval_return": score.value,
                                "path": str(path.relative_to(self.out.run_dir))}
        self._best_saved = score, params
        return self.best_checkpoint

    def _kept_best(self) -> dict[str, Any] | None:
        """``best_checkpoint``, its file checked first: one deleted under the running run
        (``checkpoints/`` removed) is saved again from the parameters it judged, or where this run
        does not hold them (a resumed run's earlier best) is dropped, with a line saying which."""
        best = self.best_checkpoint
        if best is None or "path" not in best or (self.out.run_dir / str(best["path"])).is_file():
            return best
        if self._best_saved is not None:
            saved = self._save_best(*self._best_saved)
            self.out.logger.message(f"the best checkpoint {best['path']} was deleted: saved again as "
                                    f"{saved['path']}")
        else:
            self.best_checkpoint = None
            self.out.logger.message(f"the best checkpoint {best['path']} was deleted; the run names none now")
        return self.best_checkpoint

    def _exports(self, arrays: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The network's named state_dict (``model``), for use without gorila; none for lstsq."""
        if self.plan.network_fn is None:
            return {}
        if self._network is None:
            from gorila.nets import FlatParams  # torch: only plans with a network get here

            self._network = FlatParams(self.plan.network_fn())
        return {"model": self._network.state_dict(server_params(arrays))}

    def _export_notes(self) -> dict[str, dict[str, str]]:
        """What the exported network says of itself in its file's metadata: a recurrent one, its
        core state (:meth:`~gorila.nets.recurrent.RecurrentActorCritic.export_notes`)."""
        notes = getattr(self._network.module, "export_notes", None) if self._network is not None else None
        return {"model": notes()} if callable(notes) else {}

    def summary(self, runtime: Runtime, train_s: float, stop_reason: str, signal: str | None = None, *,
                offline: bool = False) -> dict[str, Any]:
        """``summary.json``'s dict; ``signal`` names the signal that stopped the run, if one did.
        ``offline``: the shards cannot be asked (their cluster is gone), so the servers' counters
        are those of the last row."""
        plan, run_config, counters, shards = self.plan, self.run_config, self.progress.counters, self.placed.shards
        stats = self.progress.stats if offline else merge_stats(shards.stats())
        cpu_by_kind = {"driver": runtime.cpu_seconds(), "parameter shards": 0.0 if offline else shards.cpu_seconds()}
        for (group, _), report in counters.last.items():
            cpu_by_kind[group] = cpu_by_kind.get(group, 0.0) + report.get("cpu_s", 0.0)
        # Service processes (replay shards, trajectory queues, inference servers) on Ray say their CPU in
        # their stats, as of the run's last row; on the local runtime they live in the driver's process.
        for (group, _), service in self.services.last.items():
            if "cpu_s" in service:
                cpu_by_kind[group] = cpu_by_kind.get(group, 0.0) + service["cpu_s"]
        env_steps = counters.total("env_steps")
        rl = {"env_steps": env_steps, "env_steps_per_s": env_steps / max(train_s, 1e-9)}
        return {
            "algo": plan.algo, "label": plan.label, "mode": run_config.mode,
            **({"preset": run_config.preset, "preset_source": run_config.preset_source} if run_config.preset else {}),
            "runtime": run_config.runtime, "run_dir": str(self.out.run_dir),
            "workers": {name: self._workers(name, g) for name, g in self.placed.groups.items()},
            "shards": run_config.shards, "wall_time_from_start_s": self.out.terminal.elapsed(),
            "train_time_s": train_s,
            "cpu_time_s": sum(cpu_by_kind.values()), "cpu_s_by_process_kind": cpu_by_kind,
            **(rl if plan.budget.unit == "env_steps" else {}),
            "updates": stats.updates, "updates_per_s": stats.updates / max(train_s, 1e-9),
            "pushes_counted": stats.pushes_counted, "pushes_accepted": stats.pushes_accepted,
            "pushes_rejected": stats.pushes_rejected, "pushes_rejected_stale": stats.pushes_rejected_stale,
            "pushes_rejected_nonfinite": stats.pushes_rejected_nonfinite,
            "pushes_rejected_outlier": int(counters.total("pushes_rejected_outlier")),
            # The workers' time waiting for push replies (ParameterClient.counters): a semi-async
            # client's blocking, a barrier's waits, a pipelined client's replies not yet in.
            "push_blocked_s": sum(r.get("push_blocked_s", 0.0) for r in counters.last.values()),
            "push_blocked_fraction": counters.mean("push_blocked_fraction"),
            "bytes_pushed": stats.bytes_in, "bytes_pulled": stats.bytes_out, "server_pulls": stats.pulls,
            "time_to_target_s": self.time_to_target, "train_time_to_target_s": self.train_time_to_target,
            "reached_target": self.time_to_target is not None, "best_checkpoint": self._kept_best(),
            **({"eval_latency_s_mean": float(np.mean(self.eval_latencies)),
                "eval_latency_s_max": float(np.max(self.eval_latencies)),
                "target_eval_latency_s": self.target_eval_latency} if self.eval_latencies else {}),
            "startup": dict(self.out.startup), "shutdown": dict(self.out.shutdown),
            **({"final_train_return": self.train_return, "best_train_return": self.best_train_return}
               if plan.budget.unit == "env_steps" else {}),
            "status": "finished" if signal is None else "interrupted",
            "stop_reason": stop_reason, "worker_restarts": counters.restarts + plan.evaluation.restarts,
            **({"signal": signal} if signal is not None else {}),
            "service_restarts": self.services.restarts, "items_lost": self.services.items_lost,
            "shard_restarts": self.shard_restarts, "env_failures": counters.total("env_failures"),
            "pushes_rejected_restarted": stats.pushes_rejected_restarted,
            "pushes_rejected_duplicate": stats.pushes_rejected_duplicate,
            "updates_rolled_back": stats.updates_rolled_back,
            **plan.evaluation.summary(), **{m.replace(".", "_"): v for m, v in self.metrics.items()},
            "evaluations": self.placed.evaluations, "staleness_histogram": stats.as_dict()["staleness"],
            **self._histograms(),
        }

    def _workers(self, name: str, group: Any) -> int:
        """How many workers ``group`` has: as many as answer, or (one that cannot be restarted
        does not) as many as ever reported."""
        if self.hurried:
            return sum(1 for g, _ in self.progress.counters.last if g == name)
        try:
            return len(group.reports())
        except Exception:  # a failed run's summary is written all the same
            return sum(1 for g, _ in self.progress.counters.last if g == name)

    def _histograms(self) -> dict[str, dict[int, int]]:
        """The plan's ``group.key`` histograms (``{value: count}`` in worker reports), summed."""
        out = {}
        for histogram in self.plan.histograms:
            group, key = histogram.split(".", 1)
            total: collections.Counter = collections.Counter()
            for (g, _), report in self.progress.counters.last.items():
                if g == group:
                    total.update({int(k): int(v) for k, v in report.get(key, {}).items()})
            out[histogram.replace(".", "_") + "_histogram"] = dict(sorted(total.items()))
        return out
