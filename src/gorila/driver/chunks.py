"""The chunks of steps the driver gives its worker groups: how large each is, how they are
collected, and the restart of workers whose chunk stalls. The chunk loop
(:mod:`gorila.driver.loop`) drives it::

    chunks = Chunks(groups, runtime, plan, progress, Patience(call_s=600, stall_s=60), logger.message)
    chunks.start_idle()        # a chunk for every group that has none under way
    done = chunks.collect()    # waits until some group's chunk is in; its reports are counted
    chunks.drain(until)        # at the end: every chunk under way finishes (by until, else a
                               # WorkerTimeoutError naming the groups not back)

A group gets its next chunk as soon as its reports are in, so groups of different speeds (actors
and a learner) never wait for each other at the driver. Chunks are sized by time: a group's first
:data:`PROBE_CHUNKS` chunks are one step each, which measure its pace, and no chunk after them
asks for more steps than take :data:`LONGEST_CHUNK_S` at the group's fastest pace so far, so that
an environment of seconds per step still trains, shows progress and stops near the time limit, as
a fast one does. A pace can change at once (a learner's steps cost nothing while it waits for its
replay to fill, then an update each): where chunks are sized by time, a worker also ends its chunk
once it has run :data:`LONGEST_CHUNK_S`, and the next one is sized from the steps it took.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gorila.core import Runtime, WorkerGroup
from gorila.driver.normalization import RunStatistics
from gorila.driver.plan import Plan
from gorila.driver.progress import Progress
from gorila.errors import EnvFailedError, WorkerTimeoutError
from gorila.reply import Pending

#: The longest a chunk is asked to last, at its group's pace so far. A chunk is the driver's unit of
#: waiting: rows, the progress line, stops and checkpoints come between chunks, and a chunk of the
#: plan's steps in a slow environment (0.2 s a step) took minutes, past every timeout. Plans whose
#: chunks last less (every plan of a fast environment) keep their steps, and so the local runtime's
#: rows fall at the same steps in every run of a seed.
LONGEST_CHUNK_S = 2.0
#: One-step chunks a group starts with. The first step of a process carries its warm-up (imports,
#: a network's first call: 50 ms and more where a step then takes 1 ms), so its pace is read from
#: the fastest step so far, which the second chunk gives: a fast plan's chunks then never shrink
#: for a machine's passing load, and keep their steps.
PROBE_CHUNKS = 2


@dataclass(frozen=True)
class Patience:
    """How long the driver waits on workers: ``call_s`` for some group to finish its chunk (then a
    :class:`~gorila.errors.WorkerTimeoutError`), ``stall_s`` before it restarts the workers of a
    chunk that has not finished (``--actor-timeout-s`` on Ray; None: never, or the runtime watches
    its workers itself, as the local one does)."""

    call_s: float
    stall_s: float | None = None


@dataclass
class _Pace:
    """One group's chunks so far."""

    size: int | None = None  # its chunk, once it adapts to the plan's chunk_seconds
    started: float = 0.0  # when its chunk under way began
    asked: int = 0  # steps per worker of its chunk under way
    took: float | None = None  # how long its last chunk took (None: no chunk in yet)
    per_step: float | None = None  # budget used per worker step in its last chunk
    chunks_in: int = 0  # its chunks in so far
    fastest: float | None = None  # the fewest seconds a step took, over its chunks so far


class Chunks:
    """The chunks under way, one per group at most; ``message`` says what the driver did (a
    restart) in the run's log. The normalisation ``statistics`` the workers' reports carry are
    merged as each chunk comes in, and handed back to a group before its next chunk."""

    def __init__(self, groups: dict[str, WorkerGroup], runtime: Runtime, plan: Plan, progress: Progress,
                 patience: Patience, message: Callable[[str], None], statistics: RunStatistics | None = None):
        self.groups, self.runtime, self.plan, self.progress = groups, runtime, plan, progress
        self.statistics = statistics or RunStatistics(())
        self.patience, self.message = patience, message
        self.running: dict[str, list[Pending[dict[str, Any]]]] = {}
        self.pace = {name: _Pace() for name in groups}
        self.restarted_in_chunk: set[tuple[str, int]] = set()  # stalled workers restarted, by group and index
        # Probes measure environments (a budget of env steps; lstsq's steps are its own arithmetic).
        # A run resumed without its pace (a Ray run, a failed one) starts at the plan's chunks, as its
        # first life went on: the local runtime's rows then fall where that life's would have.
        self.probing = plan.budget.unit == "env_steps" and progress.used() == 0
        # Workers end a chunk by time only where chunks are sized by time (not the local runtime's
        # whole chunks, whose rows fall at the same steps in every run of a seed), and not where they
        # meet every step (a barrier, the learners' all-reduce): one that stopped early would leave
        # the others waiting for a step its chunk no longer takes.
        lockstep = plan.spec.rule.barrier or plan.spec.placement == "replicas"
        self.time_bound_s = None if plan.chunk_seconds is None or lockstep else LONGEST_CHUNK_S

    def start_idle(self) -> None:
        """Give every group whose last chunk is in its next one."""
        for name, group in self.groups.items():
            if name not in self.running:
                self.statistics.hand_back(name, group)
                pace = self.pace[name]
                pace.started = time.perf_counter()
                pace.asked = self._chunk_steps(name)
                self.running[name] = group.start_steps(pace.asked, self.time_bound_s)

    def drain(self, until: float | None = None) -> None:
        """Wait for every chunk under way, so that every worker's counts are in; by ``until`` (a
        ``time.perf_counter()``), else a :class:`~gorila.errors.WorkerTimeoutError` naming the
        groups that are not back."""
        while self.running:
            if not self.collect(until) and until is not None and time.perf_counter() >= until:
                raise WorkerTimeoutError(f"the chunks of {', '.join(self.running)} did not come back within the "
                                         "time limit and its overshoot")

    def collect(self, until: float | None = None, wake: Sequence[Pending[Any]] = ()) -> set[str]:
        """Wait until at least one group's chunk is complete, or one of the replies ``wake`` is in;
        take in the completed chunks' reports. Returns the groups whose chunks completed (and are no
        longer running): none when only a ``wake`` reply came in, or once ``until`` (a
        ``time.perf_counter()``, the time limit's end) has passed with none complete."""
        timeout_s, stall_s = self.patience.call_s, self.patience.stall_s
        deadline = time.perf_counter() + timeout_s
        while True:
            ready = {name: [p.ready() for p in pending] for name, pending in self.running.items()}  # one snapshot
            # Checked on every pass: other groups' chunks keep finishing while one worker hangs.
            if stall_s is not None and self._restart_stalled(ready, stall_s):
                deadline = time.perf_counter() + timeout_s  # restarted workers get the whole time again
            done = {name for name, flags in ready.items() if all(flags)}
            if done:
                break
            if any(p.ready() for p in wake) or (until is not None and time.perf_counter() >= until):
                return set()
            waiting = [p for name, pending in self.running.items() for p, flag in zip(pending, ready[name])
                       if not flag] + list(wake)
            wait_s = timeout_s if stall_s is None else min(timeout_s, stall_s / 4)
            if until is not None:
                wait_s = max(0.0, min(wait_s, until - time.perf_counter()))
            if self.runtime.wait(waiting, wait_s):
                continue
            if time.perf_counter() >= deadline:
                raise WorkerTimeoutError(f"no worker group ({', '.join(self.running)}) finished its chunk within "
                                         f"{timeout_s:.0f} s")
        for name in done:
            self.restarted_in_chunk = {(g, k) for g, k in self.restarted_in_chunk if g != name}
            pace, before = self.pace[name], self.progress.used()
            reports = [self._report(name, k, p, timeout_s) for k, p in enumerate(self.running.pop(name))]
            for report in reports:  # the local runtime rebuilt a stalled worker
                if "restart_reason" in report:
                    self.message(report.pop("restart_reason"))
            self.statistics.take(name, reports)
            self.progress.counters.update(name, reports)
            pace.took, pace.chunks_in = time.perf_counter() - pace.started, pace.chunks_in + 1
            taken = [report.get("chunk_cut_after", pace.asked) for report in reports]
            longest = max(taken)
            if longest < pace.asked:  # every worker's chunk ended by time: the next is sized from what it held
                pace.size = longest
            step_s = pace.took / max(longest, 1)
            pace.fastest = step_s if pace.fastest is None else min(pace.fastest, step_s)
            pace.per_step = (self.progress.used() - before) / max(sum(taken), 1)
        return done

    def _report(self, group: str, k: int, pending: Pending[dict[str, Any]], timeout_s: float) -> dict[str, Any]:
        """Worker ``k``'s report of its chunk; one whose envs failed past their limit fails the run
        (its error raised), its failures counted: it never reported the last of them."""
        try:
            return pending.result(timeout_s)
        except EnvFailedError as err:
            self.progress.counters.failed(group, k, "env_failures", err.failures)
            raise

    def _restart_stalled(self, ready: dict[str, list[bool]], stall_s: float) -> bool:
        """Restart the workers of every group whose chunk has run for ``stall_s`` without them
        finishing (Ray retries their chunk in the new process); whether any was. A worker is
        restarted once per chunk: its retried chunk has ``--call-timeout-s`` (killing a process
        Ray is still starting again would end it for good)."""
        now, restarted = time.perf_counter(), False
        for name, flags in ready.items():
            if now - self.pace[name].started < stall_s:
                continue
            for k, flag in enumerate(flags):
                if not flag and (name, k) not in self.restarted_in_chunk:
                    self.groups[name].kill(k)
                    self.restarted_in_chunk.add((name, k))
                    self.message(f"{name} {k} made no progress for {stall_s:g} s: restarting it")
                    restarted = True
        return restarted

    def _chunk_steps(self, group: str) -> int:
        """How many steps each of ``group``'s workers takes in its next chunk. The first
        :data:`PROBE_CHUNKS` are one step: a chunk of the plan's size is blind to the environment's
        pace (100 steps of a 0.2 s env are 20 s with nothing to show, and a stop cannot come
        sooner). After them, the plan's chunk size; with ``chunk_seconds``, scaled toward that
        duration from the group's last chunk (at most doubling or halving at once). Either way no
        more steps than take :data:`LONGEST_CHUNK_S` at the group's fastest pace, and never more
        than the budget has left, shared among the group's workers, so a run stops near its budget."""
        pace, chunk_seconds = self.pace[group], self.plan.chunk_seconds
        if self.probing and pace.chunks_in < PROBE_CHUNKS:
            return 1
        steps = pace.size or self.plan.chunk_steps(self.progress.stats.updates)
        if chunk_seconds is not None and pace.size is not None and pace.took is not None:
            scale = min(2.0, max(0.5, chunk_seconds / max(pace.took, 1e-6)))
            steps = max(1, round(steps * scale))
        if pace.fastest is not None:
            steps = min(steps, max(1, math.floor(LONGEST_CHUNK_S / max(pace.fastest, 1e-9))))
        if chunk_seconds is not None:
            pace.size = steps
        if pace.per_step:  # this group's steps use the budget (actors' env steps; not a learner's updates)
            workers = sum(1 for g, _ in self.progress.counters.last if g == group)
            left = self.plan.budget.total - self.progress.used()
            steps = min(steps, max(1, math.ceil(left / (pace.per_step * workers))))
        return steps
