"""Replay rows of boolean grids (MinAtar's ``(C, 10, 10)`` observations) kept bit-packed.

A grid cell is one bit of information; numpy keeps a bool in a byte and float32 in four. This
storage keeps ``obs`` and ``next_obs`` as ``np.packbits`` of the flattened grid (8 cells a byte)
and unpacks only the rows of a sampled batch, which the network then casts to float.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from gorila.replay.storage import SCALAR_BYTES, TransitionStorage
from gorila.types import Batch, Transitions


def is_bool_grid(obs_shape: tuple[int, ...], obs_dtype: DTypeLike) -> bool:
    """The layout rule: ``(channels, height, width)`` boolean observations are grids to pack."""
    return len(obs_shape) == 3 and np.dtype(obs_dtype) == np.bool_


class PackedGridStorage(TransitionStorage):
    """:class:`TransitionStorage` for boolean grids at one bit per cell::

        storage = PackedGridStorage(100_000, obs_shape=(4, 10, 10))   # 124 B a row; float32 3224
        storage.add(rows)                    # rows.obs: (N, 4, 10, 10) bool
        batch = storage.sample(32, rng)      # batch.obs: (32, 4, 10, 10) bool, unpacked

    ``state_dict`` holds the packed arrays, so checkpoints shrink as well. Rows' grids are read as
    they are when added, and never written afterwards: an ``obs`` that is the very array the last
    rows' ``next_obs`` was (an actor's next step) reuses its packing.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike = np.bool_):
        self.cells = int(np.prod(obs_shape))
        super().__init__(capacity, (packed_bytes(obs_shape),), np.uint8)
        self.obs_shape = tuple(obs_shape)
        self._last_grids: np.ndarray | None = None  # the last rows' next_obs, and its packing
        self._last_packed: np.ndarray | None = None

    @staticmethod
    def estimate_bytes(capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike = np.bool_) -> int:
        return capacity * (2 * packed_bytes(obs_shape) + SCALAR_BYTES)

    def add(self, t: Transitions) -> tuple[np.ndarray, np.ndarray]:
        # An actor's one-step rows start where its last ones landed: the very array, where no episode
        # ended in between. Its packing is kept, so that each step's grids are packed once.
        last = self._last_packed
        obs = last if last is not None and t.obs is self._last_grids else self._pack(t.obs)
        next_obs = self._pack(t.next_obs)
        self._last_grids, self._last_packed = t.next_obs, next_obs
        return self._store(t, obs, next_obs)

    def gather(self, indices: np.ndarray, weights: np.ndarray | None = None) -> Batch:
        batch = super().gather(indices, weights)
        return batch._replace(obs=self._unpack(batch.obs), next_obs=self._unpack(batch.next_obs))

    def _pack(self, grids: np.ndarray) -> np.ndarray:
        return np.packbits(np.asarray(grids, bool).reshape(len(grids), self.cells), axis=1)

    def _unpack(self, packed: np.ndarray) -> np.ndarray:
        cells = np.unpackbits(packed, axis=1, count=self.cells)
        return cells.view(bool).reshape(len(packed), *self.obs_shape)


def packed_bytes(obs_shape: tuple[int, ...]) -> int:
    """Bytes of one packed grid: a bit per cell, rounded up to whole bytes."""
    return (int(np.prod(obs_shape)) + 7) // 8
