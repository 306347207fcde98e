"""The local runtime's chunks, stepped on a thread the driver can abandon: its watchdog.

Everything of a local run lives in the driver's process, so an environment that hangs in
``step`` would hang the driver with it, past every timeout. The local groups' chunks therefore
run on a thread of their own, one chunk after another in the order they were started (the same
order, and so the same results, as stepping them on the driver's thread), while the driver waits
for them with a timeout. A worker whose single step has not returned after ``stall_s``
(``--actor-timeout-s``) is given up: its thread is left behind (a daemon, stuck where the
environment hangs), the worker is rebuilt from its factory (a new env, fresh parameters, counted
as a restart), its chunk ends there with the reports as they stand, and a new thread steps the
chunks still to come::

    stepper = Stepper(stall_s=30.0)
    replies = stepper.submit(group, 100)     # one reply per worker, ready once the chunk is done
    stepper.wait(timeout_s=60.0)             # True once every chunk submitted is done
    replies[0].result(timeout_s=60.0)        # worker 0's report

A step that hangs and later returns may still finish what it was doing (a push of the old
worker's last gradient); nothing after it runs: the abandoned thread stops there. A step that
raises fails its chunk, and every chunk submitted after it, with its error: the run is failing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from gorila.errors import WorkerTimeoutError
from gorila.reply import Pending


class SteppedGroup(Protocol):
    """What the stepper needs of a local group (:class:`~gorila.runtime.local.LocalWorkers`)."""

    name: str
    workers: list[Any]

    def step_chunk(self, steps: int, before_step: Any, seconds: float | None) -> list[dict[str, Any]] | None: ...
    def rebuild(self, index: int, reason: str) -> None: ...
    def reports(self) -> list[dict[str, Any]]: ...


@dataclass
class _Chunk:
    """One group's chunk, submitted; done once its reports (or the error it raised) are in."""

    group: SteppedGroup
    steps: int
    seconds: float | None  # the chunk's time bound (see WorkerGroup.run_steps), or None
    done: threading.Event = field(default_factory=threading.Event)
    reports: list[dict[str, Any]] | None = None
    error: BaseException | None = None

    def finish(self, reports: list[dict[str, Any]] | None, error: BaseException | None) -> None:
        self.reports, self.error = reports, error
        self.done.set()


@dataclass(frozen=True)
class _Stepping:
    chunk: _Chunk
    index: int
    since: float


class Stepper:
    """Steps the local groups' chunks on its thread, in order (see the module doc)."""

    def __init__(self, stall_s: float | None = None):
        self.stall_s = stall_s
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # a chunk submitted, or the thread given up
        self._queue: deque[_Chunk] = deque()
        self._idle = threading.Event()
        self._idle.set()
        self._life = 0  # the running thread's number; an abandoned thread's is smaller
        self._running = False
        self._stepping: _Stepping | None = None
        self._failed: Exception | None = None  # what a step raised: the run fails, nothing more is stepped

    def submit(self, group: SteppedGroup, steps: int, seconds: float | None = None) -> list[Pending[dict[str, Any]]]:
        chunk = _Chunk(group, steps, seconds)
        with self._lock:
            if self._failed is not None:
                chunk.finish(None, self._failed)
                return [StepReply(self, chunk, k) for k in range(len(group.workers))]
            self._queue.append(chunk)
            self._idle.clear()
            if self._running:
                self._work.notify()
            else:
                self._start()
        return [StepReply(self, chunk, k) for k in range(len(group.workers))]

    def _start(self) -> None:
        """A new thread for the chunks submitted from now on (the lock is held); it lives until
        it is given up or :meth:`close`."""
        self._running = True
        threading.Thread(target=self._run, args=(self._life,), name=f"local-steps-{self._life}",
                         daemon=True).start()  # a daemon: one left stuck in a hung env never holds up the exit

    def _run(self, life: int) -> None:
        torch = sys.modules.get("torch")
        if torch is not None:  # a new thread starts with the default thread count: one core, as the runtime's
            torch.set_num_threads(1)
        while True:
            with self._work:
                while life == self._life and not self._queue:
                    self._idle.set()
                    self._work.wait()
                if life != self._life:
                    return
                chunk = self._queue[0]
            reports, error = None, None
            try:
                reports = chunk.group.step_chunk(chunk.steps, lambda k: self._before_step(life, chunk, k),
                                                 chunk.seconds)
            except Exception as err:  # raised on the driver's thread, by the reply
                error = err
            with self._lock:
                if life != self._life:  # given up while it stepped: the driver has ended this chunk
                    return
                self._stepping = None
                self._queue.popleft()
                chunk.finish(reports, error)
                if error is not None:  # the run fails: nothing more is stepped
                    self._failed = error
                    while self._queue:
                        self._queue.popleft().finish(None, error)

    def _before_step(self, life: int, chunk: _Chunk, index: int) -> bool:
        """Note which worker steps now; False once this thread was given up (it stops there)."""
        with self._lock:
            if life != self._life:
                return False
            self._stepping = _Stepping(chunk, index, time.perf_counter())
            return True

    def idle(self) -> bool:
        """Whether every chunk submitted is done (none is stepping)."""
        return self._idle.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for every chunk submitted, giving up a step that outlasts
        ``stall_s`` (see the module doc); whether all are done."""
        deadline = time.perf_counter() + timeout_s
        while True:
            left = deadline - time.perf_counter()
            poll = left if self.stall_s is None else min(left, self.stall_s / 4)
            if self._idle.wait(max(poll, 0.0)):
                return True
            if self.stall_s is not None:
                self._give_up_stalled(self.stall_s)
            if time.perf_counter() >= deadline:
                return self._idle.is_set()

    def _give_up_stalled(self, stall_s: float) -> None:
        with self._lock:
            stepping = self._stepping
            if stepping is None or time.perf_counter() - stepping.since < stall_s:
                return
            self._life += 1
            self._stepping = None
            self._queue.popleft()  # the stalled chunk is the first
        chunk, k = stepping.chunk, stepping.index
        chunk.group.rebuild(k, f"{chunk.group.name} {k} made no progress for {stall_s:g} s: rebuilt it")
        chunk.finish(chunk.group.reports(), None)
        with self._lock:
            self._start()
            if not self._queue:
                self._idle.set()

    def close(self) -> None:
        """End the thread (one stuck in a hung step ends once the step returns)."""
        with self._work:
            self._life += 1
            self._running = False
            self._work.notify_all()


class StepReply:
    """Worker ``index``'s report of a submitted chunk: a :class:`~gorila.reply.Pending`."""

    def __init__(self, stepper: Stepper, chunk: _Chunk, index: int):
        self.stepper, self.chunk, self.index = stepper, chunk, index

    def ready(self) -> bool:
        """Done, and so is every chunk submitted: the driver goes on only while nothing steps."""
        return self.chunk.done.is_set() and self.stepper.idle()

    def result(self, timeout_s: float) -> dict[str, Any]:
        if not self.chunk.done.is_set():
            self.stepper.wait(timeout_s)  # the watchdog runs while the driver waits
        if not self.chunk.done.is_set():
            raise WorkerTimeoutError(f"{self.chunk.group.name} {self.index} did not finish its chunk within "
                                     f"{timeout_s:g} s")
        if self.chunk.error is not None:
            raise self.chunk.error
        assert self.chunk.reports is not None
        return self.chunk.reports[self.index]
