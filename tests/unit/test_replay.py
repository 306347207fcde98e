import threading
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation

from gorila.actors.nstep import NStep
from gorila.envs import CountingEnv, EnvRunner, make_env_runner
from gorila.envs.vector import GymnasiumBackend
from gorila.errors import ConfigError, WorkerTimeoutError
from gorila.replay import (
    FrameStackStorage,
    TransitionStorage,
    check_replay_memory,
    estimate_storage_bytes,
    make_storage,
)
from gorila.replay.prefetch import Prefetcher
from gorila.types import Transitions


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


def collect(runner: EnvRunner, storage, steps: int, n: int = 1) -> list[tuple]:
    """Step the runner, build ``n``-step rows as an actor does, add them; returns what was added."""
    nstep, added = NStep(n, gamma=0.5), []
    for _ in range(steps):
        rows = nstep.add(runner.step(np.zeros(runner.num_envs, np.int64)))
        if rows is not None:
            storage.add(rows)
            added += [row(rows, i) for i in range(len(rows))]
    return added


def row(t, i) -> tuple:
    return t.obs[i].tobytes(), t.next_obs[i].tobytes(), float(t.reward[i]), float(t.discount[i])


def sampled(storage, n: int, seed: int = 0) -> list[tuple]:
    batch = storage.sample(n, np.random.default_rng(seed))
    return [row(batch, i) for i in range(n)]


def vector_rows(first: int, count: int, terminal: int | None = None):
    """``count`` one-step rows numbered from ``first`` (obs = number); ``terminal`` ends an episode."""
    obs = np.arange(first, first + count, dtype=np.float32)[:, None]
    done = obs[:, 0] == terminal
    return Transitions(obs, obs[:, 0].astype(np.int64) % 2, np.ones(count, np.float32), obs + 1, done,
                       np.zeros(count, bool), np.zeros(count, np.int64), policy_version=np.arange(count),
                       discount=np.where(done, 0.0, 0.9).astype(np.float32), steps=np.ones(count, np.int64))


# -- TransitionStorage ------------------------------------------------------------------------------------

def test_vector_storage_keeps_the_newest_capacity_rows():
    storage = TransitionStorage(4, (1,), np.float32)
    for k in range(6):
        storage.add(vector_rows(k, 1, terminal=5))
    assert len(storage) == 4
    b = storage.sample(200, np.random.default_rng(0))
    assert set(b.obs[:, 0]) == {2, 3, 4, 5}
    assert np.array_equal(b.next_obs[:, 0], b.obs[:, 0] + 1)
    assert np.array_equal(b.action, b.obs[:, 0].astype(np.int64) % 2)
    assert np.array_equal(b.discount, np.where(b.obs[:, 0] == 5, 0.0, 0.9).astype(np.float32))
    assert np.array_equal(storage.gather(b.indices).obs, b.obs)  # indices name the rows


def test_vector_storage_batch_equals_row_by_row_adds_and_state_round_trips():
    one, many = TransitionStorage(8, (1,)), TransitionStorage(8, (1,))
    for i in range(10):
        one.add(vector_rows(i, 1))
    written, lost = many.add(vector_rows(0, 10))
    assert written.tolist() == [-1, -1, 2, 3, 4, 5, 6, 7, 0, 1] and len(lost) == 0
    assert sampled(one, 50) == sampled(many, 50)
    restored = TransitionStorage(8, (1,))
    restored.load_state_dict(many.state_dict())
    assert len(restored) == 8 and sampled(restored, 50) == sampled(many, 50)
    with pytest.raises(ValueError, match="obs"):
        TransitionStorage(9, (1,)).load_state_dict(many.state_dict())


def test_a_batch_that_wraps_the_ring_lands_in_the_slots_it_names():
    storage = TransitionStorage(8, (1,))
    assert storage.add(vector_rows(0, 5))[0].tolist() == [0, 1, 2, 3, 4]
    written, _ = storage.add(vector_rows(5, 5))
    assert written.tolist() == [5, 6, 7, 0, 1]
    assert storage.gather(written).obs[:, 0].tolist() == [5, 6, 7, 8, 9]
    assert storage.gather(np.array([2, 3, 4])).obs[:, 0].tolist() == [2, 3, 4]  # older rows untouched


def test_rows_without_discount_are_refused():
    runner = EnvRunner(GymnasiumBackend([lambda: CountingEnv(3)]))
    with pytest.raises(ValueError, match="NStep"):
        TransitionStorage(4, (1,)).add(runner.step(np.zeros(1, np.int64)))


def test_sampling_an_empty_storage_fails_clearly():
    with pytest.raises(ValueError, match="empty"):
        TransitionStorage(4, (1,)).sample(1, np.random.default_rng(0))


# -- FrameStackStorage ------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 3, 4])
def test_frame_storage_returns_exactly_the_rows_added_across_streams_and_episode_ends(n):
    runner = EnvRunner(GymnasiumBackend([lambda: stacked_env(3), lambda: stacked_env(6, truncate=True),
                                         lambda: stacked_env(2, padding="zero"), lambda: stacked_env(9)]))
    storage = FrameStackStorage(4 * 200, (4, 1), np.float32, num_streams=4)
    added = collect(runner, storage, 40, n=n)
    assert len(storage) == len(added)
    # every row with its n-step bootstrap stack, and nothing else (no stack spans two episodes)
    assert set(sampled(storage, 6000)) == set(added)


@pytest.mark.parametrize("n", [1, 3])
def test_frame_storage_ring_only_forgets_whole_old_rows(n, monkeypatch):
    runner = EnvRunner(GymnasiumBackend([lambda: stacked_env(7), lambda: stacked_env(4, truncate=True)]))
    storage = FrameStackStorage(2 * 16, (4, 1), np.float32, num_streams=2)
    present, lost_any = set(), False  # what a sampler learns from add's return values
    original = storage.add

    def add(rows):
        nonlocal lost_any
        written, lost = original(rows)
        present.update(written[written >= 0].tolist())
        present.difference_update(lost.tolist())
        lost_any |= len(lost) > 0
        return written, lost
    monkeypatch.setattr(storage, "add", add)
    added = collect(runner, storage, 60, n=n)
    assert 0 < len(storage) <= 32 and lost_any
    recent = Counter(added[-len(storage) - 8:])
    for transition in sampled(storage, 500):
        assert transition in recent
    assert len(set(sampled(storage, 2000))) == len(storage)
    # the slots add reported written and not lost since are exactly the rows that can be sampled
    assert present == set(np.flatnonzero(storage._valid.reshape(-1)).tolist())


def test_frame_storage_state_round_trips():
    runner = EnvRunner(GymnasiumBackend([lambda: stacked_env(5)]))
    storage = FrameStackStorage(40, (4, 1), np.float32)
    collect(runner, storage, 30, n=3)
    restored = FrameStackStorage(40, (4, 1), np.float32)
    restored.load_state_dict(storage.state_dict())
    assert len(restored) == len(storage) and sampled(restored, 64) == sampled(storage, 64)
    collect(runner, restored, 3)  # keeps appending to the same stream after a restore


def test_frame_storage_refuses_observations_that_are_not_frame_stacks():
    storage = FrameStackStorage(16, (4, 1), np.float32)
    rows = Transitions(np.zeros((1, 4, 1)), np.zeros(1, np.int64), np.zeros(1, np.float32), np.ones((1, 4, 1)),
                       np.zeros(1, bool), np.zeros(1, bool), np.zeros(1, np.int64), discount=np.ones(1, np.float32),
                       steps=np.ones(1, np.int64))
    with pytest.raises(ValueError, match="shifted"):
        storage.add(rows)


def test_atari_observations_are_stacked_bytes_and_replay_stores_each_frame_once():
    runner = make_env_runner("ALE/Pong-v5", 1, seed=0, training=True, backend="gymnasium")
    assert runner.observations.shape == (1, 4, 84, 84) and runner.observations.dtype == np.uint8
    shape = runner.observation_space.shape
    assert shape is not None
    storage = make_storage(64, shape, np.uint8)
    assert isinstance(storage, FrameStackStorage)
    nstep, added = NStep(3, gamma=0.99), []
    rng = np.random.default_rng(0)
    for _ in range(100):
        t = runner.step(rng.integers(6, size=1))
        assert t.reward[0] in (-1.0, 0.0, 1.0)
        rows = nstep.add(t)
        if rows is not None:
            storage.add(rows)
            added += [row(rows, i) for i in range(len(rows))]
    runner.close()
    assert storage.nbytes / storage.capacity < 84 * 84 * 1.01  # one frame per row, not four or eight
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
    assert e.value.field == "replay_capacity" and "6.60 GiB" in e.value.message and "8.00 GiB" in e.value.message


# -- Prefetcher -------------------------------------------------------------------------------------------

def test_prefetcher_hands_out_samples_in_order_and_stays_bounded():
    calls: list[int] = []
    full = threading.Event()

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
