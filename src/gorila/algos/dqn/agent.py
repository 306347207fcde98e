"""The two halves of Gorila DQN as plain objects: the Actor (acts, fills replay) and the Learner
(turns minibatches into double-Q gradients). Bundles and the distributed workers compose them."""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from gorila.algos.dqn.config import DQNConfig, parse_target_update
from gorila.envs import make_env
from gorila.errors import ConfigError
from gorila.envs.vector import Transitions, make_env_runner
from gorila.losses.dqn import dqn_loss
from gorila.nets import FlatParams, soft_update
from gorila.nets.q import make_q_network
from gorila.replay import Batch


def build_q_network(env_id: str, hidden: tuple[int, ...], seed: int) -> nn.Module:
    """The Q-network for ``env_id`` (MLP or Nature CNN), initialised from ``seed``: every process
    that calls this gets the same architecture, and the driver takes initial parameters from it."""
    env = make_env(env_id, seed=seed, training=False)
    try:
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise ConfigError("env", f"dqn needs discrete actions; {env_id} has {env.action_space}")
        torch.manual_seed(seed)
        return make_q_network(env.observation_space, int(env.action_space.n), hidden)
    finally:
        env.close()


def greedy_policy(net: nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """Batch of observations -> argmax-Q actions."""
    device = next(net.parameters()).device

    def act(obs: np.ndarray) -> np.ndarray:
        # inference_mode skips the version counters and view tracking no_grad still keeps: this
        # runs once per actor step, where that overhead is a visible share of a small network's forward.
        with torch.inference_mode():
            return net(torch.as_tensor(obs, device=device)).argmax(1).cpu().numpy()
    return act


class QActor:
    """Steps its envs ε-greedily with a copy of the parameters it refreshes every few steps::

        actor = QActor(env_id, cfg, seed, network_fn)
        actor.load(params)
        transitions = actor.act(epsilon)   # one step of every env (EnvPool's hidden reset steps excluded)
    """

    def __init__(self, env_id: str, cfg: DQNConfig, seed: int, network_fn: Callable[[], nn.Module]):
        self.runner = make_env_runner(env_id, cfg.envs_per_actor, seed=seed, training=True,
                                      terminal_on_life_loss=cfg.terminal_on_life_loss, backend=cfg.env_backend)
        self.net = network_fn().eval()
        self.flat = FlatParams(self.net)
        self.policy = greedy_policy(self.net)
        self.n_actions = int(self.runner.action_space.n)
        self.rng = np.random.default_rng(seed)
        self.env_steps = 0
        self.episodes = 0
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=20)

    def load(self, params: np.ndarray) -> None:
        self.flat.set(params)

    def act(self, epsilon: float) -> Transitions:
        obs = self.runner.observations
        actions = self.policy(obs)
        explore = self.rng.random(len(actions)) < epsilon
        actions[explore] = self.rng.integers(self.n_actions, size=int(explore.sum()))
        transitions = self.runner.step(actions)
        self.env_steps += len(transitions)
        for episode in self.runner.pop_episodes():
            self.episodes += 1
            self.recent_returns.append(episode.score)
        return transitions

    def close(self) -> None:
        self.runner.close()


class OutlierFilter:
    """Gorila's safeguard: a loss above the running mean + ``k``·std of recent losses is an outlier.
    With ``k=None`` nothing is."""

    def __init__(self, k: float | None, window: int = 100, warmup: int = 20):
        self.k, self.warmup = k, warmup
        self.losses: collections.deque[float] = collections.deque(maxlen=window)

    def is_outlier(self, loss: float) -> bool:
        outlier = (self.k is not None and len(self.losses) >= self.warmup
                   and abs(loss) > np.mean(self.losses) + self.k * np.std(self.losses))
        if not outlier:
            self.losses.append(abs(loss))
        return bool(outlier)


class QLearner:
    """Double-Q gradients on the parameters it is given, with its own target network::

        learner = QLearner(network_fn, cfg, device="cpu")
        grad, info = learner.gradient(params, version, batch)   # grad is None for a skipped outlier

    The target network is refreshed from the given parameters every N *global* updates
    (``hard:N``, Gorila) or moved toward them by τ whenever they change (``soft:τ``).
    """

    def __init__(self, network_fn: Callable[[], nn.Module], cfg: DQNConfig, device: str = "cpu"):
        self.cfg = cfg
        self.online = network_fn().to(device)
        self.target = copy.deepcopy(self.online)
        self.flat = FlatParams(self.online)
        self.target_flat = FlatParams(self.target)
        self.target_kind, self.target_value = parse_target_update(cfg.target_update)
        self.target_params: np.ndarray | None = None
        self.target_version = -1
        self.seen_version = -1
        self.outliers = OutlierFilter(cfg.outlier_k)
        self.skipped_outliers = 0

    def _sync_target(self, params: np.ndarray, version: int) -> None:
        if self.target_params is None:
            self.target_params, self.target_version = params.copy(), version
        elif self.target_kind == "hard":
            if version - self.target_version < self.target_value:
                return  # the target network still holds target_params: no copy on the hot path
            self.target_params, self.target_version = params.copy(), version
        elif version != self.seen_version:
            self.target_params = soft_update(self.target_params, params, self.target_value)
        else:
            return
        self.target_flat.set(self.target_params)

    def gradient(self, params: np.ndarray, version: int, batch: Batch) -> tuple[np.ndarray | None, dict]:
        self._sync_target(params, version)
        self.seen_version = version
        self.flat.set(params)
        # Zeroed in place: backward accumulates straight into the flat buffer that is pushed.
        self.flat.zero_grad()
        loss, info = dqn_loss(self.online, self.target, batch, self.cfg.gamma, self.cfg.loss)
        if self.outliers.is_outlier(info["loss"]):
            self.skipped_outliers += 1
            return None, info
        loss.backward()
        if self.cfg.max_grad_norm is not None:
            self.flat.clip_grad_norm_(self.cfg.max_grad_norm)
        return self.flat.grad(), info
