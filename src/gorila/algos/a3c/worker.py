"""One A3C worker: pull the parameters, run a short rollout of its own environments, push the gradient."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import torch

from gorila.algos.a3c.builder import network_for
from gorila.algos.a3c.config import A3CConfig
from gorila.envs import make_env_runner
from gorila.losses.a3c import Rollout, a3c_gradients
from gorila.nets.flat import FlatParams, soft_update
from gorila.params import OUTCOMES, ParameterClient, ShardEndpoint, ShardLayout

RECENT_EPISODES = 20


class A3CWorker:
    """Section 12.3.2's worker; under the synchronous rule the server's mean makes it A2C::

        factory = functools.partial(A3CWorker, env_id="CartPole-v1", cfg=A3CConfig(), seed=0,
                                    barrier=rule.barrier, timeout_s=60.0)
        worker = factory(worker_id, endpoints)   # builds its envs and networks in its own process
        worker.step()                            # pull, one rollout, push one gradient
        worker.report()["recent_returns"]

    ``step`` is :meth:`refresh` (load the pulled parameters; soft-update the target value
    network when their version changed), :meth:`collect` (``rollout_steps`` steps of
    ``envs_per_worker`` environments, actions sampled from pi) and one push of the gradient of
    that rollout. Environment ``i`` of worker ``k`` is seeded ``seed + 1000 k + i``; actions come
    from a generator seeded the same way, so a worker's rollouts depend only on its seed and the
    parameters it pulls.
    """

    def __init__(self, worker_id: int, endpoints: list[ShardEndpoint], *, env_id: str, cfg: A3CConfig,
                 seed: int, barrier: bool, timeout_s: float):
        # Parallelism comes from worker processes; intra-op threads would only contend.
        torch.set_num_threads(1)
        self.cfg = cfg
        worker_seed = seed + 1000 * worker_id
        self.runner = make_env_runner(env_id, cfg.envs_per_worker, seed=worker_seed, training=True)
        self.net = network_for(self.runner.observation_space, self.runner.action_space, cfg)
        self.target_net = network_for(self.runner.observation_space, self.runner.action_space, cfg)
        self.flat, self.target_flat = FlatParams(self.net), FlatParams(self.target_net)
        self.client = ParameterClient(endpoints, ShardLayout(self.flat.size, len(endpoints)),
                                      worker_id=worker_id, barrier=barrier, timeout_s=timeout_s)
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
                            else soft_update(self._target, params, self.cfg.target_tau))
            self.target_flat.set(self._target)
            self._target_version = version

    def collect(self) -> Rollout:
        """``rollout_steps`` steps of every environment with actions sampled from pi.

        A slot where an environment spent the step resetting (no row from the runner) is marked
        invalid; so is nothing else. ``final_obs`` holds the observation a truncated episode was
        cut at.
        """
        T, N = self.cfg.rollout_steps, self.runner.num_envs
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
        grad, self.last_info = a3c_gradients(self.net, self.target_net, rollout, self.cfg.gamma,
                                             self.cfg.entropy_coef, self.flat, self.cfg.max_grad_norm,
                                             self.cfg.gae_lambda)
        self.client.push(grad)
        self.updates_pushed += 1

    def report(self) -> dict[str, Any]:
        """Cumulative counters; push outcomes count once per push (averaged over shards, as
        :func:`gorila.params.merge_stats` does); ``loss``, ``entropy`` and ``version`` (of the
        parameters it was computed on) of the latest push."""
        shards = self.client.layout.num_shards
        return {
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "updates_pushed": self.updates_pushed,
            **{f"pushes_{k}": self.client.outcomes[k] // shards for k in OUTCOMES},
            "recent_returns": list(self.recent_returns),
            "loss": self.last_info.get("loss"),
            "entropy": self.last_info.get("entropy"),
            "version": self._target_version,
        }
