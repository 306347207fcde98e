"""A replay shard as a service: what goes in comes out, at most once, and learners agree when to start."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation

from gorila.envs import CountingEnv, EnvRunner, Transitions
from gorila.envs.vector import GymnasiumBackend
from gorila.errors import ConfigError
from gorila.replay import FrameStackStorage, ReplayShard, ShardedReplaySpec


class Frames(gym.ObservationWrapper):
    """CountingEnv as a one-pixel uint8 frame worth 10 * episode number + step index, so a stack
    that reached into another episode shows."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0, 255, (1, 1), np.uint8)
        self.episode = -1

    def reset(self, **kwargs):
        self.episode += 1
        return super().reset(**kwargs)

    def observation(self, obs):
        return (obs + 10 * self.episode).astype(np.uint8).reshape(1, 1)


def counting_runner(lengths, stack: int | None = None) -> EnvRunner:
    def make(length):
        return (lambda: CountingEnv(length)) if stack is None else (
            lambda: FrameStackObservation(Frames(CountingEnv(length)), stack, padding_type="reset"))
    return EnvRunner(GymnasiumBackend([make(n) for n in lengths]))


def send(shard: ReplayShard, runner: EnvRunner, steps: int, writer: str, seq: int, first_stream: int = 0):
    t = Transitions.concatenate([runner.step(np.zeros(runner.num_envs, np.int64)) for _ in range(steps)])
    t = dataclasses.replace(t, env_index=t.env_index + first_stream)
    return t, shard.add(t, writer, seq)


def test_samples_are_transitions_that_were_added():
    runner = counting_runner([3, 4])
    shard = ReplayShard(0, 1000, (1,), np.float32, num_streams=2, seed=0)
    sent, stored = send(shard, runner, 20, "a", 0)
    assert stored == len(sent) == shard.size() == shard.stats()["added"]
    b = shard.sample(500)
    # CountingEnv: obs [k] -> next_obs [k + 1], and only the episode's last step terminates.
    assert np.array_equal(b.next_obs, b.obs + 1)
    assert set(b.obs[:, 0]) == {0, 1, 2, 3}
    assert set(b.next_obs[b.done == 1, 0]) == {3, 4}       # episodes end at their length...
    assert np.all(b.done[b.next_obs[:, 0] == 4] == 1)       # ...and only there
    assert shard.stats()["sampled"] == 500


def test_a_redelivered_batch_is_stored_once():
    runner = counting_runner([5])
    shard = ReplayShard(0, 1000, (1,), np.float32, seed=0)
    sent, first = send(shard, runner, 10, "actor0", 0)
    assert shard.add(sent, "actor0", 0) == 0                 # a retried call
    assert shard.size() == first and shard.stats()["duplicates"] == 1
    _, second = send(shard, runner, 10, "actor0", 1)
    assert shard.add(sent, "actor0", 0) == 0                 # an old batch arriving late
    _, other = send(shard, counting_runner([5]), 10, "actor0-restarted", 0)   # a new writer starts at 0
    assert shard.size() == first + second + other == shard.stats()["added"]
    assert shard.stats()["duplicates"] == 2


def test_sampling_an_empty_shard_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        ReplayShard(0, 10, (1,), np.float32).sample(4)


def test_every_learner_gets_the_same_answer_for_the_same_step():
    shard = ReplayShard(0, 100, (1,), np.float32)
    runner = counting_runner([5])
    assert not shard.ready(7, min_size=10)       # a learner ahead of the others is refused at step 7
    send(shard, runner, 12, "a", 0)
    assert not shard.ready(5, min_size=10)       # so the opening step comes after 7, even for one behind
    assert not shard.ready(7, min_size=10)
    assert [shard.ready(s, min_size=10) for s in (8, 9, 3, 8)] == [True, True, False, True]


def test_stacked_frames_of_several_actors_are_stored_once_and_come_back_as_added():
    shard = ReplayShard(0, 400, (4, 1, 1), np.uint8, num_streams=4, seed=0)
    assert isinstance(shard.storage, FrameStackStorage)
    runners = [counting_runner([3, 5], stack=4), counting_runner([4, 6], stack=4)]
    added, rows_sent = set(), 0
    for seq in range(3):   # the two actors' batches interleave; each actor owns two streams
        for slot, runner in enumerate(runners):
            sent, stored = send(shard, runner, 7, f"actor{slot}", seq, first_stream=2 * slot)
            added |= {(o.tobytes(), n.tobytes()) for o, n in zip(sent.obs, sent.next_obs)}
            rows_sent += stored
    assert shard.size() == shard.stats()["added"] == rows_sent
    assert max(int(frame) for o, _ in added for frame in o) >= 20   # third episodes are in there
    b = shard.sample(2000)
    assert {(o.tobytes(), n.tobytes()) for o, n in zip(b.obs, b.next_obs)} == added


def test_actors_are_routed_by_group_and_each_gets_its_streams():
    spec = ShardedReplaySpec(num_shards=2, actors=5, envs_per_actor=3, capacity=600, obs_shape=(4, 84, 84),
                             obs_dtype=np.uint8)
    assert [spec.route(k) for k in range(5)] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
    assert [spec.build(s).storage.num_streams for s in range(2)] == [9, 6]


def test_a_capacity_beyond_memory_is_refused_when_the_shard_is_built():
    with pytest.raises(ConfigError, match="replay_capacity"):
        ReplayShard(0, 10**12, (4, 84, 84), np.uint8)
