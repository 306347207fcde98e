"""Replay: ring storage with uniform sampling, memory checks, minibatch prefetch, and sharded replay
as a service with a typed client."""

from gorila.replay.client import RemoteReplay
from gorila.replay.frames import FrameStackStorage
from gorila.replay.memory import check_replay_memory, estimate_storage_bytes, make_storage
from gorila.replay.priority import PrioritizedSampler
from gorila.replay.rate_limit import RateLimiter
from gorila.replay.shard import Prioritization, ReplayShard, ShardedReplaySpec
from gorila.replay.storage import TransitionStorage

__all__ = ["FrameStackStorage", "PrioritizedSampler", "Prioritization", "RateLimiter", "RemoteReplay",
           "ReplayShard", "ShardedReplaySpec", "TransitionStorage", "check_replay_memory", "estimate_storage_bytes",
           "make_storage"]
