"""The driver's parts on their own: the chunks' sizes and the restart of stalled workers
(``driver/chunks.py``), the services' stats as the rows read them (``driver/report.py``), and the
typed ``stats()`` / ``save()`` of a local service group."""

import numpy as np
import pytest

from gorila.core import WorkerGroup
from gorila.driver.chunks import Chunks, Patience
from gorila.driver.plan import Budget, Plan
from gorila.driver.progress import Progress
from gorila.driver.service_watch import ServiceWatch
from gorila.errors import WorkerTimeoutError
from gorila.params import ServerSpec, UpdateRule
from gorila.reply import Done
from gorila.runtime import LocalRuntime
from role_fakes import EvaluationStandIn, GroupStandIn, ReplyStandIn, ServicesStandIn


def _plan(budget: int, chunk: int, chunk_seconds: float | None = None, rule: UpdateRule | None = None) -> Plan:
    return Plan(algo="test", label="fake", initial_params=lambda: np.zeros(1, np.float32),
                spec=ServerSpec(rule=rule or UpdateRule.asynchronous()), groups=lambda services: [],
                evaluation=EvaluationStandIn(), budget=Budget(budget, "env_steps"), processes=1,
                chunk_steps=lambda updates: chunk, chunk_seconds=chunk_seconds)


class _Stepper:
    """A worker whose every step is one env step."""

    def __init__(self, worker_id, server):
        self.env_steps = 0

    def step(self) -> None:
        self.env_steps += 1

    def report(self) -> dict:
        return {"env_steps": self.env_steps}


def test_a_chunk_never_asks_for_more_than_the_budget_has_left():
    runtime = LocalRuntime()
    shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), np.zeros(1, np.float32))
    groups: dict[str, WorkerGroup] = {"actor": runtime.start_workers(_Stepper, 2, shards.server, name="actor")}
    progress = Progress.resumed("env_steps", {})
    chunks = Chunks(groups, runtime, _plan(budget=120, chunk=50), progress, Patience(call_s=10.0), print)
    for used in (2, 4):  # the first chunks are a step each, which measure the group's pace
        chunks.start_idle()
        assert chunks.collect() == {"actor"} and progress.used() == used
    chunks.start_idle()
    assert chunks.collect() == {"actor"} and progress.used() == 104
    chunks.start_idle()  # 16 env steps left, two workers: 8 steps each, not the plan's 50
    assert chunks.pace["actor"].asked == 8
    chunks.drain()
    assert progress.used() == 120


class _Clock:
    """A clock that only the steps of :class:`_SlowStepper` move."""

    now = 0.0

    def __call__(self) -> float:
        return self.now


class _SlowStepper(_Stepper):
    """A worker whose every step takes ``STEP_S`` on :class:`_Clock`, as a slow env's do."""

    STEP_S = 0.5
    clock = _Clock()

    def step(self) -> None:
        _SlowStepper.clock.now += self.STEP_S
        super().step()


def test_chunks_are_sized_by_time_so_a_slow_env_is_never_asked_for_the_plans_100_steps(monkeypatch):
    """Issue 44, item 5: a chunk of the plan's 100 steps of a 0.2 s env took 20 s per worker, so
    that no row, no stop and no timeout could come in between."""
    import gorila.driver.chunks as chunks_module

    monkeypatch.setattr("gorila.driver.chunks.time.perf_counter", _SlowStepper.clock)
    runtime = LocalRuntime()
    shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), np.zeros(1, np.float32))
    groups: dict[str, WorkerGroup] = {"actor": runtime.start_workers(_SlowStepper, 1, shards.server, name="actor")}
    progress = Progress.resumed("env_steps", {})
    chunks = Chunks(groups, runtime, _plan(budget=10_000, chunk=100), progress, Patience(call_s=10.0), print)
    asked = []
    for _ in range(4):
        chunks.start_idle()
        asked.append(chunks.pace["actor"].asked)
        assert chunks.collect() == {"actor"}
    assert asked == [1, 1] + 2 * [int(chunks_module.LONGEST_CHUNK_S / _SlowStepper.STEP_S)]


class _WarmingStepper(_Stepper):
    """A worker whose first ``FREE`` steps take no time on :class:`_Clock` and every later one
    ``STEP_S``: a learner's warm-up, then its updates."""

    FREE, STEP_S = 400, 0.5
    clock = _Clock()

    def step(self) -> None:
        if self.env_steps >= self.FREE:
            _WarmingStepper.clock.now += self.STEP_S
        super().step()


def _warming_chunks(monkeypatch, rule: UpdateRule) -> tuple[Chunks, list[float]]:
    """Chunks of one :class:`_WarmingStepper` sized by time (0.5 s a chunk), until it has taken 700
    steps; the seconds each chunk took on the clock."""
    monkeypatch.setattr("gorila.driver.chunks.time.perf_counter", _WarmingStepper.clock)
    _WarmingStepper.clock.now = 0.0
    runtime = LocalRuntime()
    shards = runtime.start_shards(ServerSpec(rule=rule), np.zeros(1, np.float32))
    groups: dict[str, WorkerGroup] = {"learner": runtime.start_workers(_WarmingStepper, 1, shards.server,
                                                                       name="learner")}
    progress = Progress.resumed("env_steps", {})
    chunks = Chunks(groups, runtime, _plan(budget=10**9, chunk=10, chunk_seconds=0.5, rule=rule), progress,
                    Patience(call_s=10.0), print)
    took = []
    while progress.used() < 700:
        began = _WarmingStepper.clock.now
        chunks.start_idle()
        assert chunks.collect() == {"learner"}
        took.append(_WarmingStepper.clock.now - began)
    return chunks, took


def test_a_chunk_grown_on_free_steps_ends_by_time_once_they_cost_and_the_next_is_sized_from_it(monkeypatch):
    """Ape-X's learner on Atari: its steps cost nothing while its replay filled, its chunks grew to
    13,144 steps, and its first chunk of updates outlasted the run's time limit (WorkerTimeoutError)."""
    import gorila.driver.chunks as chunks_module

    chunks, took = _warming_chunks(monkeypatch, UpdateRule.asynchronous())
    step_s = _WarmingStepper.STEP_S
    assert max(took) <= chunks_module.LONGEST_CHUNK_S + step_s
    # The chunk after a cut one is sized from the steps the cut one took, not from those it was
    # asked for: only the chunk that held the last free steps and the one after it reach the bound.
    assert sum(t >= chunks_module.LONGEST_CHUNK_S for t in took) <= 2


def test_a_chunk_under_a_barrier_is_never_ended_by_time(monkeypatch):
    """Workers that meet at every step wait for each other's next push: one that ended its chunk
    early would leave the others waiting for a step it no longer takes."""
    import gorila.driver.chunks as chunks_module

    chunks, took = _warming_chunks(monkeypatch, UpdateRule.synchronous(num_workers=1))
    assert chunks.time_bound_s is None and max(took) > chunks_module.LONGEST_CHUNK_S


class _Hung:
    def ready(self) -> bool:
        return False

    def result(self, timeout_s: float):
        raise AssertionError("a hung chunk has no result")


class _HungGroup(GroupStandIn):
    """Two workers whose chunks never finish; kills are recorded."""

    def __init__(self):
        self.killed: list[int] = []

    def start_steps(self, steps, seconds=None):
        return [_Hung(), _Hung()]

    def kill(self, index):
        self.killed.append(index)


class _NothingReady(LocalRuntime):
    def wait(self, pending, timeout_s):
        return []


def test_the_workers_of_a_stalled_chunk_are_restarted_once_each():
    group = _HungGroup()
    messages: list[str] = []
    chunks = Chunks({"actor": group}, _NothingReady(), _plan(budget=100, chunk=5), Progress.resumed("env_steps", {}),
                    Patience(call_s=0.2, stall_s=0.0), messages.append)
    chunks.start_idle()
    with pytest.raises(WorkerTimeoutError, match="no worker group \\(actor\\) finished its chunk"):
        chunks.collect()
    assert group.killed == [0, 1]
    assert messages == ["actor 0 made no progress for 0 s: restarting it",
                        "actor 1 made no progress for 0 s: restarting it"]


class _Reply(ReplyStandIn):
    """A reply that is in once ``ready_after`` checks have seen it not in."""

    def __init__(self, ready_after: int):
        self.checks, self.ready_after = 0, ready_after

    def ready(self) -> bool:
        self.checks += 1
        return self.checks > self.ready_after


def test_the_wait_for_a_chunk_ends_when_an_awaited_reply_comes_in_and_counts_no_chunk():
    """An evaluation in its own process is judged when it comes in, not when the chunk under way ends."""
    evaluation = _Reply(ready_after=2)
    chunks = Chunks({"actor": _HungGroup()}, _NothingReady(), _plan(budget=100, chunk=5),
                    Progress.resumed("env_steps", {}), Patience(call_s=5.0), print)
    chunks.start_idle()
    assert chunks.collect(wake=[evaluation]) == set()
    assert evaluation.checks == 3 and "actor" in chunks.running  # the chunk is still under way
    alone = Chunks({"actor": _HungGroup()}, _NothingReady(), _plan(budget=100, chunk=5),
                   Progress.resumed("env_steps", {}), Patience(call_s=0.2), print)
    alone.start_idle()
    with pytest.raises(WorkerTimeoutError):  # without a reply to wake for, the wait is for the chunk
        alone.collect()


class _Down:
    """The reply of a service being restarted."""

    def result(self, timeout_s: float):
        raise WorkerTimeoutError("replay 0.stats did not answer")


class _Services(ServicesStandIn):
    """A service group whose replies are set by the test."""

    def __init__(self):
        self.replies: list = []

    def stats(self):
        return self.replies


def test_a_restarted_service_is_noted_with_the_rows_it_lost():
    services = _Services()
    messages: list[str] = []
    watch = ServiceWatch({"replay": services}, messages.append)
    services.replies = [Done({"pid": 1, "size": 100})]
    assert watch.read() == {"replay": [{"pid": 1, "size": 100}]}
    services.replies = [Done({"pid": 2, "size": 30, "restored": True, "restored_size": 30})]
    watch.read()
    assert (watch.restarts, watch.items_lost) == (1, 70)
    assert messages == ["replay 0 was restarted and came back from its last checkpoint: 70 rows lost"]


def test_a_service_that_does_not_answer_keeps_its_last_stats_and_holds_nothing_up():
    services = _Services()
    messages: list[str] = []
    watch = ServiceWatch({"replay": services}, messages.append)
    services.replies = [Done({"pid": 1, "size": 100}), Done({"pid": 5, "size": 7})]
    watch.read()
    services.replies = [_Down(), Done({"pid": 5, "size": 9})]
    assert watch.read() == {"replay": [{"pid": 1, "size": 100}, {"pid": 5, "size": 9}]}
    assert watch.restarts == 0 and messages == []


class _Saving:
    def __init__(self, service_id):
        self.service_id, self.saved = service_id, 0

    def stats(self) -> dict:
        return {"shard": self.service_id}

    def save(self) -> None:
        self.saved += 1


def test_local_services_answer_stats_and_save_every_service():
    runtime = LocalRuntime()
    group = runtime.start_services(_Saving, 3, name="replay")
    assert [reply.result(1.0) for reply in group.stats()] == [{"shard": 0}, {"shard": 1}, {"shard": 2}]
    group.save()
    assert [s.saved for s in group.services] == [1, 1, 1]
