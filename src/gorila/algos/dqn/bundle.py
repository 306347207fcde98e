"""Gorila's bundled mode: one Actor, its own replay and one Learner in one worker."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from gorila.algos.dqn.agent import QActor, QLearner
from gorila.algos.dqn.config import DQNConfig
from gorila.params import ParameterClient, ShardEndpoint, ShardLayout
from gorila.replay import check_replay_memory, make_storage
from gorila.replay.prefetch import Prefetcher


class Bundle:
    """A worker: each ``step()`` is ``train_every`` actor steps and then one learner push.

    ::

        bundle = Bundle(k, endpoints, env_id="CartPole-v1", cfg=DQNConfig(), seed=0,
                        network_fn=..., barrier=False, timeout_s=60)
        bundle.step(); bundle.report()

    Bundles talk to each other only through the parameter server. The learner's next minibatch
    is sampled on a background thread while the current gradient is computed.
    """

    def __init__(self, worker_id: int, endpoints: list[ShardEndpoint], *, env_id: str, cfg: DQNConfig,
                 seed: int, network_fn: Callable[[], nn.Module], barrier: bool, timeout_s: float,
                 device: str = "cpu"):
        torch.set_num_threads(1)
        self.worker_id, self.cfg = worker_id, cfg
        self.actor = QActor(env_id, cfg, seed + 1000 * worker_id, network_fn)
        self.learner = QLearner(network_fn, cfg, device)
        space = self.actor.runner.observation_space
        check_replay_memory(cfg.replay_capacity, space.shape, space.dtype)
        self.replay = make_storage(cfg.replay_capacity, space.shape, space.dtype, num_streams=cfg.envs_per_actor)
        self.replay_lock = threading.Lock()  # actor adds and the prefetch thread samples
        self.rng = np.random.default_rng(seed + 7 * worker_id)
        self.prefetch: Prefetcher | None = None
        self.client = ParameterClient(endpoints, ShardLayout(self.learner.flat.size, len(endpoints)),
                                      worker_id=worker_id, barrier=barrier, timeout_s=timeout_s)
        self.actor.load(self.client.params())  # a (re)started bundle acts on fresh parameters
        self.actor_steps = 0
        # Twice the batch: even if every other step were a hidden reset step, a batch fits.
        self.learning_starts = max(cfg.learning_starts, 2 * cfg.batch_size)
        self.pushes = 0
        self.last_info: dict[str, float] = {}

    def _sample(self):
        with self.replay_lock:
            return self.replay.sample(self.cfg.batch_size, self.rng)

    def step(self) -> None:
        for _ in range(self.cfg.train_every):
            if self.actor_steps % self.cfg.actor_refresh == 0:
                self.actor.load(self.client.params())
            t = self.actor.act(self.cfg.epsilon(self.worker_id, self.client.version))
            with self.replay_lock:
                self.replay.add_batch(t.obs, t.action, t.reward, t.next_obs, t.terminated, streams=t.env_index)
            self.actor_steps += 1
        # Decided by step count, not replay size (hidden reset steps make sizes differ between
        # bundles): under the synchronous rule every bundle must push at the same steps, or a
        # barrier would wait for a push that only comes in the next driver chunk.
        if self.actor_steps * self.cfg.envs_per_actor < self.learning_starts:
            return
        if self.prefetch is None:
            self.prefetch = Prefetcher(self._sample, depth=2)
        batch = self.prefetch.next(timeout_s=60.0)
        params = self.client.params()
        grad, self.last_info = self.learner.gradient(params, self.client.version, batch)
        if grad is not None:
            # Under asynchronous rules the reply travels while the next actor steps run.
            self.client.push(grad, wait=self.client.barrier)
            self.pushes += 1

    def report(self) -> dict[str, Any]:
        return {"env_steps": self.actor.env_steps, "episodes": self.actor.episodes,
                "recent_returns": list(self.actor.recent_returns), "updates_pushed": self.pushes,
                "pushes_rejected_outlier": self.learner.skipped_outliers, "loss": self.last_info.get("loss"),
                "version": self.client.version,
                "epsilon": self.cfg.epsilon(self.worker_id, max(self.client.version, 0))}
