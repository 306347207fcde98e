"""Judging an RL run: an evaluator worker (:mod:`gorila.driver.evaluator`) plays the newest
parameters while training goes on, and :class:`PolicyEvaluation` places it, paces it and judges
what it reports.

No torch at import: an evaluator of a network with a numpy twin (an MLP or MinAtar's: a plain
Q-network, or an actor-critic's policy) plays it in numpy
(:class:`~gorila.nets.numpy_conv.NumpyNetwork`), and its process never loads torch."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gorila.core import Runtime, ShardGroup, WorkerGroup
from gorila.driver.evaluator import IN_PROCESS_SHARE, SLICE_S, Evaluator
from gorila.driver.plan import Score
from gorila.envs.evaluation import NORMALIZATION_SOURCE, dqn_normalized, human_normalized
from gorila.envs.make import is_atari
from gorila.envs.normalize import Statistics
from gorila.errors import WorkerTimeoutError
from gorila.nets.numpy_conv import NumpyNetwork
from gorila.params import ParameterServer
from gorila.reply import Pending

if TYPE_CHECKING:
    from torch import nn

#: The cadence (``every_s``) of an evaluator that starts the next evaluation as soon as one is in;
#: it always has one to play, so it plays at this niceness, on the CPU training leaves (2 cores:
#: A3C, IMPALA, PPO 20-40 % more env steps/s, as many evaluations).
BACK_TO_BACK, BACKGROUND_NICE = 0.0, 10


class PolicyEvaluation:
    """The :class:`~gorila.driver.plan.Evaluation` of RL plans: at most one evaluation every
    ``every_s`` seconds (or every ``every_steps`` env steps), played by an
    :class:`~gorila.driver.evaluator.Evaluator` worker
    in parallel with training (in slices between the chunks, on a runtime that runs everything in one
    process, or there whole between two chunks with ``every_steps``); the run reaches its target
    when an evaluation's mean return reaches ``target``::

        evaluation = PolicyEvaluation("CartPole-v1", network_fn, greedy_policy, episodes=10,
                                      epsilon=0.05, seed=0, noop_max=30, every_s=1.0, target=475.0)

    With ``numpy_policy`` (the greedy policy as an unset :class:`~gorila.nets.numpy_conv.NumpyNetwork`,
    where it is an MLP) the evaluator plays it in numpy, and its process never imports torch (its
    factory then holds neither ``network_fn`` nor ``policy_fn``).

    An evaluation whose envs fail too often is a failed evaluation, not a failed run: it is said,
    kept in ``summary.json``'s ``evaluations`` with its reason, and counted (``evaluations_failed``);
    the env failures of every evaluation go into the column ``eval_env_failures`` and the summary.

    A hang is bounded too: with ``stall_s`` (``--actor-timeout-s``) an evaluator in a process of its
    own plays in slices shorter than it, and one whose slice has not come back after ``stall_s`` is
    restarted (once per slice; Ray plays the slice again in the new process, counted among
    ``worker_restarts``); in one process the runtime's watchdog rebuilds it. ``finish(within_s)``
    gives the last evaluation that long: one not in by then is dropped, said and counted
    (``evaluations_dropped``), so that the run ends within its time limit's overshoot.
    """

    #: the headline, then where the evaluated parameters were taken (metrics.csv's step and time
    #: are where the evaluation came in: plots put it at ``eval_env_steps`` / ``eval_train_time_s``)
    columns = ("eval_return", "eval_version", "eval_min", "eval_max", "eval_env_steps", "eval_train_time_s",
               "eval_env_failures")

    def __init__(self, env_id: str, network_fn: Callable[[], nn.Module], policy_fn: Callable, *,
                 episodes: int, epsilon: float, seed: int, noop_max: int, every_s: float, target: float | None,
                 every_steps: int | None = None, numpy_policy: NumpyNetwork | None = None):
        self.env_id, self.epsilon, self.every_s, self.target = env_id, epsilon, every_s, target
        self.every_steps = every_steps
        self.next_steps = 0  # with every_steps: the env steps at which the next evaluation starts
        self.episodes, self.noop_max = episodes, noop_max
        torch_free = numpy_policy is not None  # then nothing in the factory makes its process import torch
        self.factory = functools.partial(Evaluator, env_id=env_id, network_fn=None if torch_free else network_fn,
                                         policy_fn=None if torch_free else policy_fn, numpy_policy=numpy_policy,
                                         episodes=episodes, epsilon=epsilon, seed=seed, noop_max=noop_max)
        self.group: WorkerGroup | None = None
        self.runtime: Runtime | None = None
        self.server: ParameterServer | None = None
        self.pending: Pending[dict[str, Any]] | None = None
        self.playing = False  # an evaluation played in slices is under way
        self.last_started = -np.inf
        self.timeout_s = 600.0
        self.final: float | None = None
        self.best: float | None = None
        self.env_failures = self.evaluations_failed = 0
        self.restarts = 0  # of the evaluator's process
        self.pid: int | None = None  # the evaluator's, as its last report said
        self.before_restarts = (0, 0)  # env failures and failed evaluations its earlier processes counted
        self.now: dict[str, float] | None = None  # where the run was when the evaluation under way was asked for
        # (wall clock, where the run was) at every chunk since: the evaluator took its parameters
        # when it got to them, after its process started for the first one
        self.since_asked: list[tuple[float, dict[str, float]]] = []
        self.latest: dict[str, float] = {}  # where the run was at the last chunk
        self.stall_s: float | None = None
        self.pending_since = 0.0  # when the slice under way was asked for
        self.killed = False  # whether the evaluator of the slice under way was restarted
        self.dropped = 0  # evaluations not in by the run's end
        self.statistics: Statistics | None = None  # the run's normalisation statistics, as last handed

    def start(self, runtime: Runtime, shards: ShardGroup, groups: dict[str, WorkerGroup],
              stall_s: float | None = None) -> None:
        """Place the evaluator. In a process of its own it starts now, beside the run's other
        processes, so that it is up when training starts and the first evaluations judge the first
        seconds' parameters (started with the first chunk, its start-up delayed every evaluation of
        a short run by seconds); in the driver's process it is built with the first chunk.
        ``stall_s``: how long a slice may go without an answer before the evaluator is restarted
        (None: the runtime watches, or nothing does)."""
        self.timeout_s = shards.server.timeout_s
        self.runtime, self.server, self.stall_s = runtime, shards.server, stall_s
        if runtime.name != "local":
            self._start_group()

    def _start_group(self) -> WorkerGroup:
        # In one process an evaluation is played in slices of the wall time, unless it falls due
        # by steps: it is then played whole where it falls due, so that where every evaluation
        # starts and which row it lands in are the same in every run of a seed, resumed or not.
        runtime, server = self.runtime, self.server
        if runtime is None or server is None:
            raise RuntimeError("PolicyEvaluation.start places the evaluator before its first chunk")
        local = runtime.name == "local"
        share = IN_PROCESS_SHARE if local and self.every_steps is None else None
        slice_s = None if local or self.stall_s is None else min(SLICE_S, self.stall_s / 2)
        nice = BACKGROUND_NICE if self.every_s == BACK_TO_BACK and self.every_steps is None else 0
        self.group = runtime.start_workers(functools.partial(self.factory, share=share, slice_s=slice_s), 1,
                                           server, name="evaluator", nice=nice, wait=False)
        return self.group

    @property
    def _started(self) -> WorkerGroup:
        """The evaluator's group, asked for only once an evaluation has been (so once it is started)."""
        if self.group is None:
            raise RuntimeError("no evaluator has been started")
        return self.group

    def before_chunk(self, now: dict[str, float]) -> None:
        """Go on with the evaluation under way, or start one if it is time; ``now`` (the budget used
        and the training time) is where a new one takes its parameters."""
        group = self.group if self.group is not None else self._start_group()
        clock = time.perf_counter()
        self.latest = dict(now)
        if self.pending is not None:  # asked for, not in: the evaluator may be taking its parameters about now
            self.since_asked.append((time.time(), dict(now)))
        if self.pending is None and self.playing:
            self.pending, self.pending_since, self.killed = group.start_steps(1)[0], clock, False
        elif self.pending is None and self._due(clock, now):
            if self.statistics is not None:  # a new evaluation plays with the run's latest statistics
                group.call("normalize_with", self.statistics)
            self.since_asked = [(time.time(), dict(now))]
            self.pending, self.last_started, self.now = group.start_steps(1)[0], clock, dict(now)
            self.pending_since, self.killed = clock, False

    def _due(self, clock: float, now: dict[str, float]) -> bool:
        """Time for a new evaluation: ``every_steps`` env steps since the last one started (the next
        is due at the next multiple), else ``every_s`` seconds."""
        if self.every_steps is None:
            return clock - self.last_started >= self.every_s
        steps = now.get("env_steps", 0.0)
        if steps < self.next_steps:
            return False
        self.next_steps = (int(steps) // self.every_steps + 1) * self.every_steps
        return True

    def after_chunk(self) -> Score | None:
        if self.pending is None:
            return None
        if not self.pending.ready():
            return self._restart_if_stalled()
        return self._collect(self.pending, self.timeout_s)

    def awaited(self) -> list[Pending[dict[str, Any]]]:
        """The evaluation under way in a process of its own: the driver's wait for a chunk ends
        when it comes in, so that it is judged, and the next one started, at once rather than at the
        next chunk's end (CartPole's evaluations take ~0.2 s, Ray's chunks ~0.5 s). In one process
        an evaluation is played in slices between the chunks: nothing to wait for."""
        if self.pending is None or self.runtime is None or self.runtime.name == "local":
            return []
        return [self.pending]

    def _restart_if_stalled(self) -> Score | None:
        """Restart an evaluator whose slice has gone ``stall_s`` without an answer (once per
        slice: a process Ray is still starting, killed again, would end for good; and not before
        its first answer, whose wait includes the process's start-up); its message."""
        if (self.stall_s is None or self.killed or self.pid is None
                or time.perf_counter() - self.pending_since < self.stall_s):
            return None
        self._started.kill(0)
        self.killed = True
        self.now = dict(self.latest)  # the new process plays the parameters of now
        return Score(float("nan"), False, message=f"evaluator made no progress for {self.stall_s:g} s: restarting it")

    def finish(self, within_s: float | None = None) -> Score | None:
        """The evaluation under way, played to its end within ``within_s`` (default: the call
        timeout); one not in by then is dropped, and the score says so."""
        deadline = time.perf_counter() + (self.timeout_s if within_s is None else within_s)
        try:
            score = (None if self.pending is None
                     else self._collect(self.pending, max(0.0, deadline - time.perf_counter())))
            while self.playing and time.perf_counter() < deadline:  # one played in slices goes on to its end
                score = self._collect(self._started.start_steps(1)[0], max(0.0, deadline - time.perf_counter()))
        except WorkerTimeoutError:
            self.playing = True  # not in: dropped below
        if not self.playing:
            return score
        self.playing, self.dropped = False, self.dropped + 1
        message = ("the last evaluation did not finish within the "
                   f"{self.timeout_s if within_s is None else within_s:.0f} s it had left: dropped")
        return Score(float("nan"), False, record={"eval_failed": message}, message=message)

    def _collect(self, pending: Pending[dict[str, Any]], timeout_s: float) -> Score | None:
        """The report of ``pending`` (the slice asked for, no longer under way once this is called)
        within ``timeout_s``, judged."""
        self.pending = None
        report = pending.result(timeout_s)
        self.playing = report.pop("playing", False)
        self._note_restart(report)
        reason = report.pop("restart_reason", None)  # the local runtime rebuilt a stalled evaluator
        self.env_failures = self.before_restarts[0] + report.pop("env_failures", 0)
        self.evaluations_failed = self.before_restarts[1] + report.pop("evaluations_failed", 0)
        if self.playing or "eval_version" not in report:
            return None if reason is None else Score(float("nan"), False, message=reason)
        if "eval_failed" in report:
            return Score(float("nan"), False, row={"eval_env_failures": self.env_failures}, record=report,
                         message=report["eval_failed"])
        params = report.pop("eval_params")
        statistics = report.pop("eval_statistics", {})
        taken = self._taken(report.pop("eval_taken_at", None))
        score, version = report["eval_return"], report["eval_version"]
        best = self.best is None or score > self.best
        self.final, self.best = score, score if self.best is None else max(self.best, score)
        at = {f"eval_{key}": value for key, value in (taken or {}).items()}
        return Score(score, self.target is not None and score >= self.target,
                     row={"eval_return": score, "eval_version": version, "eval_min": report["eval_min"],
                          "eval_max": report["eval_max"], "eval_env_failures": self.env_failures, **at},
                     record={**report, **at}, at=taken, params=params if best else None,
                     statistics=statistics if best else {},
                     best_meta={"version": version, "eval_return": score, "eval_min": report["eval_min"],
                                "episodes": self.episodes, "seed": report["eval_seed"], "epsilon": self.epsilon,
                                "noop_max": self.noop_max, **at},
                     message=f"eval {score:8.1f} (min {report['eval_min']:.1f}) at version {version}")

    def _taken(self, taken_at: float | None) -> dict[str, float] | None:
        """Where the run was when the evaluator took its parameters: at the last chunk that began by
        then (the evaluation's first parameters come only once its process is up, seconds after it
        was asked for); where it was asked for when the evaluator does not say."""
        if taken_at is None:
            return self.now
        began = [now for wall, now in self.since_asked if wall <= taken_at]
        return began[-1] if began else self.now

    def _note_restart(self, report: dict[str, Any]) -> None:
        """A report from a new evaluator process (Ray restarted it: ``pid`` changed, or a first
        report says ``restarted``) counts a restart; what the old process counted is kept."""
        pid = report.get("pid")
        if (self.pid is not None and pid != self.pid) or (self.pid is None and report.get("restarted")):
            self.restarts += 1
            self.before_restarts = (self.env_failures, self.evaluations_failed)
        self.pid = pid

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"final_eval_return": self.final, "best_eval_return": self.best,
                               "target_return": self.target, "eval_epsilon": self.epsilon,
                               "eval_env_failures": self.env_failures, "evaluations_failed": self.evaluations_failed,
                               "evaluations_dropped": self.dropped}
        if is_atari(self.env_id) and self.final is not None and self.best is not None:
            out["final_human_normalized"] = human_normalized(self.env_id, self.final)
            out["final_dqn_normalized"] = dqn_normalized(self.env_id, self.final)
            out["best_human_normalized"] = human_normalized(self.env_id, self.best)
            out["best_dqn_normalized"] = dqn_normalized(self.env_id, self.best)
            out["human_normalized_table"] = NORMALIZATION_SOURCE
        return out

    def normalize_with(self, statistics: Statistics) -> None:
        """The run's normalisation statistics (the driver's, as they change): the next evaluation
        plays with them, frozen, and a best checkpoint saves them with its parameters."""
        self.statistics = statistics

    def state_dict(self) -> dict[str, Any]:
        """The best score and the cadence (``--eval-every-steps``: where the next evaluation is due)."""
        return {"best_eval_return": self.best, "next_steps": self.next_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = state.get("best_eval_return")
        self.next_steps = int(state.get("next_steps", 0))

    def in_flight(self) -> dict[str, Any]:
        """The evaluation under way between chunks (one played in slices on the local runtime), for
        a snapshot that saves the evaluator with it (:mod:`gorila.driver.exact`)."""
        return {"playing": self.playing, "now": self.now}

    def resume_in_flight(self, state: dict[str, Any]) -> None:
        """Go on with the evaluation :meth:`in_flight` saved (its evaluator was restored with it)."""
        self.playing, self.now = bool(state["playing"]), state["now"]
