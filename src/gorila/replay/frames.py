"""Replay for stacked-frame observations (Atari: ``(4, 84, 84)`` uint8) that keeps each frame once.

Consecutive observations of an episode share all but one frame, so storing whole stacks costs
``stack`` times the memory (28 KB instead of 7 KB per Atari transition, both for ``obs`` and
``next_obs``). Each stream (one environment feeding the storage) has its own ring of slots, one per
step: a slot holds the newest frame of that step's observation and, when a row starts there, the
row's action, return, discount, ``steps`` and policy version. A row's bootstrap observation is the
stack ``steps`` slots later, so n-step rows cost no more than one-step ones. ``depth`` counts how
many earlier frames of the same episode a slot's stack may use, so a stack is rebuilt by repeating
the episode's first frame instead of reaching into the previous episode — the padding Gymnasium's
``FrameStackObservation`` uses, so samples equal what was added.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from gorila import validate
from gorila.errors import ConfigError
from gorila.replay.storage import SCALAR_BYTES, check_array, check_rows
from gorila.types import Batch, Transitions

# Bytes per slot besides the frame: the scalars plus steps and depth int8 and valid bool.
SLOT_BYTES = SCALAR_BYTES + 3


class FrameStackStorage:
    """Rows of stacked frames, each frame stored once; uniform sampling with replacement::

        storage = FrameStackStorage(1_000_000, (4, 84, 84), np.uint8, num_streams=8)
        written, forgotten = storage.add(rows)   # rows: Transitions from NStep, env_index = stream
        batch = storage.sample(32, rng)           # batch.obs: (32, 4, 84, 84) uint8

    ``capacity`` is the number of frame slots, split evenly between ``num_streams`` rings. A row
    takes one slot; an episode takes ``steps`` more for the frames after its last row (plus up to
    ``stack - 1`` when its first observation is not padded by repetition), so ``len`` stays a little
    under ``capacity``. Rows of one stream must arrive in time order (NStep sends them so); a row
    whose ``obs`` does not continue the stream's previous row starts a new episode. ``next_obs``
    must be ``obs`` shifted by ``steps`` frames, otherwise :meth:`add` raises ``ValueError``; rows
    may look at most ``stack`` steps ahead. Slots are named by flat indices ``stream · slots + slot``.
    Not thread-safe: a
    caller that samples on another thread must hold a lock around add and sample.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike = np.uint8, *,
                 num_streams: int = 1):
        validate.integer("replay_capacity", capacity, low=1)
        validate.integer("num_streams", num_streams, low=1)
        if len(obs_shape) < 2:
            raise ValueError(f"expected (stack, *frame_shape) observations, got shape {obs_shape}")
        self.capacity = capacity
        self.obs_shape = tuple(obs_shape)
        self.stack = obs_shape[0]
        slots = capacity // num_streams
        if slots < 2 * self.stack:
            raise ConfigError(
                "replay_capacity", f"must be >= {2 * self.stack * num_streams} for {num_streams} streams "
                                   f"of {self.stack}-frame stacks, got {capacity}")
        self.num_streams = num_streams
        self._slots = slots
        shape = (num_streams, slots)
        self._frames = np.zeros((*shape, *obs_shape[1:]), obs_dtype)
        self._action = np.zeros(shape, np.int64)
        self._reward = np.zeros(shape, np.float32)
        self._discount = np.zeros(shape, np.float32)
        self._version = np.zeros(shape, np.int64)
        self._steps = np.zeros(shape, np.int8)
        self._depth = np.zeros(shape, np.int8)
        self._valid = np.zeros(shape, bool)       # a row starts at this slot and can be sampled
        self._written = np.zeros(num_streams, np.int64)  # frames ever written to the stream (the next one's number)
        self._last_row = np.full(num_streams, -1, np.int64)  # frame number of the stream's latest row
        self._ended = np.ones(num_streams, bool)  # the latest row closed its episode
        self._size = 0
        self._forgotten: list[int] = []

    @staticmethod
    def estimate_bytes(capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike) -> int:
        frame = int(np.prod(obs_shape[1:])) * np.dtype(obs_dtype).itemsize
        return capacity * (frame + SLOT_BYTES)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, "_" + name).nbytes for name in _SLOT_ARRAYS)

    def __len__(self) -> int:
        return self._size

    @property
    def num_slots(self) -> int:
        """How many slots rows are named by (flat indices ``0 .. num_slots - 1``)."""
        return self.num_streams * self._slots

    def add(self, t: Transitions) -> tuple[np.ndarray, np.ndarray]:
        """Store the rows in order. Returns the flat slot of each row (-1 for a row a later one of
        the same call already overwrote) and the flat slots of older rows overwritten."""
        discount, steps = check_rows(t)
        self._forgotten = []
        written = np.array([self._add_row(t, discount, steps, i) for i in range(len(t))], np.int64)
        lost = np.unique(np.array(self._forgotten, np.int64))
        lost = lost[~self._valid.reshape(-1)[lost]]  # a slot forgotten and then written again holds a row
        written[np.isin(written, lost)] = -1
        return written, lost[~np.isin(lost, written)]

    def _add_row(self, t: Transitions, discount: np.ndarray, steps: np.ndarray, i: int) -> int:
        stream, m = int(t.env_index[i]), int(steps[i])
        obs, next_obs = np.asarray(t.obs[i]), np.asarray(t.next_obs[i])
        if not 1 <= m <= self.stack:
            raise ValueError(f"a row may look 1 to {self.stack} steps ahead with {self.stack}-frame stacks, got {m}")
        if not np.array_equal(next_obs[:-m], obs[m:]):
            raise ValueError(f"next_obs is not obs shifted by {m} frames; FrameStackStorage needs stacked frames")
        start = self._last_row[stream] + 1
        if (not self._ended[stream] and start < self._written[stream]
                and np.array_equal(self._stack(stream, start % self._slots), obs)):
            frame = int(start)                 # obs continues the stream: its frame is stored already
        else:
            frame = self._write_first(stream, obs)
        for ahead in range(self._written[stream] - frame, m + 1):  # the bootstrap frames not stored yet
            self._write(stream, next_obs[self.stack - 1 - (m - ahead)])
        slot = frame % self._slots
        self._action[stream, slot] = t.action[i]
        self._reward[stream, slot] = t.reward[i]
        self._discount[stream, slot] = discount[i]
        self._version[stream, slot] = -1 if t.policy_version is None else t.policy_version[i]
        self._steps[stream, slot] = m
        if not self._valid[stream, slot]:
            self._valid[stream, slot] = True
            self._size += 1
        self._last_row[stream] = frame
        # Only the row of an episode's last step looks one step ahead to its end.
        self._ended[stream] = m == 1 and bool(t.terminated[i] or t.truncated[i])
        return stream * self._slots + slot

    def sample_indices(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay storage")
        # Rejection sampling is uniform over valid slots and cheap once the storage is mostly
        # valid; the scan of all slots is the fallback while it is still filling.
        valid = self._valid.reshape(-1)
        accepted = np.empty(0, np.int64)
        for _ in range(4):
            candidates = rng.integers(0, valid.size, 2 * batch_size)
            accepted = np.concatenate([accepted, candidates[valid[candidates]]])
            if len(accepted) >= batch_size:
                return accepted[:batch_size]
        pool = np.flatnonzero(valid)
        return pool[rng.integers(0, len(pool), batch_size)]

    def gather(self, indices: np.ndarray, weights: np.ndarray | None = None) -> Batch:
        """The rows at flat ``indices`` (with importance ``weights``, default 1)."""
        streams, slots = np.divmod(np.asarray(indices, np.int64), self._slots)
        ahead = (slots + self._steps[streams, slots]) % self._slots
        return Batch(self._stacks(streams, slots), self._action[streams, slots], self._reward[streams, slots],
                     self._stacks(streams, ahead), self._discount[streams, slots], np.asarray(indices, np.int64),
                     np.ones(len(streams), np.float32) if weights is None else weights,
                     self._version[streams, slots])

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        return self.gather(self.sample_indices(batch_size, rng))

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {name: getattr(self, "_" + name).copy() for name in (*_SLOT_ARRAYS, *_STREAM_ARRAYS)}
        state["size"] = np.array([self._size])  # 1-d: safetensors keeps no 0-d arrays
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name in (*_SLOT_ARRAYS, *_STREAM_ARRAYS):
            target = getattr(self, "_" + name)
            check_array(name, state[name], target)
            target[...] = state[name]
        self._size = int(state["size"][0])

    def _write(self, stream: int, frame: np.ndarray) -> None:
        """Append the stream's next frame; ``depth`` continues the frame before it."""
        number = int(self._written[stream])
        slot = number % self._slots
        depth = 0 if number == 0 else min(int(self._depth[stream, (slot - 1) % self._slots]) + 1, self.stack - 1)
        self._overwrite(stream, slot)
        self._frames[stream, slot] = frame
        self._depth[stream, slot] = depth
        self._written[stream] = number + 1

    def _write_first(self, stream: int, obs: np.ndarray) -> int:
        """Store an episode's first observation (its leading run of equal frames as one slot);
        returns the frame number of its newest frame."""
        first = 0
        while first + 1 < self.stack and np.array_equal(obs[first + 1], obs[0]):
            first += 1
        for depth, frame in enumerate(obs[first:]):
            self._write(stream, frame)
            self._depth[stream, (self._written[stream] - 1) % self._slots] = depth
        return int(self._written[stream] - 1)

    def _overwrite(self, stream: int, slot: int) -> None:
        # Overwriting this slot ends the row that starts there and every later one whose stack
        # reaches back to it (those within depth of it). Their bootstrap frames are newer still.
        self._forget(stream, slot)
        for back in range(1, self.stack):
            later = (slot + back) % self._slots
            if self._depth[stream, later] >= back:
                self._forget(stream, later)

    def _forget(self, stream: int, slot: int) -> None:
        if self._valid[stream, slot]:
            self._valid[stream, slot] = False
            self._size -= 1
            self._forgotten.append(stream * self._slots + slot)

    def _stack(self, stream: int, slot: int) -> np.ndarray:
        stack: np.ndarray = self._stacks(np.array([stream]), np.array([slot]))[0]
        return stack

    def _stacks(self, streams: np.ndarray, slots: np.ndarray) -> np.ndarray:
        # Position j of a stack is the frame (stack-1-j) slots back, but never further back than
        # the slot's depth: earlier positions repeat the episode's first frame.
        back = np.minimum(np.arange(self.stack - 1, -1, -1)[None, :], self._depth[streams, slots][:, None])
        stacks: np.ndarray = self._frames[streams[:, None], (slots[:, None] - back) % self._slots]
        return stacks


_SLOT_ARRAYS = ("frames", "action", "reward", "discount", "version", "steps", "depth", "valid")
_STREAM_ARRAYS = ("written", "last_row", "ended")
