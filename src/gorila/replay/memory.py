"""Choosing a replay layout and refusing one that will not fit in memory, before anything starts."""

from __future__ import annotations

import numpy as np
import psutil  # type: ignore[import-untyped]  # psutil ships no type hints
from numpy.typing import DTypeLike

from gorila.errors import ConfigError
from gorila.replay.frames import FrameStackStorage
from gorila.replay.grids import PackedGridStorage, is_bool_grid
from gorila.replay.storage import TransitionStorage

# Headroom for the rest of the process (networks, env copies, the OS) and for other workers.
MAX_FRACTION = 0.8


def is_frame_stack(obs_shape: tuple[int, ...], obs_dtype: DTypeLike) -> bool:
    """The layout rule: ``(stack, height, width)`` uint8 observations are stacks of frames."""
    return len(obs_shape) == 3 and np.dtype(obs_dtype) == np.uint8


def make_storage(capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike, *,
                 num_streams: int = 1) -> TransitionStorage | FrameStackStorage | PackedGridStorage:
    """:class:`FrameStackStorage` for stacked frames, :class:`PackedGridStorage` for boolean grids,
    :class:`TransitionStorage` otherwise::

        storage = make_storage(1_000_000, (4, 84, 84), np.uint8, num_streams=8)   # ~7 GB, not ~56 GB
        storage = make_storage(100_000, (4, 10, 10), bool)   # MinAtar: 124 B a row, float32's 3224

    Observations become float only in the network, on a sampled batch: frames stay bytes, and
    MinAtar's boolean grids are kept at one bit per cell, 1/32 of float32.
    """
    if is_frame_stack(obs_shape, obs_dtype):
        return FrameStackStorage(capacity, obs_shape, obs_dtype, num_streams=num_streams)
    if is_bool_grid(obs_shape, obs_dtype):
        return PackedGridStorage(capacity, obs_shape, obs_dtype)
    return TransitionStorage(capacity, obs_shape, obs_dtype)


def estimate_storage_bytes(capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike) -> int:
    """Bytes :func:`make_storage` allocates for these arguments."""
    cls = (FrameStackStorage if is_frame_stack(obs_shape, obs_dtype)
           else PackedGridStorage if is_bool_grid(obs_shape, obs_dtype) else TransitionStorage)
    return cls.estimate_bytes(capacity, obs_shape, obs_dtype)


def check_replay_memory(capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike, *,
                        available_bytes: int | None = None) -> int:
    """Estimated bytes of the storage; raises ConfigError("replay_capacity") above 80 % of what is free::

        check_replay_memory(1_000_000, (4, 84, 84), np.uint8)   # ~7.1e9, or ConfigError on a small machine

    ``available_bytes`` defaults to psutil's available memory now. Several replays on one machine
    each need their own check against a share of it.
    """
    need = estimate_storage_bytes(capacity, obs_shape, obs_dtype)
    available = psutil.virtual_memory().available if available_bytes is None else available_bytes
    if need > MAX_FRACTION * available:
        raise ConfigError("replay_capacity",
                          f"{capacity} transitions of {tuple(obs_shape)} {np.dtype(obs_dtype)} needs "
                          f"{need / 2**30:.2f} GiB, {available / 2**30:.2f} GiB available "
                          f"(at most {MAX_FRACTION:.0%} may be used); lower it")
    return need
