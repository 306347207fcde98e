"""A learner worker fed by a global replay's shards (Gorila's global-replay mode, Ape-X's learner)."""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

import numpy as np

from gorila.core import Learner, ReplayClient
from gorila.errors import WorkerTimeoutError
from gorila.params import ParameterServer
from gorila.reply import Pending
from gorila.types import Batch

#: How long a learner waits for one replay shard's sample reply before it asks another shard too.
#: A live shard answers in milliseconds; a killed one takes seconds to be restarted.
SHARD_PATIENCE_S = 1.0


class ReplayLearner:
    """A worker: each ``step()`` is one gradient on a minibatch from the replay shards, pushed to the
    parameter server::

        factory = functools.partial(ReplayLearner, learner=functools.partial(QLearner, network_fn, ...),
                                    replay=[RemoteReplay(e) for e in endpoints], batch_size=64,
                                    learning_starts=1000, prefetch=4, prioritized=True)
        worker = factory(worker_id, server); worker.step(); worker.report()

    Each sample request asks a shard (the shards in turn) for ``prefetch`` minibatches at once, and
    the next request is in flight while they are used, so a minibatch is usually there before it
    is needed and a replay call serves several updates; the time the learner still spends waiting
    is reported as ``wait_fraction`` of its time. A shard that does not answer within
    ``SHARD_PATIENCE_S`` (killed and being restarted) is passed over while the others answer
    (``shards_passed_over`` counts the replies used ahead of it). With ``prioritized`` each
    minibatch is importance-weighted and its rows' new priorities (``|TD error|``) go back to their
    shard once the request's minibatches are used, in one call, without waiting for the reply. A
    shard whose rate limiter holds sampling back answers None: the request is sent again and the
    step says it is blocked (the runtime backs off); refused for longer than the server's timeout,
    it is a :class:`WorkerTimeoutError`. Until every shard holds its share of ``learning_starts``
    rows a step only asks the shards whether to start; they give every learner the same answer for
    the same step, so learners under a synchronous rule start in the same round (a learner restarted
    after a crash is let in at once). A learner on a GPU that copies ahead (``stages_ahead``) is
    handed the request's next minibatch before this one's gradient. ``policy_lag`` counts sampled
    rows by how many versions the server had moved on since the actor acted, in bins of powers of
    two (see :func:`lag_bins`).
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, learner: Callable[[], Learner],
                 replay: list[ReplayClient], batch_size: int, learning_starts: int, prefetch: int = 1,
                 prioritized: bool = False):
        self.learner = learner()
        self.worker_id = worker_id
        self.client = server.client(worker_id)
        self.replay, self.batch_size, self.timeout_s = replay, batch_size, server.timeout_s
        self.prefetch, self.prioritized = prefetch, prioritized
        self.min_shard_size = math.ceil(max(learning_starts, batch_size) / len(replay))
        self.next_shard = worker_id % len(replay)  # learners start on different shards
        self.requests: dict[int, Pending[Batch | None]] = {}  # by shard, in the order sent
        self.slow: set[int] = set()  # shards passed over: no answer within SHARD_PATIENCE_S
        self.shards_passed_over = 0  # replies used while an older request to another shard was unanswered
        self.minibatches: collections.deque[Batch] = collections.deque()  # of the request in use
        self.shard_in_use = 0
        self.priorities: list[tuple[np.ndarray, np.ndarray]] = []  # (keys, |TD|) not sent yet
        self.priority_updates: list[Pending[None]] = []
        self.started = False
        self.refused_since: float | None = None
        self.steps = self.pushes = 0
        self.wait_s = self.time_s = 0.0
        self.policy_lag: collections.Counter = collections.Counter()  # rows by lag_bins
        self.lag_sum = 0
        self.last_info: dict[str, float] = {}

    def step(self) -> bool:
        """One gradient; False when no minibatch was let through (the rate limiters hold sampling back)."""
        step, self.steps = self.steps, self.steps + 1
        if not self.started:
            self.started = self._replay_ready(step)
            if not self.started:
                return True
        began = time.perf_counter()
        shard, batch = self._next_batch()
        got = time.perf_counter()
        self.wait_s += got - began
        if batch is None:
            return False
        if self.minibatches and getattr(self.learner, "stages_ahead", False):
            # on its way to the GPU while this one trains
            cast(StagingLearner, self.learner).stage(self.minibatches[0])
        params, version = self.client.params(), self.client.version
        grad, info = self.learner.gradient(params, version, batch)
        self.last_info = {k: v for k, v in info.items() if isinstance(v, float)}
        if grad is not None:
            self.client.push(grad, wait=self.client.blocks)
            self.pushes += 1
        if self.prioritized:
            self.priorities.append((batch.indices, info["td_abs"]))
        lag = np.maximum(version - batch.policy_version, 0)
        self.lag_sum += int(lag.sum())
        self.policy_lag.update(lag_bins(lag).tolist())
        self.time_s += time.perf_counter() - began
        return True

    def _next_batch(self) -> tuple[int, Batch | None]:
        """The next minibatch, or None where its shard held the request back (asked again)."""
        if not self.minibatches:
            self._send_priorities()
            shard, rows = self._first_reply()
            self._ask(2)  # the next request is in flight while these minibatches are used
            now = time.monotonic()
            if rows is None:
                self.refused_since = self.refused_since or now
                if now - self.refused_since > self.timeout_s:
                    raise WorkerTimeoutError(f"the replay shards held sampling back for {self.timeout_s:.0f} s: no "
                                             "actor adds rows (their rate limiters wait for inserts)")
                return shard, None
            self.refused_since = None
            # A reply from another process may hold read-only arrays, which torch refuses to wrap.
            rows = Batch(*(np.require(x, requirements="W") for x in rows))
            self.shard_in_use = shard
            self.minibatches.extend(Batch(*(x[k::self.prefetch] for x in rows)) for k in range(self.prefetch))
        return self.shard_in_use, self.minibatches.popleft()

    def _ask(self, shards: int) -> None:
        """Keep sample requests in flight to ``shards`` shards (one each at most), the next in turn."""
        want = min(shards, len(self.replay))
        for _ in range(len(self.replay)):
            if len(self.requests) >= want:
                return
            shard, self.next_shard = self.next_shard, (self.next_shard + 1) % len(self.replay)
            if shard not in self.requests:
                self.requests[shard] = self.replay[shard].sample(self.batch_size * self.prefetch)

    def _first_reply(self) -> tuple[int, Batch | None]:
        """The first reply to come of the requests in flight, in the order they were sent.

        A shard that has not answered within ``SHARD_PATIENCE_S`` (its process died and is being
        restarted, or it stalls) is passed over: one more shard is asked, and whichever answers
        first is used, so the learner keeps drawing from the shards that answer. The slow shard's
        request stays in flight and is used once it answers. Only when no shard answers for the
        server's timeout is it a :class:`WorkerTimeoutError`.
        """
        self._ask(2)
        deadline = time.monotonic() + self.timeout_s
        while True:
            # The oldest answered request; else wait on the oldest of a shard not passed over yet
            # (all were: the oldest).
            shard = next((s for s, pending in self.requests.items() if pending.ready()), None)
            if shard is None:
                shard = next((s for s in self.requests if s not in self.slow), next(iter(self.requests)))
            patience = max(0.0, min(SHARD_PATIENCE_S, deadline - time.monotonic()))
            try:
                rows = self.requests[shard].result(patience)
            except WorkerTimeoutError:
                if time.monotonic() >= deadline:
                    raise WorkerTimeoutError(f"no replay shard answered a sample request within "
                                             f"{self.timeout_s:.0f} s") from None
                self.slow.add(shard)
                self._ask(len(self.requests) + 1)
                continue
            if shard != next(iter(self.requests)):
                self.shards_passed_over += 1  # an older request to another shard is still unanswered
            del self.requests[shard]
            self.slow.discard(shard)
            return shard, rows

    def _send_priorities(self) -> None:
        """The new priorities of the minibatches used so far, in one call to their shard."""
        if self.priorities:
            keys, values = (np.concatenate(part) for part in zip(*self.priorities))
            self.priorities = []
            self._collect_priority_updates()
            self.priority_updates.append(self.replay[self.shard_in_use].update_priorities(keys, values))

    def _collect_priority_updates(self) -> None:
        """Check the replies of earlier priority updates (an error there is raised here)."""
        done = [p for p in self.priority_updates if p.ready()]
        for pending in done:
            pending.result(self.timeout_s)
        self.priority_updates = [p for p in self.priority_updates if p not in done]

    def _replay_ready(self, step: int) -> bool:
        pending = [shard.ready(self.worker_id, step, self.min_shard_size) for shard in self.replay]
        return all([p.result(self.timeout_s) for p in pending])

    def report(self) -> dict[str, Any]:
        lag = self.lag_sum / max(sum(self.policy_lag.values()), 1)
        return {"updates_pushed": self.pushes, "pushes_rejected_outlier": self.learner.skipped_outliers,
                "loss": self.last_info.get("loss"), "q_mean": self.last_info.get("q_mean"),
                "version": self.client.version, "learning": self.started,
                "learner_wait_s": self.wait_s, "learner_time_s": self.time_s,
                "wait_fraction": self.wait_s / self.time_s if self.time_s else None, "policy_lag_mean": lag,
                "policy_lag": dict(self.policy_lag),
                "shards_passed_over": self.shards_passed_over, **device_copy_report(self.learner),
                **self.client.counters()}


class StagingLearner(Learner, Protocol):
    """A learner that copies minibatches to its device ahead (``stages_ahead``, see
    :class:`~gorila.learners.device_copy.DeviceCopy`); whoever feeds it hands it the next one early::

        if getattr(learner, "stages_ahead", False):
            cast(StagingLearner, learner).stage(next_batch)    # its copy overlaps this gradient
    """

    stages_ahead: bool

    def stage(self, batch: Batch) -> None: ...


def device_copy_report(learner: Learner) -> dict[str, int]:
    """A GPU learner's counts of minibatches copied ahead and when used (nothing for others)."""
    copy = getattr(learner, "device_copy", None)
    return copy.report() if copy is not None and copy.ahead else {}


def lag_bins(lag: np.ndarray) -> np.ndarray:
    """Each lag's bin: 0, 1, 2, 4, 8, ... (bin ``b`` holds lags ``b .. 2b - 1``)."""
    lag = np.asarray(lag, np.int64)
    bins = np.zeros_like(lag)
    positive = lag > 0
    bins[positive] = 1 << np.floor(np.log2(lag[positive])).astype(np.int64)
    return bins
