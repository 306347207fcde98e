"""Gorila's bundled mode: one actor, its own replay and one learner in one worker."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from gorila.core import ActorSpec, Learner
from gorila.learners.replay_learner import StagingLearner, device_copy_report, lag_bins
from gorila.params import ParameterServer
from gorila.replay import check_replay_memory, make_storage
from gorila.replay.prefetch import Prefetcher
from gorila.types import Batch


class Bundle:
    """A worker: each ``step()`` is ``train_every`` actor steps (:meth:`act`) and then one learner
    push (:meth:`learn`) once ``learning_starts`` transitions were collected::

        factory = functools.partial(Bundle, actor=QActorSpec(...), learner=functools.partial(QLearner, ...),
                                    replay_capacity=50_000, batch_size=64, learning_starts=1000,
                                    train_every=1, actor_refresh=10)
        bundle = factory(worker_id, server); bundle.step(); bundle.report()

    Bundles talk to each other only through the parameter server. The actor reloads the parameters
    every ``actor_refresh`` steps (an actor of ``--inference central`` asks the run's inference
    server instead, which refreshes its own); the learner's next minibatch is sampled on a background thread
    while the current gradient is computed (unless ``prefetch`` is False: the local runtime
    samples in turn, so that which rows a minibatch can hold never depends on a thread's timing,
    and a run of a seed is reproduced exactly, resumed or not). A learner on a GPU that copies
    minibatches ahead (``stages_ahead``) is handed the next minibatch before this one's gradient,
    so its copy to the device overlaps this one's training. ``policy_lag`` counts the sampled rows by how many
    versions the server had moved on since their action was chosen (see
    :func:`~gorila.learners.replay_learner.lag_bins`).
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, actor: ActorSpec,
                 learner: Callable[[], Learner], replay_capacity: int, batch_size: int, learning_starts: int,
                 train_every: int, actor_refresh: int, prefetch: bool = True):
        self.actor = actor.build(worker_id)
        self.learner = learner()
        self.envs_per_actor = actor.envs.num_envs
        space = self.actor.observation_space
        assert space.shape is not None and space.dtype is not None  # as the spaces replay can store have
        check_replay_memory(replay_capacity, space.shape, space.dtype)
        self.replay = make_storage(replay_capacity, space.shape, space.dtype, num_streams=self.envs_per_actor)
        self.replay_lock = threading.Lock()  # actor adds and the prefetch thread samples
        self.rng = np.random.default_rng(actor.seed + 7 * worker_id)
        self.batch_size, self.train_every, self.actor_refresh = batch_size, train_every, actor_refresh
        self.prefetch: Prefetcher | None = None
        self.prefetches = prefetch
        self.client = server.client(worker_id)
        self.actor.load(self.client.params(), self.client.version)  # a (re)started bundle acts on fresh parameters
        self.actor_steps = 0
        # Twice the batch: even if every other step were a hidden reset step, a batch fits.
        self.learning_starts = max(learning_starts, 2 * batch_size)
        self.pushes = 0
        self.last_info: dict[str, float] = {}
        self.policy_lag: collections.Counter = collections.Counter()  # sampled rows by lag_bins
        self.lag_sum = 0
        self.next_batch: Batch | None = None  # sampled and on its way to the learner's device

    def sample_batch(self) -> Batch:
        with self.replay_lock:
            return self.replay.sample(self.batch_size, self.rng)

    def step(self) -> None:
        self.act(self.train_every)
        # Decided by step count, not replay size (hidden reset steps make sizes differ between
        # bundles): under the synchronous rule every bundle must push at the same steps, or a
        # barrier would wait for a push that only comes in the next driver chunk.
        if self.actor_steps * self.envs_per_actor >= self.learning_starts:
            self.learn()

    def act(self, steps: int) -> None:
        """``steps`` steps of every env into the replay, reloading parameters every ``actor_refresh``."""
        for _ in range(steps):
            if self.actor_steps % self.actor_refresh == 0:
                self.actor.load(self.client.params(), self.client.version)
            rows = self.actor.act()
            if rows is not None:
                with self.replay_lock:
                    self.replay.add(rows)
            self.actor_steps += 1

    def learn(self) -> None:
        """One gradient on a prefetched minibatch, pushed without waiting (asynchronous rules) or
        through the barrier (synchronous)."""
        batch, self.next_batch = self.next_batch or self._sampled(), None
        if getattr(self.learner, "stages_ahead", False):
            self.next_batch = self._sampled()
            cast(StagingLearner, self.learner).stage(self.next_batch)
        params, version = self.client.params(), self.client.version
        grad, self.last_info = self.learner.gradient(params, version, batch)
        lag = np.maximum(version - batch.policy_version, 0)
        self.lag_sum += int(lag.sum())
        self.policy_lag.update(lag_bins(lag).tolist())
        if grad is not None:
            # Under asynchronous rules the reply travels while the next actor steps run; a barrier
            # and the semi-async client wait for it.
            self.client.push(grad, wait=self.client.blocks)
            self.pushes += 1

    def _sampled(self) -> Batch:
        """A minibatch from the prefetch thread, or sampled now where the run samples in turn."""
        if not self.prefetches:
            return self.sample_batch()
        if self.prefetch is None:
            self.prefetch = Prefetcher(self.sample_batch, depth=2)
        return self.prefetch.next(timeout_s=60.0)

    def close(self) -> None:
        if self.prefetch is not None:
            self.prefetch.close()
        self.actor.close()

    def report(self) -> dict[str, Any]:
        return {**self.actor.tally.report(), "env_failures": self.actor.env_failures, "updates_pushed": self.pushes,
                "pushes_rejected_outlier": self.learner.skipped_outliers, "loss": self.last_info.get("loss"),
                "q_mean": self.last_info.get("q_mean"),
                "version": self.client.version, "epsilon": self.actor.epsilon, "policy_lag": dict(self.policy_lag),
                "policy_lag_mean": self.lag_sum / max(sum(self.policy_lag.values()), 1),
                **device_copy_report(self.learner), **self.client.counters()}
