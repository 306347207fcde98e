"""Preallocated ring storage for transitions ``(obs, action, reward, next_obs, done)``.

Two layouts behind one interface (``add``, ``add_batch``, ``sample``, ``__len__``, ``state_dict``):
:class:`TransitionStorage` keeps vector observations as they are; :class:`FrameStackStorage`
(in :mod:`gorila.replay.frames`) keeps each frame of stacked-frame observations once.
:func:`gorila.replay.memory.make_storage` picks one from the observation shape.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gorila import validate


class Batch(NamedTuple):
    """A sampled minibatch; ``done`` is 1.0 where the episode terminated (not where it was truncated)."""

    obs: np.ndarray
    action: np.ndarray     # int64
    reward: np.ndarray     # float32
    next_obs: np.ndarray
    done: np.ndarray       # float32


# Bytes per slot besides observations: action int64, reward float32, done float32.
SCALAR_BYTES = 8 + 4 + 4


class TransitionStorage:
    """A ring of the last ``capacity`` transitions, sampled uniformly with replacement::

        storage = TransitionStorage(100_000, obs_shape=(4,), obs_dtype=np.float32)
        storage.add(obs, action, reward, next_obs, terminated)
        batch = storage.sample(32, np.random.default_rng(0))    # Batch of numpy arrays

    ``obs`` and ``next_obs`` are both stored: next_obs at an episode end is the true final
    observation, which no later transition holds. ``streams`` in :meth:`add_batch` is accepted for
    interface parity with :class:`~gorila.replay.frames.FrameStackStorage` and ignored. Not
    thread-safe: a caller that samples on another thread must hold a lock around add and sample.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype=np.float32):
        validate.integer("replay_capacity", capacity, low=1)
        self.capacity = capacity
        self.obs_shape = tuple(obs_shape)
        self._obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self._next_obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self._action = np.zeros(capacity, np.int64)
        self._reward = np.zeros(capacity, np.float32)
        self._done = np.zeros(capacity, np.float32)
        self._cursor = 0
        self._size = 0

    @staticmethod
    def estimate_bytes(capacity: int, obs_shape: tuple[int, ...], obs_dtype) -> int:
        return capacity * (2 * int(np.prod(obs_shape)) * np.dtype(obs_dtype).itemsize + SCALAR_BYTES)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self._obs, self._next_obs, self._action, self._reward, self._done))

    def __len__(self) -> int:
        return self._size

    def add(self, obs, action, reward, next_obs, terminated, stream: int = 0) -> None:
        self.add_batch(np.asarray(obs)[None], np.asarray([action]), np.asarray([reward]),
                       np.asarray(next_obs)[None], np.asarray([terminated]))

    def add_batch(self, obs, action, reward, next_obs, terminated, streams=None) -> None:
        n = len(action)
        start = self._cursor
        if n > self.capacity:  # only the newest rows survive, in the slots row-by-row adds would give them
            skip = n - self.capacity
            obs, action, reward, next_obs, terminated = (
                x[skip:] for x in (obs, action, reward, next_obs, terminated))
            start = (start + skip) % self.capacity
        rows = (start + np.arange(min(n, self.capacity))) % self.capacity
        self._obs[rows] = obs
        self._next_obs[rows] = next_obs
        self._action[rows] = action
        self._reward[rows] = reward
        self._done[rows] = terminated
        self._cursor = int((self._cursor + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay storage")
        rows = rng.integers(0, self._size, batch_size)
        return Batch(self._obs[rows], self._action[rows], self._reward[rows], self._next_obs[rows],
                     self._done[rows])

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"obs": self._obs.copy(), "next_obs": self._next_obs.copy(), "action": self._action.copy(),
                "reward": self._reward.copy(), "done": self._done.copy(),
                "cursor": np.array(self._cursor), "size": np.array(self._size)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name in ("obs", "next_obs", "action", "reward", "done"):
            target = getattr(self, "_" + name)
            check_array(name, state[name], target)
            target[...] = state[name]
        self._cursor = int(state["cursor"])
        self._size = int(state["size"])


def check_array(name: str, value: np.ndarray, target: np.ndarray) -> None:
    """Refuse to load a saved array of another shape or dtype (a checkpoint of another config)."""
    if value.shape != target.shape or value.dtype != target.dtype:
        raise ValueError(f"replay state {name!r}: expected {target.shape} {target.dtype}, "
                         f"got {value.shape} {value.dtype}")
