"""The local runtime ends what it started: shutdown closes the workers that can be closed."""

import numpy as np
import pytest

from gorila.core import Worker
from gorila.params import ServerSpec, UpdateRule
from gorila.runtime import LocalRuntime


class _Closable:
    def __init__(self, worker_id, server):
        self.closed = False

    def step(self) -> None:
        """Nothing to do."""

    def report(self) -> dict:
        return {}

    def close(self) -> None:
        self.closed = True


class _Bare:
    """A worker without ``close``."""

    def step(self) -> None:
        """Nothing to do."""

    def report(self) -> dict:
        return {}


def test_shutdown_closes_the_workers_that_have_close():
    runtime = LocalRuntime()
    shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), np.zeros(3, np.float32))
    closable = runtime.start_workers(_Closable, 2, shards.server, name="bundle")
    runtime.start_workers(lambda k, server: _Bare(), 1, shards.server, name="bare")  # nothing to close
    runtime.shutdown()
    assert [w.closed for w in closable.workers if isinstance(w, _Closable)] == [True, True]


class AlwaysBlocked:
    """A worker whose every step waits on another group (a rate limiter holding it back)."""

    def __init__(self):
        self.steps = 0

    def step(self):
        self.steps += 1
        return False

    def report(self):
        return {"steps": self.steps}


@pytest.mark.timeout(10)
def test_a_chunk_ends_as_soon_as_every_worker_is_blocked():
    from gorila.runtime.local import LocalWorkers

    workers: list[Worker] = [AlwaysBlocked(), AlwaysBlocked()]
    assert LocalWorkers(workers).run_steps(10**9) == [{"steps": 1}, {"steps": 1}]


class _Timed:
    """A worker whose steps move a shared fake clock on by ``step_s``."""

    def __init__(self, clock, step_s):
        self.clock, self.step_s, self.steps = clock, step_s, 0

    def step(self):
        self.clock[0] += self.step_s
        self.steps += 1

    def report(self):
        return {"steps": self.steps}


def test_a_chunk_given_seconds_ends_once_they_have_passed_and_says_after_how_many_steps(monkeypatch):
    from gorila.runtime.local import LocalWorkers

    clock = [0.0]
    monkeypatch.setattr("gorila.runtime.local.time.perf_counter", lambda: clock[0])
    workers: list[Worker] = [_Timed(clock, 0.25), _Timed(clock, 0.25)]  # a round: 0.5 s
    reports = LocalWorkers(workers).run_steps(10**9, seconds=2.0)
    assert reports == [{"steps": 4, "chunk_cut_after": 4}, {"steps": 4, "chunk_cut_after": 4}]
    assert LocalWorkers(workers).run_steps(3, seconds=2.0) == [{"steps": 7}, {"steps": 7}]  # within its seconds


class Logged:
    """A worker that notes each of its steps in a shared log; ``hang_at`` (its step number) waits on
    ``release`` first, as a hung environment would until the test lets it go."""

    def __init__(self, name, log, hang_at=None, release=None):
        self.name, self.log, self.hang_at, self.release, self.steps = name, log, hang_at, release, 0

    def step(self):
        self.steps += 1
        if self.steps == self.hang_at:
            self.release.wait()
        self.log.append(self.name)

    def report(self):
        return {"steps": self.steps}


def _group(name, workers, stepper, factory=None):
    from gorila.runtime.local import LocalWorkers

    return LocalWorkers(workers, name=name, factory=factory, stepper=stepper)


@pytest.mark.timeout(10)
def test_chunks_are_stepped_one_after_another_in_the_order_they_were_started():
    from gorila.runtime.local_steps import Stepper

    log: list[str] = []
    stepper = Stepper()
    a = _group("a", [Logged("a0", log), Logged("a1", log)], stepper)
    b = _group("b", [Logged("b0", log)], stepper)
    replies = a.start_steps(2) + b.start_steps(3)
    assert stepper.wait(5.0)
    assert log == ["a0", "a1", "a0", "a1", "b0", "b0", "b0"]  # rounds within a group, groups in turn
    assert [r.result(0.0) for r in replies] == [{"steps": 2}, {"steps": 2}, {"steps": 3}]


@pytest.mark.timeout(10)
def test_a_step_that_outlasts_the_stall_limit_is_given_up_and_its_worker_rebuilt():
    import threading

    from gorila.runtime.local_steps import Stepper

    log: list[str] = []
    release, stepper = threading.Event(), Stepper(stall_s=0.2)
    hung = Logged("a1", log, hang_at=2, release=release)
    a = _group("actor", [Logged("a0", log), hung], stepper, factory=lambda k: Logged(f"new{k}", log))
    b = _group("learner", [Logged("b0", log)], stepper)
    replies = a.start_steps(5) + b.start_steps(2)
    try:
        assert stepper.wait(5.0)  # the hung step was given up: everything submitted is done
        first, rebuilt, learner = (r.result(0.0) for r in replies)
        assert first == {"steps": 2}  # the chunk ended at the stall
        assert rebuilt["steps"] == 0 and rebuilt["restarted"] is True and rebuilt["pid"].endswith(".1")
        assert rebuilt["restart_reason"] == "actor 1 made no progress for 0.2 s: rebuilt it"
        assert learner == {"steps": 2} and log[-2:] == ["b0", "b0"]  # the chunk queued behind it still ran
        assert a.workers[1] is not hung and "restart_reason" not in a.reports()[1]  # told once
    finally:
        release.set()
    assert log.count("a1") <= 2  # the abandoned thread stops once the step returns: nothing after it


@pytest.mark.timeout(10)
def test_without_a_stall_limit_a_hung_step_times_the_wait_out_and_the_reply_says_so():
    import threading

    from gorila.errors import WorkerTimeoutError
    from gorila.runtime.local_steps import Stepper

    release, stepper = threading.Event(), Stepper()
    reply = _group("actor", [Logged("a0", [], hang_at=1, release=release)], stepper).start_steps(3)[0]
    try:
        assert not stepper.wait(0.2) and not reply.ready()
        with pytest.raises(WorkerTimeoutError, match="actor 0 did not finish its chunk within 0.1 s"):
            reply.result(0.1)
    finally:
        release.set()
    assert reply.result(5.0) == {"steps": 3}  # once the env comes back, the chunk completes


class Raises:
    def step(self):
        raise RuntimeError("emulator lost")

    def report(self):
        return {}


@pytest.mark.timeout(10)
def test_an_error_in_a_step_reaches_the_reply_and_nothing_submitted_after_it_is_stepped():
    from gorila.runtime.local_steps import Stepper

    log: list[str] = []
    stepper = Stepper()
    failing = _group("actor", [Raises()], stepper).start_steps(1)[0]
    behind = _group("learner", [Logged("b0", log)], stepper).start_steps(1)[0]
    assert stepper.wait(5.0)
    for reply in (failing, behind):
        with pytest.raises(RuntimeError, match="emulator lost"):
            reply.result(0.0)
    assert log == []
