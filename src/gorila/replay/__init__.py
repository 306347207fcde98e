"""Replay: ring storage with uniform sampling, memory checks, and minibatch prefetch."""

from gorila.replay.frames import FrameStackStorage
from gorila.replay.memory import check_replay_memory, estimate_storage_bytes, make_storage
from gorila.replay.storage import Batch, TransitionStorage

__all__ = ["Batch", "FrameStackStorage", "TransitionStorage", "check_replay_memory", "estimate_storage_bytes",
           "make_storage"]
