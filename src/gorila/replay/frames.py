"""Replay for stacked-frame observations (Atari: ``(4, 84, 84)`` uint8) that keeps each frame once.

Consecutive observations of an episode share all but one frame, so storing whole stacks costs
``stack`` times the memory (28 KB instead of 7 KB per Atari transition, both for ``obs`` and
``next_obs``). Each stream (one environment feeding the storage) has its own ring of slots; a slot
holds one frame and, when it starts a transition, that transition's action, reward and done flag.
``depth`` counts how many earlier frames of the same episode a slot's stack may use, so a stack is
rebuilt by repeating the episode's first frame instead of reaching into the previous episode —
the padding Gymnasium's ``FrameStackObservation`` uses, so samples equal what was added.
"""

from __future__ import annotations

import numpy as np

from gorila import validate
from gorila.errors import ConfigError
from gorila.replay.storage import SCALAR_BYTES, Batch, check_array

# Bytes per slot besides the frame: the scalars plus depth int8 and valid bool.
SLOT_BYTES = SCALAR_BYTES + 2


class FrameStackStorage:
    """Transitions of stacked frames, each frame stored once; uniform sampling with replacement::

        storage = FrameStackStorage(1_000_000, (4, 84, 84), np.uint8, num_streams=8)
        t = runner.step(actions)
        storage.add_batch(t.obs, t.action, t.reward, t.next_obs, t.terminated, streams=t.env_index)
        batch = storage.sample(32, rng)          # batch.obs: (32, 4, 84, 84) uint8

    ``capacity`` is the number of frame slots, split evenly between ``num_streams`` rings. A
    transition takes one slot; an episode takes one more for its final frame (plus up to
    ``stack - 1`` when its first observation is not padded by repetition), so ``len`` stays a little
    under ``capacity``. Transitions of one stream must arrive in order; an ``obs`` that does not
    continue the stream's last ``next_obs`` starts a new episode. ``next_obs`` must be ``obs``
    shifted by one frame, otherwise :meth:`add` raises ``ValueError``. Not thread-safe: a caller
    that samples on another thread must hold a lock around add and sample.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype=np.uint8, *, num_streams: int = 1):
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
        self._done = np.zeros(shape, np.float32)
        self._depth = np.zeros(shape, np.int8)
        self._valid = np.zeros(shape, bool)       # slot starts a complete, sampleable transition
        self._cursor = np.zeros(num_streams, np.int64)     # next slot to write
        self._head = np.full(num_streams, -1, np.int64)    # slot of the stream's latest next_obs frame
        self._head_done = np.zeros(num_streams, bool)      # ... whose transition terminated
        self._size = 0

    @staticmethod
    def estimate_bytes(capacity: int, obs_shape: tuple[int, ...], obs_dtype) -> int:
        frame = int(np.prod(obs_shape[1:])) * np.dtype(obs_dtype).itemsize
        return capacity * (frame + SLOT_BYTES)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self._frames, self._action, self._reward, self._done, self._depth,
                                      self._valid))

    def __len__(self) -> int:
        return self._size

    def add(self, obs, action, reward, next_obs, terminated, stream: int = 0) -> None:
        obs, next_obs = np.asarray(obs), np.asarray(next_obs)
        if not np.array_equal(next_obs[:-1], obs[1:]):
            raise ValueError("next_obs is not obs shifted by one frame; FrameStackStorage needs stacked frames")
        head = self._head[stream]
        if head >= 0 and not self._head_done[stream] and np.array_equal(self._stack(stream, head), obs):
            slot = int(head)                  # obs is the stream's previous next_obs, already stored
        else:
            slot = self._write_first(stream, obs)
        self._action[stream, slot] = action
        self._reward[stream, slot] = reward
        self._done[stream, slot] = terminated
        depth = min(int(self._depth[stream, slot]) + 1, self.stack - 1)
        self._head[stream] = self._write(stream, next_obs[-1], depth)
        self._head_done[stream] = bool(terminated)
        self._valid[stream, slot] = True
        self._size += 1

    def add_batch(self, obs, action, reward, next_obs, terminated, streams=None) -> None:
        """Rows in order; ``streams[i]`` is row ``i``'s stream (all stream 0 when omitted)."""
        for i in range(len(action)):
            self.add(obs[i], action[i], reward[i], next_obs[i], terminated[i],
                     0 if streams is None else int(streams[i]))

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay storage")
        streams, slots = np.divmod(self._sample_flat(batch_size, rng), self._slots)
        return Batch(self._stacks(streams, slots), self._action[streams, slots], self._reward[streams, slots],
                     self._stacks(streams, (slots + 1) % self._slots), self._done[streams, slots])

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {name: getattr(self, "_" + name).copy() for name in _ARRAYS}
        state["size"] = np.array(self._size)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name in _ARRAYS:
            target = getattr(self, "_" + name)
            check_array(name, state[name], target)
            target[...] = state[name]
        self._size = int(state["size"])

    def _write(self, stream: int, frame: np.ndarray, depth: int) -> int:
        slot = int(self._cursor[stream])
        # Overwriting this slot ends the transition it started and every later one whose stack
        # reaches back to it (those within depth of it).
        self._forget(stream, slot)
        for back in range(1, self.stack):
            later = (slot + back) % self._slots
            if self._depth[stream, later] >= back:
                self._forget(stream, later)
        self._frames[stream, slot] = frame
        self._depth[stream, slot] = depth
        self._cursor[stream] = (slot + 1) % self._slots
        return slot

    def _write_first(self, stream: int, obs: np.ndarray) -> int:
        """Store an episode's first observation: its leading run of equal frames becomes one slot."""
        first = 0
        while first + 1 < self.stack and np.array_equal(obs[first + 1], obs[0]):
            first += 1
        slot = -1
        for depth, frame in enumerate(obs[first:]):
            slot = self._write(stream, frame, depth)
        return slot

    def _forget(self, stream: int, slot: int) -> None:
        if self._valid[stream, slot]:
            self._valid[stream, slot] = False
            self._size -= 1

    def _stack(self, stream: int, slot: int) -> np.ndarray:
        return self._stacks(np.array([stream]), np.array([slot]))[0]

    def _stacks(self, streams: np.ndarray, slots: np.ndarray) -> np.ndarray:
        # Position j of a stack is the frame (stack-1-j) slots back, but never further back than
        # the slot's depth: earlier positions repeat the episode's first frame.
        back = np.minimum(np.arange(self.stack - 1, -1, -1)[None, :], self._depth[streams, slots][:, None])
        return self._frames[streams[:, None], (slots[:, None] - back) % self._slots]

    def _sample_flat(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # Rejection sampling is uniform over valid slots and cheap once the storage is mostly
        # valid; the scan of all slots is the fallback while it is still filling.
        valid = self._valid.reshape(-1)
        accepted = np.empty(0, np.int64)
        for _ in range(4):
            candidates = rng.integers(0, valid.size, 2 * n)
            accepted = np.concatenate([accepted, candidates[valid[candidates]]])
            if len(accepted) >= n:
                return accepted[:n]
        pool = np.flatnonzero(valid)
        return pool[rng.integers(0, len(pool), n)]


_ARRAYS = ("frames", "action", "reward", "done", "depth", "valid", "cursor", "head", "head_done")
