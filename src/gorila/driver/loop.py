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

This module places the plan (:func:`run`) and runs the chunk loop (:func:`train`); the loop's
parts are :mod:`~gorila.driver.chunks` (the chunks' sizes, their collection, restarts of stalled
workers), :mod:`~gorila.driver.report` (rows, evaluations, checkpoints, the summary) and
:mod:`~gorila.driver.progress` (the budget used and the training time, which both read).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # threadpoolctl ships no type hints

from gorila.checkpoint import CheckpointTimer, load_checkpoint
from gorila.config import RunConfig
from gorila.core import Runtime
from gorila.driver.chunks import Chunks, Patience
from gorila.driver.exact import Restored, WorkerState, restore_workers
from gorila.driver.failure import cluster_lost, out_of_space, save_after_failure
from gorila.driver.normalization import RunStatistics
from gorila.driver.plan import Placed, Plan
from gorila.driver.progress import Progress, resumable
from gorila.driver.report import Outputs, Report
from gorila.driver.run_lock import hold_run_dir
from gorila.driver.run_log import open_log, plot, prepare_plot
from gorila.driver.stages import processes, runtime_stage
from gorila.driver.stop import Interrupted, StopSignals
from gorila.errors import DiskFullError
from gorila.metrics.progress import Limits
from gorila.metrics.terminal import Terminal
from gorila.params import merge_stats
from gorila.params.server import check_optimizer_state, check_shard_state
from gorila.runtime import make_runtime, preload

#: How soon after training starts the first periodic checkpoint is due (at most ``--checkpoint-every-s``):
#: a run killed, hung up or cut off in its first minute still leaves a checkpoint to resume from.
FIRST_CHECKPOINT_S = 5.0
#: Called after every row; returning False stops the run there (``stop_reason: "on_chunk"``).
OnChunk = Callable[[Placed], bool | None]
#: Called with every logged row (``step``, ``time_s`` and the filled columns); returning False
#: stops the run there (``stop_reason: "callback"``).
OnRow = Callable[[dict[str, float]], bool | None]
T = TypeVar("T")


@dataclass(frozen=True)
class Stops:
    """When the chunk loop stops, besides at the target and the budget, and when it checkpoints:
    after ``time_limit_s`` of training (None: no limit), at a signal ``signals`` caught, or when
    ``on_chunk()`` (called after every row) or ``on_row(row)`` returns False; a checkpoint every
    ``checkpoint_every_s``. Past ``end_s`` of training nothing is waited for: the chunks and the
    evaluation not in by then are given up. ``on_stop()`` starts what the run's end will need while
    it waits for its last chunks (the learning curve's imports)."""

    time_limit_s: float | None
    checkpoint_every_s: float
    signals: StopSignals | None = None
    on_chunk: Callable[[], bool | None] | None = None
    on_row: OnRow | None = None
    end_s: float | None = None  # with a time limit: the training seconds by which the run ends (its overshoot)
    on_stop: Callable[[], Any] | None = None  # called once the loop stops, before the chunks under way are in
    # Whether a second signal may give up the chunks under way: on Ray they run in other processes;
    # the local runtime's run on a thread of this one, whose chunk must end before anything is saved.
    abandon: bool = False


def run(run_config: RunConfig, plan: Plan | Callable[[], Plan], on_chunk: OnChunk | None = None, *,
        terminal: Terminal | None = None, on_row: OnRow | None = None) -> dict[str, Any]:
    """Train ``plan`` until its target, its budget or the time limit; returns ``summary.json``'s dict.

    ``plan`` may be given as the function that builds it (``gorila train`` does): on Ray it is then
    built on a thread while Ray starts on this one, since importing PyTorch and building the
    network take seconds in which this process would otherwise only wait for Ray's processes. A
    plan that cannot be built (a ConfigError) is raised once Ray is shut down again.

    ``on_chunk(placed)`` (tests, tools) is called after every logged row with what was placed
    (:class:`Placed`); when it returns False the run stops as at its budget, everything saved
    (``stop_reason: "on_chunk"``); ``on_row(row)`` (``gorila.train``'s ``callback``) is called with
    every logged row and stops the run the same way by returning False (``stop_reason: "callback"``).
    ``terminal`` shows the start-up and the progress (default: on
    stderr, times counted from the start of this process).
    With ``--resume`` the shards start from the newest good checkpoint and counting continues.
    SIGINT, SIGTERM or SIGHUP stops the run after the chunks under way: everything is saved as at
    any other stop (``stop_reason: "interrupted"``) and :class:`~gorila.driver.stop.Interrupted` is
    raised with the summary; a second signal gives up the chunks under way on Ray and saves all
    the same. The run directory is held (:mod:`gorila.driver.run_lock`) from before anything is
    written there until the end. A run that fails while it trains (a worker that cannot be restarted or
    does not answer in time, environments or gradients failing past their limits) saves what it
    can first: a final checkpoint of the shards' parameters and the full summary, ``status:
    "failed"`` with the ``stop_reason`` and the ``error``; then the error is raised. A resumed
    run that fails before its first chunk is in leaves the run's earlier ``summary.json`` as it was.
    A Ray cluster that stops answering is a :class:`~gorila.errors.ClusterLostError`, after the
    summary that the driver can write without it (the last checkpoint stays the one to resume).
    """
    with contextlib.ExitStack() as held:  # the run directory's lock, released once all is written
        # One BLAS thread in the driver, as in every gorila process (runtime.ONE_THREAD): Ray's start
        # forks while the plan computes on a thread of its own (lstsq's data), and a fork made while
        # OpenBLAS's threads work for another thread hangs in OpenBLAS's fork handler for good.
        held.enter_context(threadpool_limits(limits=1, user_api="blas"))
        return _run(run_config, plan, on_chunk, terminal or Terminal(), on_row, held)


def _run(run_config: RunConfig, plan: Plan | Callable[[], Plan], on_chunk: OnChunk | None, terminal: Terminal,
         on_row: OnRow | None, held: contextlib.ExitStack) -> dict[str, Any]:
    startup: dict[str, float] = {}
    # off the local runtime, a plan still to build is built beside the runtime's start
    build = plan if not isinstance(plan, Plan) and callable(plan) and run_config.runtime != "local" else None
    if build is None:
        plan = plan if isinstance(plan, Plan) else plan()
        startup["plan_s"] = terminal.elapsed()  # the command's imports and the builder are done
    # The learning curve is drawn on a thread while the run's end waits on its processes (the last
    # chunks and evaluation, the summary's reports, the runtime's shutdown): a run ends sooner.
    with StopSignals() as signals, ThreadPoolExecutor(max_workers=1, thread_name_prefix="learning-curve") as plotter:
        if build is not None:
            # Ray's import first: beside the plan's, the two would share this process's one GIL,
            # and Ray's start, which waits on it, is the longer path to the first env step.
            preload(run_config.runtime)
        planned = _in_background(_built, build, terminal) if build is not None else None
        started: list[Runtime] = []
        try:  # starting Ray installs a SIGTERM handler of its own (sys.exit(15)): a signal still ends it here
            with terminal.stage(runtime_stage(run_config)), signals.foreign():
                started.append(make_runtime(run_config.runtime, run_config.address,
                                            call_timeout_s=run_config.call_timeout(plan.chunk_seconds
                                                                                   if isinstance(plan, Plan) else None),
                                            verbose=terminal.verbose, stall_s=run_config.actor_timeout_s))
        except Interrupted:
            for made in started:
                made.shutdown()
            raise
        runtime = started[0]
        # The local runtime watches its workers' steps itself; on Ray the driver restarts a stalled process.
        stall_s = None if runtime.name == "local" else run_config.actor_timeout_s
        startup["runtime_s"] = terminal.elapsed()
        try:
            if planned is not None:
                plan, startup["plan_s"] = planned.result()
            assert isinstance(plan, Plan)
            runtime.call_timeout_s = run_config.call_timeout(plan.chunk_seconds)  # the plan's chunks now known
            run_dir = run_config.resolved_run_dir(plan.label)
            held.enter_context(hold_run_dir(run_dir, "run_dir" if run_config.resume is None else "resume",
                                            terminal.line))
            initial = plan.initial_params()
            shard_processes = plan.spec.processes
            runtime.plan(plan.processes + shard_processes + 1, plan.param_cache)  # + the server's and the evaluation
            # Every process starts side by side: each waits for no other to be up first.
            shards = runtime.start_shards(plan.spec, initial, wait=False, checkpoints=run_dir / "checkpoints")
            meta: dict[str, Any] = {}
            restored = Restored()  # what an exact resume gives back (driver/exact.py)
            statistics = RunStatistics(plan.normalized, plan.evaluation)  # normalisation's (driver/normalization.py)
            if run_config.resume is not None:
                skipped: list[str] = []
                arrays, meta = load_checkpoint(run_dir / "checkpoints", skipped,
                                               check=resumable(plan.spec.num_shards))
                for reason in skipped:
                    terminal.line(f"skipping a damaged checkpoint: {reason}")
                check_shard_state(arrays, plan.spec.layout(initial.size), f"the checkpoint in {run_dir}")
                check_optimizer_state(arrays, plan.spec.optimizer, f"the checkpoint in {run_dir}")
                shards.load_state_dict(arrays)
                plan.evaluation.load_state_dict(meta.get("evaluation", {}))
                restored = restore_workers(runtime, plan, arrays)
                statistics.restore(arrays)
            services = {s.name: runtime.start_services(s.bound(shards.server), s.count, name=s.name, wait=False,
                                                       node_of=s.node_of, gpus=s.gpus)
                        for s in plan.services}
            specs = plan.groups({name: group.endpoints() for name, group in services.items()})
            server = shards.server
            if plan.param_cache is not None:
                server, caches = runtime.start_param_caches(server, plan.param_cache)
                services.update(caches)
            with terminal.stage(f"starting {processes(plan, specs)}"):
                groups = {w.name: runtime.start_workers(w.factory, w.count, server, name=w.name,
                                                        nice=w.nice, wait=False, node_of=w.node_of, gpus=w.gpus,
                                                        spread=w.spread)
                          for w in specs}
                plan.evaluation.start(runtime, shards, groups, stall_s)
                runtime.wait_started()
            startup["processes_s"] = terminal.elapsed()
            unit = plan.budget.unit.replace("_", " ")
            config = {"algo": plan.algo, "run": asdict(run_config), plan.algo: plan.config,
                      "rule": asdict(plan.spec.rule), "run_dir": str(run_dir), "step_unit": unit,
                      "headline": plan.evaluation.columns[0],
                      "target": plan.evaluation.target if plan.train_target is None else plan.train_target,
                      "target_on": "eval" if plan.train_target is None else "train100"}
            limits = Limits(plan.budget.total, unit, run_config.time_limit_s,
                            time_before_s=float(meta.get("train_time_s", 0.0)))
            signals.arm()  # from here on a signal stops the run with everything saved
            terminal.line(f"{terminal.elapsed():7.1f} s  training until {limits.describe()}")
            display = terminal.progress(limits, description=f"{plan.algo} {plan.label} {run_config.mode}")
            with open_log(plan, run_config, run_dir, config, display, meta) as logger:
                placed = Placed(shards, services, groups)
                progress = Progress.resumed(plan.budget.unit, meta, restored.counters)
                outputs = Outputs(run_dir, logger, terminal, startup)
                report = Report(run_config, plan, placed, progress, outputs, resumed=meta)
                chunks = Chunks(groups, runtime, plan, progress,
                                Patience(run_config.call_timeout(plan.chunk_seconds), stall_s), logger.message,
                                statistics)
                chunks.pace.update(restored.pace)
                report.workers = WorkerState(runtime, plan, progress, chunks, logger.message)
                report.statistics = statistics
                try:
                    train_s, stop_reason = train(plan, chunks, report, Stops(
                        run_config.time_limit_s, run_config.checkpoint_every_s, signals,
                        None if on_chunk is None else functools.partial(on_chunk, placed), on_row,
                        end_s=run_config.time_limit_end(plan.chunk_seconds),
                        on_stop=functools.partial(plotter.submit, prepare_plot), abandon=runtime.name != "local"))
                except Exception as error:
                    lost = cluster_lost(runtime, report, error)  # then nothing can be asked of the shards
                    try:
                        if run_config.resume is not None and not progress.counters.last:
                            logger.discard()  # nothing trained: the run's earlier summary stays
                        else:
                            logger.close(save_after_failure(report, runtime, lost or error, offline=lost is not None))
                    except DiskFullError as full:  # the summary found no room either
                        raise out_of_space(report, full) from error
                    if lost is not None:
                        raise lost from error
                    if isinstance(error, DiskFullError):
                        raise out_of_space(report, error) from error
                    raise
                plotted = plotter.submit(plot, run_dir, plan, run_config)  # metrics.csv has its final row
                summary = report.summary(runtime, train_s, stop_reason, _signal_name(signals))
                logger.close(summary)  # before any process is stopped
                outputs.stamp("summary_s", "summary.json written")
        finally:
            runtime.shutdown()
        outputs.stamp("runtime_stopped_s", "runtime shut down")
        plotted.result()  # what the plot raised, if anything
    outputs.stamp("learning_curve_s", "learning curve drawn: done")
    ended = {"shutdown": dict(outputs.shutdown), "shutdown_s": _shutdown_s(outputs.shutdown)}
    logger.amend(ended)
    summary.update(ended)
    if signals.received is not None:
        raise Interrupted(signals.received, summary)
    return summary


def train(plan: Plan, chunks: Chunks, report: Report, stops: Stops) -> tuple[float, str]:
    """The chunk loop: give every group its chunks, judge, log a row once every group has finished
    a chunk, checkpoint, and stop; the training time and why it stopped (``target``, ``budget``,
    ``time_limit``, ``on_chunk``, ``callback``, ``interrupted``). The chunks under way finish first,
    and a final row (unless it would repeat the last) and checkpoint are written. A resumed run that has
    nothing to do (its target reached, its budget used) says why in one line and trains nothing.
    The time limit counts this run's training, not a resumed run's earlier lives'."""
    evaluation, progress = plan.evaluation, report.progress
    progress.start_training()
    until = None if stops.end_s is None else time.perf_counter() + stops.end_s  # the time limit's overshoot
    done = _nothing_to_do(plan, report)
    if done is not None:
        report.out.logger.message(done[1])
        report.out.stamp("stop_s", f"stopping ({done[0]}) before training")
        return progress.train_s(), done[0]
    # The first checkpoint within seconds: a run that ends abruptly early on still leaves one to resume.
    timer = CheckpointTimer(stops.checkpoint_every_s, first_s=min(FIRST_CHECKPOINT_S, stops.checkpoint_every_s))
    hurry = stops.signals.abandonable if stops.signals is not None and stops.abandon else _wait
    stop_reason = "budget"
    progress.stats = merge_stats(report.placed.shards.stats())
    finished: set[str] = set()  # groups that finished a chunk since the last row
    while True:
        evaluation.before_chunk(progress.now())
        chunks.start_idle()
        finished |= hurry(functools.partial(chunks.collect, until, wake=evaluation.awaited())) or set()
        report.began_stepping()
        report.judged(evaluation.after_chunk())
        train_s = progress.train_s()
        if finished == set(chunks.groups):
            finished.clear()
            go_on = stops.on_chunk is None or stops.on_chunk() is not False
            row = report.row(train_s)
            if not go_on:
                stop_reason = "on_chunk"
                break
            if stops.on_row is not None and row is not None and stops.on_row(row) is False:
                stop_reason = "callback"
                break
        if stops.signals is not None and stops.signals.received is not None:
            stop_reason = "interrupted"
            report.out.logger.message(f"{_signal_name(stops.signals)}: stopping; saving a final checkpoint and "
                                      "the summary (send it again to give up the chunks under way, a third time "
                                      "to quit at once)")
            break
        if timer.due():
            report.checkpoint(train_s)
        if report.time_to_target is not None and plan.stop_at_target:
            stop_reason = "target"
            break
        if progress.used() >= plan.budget.total:
            break
        if stops.time_limit_s is not None and train_s - progress.train_before_s >= stops.time_limit_s:
            stop_reason = "time_limit"
            break
    report.out.stamp("stop_s", f"stopping ({stop_reason}): the chunks under way finish")
    if stops.on_stop is not None:
        stops.on_stop()
    hurry(chunks.drain, until)  # every worker's counts are in, unless a second signal gave them up
    if stops.signals is not None and stops.signals.hurried:
        report.hurried = True  # the summary asks nothing more of the workers
        report.out.logger.message("signalled again: saving the final checkpoint and the summary now"
                                  + (", the chunks under way given up" if stops.abandon else ""))
    report.out.stamp("last_chunk_s", "every chunk in")
    if stop_reason not in ("target", "interrupted"):  # an interrupt does not wait for an evaluation
        report.judged(evaluation.finish(None if until is None else max(0.0, until - time.perf_counter())))
        report.out.stamp("last_evaluation_s", "the last evaluation in")
    train_s = progress.train_s()
    report.row(train_s, final=True)
    report.checkpoint(train_s)
    report.out.stamp("final_checkpoint_s", "final row and checkpoint written")
    return train_s, stop_reason


def _wait(wait: Callable[..., Any], *args: Any) -> Any:
    """``wait(*args)``: a wait that no signal gives up (the local runtime's chunks)."""
    return wait(*args)


def _shutdown_s(stamps: dict[str, float]) -> float | None:
    """Seconds from the end of the last chunk (or from the decision to stop, for a run that had
    nothing to do) to the run's end: everything written and every process stopped."""
    start = stamps.get("last_chunk_s", stamps.get("stop_s"))
    return None if start is None else stamps["learning_curve_s"] - start


def _in_background(fn: Callable[..., T], *args: Any) -> Future[T]:
    """``fn(*args)`` on a daemon thread, its result a future. Not a pool's thread: a pool's are
    joined when the process exits, and a start that a signal aborts must not wait for the plan.
    The signal's exception lands in the main thread wherever it is, and may leave a lock taken
    there (logging's, where it landed in a log call) for good: the plan's imports, which log,
    would then wait forever, and the exit with them."""
    future: Future[T] = Future()

    def run() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn(*args))
        except BaseException as error:  # handed to whoever takes the result
            future.set_exception(error)

    threading.Thread(target=run, name="plan", daemon=True).start()
    return future


def _built(build: Callable[[], Plan], terminal: Terminal) -> tuple[Plan, float]:
    """The plan ``build`` returns, and when it was done (seconds since the command started)."""
    plan = build()
    return plan, terminal.elapsed()


def _nothing_to_do(plan: Plan, report: Report) -> tuple[str, str] | None:
    """Why a (resumed) run stops before training, and the line that says so and how to go on."""
    if report.time_to_target is not None and plan.stop_at_target:
        at = f" at version {report.target_version}" if report.target_version is not None else ""
        how = "pass --no-stop-at-target to train on" if "stop_at_target" in plan.config else "nothing to train"
        return "target", f"target already reached{at}; {how}"
    used, unit = report.progress.used(), plan.budget.unit.replace("_", " ")
    if used >= plan.budget.total:
        flag = "--total-steps" if plan.budget.unit == "env_steps" else "--iterations"
        return "budget", (f"budget already used: {used:,} of {plan.budget.total:,} {unit}; "
                          f"pass {flag} above {used:,} to train on")
    return None


def _signal_name(signals: StopSignals) -> str | None:
    return None if signals.received is None else signal.Signals(signals.received).name
