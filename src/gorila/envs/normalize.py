"""Running normalisation of observations and rewards (``--normalize-obs``, ``--normalize-reward``),
as Stable-Baselines3's ``VecNormalize`` does it: an observation becomes ``(obs - mean) /
sqrt(var + 1e-8)`` clipped to ±10, and a reward is divided by the standard deviation of the
discounted return (``ret = ret * gamma + r`` per env, reset at the episode's end), clipped to ±10.

Every statistic is a count, a mean and M2 (the sum of squared deviations), merged by Chan et
al.'s parallel formula, so that the statistics of several actors add up to those of all their
observations::

    normalizer = Normalizer(Normalization(obs=True, reward=True, gamma=0.99), runner.observation_space)
    runner = NormalizedRunner(envs.runner(seed), normalizer)   # what an actor steps and stores
    report = normalizer.report()        # the statistics' growth since the last report (a worker's report)
    normalizer.load(statistics)         # the run's merged statistics, handed back by the driver

The episodes' scores stay the raw rewards' (the runner inside counts them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from gorila.envs.vector import EnvRunner
from gorila.errors import CheckpointError
from gorila.types import Episode, Transitions

#: VecNormalize's defaults: normalised observations and rewards are clipped to ±CLIP, and EPSILON
#: keeps the division finite while a variance is 0.
CLIP = 10.0
EPSILON = 1e-8
#: The checkpoint arrays that hold the run's statistics (``normalize.obs.count`` ...).
PREFIX = "normalize."


class RunningStats:
    """The count, mean and M2 of a stream of arrays of one shape::

        stats = RunningStats.empty((3,))
        stats.update(batch)                # rows of shape (3,)
        stats.merge(other)                 # as if other's rows had been added here (Chan et al.)
        stats.var                          # the population variance, M2 / count (1 while empty)
        stats.normalize(obs)               # (obs - mean) / sqrt(var + 1e-8), clipped to ±10, float32
    """

    def __init__(self, count: int, mean: np.ndarray, m2: np.ndarray):
        self.count = int(count)
        self.mean = np.asarray(mean, np.float64)
        self.m2 = np.asarray(m2, np.float64)

    @classmethod
    def empty(cls, shape: tuple[int, ...]) -> RunningStats:
        return cls(0, np.zeros(shape), np.zeros(shape))

    @property
    def var(self) -> np.ndarray:
        # Empty statistics scale by 1, as VecNormalize's start (mean 0, var 1) does.
        return self.m2 / self.count if self.count else np.ones_like(self.m2)

    def update(self, batch: np.ndarray) -> None:
        """Add ``batch``'s rows (its first axis)."""
        self.merge(RunningStats.of(batch))

    @classmethod
    def of(cls, batch: np.ndarray) -> RunningStats:
        """The statistics of ``batch``'s rows (its first axis)."""
        batch = np.asarray(batch, np.float64)
        if len(batch) == 1:  # an actor of one env adds one row a step: no mean or deviations to take
            return cls(1, batch[0].copy(), np.zeros(batch.shape[1:]))  # a copy: runners reuse their arrays
        if len(batch) == 0:
            return cls.empty(batch.shape[1:])
        mean = np.add.reduce(batch, axis=0) / len(batch)
        deviations = batch - mean
        return cls(len(batch), mean, np.add.reduce(deviations * deviations, axis=0))

    def merge(self, other: RunningStats) -> None:
        """Chan et al.'s parallel update: these statistics become those of both streams."""
        if other.count == 0:
            return
        count = self.count + other.count
        delta = other.mean - self.mean
        # np.asarray: a scalar statistic (the return's) stays a 0-d array, as checkpoints save it
        self.mean = np.asarray(self.mean + delta * (other.count / count))
        self.m2 = np.asarray(self.m2 + other.m2 + delta * delta * (self.count * other.count / count))
        self.count = count

    def copy(self) -> RunningStats:
        return RunningStats(self.count, self.mean.copy(), self.m2.copy())

    def normalize(self, x: np.ndarray) -> np.ndarray:
        return _clipped((np.asarray(x) - self.mean) / np.sqrt(self.var + EPSILON))

    def to_report(self) -> dict[str, Any]:
        """JSON-like, as a worker's report is."""
        return {"count": self.count, "mean": self.mean.tolist(), "m2": self.m2.tolist()}

    @classmethod
    def from_report(cls, report: dict[str, Any]) -> RunningStats:
        return cls(report["count"], np.asarray(report["mean"]), np.asarray(report["m2"]))


def _clipped(scaled: np.ndarray) -> np.ndarray:
    """``scaled`` (a fresh float64 array) clipped to ±CLIP in place, as float32: np.minimum and
    np.maximum, since np.clip's dispatch costs more than the work on one env's row."""
    clipped: np.ndarray = np.maximum(np.minimum(scaled, CLIP, out=scaled), -CLIP, out=scaled)
    return clipped.astype(np.float32)


@dataclass(frozen=True)
class Normalization:
    """What a run normalises and with which discount (the algorithm's ``gamma``, for the return
    whose spread scales the rewards); small and picklable, given to every acting worker's factory."""

    obs: bool
    reward: bool
    gamma: float


@dataclass
class Statistics:
    """The run's statistics as the driver merges them, hands them back to the workers and saves
    them in checkpoints: ``obs`` per observation feature, ``ret`` of the discounted return (a
    scalar); each None where that is not normalised (or nothing was seen yet)::

        stats = Statistics.from_arrays(arrays)      # a checkpoint's, empty where it has none
        stats.arrays()                              # {"normalize.obs.count": ..., ...}
    """

    obs: RunningStats | None = None
    ret: RunningStats | None = None

    def merge_report(self, report: dict[str, Any]) -> None:
        """Add a worker's :meth:`Normalizer.report` (the statistics it gathered since its last)."""
        for name in ("obs", "ret"):
            if name in report:
                part = RunningStats.from_report(report[name])
                mine = getattr(self, name)
                if mine is None:
                    setattr(self, name, part)
                else:
                    mine.merge(part)

    def copy(self) -> Statistics:
        return Statistics(*(None if s is None else s.copy() for s in (self.obs, self.ret)))

    def arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for name, stats in (("obs", self.obs), ("ret", self.ret)):
            if stats is not None:
                out.update({f"{PREFIX}{name}.count": np.array([stats.count], np.int64),
                            f"{PREFIX}{name}.mean": stats.mean, f"{PREFIX}{name}.m2": stats.m2})
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Statistics:
        """The statistics a checkpoint's arrays hold (None for each it does not)."""
        def read(name: str) -> RunningStats | None:
            keys = [f"{PREFIX}{name}.{part}" for part in ("count", "mean", "m2")]
            if not any(key in arrays for key in keys):
                return None
            if not all(key in arrays for key in keys):
                raise CheckpointError(f"its {name} normalisation statistics lack some of {', '.join(keys)}")
            count, mean, m2 = (np.asarray(arrays[key]) for key in keys)
            if (count.shape != (1,) or count.dtype.kind not in "iu" or count[0] < 0 or mean.shape != m2.shape
                    or (name == "ret" and mean.size != 1)
                    or not (np.isfinite(mean).all() and np.isfinite(m2).all()) or (m2 < 0).any()):
                raise CheckpointError(f"its {name} normalisation statistics are damaged")
            if name == "ret":  # safetensors keeps a scalar as one element: the return's is a scalar again
                mean, m2 = mean.reshape(()), m2.reshape(())
            return RunningStats(int(count[0]), mean, m2)
        return cls(read("obs"), read("ret"))


class Normalizer:
    """One worker's statistics: those it normalises with (the run's, as last handed back, with its
    own since), and its own since its last :meth:`report`, which the driver merges into the run's.
    Build it once per worker and wrap each of its env runners (:class:`NormalizedRunner`)."""

    def __init__(self, spec: Normalization, observation_space: gym.Space[Any]):
        self.spec = spec
        shape = tuple(observation_space.shape or ())
        self.shape = shape
        self.current = self._empty()
        self.since = self._empty()

    def _empty(self) -> Statistics:
        return Statistics(RunningStats.empty(self.shape) if self.spec.obs else None,
                          RunningStats.empty(()) if self.spec.reward else None)

    def observations(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` (a batch) added to the statistics, then normalised by them."""
        if self.current.obs is None or self.since.obs is None:
            return obs
        batch = RunningStats.of(obs)
        self.current.obs.merge(batch)
        self.since.obs.merge(batch)
        return self.current.obs.normalize(obs)

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` normalised by the statistics as they are, nothing added (a final observation)."""
        return obs if self.current.obs is None else self.current.obs.normalize(obs)

    def rewards(self, rewards: np.ndarray, returns: np.ndarray) -> np.ndarray:
        """``returns`` (the discounted returns so far, one per reward) added to the return's
        statistics; ``rewards`` divided by its standard deviation, clipped."""
        if self.current.ret is None or self.since.ret is None:
            return rewards
        batch = RunningStats.of(returns)
        self.current.ret.merge(batch)
        self.since.ret.merge(batch)
        return _clipped(np.asarray(rewards, np.float64) / np.sqrt(self.current.ret.var + EPSILON))

    def report(self) -> dict[str, Any]:
        """``{"normalization": ...}``: what was added since the last report, for the driver to
        merge (each report's part is merged once; it is not repeated in the next)."""
        part = {name: stats.to_report() for name, stats in (("obs", self.since.obs), ("ret", self.since.ret))
                if stats is not None}
        self.since = self._empty()
        return {"normalization": part}

    def load(self, statistics: Statistics) -> None:
        """Normalise from now on by the run's ``statistics`` and what was added here since the last report."""
        current = statistics.copy()
        for name in ("obs", "ret"):
            mine, since = getattr(current, name), getattr(self.since, name)
            if since is None:
                setattr(current, name, None)
            elif mine is None:
                setattr(current, name, since.copy())
            else:
                mine.merge(since)
        self.current = current


def actor_runner(envs: Any, seed: int, normalize: Normalization | None) -> tuple[Any, Normalizer | None]:
    """The runner an actor steps, ``envs.runner(seed)``, and its :class:`Normalizer`: wrapped in a
    :class:`NormalizedRunner` with ``normalize``, as it is (and None) without."""
    runner = envs.runner(seed)
    if normalize is None:
        return runner, None
    normalizer = Normalizer(normalize, runner.observation_space)
    return NormalizedRunner(runner, normalizer), normalizer


class NormalizedRunner:
    """An :class:`~gorila.envs.vector.EnvRunner` as an actor steps it, its observations and rewards
    normalised by a :class:`Normalizer` (which may be shared by several runners of one worker)::

        runner = NormalizedRunner(envs.runner(seed), normalizer)
        actions = policy(runner.observations)       # normalised
        t = runner.step(actions)                    # t.obs, t.next_obs, t.reward normalised
        runner.pop_episodes()                       # scores of the raw rewards

    Each step adds the observations to act on next to the statistics (a final observation is
    normalised, not added, as VecNormalize does), and the discounted returns of the envs that
    stepped (each reset where its episode ended, or where its env failed)."""

    def __init__(self, runner: EnvRunner, normalizer: Normalizer):
        self.runner, self.normalizer = runner, normalizer
        self.num_envs = runner.num_envs
        self.returns = np.zeros(runner.num_envs)
        self.observations = normalizer.observations(runner.observations)
        inner = runner.observation_space
        self.observation_space = (gym.spaces.Box(-CLIP, CLIP, normalizer.shape, np.float32)
                                  if normalizer.spec.obs else inner)

    @property
    def action_space(self) -> gym.Space[Any]:
        return self.runner.action_space

    @property
    def dropped(self) -> list[int]:
        return self.runner.dropped

    @property
    def starts(self) -> np.ndarray:
        return self.runner.starts

    @property
    def env_failures(self) -> int:
        return self.runner.env_failures

    def step(self, actions: np.ndarray) -> Transitions:
        t = self.runner.step(actions)
        rows = t.env_index
        acted_on = self.observations
        self.observations = self.normalizer.observations(self.runner.observations)
        reward = t.reward
        if self.normalizer.spec.reward:
            self.returns[self.runner.dropped] = 0.0
            self.returns[rows] = self.returns[rows] * self.normalizer.spec.gamma + t.reward
            reward = self.normalizer.rewards(t.reward, self.returns[rows])
            self.returns[rows[t.terminated | t.truncated]] = 0.0
        if not self.normalizer.spec.obs:
            return dataclasses.replace(t, reward=reward)
        return dataclasses.replace(t, obs=acted_on[rows], next_obs=self.normalizer.normalize(t.next_obs),
                                   reward=reward)

    def pop_episodes(self) -> list[Episode]:
        return self.runner.pop_episodes()

    def close(self) -> None:
        self.runner.close()


class NormalizedPolicy:
    """A policy that maps raw observations through frozen statistics first (evaluation, ``gorila
    eval``, :func:`gorila.load_policy`)::

        act = NormalizedPolicy(greedy, stats)       # act(obs) is greedy(stats.normalize(obs))

    A recurrent policy's further arguments (its state, the episodes' starts) pass through as they are.
    """

    def __init__(self, policy: Any, stats: RunningStats):
        self.policy, self.stats = policy, stats

    def __call__(self, obs: np.ndarray, *memory: np.ndarray) -> Any:
        return self.policy(self.stats.normalize(obs), *memory)
