"""A learner worker fed by a global replay's shards (Gorila's global-replay mode)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gorila.core import Pending
from gorila.learners.q_learner import QLearner
from gorila.params import ParameterServer
from gorila.replay import Batch, RemoteReplay


class ReplayLearner:
    """A worker: each ``step()`` is one gradient on a minibatch from the replay shards, pushed to the
    parameter server::

        factory = functools.partial(ReplayLearner, learner=functools.partial(QLearner, network_fn, ...),
                                    replay=[RemoteReplay(e) for e in endpoints], batch_size=64,
                                    learning_starts=1000)
        worker = factory(worker_id, server); worker.step(); worker.report()

    The next minibatch is requested (from the shards in turn) before the gradient of the current
    one is computed, so sampling overlaps computing. Until every shard holds its share of
    ``learning_starts`` a step only asks the shards whether to start; they give every learner the
    same answer for the same step, so learners under a synchronous rule start in the same round.
    Under asynchronous rules a push's reply is collected at the next push, so it travels while the
    next gradient is computed.
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, learner: Callable[[], QLearner],
                 replay: list[RemoteReplay], batch_size: int, learning_starts: int):
        self.learner = learner()
        self.client = server.client(worker_id)
        self.replay, self.batch_size, self.timeout_s = replay, batch_size, server.timeout_s
        self.min_shard_size = math.ceil(max(learning_starts, batch_size) / len(replay))
        self.next_shard = worker_id % len(replay)  # learners start on different shards
        self.prefetched: Pending[Batch] | None = None
        self.steps = 0
        self.pushes = 0
        self.last_info: dict[str, float] = {}

    def step(self) -> None:
        step, self.steps = self.steps, self.steps + 1
        if self.prefetched is None:
            if not self._replay_ready(step):
                return
            self.prefetched = self._request()
        # A reply from another process may hold read-only arrays, which torch refuses to wrap.
        batch = Batch(*(np.require(x, requirements="W") for x in self.prefetched.result(self.timeout_s)))
        self.prefetched = self._request()
        grad, self.last_info = self.learner.gradient(self.client.params(), self.client.version, batch)
        if grad is not None:
            self.client.push(grad, wait=self.client.barrier)
            self.pushes += 1

    def _replay_ready(self, step: int) -> bool:
        pending = [shard.ready(step, self.min_shard_size) for shard in self.replay]
        return all([p.result(self.timeout_s) for p in pending])

    def _request(self) -> Pending[Batch]:
        shard = self.replay[self.next_shard]
        self.next_shard = (self.next_shard + 1) % len(self.replay)
        return shard.sample(self.batch_size)

    def report(self) -> dict[str, Any]:
        return {"updates_pushed": self.pushes, "pushes_rejected_outlier": self.learner.skipped_outliers,
                "loss": self.last_info.get("loss"), "version": self.client.version,
                "learning": self.prefetched is not None}
