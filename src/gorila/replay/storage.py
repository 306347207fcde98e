"""Preallocated ring storage for replay rows ``(obs, action, reward, next_obs, discount)``.

Two layouts behind one interface (``add``, ``sample_indices``, ``gather``, ``sample``, ``len``,
``state_dict``): :class:`TransitionStorage` keeps vector observations as they are;
:class:`FrameStackStorage` (in :mod:`gorila.replay.frames`) keeps each frame of stacked-frame
observations once. :func:`gorila.replay.memory.make_storage` picks one from the observation shape.
Rows are :class:`~gorila.types.Transitions` with ``discount`` (see
:class:`~gorila.actors.nstep.NStep`): the TD target of a row is ``reward + discount · Q(next_obs)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from gorila import validate
from gorila.types import Batch, Transitions

# What add returns for the slots it lost besides those it wrote: shared, read-only.
NO_SLOTS = np.zeros(0, np.int64)
NO_SLOTS.flags.writeable = False

# Bytes per slot besides observations: action int64, reward and discount float32, policy version int64.
SCALAR_BYTES = 8 + 4 + 4 + 8


def check_rows(t: Transitions) -> tuple[np.ndarray, np.ndarray]:
    """Replay rows must say how to bootstrap: ``discount`` (and ``steps``) from an NStep builder.
    Returns the two."""
    if t.discount is None or t.steps is None:
        raise ValueError("replay rows need discount and steps: pass the actor's transitions through NStep")
    return t.discount, t.steps


class TransitionStorage:
    """A ring of the last ``capacity`` rows, sampled uniformly with replacement::

        storage = TransitionStorage(100_000, obs_shape=(4,), obs_dtype=np.float32)
        written, forgotten = storage.add(rows)           # rows: Transitions from NStep
        batch = storage.sample(32, np.random.default_rng(0))

    ``obs`` and ``next_obs`` are both stored (``next_obs`` at an episode end is the true final
    observation, which no later row holds). A new row evicts the oldest in its slot. Not
    thread-safe: a caller that samples on another thread must hold a lock around add and sample.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike = np.float32):
        validate.integer("replay_capacity", capacity, low=1)
        self.capacity = capacity
        self.obs_shape = tuple(obs_shape)
        self._obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self._next_obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self._action = np.zeros(capacity, np.int64)
        self._reward = np.zeros(capacity, np.float32)
        self._discount = np.zeros(capacity, np.float32)
        self._version = np.zeros(capacity, np.int64)
        self._cursor = 0
        self._size = 0

    @staticmethod
    def estimate_bytes(capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike) -> int:
        return capacity * (2 * int(np.prod(obs_shape)) * np.dtype(obs_dtype).itemsize + SCALAR_BYTES)

    @property
    def nbytes(self) -> int:
        return sum(int(getattr(self, "_" + name).nbytes) for name in _ARRAYS)

    def __len__(self) -> int:
        return self._size

    @property
    def num_slots(self) -> int:
        """How many slots rows are named by (flat indices ``0 .. num_slots - 1``)."""
        return self.capacity

    def add(self, t: Transitions) -> tuple[np.ndarray, np.ndarray]:
        """Store the rows. Returns the slot of each row (-1 for a row the same batch overwrote: a
        batch over capacity keeps its newest rows) and the slots of rows lost otherwise (none here:
        an evicted row's slot is the new row's)."""
        return self._store(t, t.obs, t.next_obs)

    def _store(self, t: Transitions, obs: np.ndarray, next_obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`add` with ``obs`` and ``next_obs`` already in the stored layout (packed, in a subclass)."""
        discount, _ = check_rows(t)
        n = len(t)
        skip = max(n - self.capacity, 0)
        start, kept = (self._cursor + skip) % self.capacity, n - skip
        # Every actor step adds a few rows: a slice writes them in place, cheaper than a fancy index.
        rows: slice | np.ndarray
        if start + kept <= self.capacity:
            rows, slots = slice(start, start + kept), np.arange(start, start + kept)
        else:
            rows = slots = (start + np.arange(kept)) % self.capacity
        action, reward, version = t.action, t.reward, t.policy_version
        if skip:  # a batch over capacity keeps its newest rows
            obs, next_obs, action, reward, discount = (a[skip:] for a in (obs, next_obs, action, reward, discount))
            version = None if version is None else version[skip:]
        self._obs[rows] = obs
        self._next_obs[rows] = next_obs
        self._action[rows] = action
        self._reward[rows] = reward
        self._discount[rows] = discount
        self._version[rows] = -1 if version is None else version
        self._cursor = int((self._cursor + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)
        written = np.concatenate([np.full(skip, -1, np.int64), slots]) if skip else slots
        return written, NO_SLOTS

    def sample_indices(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay storage")
        return rng.integers(0, self._size, batch_size)

    def gather(self, indices: np.ndarray, weights: np.ndarray | None = None) -> Batch:
        """The rows at ``indices`` (with importance ``weights``, default 1)."""
        return Batch(self._obs[indices], self._action[indices], self._reward[indices], self._next_obs[indices],
                     self._discount[indices], np.asarray(indices, np.int64),
                     np.ones(len(indices), np.float32) if weights is None else weights, self._version[indices])

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """``batch_size`` rows drawn uniformly with replacement."""
        return self.gather(self.sample_indices(batch_size, rng))

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {name: getattr(self, "_" + name).copy() for name in _ARRAYS}
        # 1-d: safetensors keeps no 0-d arrays
        state.update(cursor=np.array([self._cursor]), size=np.array([self._size]))
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name in _ARRAYS:
            target = getattr(self, "_" + name)
            check_array(name, state[name], target)
            target[...] = state[name]
        self._cursor = int(state["cursor"][0])
        self._size = int(state["size"][0])


_ARRAYS = ("obs", "next_obs", "action", "reward", "discount", "version")


def check_array(name: str, value: np.ndarray, target: np.ndarray) -> None:
    """Refuse to load a saved array of another shape or dtype (a checkpoint of another config)."""
    if value.shape != target.shape or value.dtype != target.dtype:
        raise ValueError(f"replay state {name!r}: expected {target.shape} {target.dtype}, "
                         f"got {value.shape} {value.dtype}")
