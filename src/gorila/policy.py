"""A saved run's policy, outside training: loaded from Python, and played by ``gorila eval``::

    policy = load_policy("runs/dqn-CartPole-v1-20261122-081500")     # gorila.load_policy: the best checkpoint
    policy = load_policy("runs/dqn-CartPole-v1-20261122-081500", checkpoint="last")   # the newest periodic one
    action = policy(observation)
    report = evaluate("runs/dqn-CartPole-v1-20261122-081500")        # gorila.evaluate: scores as JSON

A recurrent policy (``--core lstm``) remembers: ``policy.reset()`` at each episode's start, then
``policy.step(obs)`` at each step (a feed-forward one's ``reset`` does nothing, so one loop plays both).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from gorila.agents.registry import ALGORITHMS
from gorila.config import RunConfig, values_from_json
from gorila.driver.saved import SavedRun
from gorila.envs import evaluation
from gorila.envs.make import env_spaces, is_atari, make_env
from gorila.envs.normalize import NormalizedPolicy
from gorila.errors import ConfigError
from gorila.nets import FlatParams
from gorila.run_files import check_recorded_env, writable_directory
from gorila.validate import clipped, excerpt

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class Policy:
    """The greedy policy of a saved run (see :func:`load_policy`)::

        policy = load_policy("runs/dqn-CartPole-v1-20261122-081500")
        env = policy.make_env(seed=0)          # the env as the policy saw it (Atari: preprocessed)
        obs, _ = env.reset(seed=0)
        action = policy(obs)                   # one observation -> one action (an int)
        actions = policy(np.stack([obs, obs])) # a batch -> an array of actions

    ``network`` is the PyTorch module, with the checkpoint's weights (a run with ``--normalize-obs``
    acts through the observation statistics its checkpoint saved, frozen: the policy takes raw
    observations, and ``network`` normalised ones); ``epsilon`` the exploration
    rate the run was evaluated with (``gorila eval`` plays with it, calling the policy does not);
    ``checkpoint`` which checkpoint it holds (``best`` or ``last``; ``fallback`` says why a damaged
    best one was passed over) and ``meta`` that checkpoint's record (a best one's: ``version``,
    ``eval_return``, and the ``episodes``, ``seed``, ``epsilon``
    and ``noop_max`` it was judged with).

    A recurrent policy (``state_shape`` is one env's core state, ``()`` for a feed-forward one)
    carries each env's memory from call to call::

        policy.reset()                     # a new episode (reset(batch=8): 8 envs side by side)
        action = policy.step(obs)          # acts and remembers; policy(obs) is the same
        policy.state                       # (batch, *state_shape): the LSTM's h and c, zero after reset

    An env whose episode ends gets a fresh state by ``reset(batch)`` again, or ``step(obs,
    starts=...)``: ``starts`` marks the envs whose ``obs`` begins an episode.
    """

    def __init__(self, network: nn.Module, act: Callable[..., Any], *, env_id: str,
                 observation_shape: tuple[int, ...], epsilon: float, saved: SavedRun,
                 state_shape: tuple[int, ...] = ()):
        self.network, self._act = network, act
        self.env_id, self.observation_shape, self.epsilon = env_id, observation_shape, epsilon
        self.state_shape = state_shape
        self._state: np.ndarray | None = None
        self._starts = np.ones(1, bool)
        self.run_dir, self.algo = saved.run_dir, saved.algo
        self.env_steps = saved.meta.get("env_steps", saved.meta.get("eval_env_steps"))
        self.checkpoint, self.meta = saved.checkpoint, saved.meta
        self.fallback = saved.fallback  # why the best checkpoint is not the one held, if it is not

    def __call__(self, obs: Any) -> int | np.ndarray:
        return self.step(obs)

    @property
    def state(self) -> np.ndarray | None:
        """A recurrent policy's core state of each env (a copy), None before a step or for a feed-forward one."""
        return None if self._state is None else self._state.copy()

    def reset(self, batch: int = 1) -> None:
        """Start ``batch`` episodes: their core states are zero at the next step (nothing to do for
        a feed-forward policy)."""
        self._state = None if not self.state_shape else np.zeros((batch, *self.state_shape), np.float32)
        self._starts = np.ones(batch, bool)

    def step(self, obs: Any, starts: Any = None) -> int | np.ndarray:
        """The action for ``obs`` (one observation, or a batch), remembered by a recurrent policy;
        ``starts`` (bool, one per observation) marks observations that begin a new episode."""
        obs = np.asarray(obs)
        single = obs.shape == self.observation_shape
        batch = obs[None] if single else obs
        with torch.no_grad():
            if not self.state_shape:
                actions = np.asarray(self._act(batch))
            else:
                if self._state is None or len(self._state) != len(batch):
                    if self._state is not None:
                        raise ValueError(f"the policy remembers {len(self._state)} envs and was given "
                                         f"{len(batch)} observations: reset(batch={len(batch)}) first")
                    self.reset(len(batch))
                begun = self._starts if starts is None else self._starts | np.asarray(starts, bool).reshape(-1)
                actions, self._state = self._act(batch, self._state, begun)
                self._starts = np.zeros(len(batch), bool)
        return int(actions[0]) if single else np.asarray(actions)

    def batch_act(self, obs: np.ndarray, state: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A recurrent policy's actions for a batch whose states its caller keeps (``gorila eval``'s
        episodes): ``(actions, states after the step)``."""
        with torch.no_grad():
            actions, after = self._act(obs, state, starts)
        return np.asarray(actions), after

    def make_env(self, seed: int = 0, render_mode: str | None = None) -> gym.Env:
        """A new env of the run's id, preprocessed as in training (Atari frames 84x84, 4 stacked),
        with real rewards."""
        return make_env(self.env_id, seed=seed, training=False, render_mode=render_mode)


def load_policy(run_dir: Path | str, checkpoint: str = "best", *, env: str | None = None) -> Policy:
    """The greedy policy of the run in ``run_dir`` (or its ``checkpoints/``): by default the
    parameters of its best evaluation (the newest good checkpoint while it has none, or where its
    best one is damaged), with ``checkpoint="last"`` its newest good periodic checkpoint. A run
    whose env id names a module to import (``my_envs:Maze-v0``) is played only with ``env`` the
    same id: the run directory chose that module, the caller names it (a ``ConfigError`` says so)."""
    saved = SavedRun.open(run_dir, checkpoint, algorithms=ALGORITHMS)
    algorithm = ALGORITHMS[saved.algo]
    if not algorithm.is_rl:
        raise ConfigError("run_dir", f"{saved.run_dir} is a {saved.algo} run: it has no policy")
    values = values_from_json(saved.config[saved.algo])
    try:
        run = RunConfig(**{k: v for k, v in saved.config["run"].items() if k not in ("run_dir", "resume")})
        configs = [cls(**{k: v for k, v in values.items() if k in _field_names(cls)})
                   for cls in algorithm.config_classes()]
        epsilon = values["eval_epsilon"]  # builders record the evaluation's exploration rate they resolved
    except (TypeError, KeyError, ConfigError) as err:  # a setting it does not have, or one out of range
        raise ConfigError("run_dir", f"{saved.run_dir / 'config.json'} was damaged or edited: "
                                     f"{err if isinstance(err, ConfigError) else clipped(str(err))}") from None
    env_id = configs[-1].env
    if env is not None and env != env_id:
        raise ConfigError("env", f"{saved.run_dir} is a run on {excerpt(env_id)}, not {excerpt(env)}")
    check_recorded_env(saved.run_dir, env_id, env, "run_dir")
    network_fn, policy_fn = algorithm.policy_fn()(run, *configs)
    net = network_fn().eval()
    FlatParams(net).set(saved.params)
    observation_space = env_spaces(env_id)[0]
    assert observation_space.shape is not None  # every RL algorithm's network refused any other observations
    shape = tuple(observation_space.shape)
    act = policy_fn(net)
    state_shape = tuple(getattr(act, "state_shape", ()))  # a recurrent policy's core state per env
    if saved.statistics.obs is not None:  # --normalize-obs: through the statistics it was judged with, frozen
        act = NormalizedPolicy(act, saved.statistics.obs)
    return Policy(net, act, env_id=env_id, observation_shape=shape, epsilon=epsilon, saved=saved,
                  state_shape=state_shape)


def evaluate(run_dir: Path | str, episodes: int = 10, *, epsilon: float | None = None, noop_max: int = 30,
             seed: int = 12345, video_dir: Path | str | None = None, checkpoint: str = "best",
             env: str | None = None) -> dict[str, Any]:
    """Scores of ``episodes`` episodes, with up to ``noop_max`` no-ops at their start, played by the
    ``best`` or ``last`` checkpoint of the run in ``run_dir`` (see :func:`load_policy`, which also
    says what ``env`` is for); ``epsilon=None`` plays with the exploration rate the run evaluated
    with; ``video_dir`` records each episode there (see ``gorila eval``; one that cannot be written
    is a ``ConfigError`` naming ``video``, before anything is played)."""
    if video_dir is not None:
        writable_directory(Path(video_dir), "video")
    policy = load_policy(run_dir, checkpoint, env=env)
    epsilon = policy.epsilon if epsilon is None else epsilon
    # a batch of observations in, a batch of actions out (a single observation would give an int); a
    # recurrent policy's network is played with each episode's state, which the episodes keep
    scores = evaluation.evaluate(policy.batch_act if policy.state_shape else lambda obs: np.asarray(policy(obs)),
                                 policy.env_id, episodes, epsilon, seed=seed, noop_max=noop_max,
                                 video_dir=None if video_dir is None else Path(video_dir),
                                 state_shape=policy.state_shape)
    mean = float(np.mean(scores))
    out = {"run_dir": str(policy.run_dir), "algo": policy.algo, "env": policy.env_id,
           "checkpoint": policy.checkpoint, "checkpoint_env_steps": policy.env_steps,
           "checkpoint_version": policy.meta.get("version"), "episodes": episodes, "epsilon": epsilon,
           "mean": mean, "min": float(np.min(scores)), "max": float(np.max(scores)),
           "scores": scores, **({"checkpoint_fallback": policy.fallback} if policy.fallback else {})}
    if video_dir is not None:
        out["videos"] = sorted(str(p) for p in Path(video_dir).glob("*.mp4"))
    if is_atari(policy.env_id):
        out["human_normalized"] = evaluation.human_normalized(policy.env_id, mean)
        out["dqn_normalized"] = evaluation.dqn_normalized(policy.env_id, mean)
        out["human_normalized_table"] = evaluation.NORMALIZATION_SOURCE
    return out


def _field_names(cls: type[DataclassInstance]) -> Collection[str]:
    """The names a config class's dataclass knows, its class variables among them: a config.json
    that names one is then refused as edited rather than read without it."""
    return cls.__dataclass_fields__.keys()
