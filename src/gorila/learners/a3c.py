"""One A3C worker: pull the parameters, run a short rollout of its own environments, push the gradient."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from gorila.envs.spec import EnvSpec
from gorila.losses.a3c import A3CLoss, Rollout
from gorila.nets.flat import FlatParams, soft_update
from gorila.params import OUTCOMES, ParameterServer

RECENT_EPISODES = 20


class A3CWorker:
    """Section 12.3.2's worker, an actor and a learner in one; under the synchronous rule the
    server's mean makes it A2C::

        factory = functools.partial(A3CWorker, envs=EnvSpec("CartPole-v1", 8), network_fn=network_fn,
                                    loss=A3CLoss(gamma=0.99), rollout_steps=8, target_tau=1.0, seed=0)
        worker = factory(worker_id, server)   # builds its envs and networks in its own process
        worker.step()                         # one rollout, one gradient pushed
        worker.report()["recent_returns"]

    ``step`` is :meth:`refresh` (load the pulled parameters; soft-update the target value
    network by ``target_tau`` when their version changed), :meth:`collect` (``rollout_steps``
    steps of every environment, actions sampled from pi) and one push of the gradient of that
    rollout. Environment ``i`` of worker ``k`` is seeded ``seed + 1000 k + i``; actions come from a
    generator seeded the same way, so a worker's rollouts depend only on its seed and the
    parameters it pulls.
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, envs: EnvSpec,
                 network_fn: Callable[[], nn.Module], loss: A3CLoss, rollout_steps: int, target_tau: float,
                 seed: int):
        self.loss, self.rollout_steps, self.target_tau = loss, rollout_steps, target_tau
        worker_seed = seed + 1000 * worker_id
        self.runner = envs.runner(worker_seed)
        self.net = network_fn()
        self.target_net = copy.deepcopy(self.net)
        self.flat, self.target_flat = FlatParams(self.net), FlatParams(self.target_net)
        self.client = server.client(worker_id)
        self.generator = torch.Generator().manual_seed(worker_seed)
        self._target: np.ndarray | None = None
        self._target_version = -1
        self.env_steps = 0
        self.episodes = 0
        self.updates_pushed = 0
        self.recent_returns: deque[float] = deque(maxlen=RECENT_EPISODES)
        self.last_info: dict[str, float] = {}

    def refresh(self) -> None:
        """Load the client's parameters into the online network; move the target value network
        towards them (``w- <- tau w + (1 - tau) w-``) once per new version."""
        params = self.client.params()
        self.flat.set(params)
        version = self.client.version
        if version != self._target_version:
            # The first pull starts the target at the server's parameters, not at random weights.
            self._target = (params.copy() if self._target is None
                            else soft_update(self._target, params, self.target_tau))
            self.target_flat.set(self._target)
            self._target_version = version

    def collect(self) -> Rollout:
        """``rollout_steps`` steps of every environment with actions sampled from pi.

        A slot where an environment spent the step resetting (no row from the runner) is marked
        invalid; so is nothing else. ``final_obs`` holds the observation a truncated episode was
        cut at.
        """
        T, N = self.rollout_steps, self.runner.num_envs
        obs_shape = self.runner.observations.shape[1:]
        obs = np.zeros((T, N, *obs_shape), np.float32)
        final_obs = np.zeros((T, N, *obs_shape), np.float32)
        actions = np.zeros((T, N), np.int64)
        rewards = np.zeros((T, N), np.float32)
        terminated = np.zeros((T, N), bool)
        truncated = np.zeros((T, N), bool)
        valid = np.zeros((T, N), bool)
        for t in range(T):
            with torch.no_grad():
                logits, _ = self.net(torch.as_tensor(self.runner.observations, dtype=torch.float32))
                chosen = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.generator)
            step = self.runner.step(chosen.squeeze(-1).numpy())
            valid[:, self.runner.dropped] = False  # an env that failed: its steps in this rollout go
            rows = step.env_index
            obs[t, rows] = step.obs
            actions[t, rows] = step.action
            rewards[t, rows] = step.reward
            terminated[t, rows] = step.terminated
            truncated[t, rows] = step.truncated
            final_obs[t, rows] = step.next_obs
            valid[t, rows] = True
            self.env_steps += len(step)
        for episode in self.runner.pop_episodes():
            self.episodes += 1
            self.recent_returns.append(episode.score)
        return Rollout(obs=obs, actions=actions, rewards=rewards, dones=terminated | truncated,
                       last_obs=np.asarray(self.runner.observations, np.float32),
                       truncated=truncated, final_obs=final_obs, valid=valid)

    def step(self) -> None:
        self.refresh()
        rollout = self.collect()
        grad, self.last_info = self.loss.gradients(self.net, self.target_net, rollout, self.flat)
        # Under asynchronous rules the reply travels while the next rollout runs; a barrier waits.
        self.client.push(grad, wait=self.client.barrier)
        self.updates_pushed += 1

    def report(self) -> dict[str, Any]:
        """Cumulative counters; push outcomes count once per push (averaged over shards, as
        :func:`gorila.params.merge_stats` does); ``loss``, ``entropy`` and ``version`` (of the
        parameters it was computed on) of the latest push."""
        shards = self.client.layout.num_shards
        return {
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "env_failures": self.runner.env_failures,
            "updates_pushed": self.updates_pushed,
            **{f"pushes_{k}": self.client.outcomes[k] // shards for k in OUTCOMES},
            "recent_returns": list(self.recent_returns),
            "loss": self.last_info.get("loss"),
            "entropy": self.last_info.get("entropy"),
            "version": self._target_version,
        }
