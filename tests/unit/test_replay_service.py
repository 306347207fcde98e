"""A replay shard as a service: what goes in comes out, at most once, and learners agree when to start."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation

from gorila.actors.nstep import NStep
from gorila.envs import CountingEnv, EnvRunner
from gorila.envs.vector import GymnasiumBackend
from gorila.errors import ConfigError
from gorila.replay import FrameStackStorage, Prioritization, RateLimiter, ReplayShard, ShardedReplaySpec
from gorila.types import Transitions


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


def send(shard: ReplayShard, runner: EnvRunner, steps: int, writer: str, seq: int, first_stream: int = 0,
         priorities=None):
    nstep = NStep(1, gamma=0.9)
    rows = [nstep.add(runner.step(np.zeros(runner.num_envs, np.int64))) for _ in range(steps)]
    assert all(r is not None for r in rows)  # 1-step windows: every step completes its rows
    t = Transitions.concatenate([r for r in rows if r is not None])
    t = dataclasses.replace(t, env_index=t.env_index + first_stream)
    return t, shard.add(t, writer, seq, priorities)


def test_samples_are_transitions_that_were_added():
    runner = counting_runner([3, 4])
    shard = ReplayShard(0, 1000, (1,), np.float32, num_streams=2, seed=0)
    sent, stored = send(shard, runner, 20, "a", 0)
    assert stored == len(sent) == shard.size() == shard.stats()["added"]
    b = shard.sample(500)
    assert b is not None
    # CountingEnv: obs [k] -> next_obs [k + 1], and only the episode's last step terminates.
    assert np.array_equal(b.next_obs, b.obs + 1)
    assert set(b.obs[:, 0]) == {0, 1, 2, 3}
    assert set(b.next_obs[b.discount == 0, 0]) == {3, 4}   # episodes end at their length...
    assert np.all(b.discount[b.next_obs[:, 0] == 4] == 0)   # ...and only there
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


def test_sampling_an_empty_shard_waits():
    assert ReplayShard(0, 10, (1,), np.float32).sample(4) is None  # the rate limiter: nothing inserted yet


def test_every_learner_gets_the_same_answer_for_the_same_step():
    shard = ReplayShard(0, 100, (1,), np.float32)
    runner = counting_runner([5])
    assert not shard.ready(0, 7, min_size=10)       # a learner ahead of the others is refused at step 7
    send(shard, runner, 12, "a", 0)
    assert not shard.ready(1, 5, min_size=10)       # so the opening step comes after 7, even for one behind
    assert not shard.ready(0, 7, min_size=10)
    assert [shard.ready(learner, s, min_size=10) for learner, s in ((0, 8), (0, 9), (1, 3), (1, 8))] == \
        [True, True, False, True]


def test_a_restarted_learner_is_let_in_at_once_and_a_new_one_still_waits_for_the_opening_step(tmp_path):
    shard = ReplayShard(0, 100, (1,), np.float32, checkpoints=tmp_path)
    assert not shard.ready(0, 3, min_size=10)    # too few rows at learner 0's step 3
    send(shard, counting_runner([5]), 12, "a", 0)
    assert shard.ready(0, 4, min_size=10)        # so the shard opens at step 4
    assert shard.ready(0, 0, min_size=10)        # learner 0 restarted: its steps count from 0 again
    assert not shard.ready(1, 0, min_size=10)    # learner 1 has not started: it waits for step 4
    shard.save()
    reborn = ReplayShard(0, 100, (1,), np.float32, checkpoints=tmp_path)  # the shard restarted too
    assert reborn.ready(0, 0, min_size=10) and not reborn.ready(1, 3, min_size=10) and reborn.ready(1, 4, min_size=10)


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
    assert b is not None
    assert {(o.tobytes(), n.tobytes()) for o, n in zip(b.obs, b.next_obs)} == added


def test_actors_are_routed_by_group_and_each_gets_its_streams():
    spec = ShardedReplaySpec(num_shards=2, actors=5, envs_per_actor=3, capacity=600, obs_shape=(4, 84, 84),
                             obs_dtype=np.uint8)
    assert [spec.route(k) for k in range(5)] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
    storages = [spec.build(s).storage for s in range(2)]
    assert [s.num_streams for s in storages if isinstance(s, FrameStackStorage)] == [9, 6]


def test_a_capacity_beyond_memory_is_refused_when_the_shard_is_built():
    with pytest.raises(ConfigError, match="replay_capacity"):
        ReplayShard(0, 10**12, (4, 84, 84), np.uint8)


# --- prioritized shards ------------------------------------------------------------------------

def prioritized(capacity=1000, **limits):
    return ReplayShard(0, capacity, (1,), np.float32, prioritization=Prioritization(alpha=1.0, beta=0.5,
                       anneal_inserts=100), limiter=RateLimiter(**limits))


def test_rows_enter_with_their_actors_priority_and_are_drawn_by_it():
    shard = prioritized()
    runner = counting_runner([5])
    sent, _ = send(shard, runner, 10, "a", 0, priorities=np.where(np.arange(10) == 7, 1000.0, 1e-3))
    b = shard.sample(200)
    assert np.mean(b.obs[:, 0] == sent.obs[7, 0]) > 0.9  # the high-priority row dominates
    # (N P(i))^-beta over the largest possible weight (N P_min)^-beta = (p_i / p_min)^-beta,
    # with beta annealed from 0.5 by 10 of 100 inserts to 0.55
    high = b.obs[:, 0] == sent.obs[7, 0]
    np.testing.assert_allclose(b.weights[high], (1000.0 / 1e-3) ** -0.55, rtol=1e-4)


def test_priorities_for_an_evicted_row_are_ignored():
    shard = prioritized(capacity=4)
    runner = counting_runner([50])
    send(shard, runner, 4, "a", 0, priorities=np.ones(4))
    batch = shard.sample(4)
    send(shard, runner, 4, "a", 1, priorities=np.ones(4))   # every sampled row is overwritten meanwhile
    shard.update_priorities(batch.indices, np.full(4, 1e6))
    assert shard.stats()["stale_priorities"] == 4
    again = shard.sample(400)
    assert set(again.obs[:, 0]) == set(range(4, 8))         # the new rows, drawn evenly: none got 1e6
    assert abs(np.mean(again.obs[:, 0] == 4) - 0.25) < 0.1


def test_beta_anneals_to_one_over_the_inserts_of_the_run():
    shard = prioritized()
    send(shard, counting_runner([5]), 50, "a", 0, priorities=np.linspace(0.1, 5, 50))
    assert shard.stats()["beta"] == pytest.approx(0.75)
    send(shard, counting_runner([5]), 60, "b", 0, priorities=np.ones(60))
    assert shard.stats()["beta"] == 1.0


def test_the_rate_limiter_holds_back_whichever_side_runs_ahead():
    limiter = RateLimiter.sample_to_insert_ratio(2.0, min_size_to_sample=10, error_buffer=12)
    shard = ReplayShard(0, 1000, (1,), np.float32, limiter=limiter)
    runner = counting_runner([5])
    assert send(shard, runner, 8, "a", 0)[1] == 8
    assert shard.sample(4) is None                 # 8 < min size to sample
    assert send(shard, runner, 4, "a", 1)[1] == 4   # 12 rows: diff = 24, band [8, 32]
    assert send(shard, runner, 6, "a", 2)[1] is None   # 18 rows would make diff 36 > 32: wait
    assert shard.stats()["refused_adds"] == 1 and shard.size() == 12
    assert shard.sample(8) is not None and shard.sample(8) is not None   # diff 24 -> 8
    assert shard.sample(4) is None                 # 8 - 4 < 8: sampling ran ahead, wait for inserts
    assert send(shard, runner, 6, "a", 2)[1] == 6   # the refused batch goes through now (same number)
    assert shard.sample(4) is not None and shard.stats()["sampled"] == 20


def test_a_shard_comes_back_from_its_checkpoint_with_its_rows_priorities_and_writers(tmp_path):
    make = lambda: ReplayShard(0, 100, (1,), np.float32, prioritization=Prioritization(alpha=1.0),  # noqa: E731
                               checkpoints=tmp_path)
    shard = make()
    runner = counting_runner([5])
    send(shard, runner, 20, "a", 0, priorities=np.arange(1, 21, dtype=np.float64))
    shard.save()
    send(shard, runner, 10, "a", 1, priorities=np.ones(10))   # after the checkpoint: lost in a crash
    reborn = make()
    assert reborn.restored and reborn.size() == 20 and reborn.stats()["restored_size"] == 20
    assert reborn.sampler is not None
    np.testing.assert_array_equal(reborn.sampler.priorities(np.arange(20)), np.arange(1, 21))
    assert reborn.add(send(shard, runner, 1, "x", 0)[0], "a", 0) == 0  # the writer's numbering survived
    a, b = shard.sample(8), make().sample(8)
    assert a is not None and b is not None
    assert a.obs.shape == b.obs.shape


def test_a_shard_without_a_checkpoint_starts_empty(tmp_path):
    shard = ReplayShard(0, 100, (1,), np.float32, checkpoints=tmp_path)
    assert not shard.restored and shard.size() == 0


def test_the_shard_counts_the_bytes_added_and_sampled_and_nothing_for_a_redelivered_batch():
    shard = ReplayShard(0, 1000, (1,), np.float32, seed=0)
    sent, _ = send(shard, counting_runner([5]), 10, "a", 0)
    sent_bytes = sum(a.nbytes for a in dataclasses.astuple(sent) if isinstance(a, np.ndarray))
    shard.add(sent, "a", 0)  # a retried call: stored once, counted once
    batch = shard.sample(32)
    assert batch is not None
    assert shard.stats()["bytes_added"] == sent_bytes > 0
    assert shard.stats()["bytes_sampled"] == sum(a.nbytes for a in batch) > 0
