import threading
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation

from gorila.envs import CountingEnv, EnvRunner, make_env
from gorila.envs.vector import GymnasiumBackend
from gorila.errors import ConfigError, WorkerTimeoutError
from gorila.replay import (FrameStackStorage, TransitionStorage, check_replay_memory, estimate_storage_bytes,
                           make_storage)
from gorila.replay.prefetch import Prefetcher


class StampEpisodes(gym.ObservationWrapper):
    """Observation = 100 * episode number + step index, so a frame from another episode shows."""

    def __init__(self, env):
        super().__init__(env)
        self.episode = -1

    def reset(self, **kwargs):
        self.episode += 1
        return super().reset(**kwargs)

    def observation(self, obs):
        return obs + 100 * self.episode


def stacked_env(length, truncate=False, padding="reset"):
    return FrameStackObservation(StampEpisodes(CountingEnv(length, truncate=truncate)), 4, padding_type=padding)


def collect(runner: EnvRunner, storage, steps: int) -> list[tuple[bytes, bytes, float]]:
    added = []
    for _ in range(steps):
        t = runner.step(np.zeros(runner.num_envs, np.int64))
        storage.add_batch(t.obs, t.action, t.reward, t.next_obs, t.terminated, streams=t.env_index)
        added += [(t.obs[i].tobytes(), t.next_obs[i].tobytes(), float(t.terminated[i])) for i in range(len(t))]
    return added


def sampled(storage, n: int, seed: int = 0) -> list[tuple[bytes, bytes, float]]:
    b = storage.sample(n, np.random.default_rng(seed))
    return [(b.obs[i].tobytes(), b.next_obs[i].tobytes(), float(b.done[i])) for i in range(n)]


# -- TransitionStorage ------------------------------------------------------------------------------------

def test_vector_storage_keeps_the_newest_capacity_transitions():
    storage = TransitionStorage(4, (1,), np.float32)
    for k in range(6):
        storage.add(np.array([k], np.float32), k % 2, 1.0, np.array([k + 1], np.float32), k == 5)
    assert len(storage) == 4
    b = storage.sample(200, np.random.default_rng(0))
    assert set(b.obs[:, 0]) == {2, 3, 4, 5}
    assert np.array_equal(b.next_obs[:, 0], b.obs[:, 0] + 1)
    assert np.array_equal(b.action, b.obs[:, 0].astype(np.int64) % 2)
    assert np.array_equal(b.done, (b.obs[:, 0] == 5).astype(np.float32))


def test_vector_storage_add_batch_equals_adds_and_state_round_trips():
    obs = np.arange(10, dtype=np.float32)[:, None]
    one, many = TransitionStorage(8, (1,)), TransitionStorage(8, (1,))
    for i in range(10):
        one.add(obs[i], i, float(i), obs[i] + 1, False)
    many.add_batch(obs, np.arange(10), obs[:, 0], obs + 1, np.zeros(10, bool))
    assert sampled(one, 50) == sampled(many, 50)
    restored = TransitionStorage(8, (1,))
    restored.load_state_dict(many.state_dict())
    assert len(restored) == 8 and sampled(restored, 50) == sampled(many, 50)
    with pytest.raises(ValueError, match="obs"):
        TransitionStorage(9, (1,)).load_state_dict(many.state_dict())


def test_sampling_an_empty_storage_fails_clearly():
    with pytest.raises(ValueError, match="empty"):
        TransitionStorage(4, (1,)).sample(1, np.random.default_rng(0))


# -- FrameStackStorage ------------------------------------------------------------------------------------

def test_frame_storage_returns_exactly_what_was_added_across_streams_and_episode_ends():
    runner = EnvRunner(GymnasiumBackend([lambda: stacked_env(3), lambda: stacked_env(6, truncate=True),
                                         lambda: stacked_env(2, padding="zero")]))
    storage = FrameStackStorage(3 * 200, (4, 1), np.float32, num_streams=3)
    added = collect(runner, storage, 40)
    assert len(storage) == len(added)
    got = sampled(storage, 4000)
    assert set(got) == set(added)  # every transition, and nothing else (no stack spans two episodes)


def test_frame_storage_ring_only_forgets_whole_old_transitions():
    runner = EnvRunner(GymnasiumBackend([lambda: stacked_env(7), lambda: stacked_env(4, truncate=True)]))
    storage = FrameStackStorage(2 * 16, (4, 1), np.float32, num_streams=2)
    added = collect(runner, storage, 60)
    assert 0 < len(storage) <= 32
    recent = Counter(added[-len(storage) - 8:])
    for transition in sampled(storage, 500):
        assert transition in recent
    assert len(set(sampled(storage, 2000))) == len(storage)


def test_frame_storage_state_round_trips():
    runner = EnvRunner(GymnasiumBackend([lambda: stacked_env(5)]))
    storage = FrameStackStorage(40, (4, 1), np.float32)
    collect(runner, storage, 30)
    restored = FrameStackStorage(40, (4, 1), np.float32)
    restored.load_state_dict(storage.state_dict())
    assert len(restored) == len(storage) and sampled(restored, 64) == sampled(storage, 64)
    collect(runner, restored, 3)  # keeps appending to the same stream after a restore


def test_frame_storage_refuses_observations_that_are_not_frame_stacks():
    storage = FrameStackStorage(16, (4, 1), np.float32)
    with pytest.raises(ValueError, match="shifted"):
        storage.add(np.zeros((4, 1)), 0, 0.0, np.ones((4, 1)), False)


def test_atari_observations_are_stacked_bytes_and_replay_stores_each_frame_once():
    env = make_env("ALE/Pong-v5", seed=0, training=True)
    obs, _ = env.reset()
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    storage = make_storage(64, obs.shape, obs.dtype)
    assert isinstance(storage, FrameStackStorage)
    added = []
    for _ in range(100):
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        assert reward in (-1.0, 0.0, 1.0)
        storage.add(obs, action, reward, next_obs, terminated)
        added.append((obs.tobytes(), next_obs.tobytes(), float(terminated)))
        obs = next_obs
    env.close()
    assert storage.nbytes / storage.capacity < 84 * 84 * 1.01  # one frame per transition, not four or eight
    assert set(sampled(storage, 256)) <= set(added[-64:])


# -- sizing -----------------------------------------------------------------------------------------------

def test_make_storage_picks_the_layout_and_estimates_its_bytes():
    for shape, dtype, cls in (((4, 84, 84), np.uint8, FrameStackStorage), ((8,), np.float32, TransitionStorage),
                              ((3, 8, 8), np.float32, TransitionStorage)):
        storage = make_storage(100, shape, dtype)
        assert isinstance(storage, cls) and storage.nbytes == estimate_storage_bytes(100, shape, dtype)


def test_check_replay_memory_refuses_what_does_not_fit():
    need = check_replay_memory(1_000_000, (4, 84, 84), np.uint8, available_bytes=64 * 2**30)
    assert 7.0e9 < need < 7.2e9
    with pytest.raises(ConfigError) as e:
        check_replay_memory(1_000_000, (4, 84, 84), np.uint8, available_bytes=8 * 2**30)
    assert e.value.field == "replay_capacity" and "6.59 GiB" in e.value.message and "8.00 GiB" in e.value.message


# -- Prefetcher -------------------------------------------------------------------------------------------

def test_prefetcher_hands_out_samples_in_order_and_stays_bounded():
    calls, full = [], threading.Event()

    def sample():
        calls.append(len(calls))
        if len(calls) == 3:  # depth 2 queued + 1 waiting to be put: the producer is now blocked
            full.set()
        return calls[-1]

    with Prefetcher(sample, depth=2) as batches:
        assert full.wait(5.0)
        assert len(calls) == 3
        assert [batches.next(timeout_s=5.0) for _ in range(5)] == [0, 1, 2, 3, 4]


def test_prefetcher_surfaces_the_sampler_error_in_next():
    def sample(counter=iter(range(10))):
        if next(counter) == 2:
            raise KeyError("boom")
        return "batch"

    batches = Prefetcher(sample, depth=1)
    assert batches.next(5.0) == batches.next(5.0) == "batch"
    for _ in range(2):
        with pytest.raises(KeyError, match="boom"):
            batches.next(5.0)
    batches.close()


def test_prefetcher_times_out_with_a_typed_error():
    release = threading.Event()
    batches = Prefetcher(lambda: release.wait(), depth=1)
    with pytest.raises(WorkerTimeoutError):
        batches.next(timeout_s=0.05)
    release.set()
    batches.close()
