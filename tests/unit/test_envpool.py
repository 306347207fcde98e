"""EnvPool's Atari (``--env-backend envpool``, what ``auto`` takes for ``ALE/*`` ids) against gorila's
Gymnasium path (:func:`gorila.envs.make.make_env`): the same preprocessing, checked frame by frame
where the two can be made to play the same game, by statistics where they draw at random, and the
one documented difference (a lost life) checked as documented."""

from __future__ import annotations

import numpy as np
import pytest

from gorila.envs.make import RAW_REWARD, make_env
from gorila.envs.vector import EnvPoolBackend, EnvRunner, envpool_supports, make_env_runner
from gorila.errors import ConfigError

pytestmark = pytest.mark.skipif(not envpool_supports("ALE/Pong-v5"),
                                reason="envpool is not installed (gorila[envpool], Python 3.11+)")


def _play_both(game: str, steps: int, seed: int = 0) -> list[tuple]:
    """Both backends' ``(obs, reward, raw reward, terminated)`` for the same random actions, from a
    reset with exactly one no-op frame (the only no-op count both can be told to draw)."""
    gym_env = make_env(f"ALE/{game}-v5", seed=seed, training=True, noop_max=1)
    pool = EnvPoolBackend(f"ALE/{game}-v5", 1, seed=seed, training=True, noop_max=1)
    rng = np.random.default_rng(seed)
    n_actions = pool.single_action_space.n  # a Discrete space: Atari's minimal action set
    rows = [(gym_env.reset(seed=seed)[0], pool.reset()[0])]
    for _ in range(steps):
        action = int(rng.integers(n_actions))
        obs, reward, terminated, truncated, info = gym_env.step(action)
        p_obs, p_reward, p_raw, p_terminated, p_truncated, _ = pool.step(np.array([action]))
        rows.append(((obs, reward, info[RAW_REWARD], terminated or truncated),
                     (p_obs[0], p_reward[0], p_raw[0], p_terminated[0] or p_truncated[0])))
        if terminated or truncated or p_terminated[0] or p_truncated[0]:
            break
    gym_env.close()
    pool.close()
    return rows


@pytest.mark.parametrize("game", ["Breakout", "SpaceInvaders"])
def test_envpool_plays_the_gymnasium_paths_frames_bit_for_bit(game):
    # Frame skip 4 with the last two frames max-pooled, 84x84 grayscale by area interpolation, 4
    # stacked frames filled with the first at the reset, no sticky actions, no fire at the reset:
    # any of them done differently changes the frames within a few steps of random play.
    rows = _play_both(game, steps=400)
    reset_gym, reset_pool = rows[0]
    assert reset_gym.shape == reset_pool.shape == (4, 84, 84) and reset_pool.dtype == np.uint8
    assert np.array_equal(reset_gym, reset_pool)
    for t, (gym_row, pool_row) in enumerate(rows[1:]):
        assert np.array_equal(gym_row[0], pool_row[0]), f"frames differ at step {t}"
        assert gym_row[1:] == pytest.approx(pool_row[1:]), f"reward or end differs at step {t}"
    raw = np.array([row[1][2] for row in rows[1:]])
    clipped = np.array([row[1][1] for row in rows[1:]])
    assert np.any(raw != 0), "the random play scored nothing: the rewards went unchecked"
    # Training's rewards are the raw rewards' signs on both paths; the raw reward stays for the score.
    assert np.array_equal(clipped, np.sign(raw))
    if game == "SpaceInvaders":
        assert raw.max() > 1, "no reward above 1 was scored: the clipping went unchecked"


def test_both_backends_start_episodes_after_1_to_30_no_ops():
    # The no-op count is drawn at random (1..30 on both paths, from different generators): a fixed
    # action sequence after the reset then reaches as many different frames as counts were drawn.
    # The same range gives sets of frames of the same size that mostly coincide; no no-ops at all,
    # or another range, would give one frame, or frames the other path never reaches.
    resets, steps = 32, 40
    gym_env = make_env("ALE/Pong-v5", seed=0, training=True)
    gym_frames = set()
    for _ in range(resets):  # each reset draws a new count from the env's generator
        gym_env.reset()
        for _ in range(steps):
            obs = gym_env.step(0)[0]
        gym_frames.add(obs.tobytes())
    gym_env.close()
    pool = EnvPoolBackend("ALE/Pong-v5", resets, seed=0, training=True)
    pool.reset()
    for _ in range(steps):
        obs = pool.step(np.zeros(resets, np.int64))[0]
    pool.close()
    pool_frames = {o.tobytes() for o in obs}
    assert len(gym_frames) >= 12 and len(pool_frames) >= 12  # ~21 distinct of 30 expected from 32 draws
    assert len(gym_frames & pool_frames) >= 8


def test_a_lost_life_ends_envpools_training_episode_and_the_game_goes_on():
    # The documented difference: EnvPool's episodic life ends the episode at a lost life (the learner
    # does not bootstrap across it) and plays on with the next life; Gymnasium's restarts the game.
    # The runner's scored episode is the whole game's either way.
    runner = EnvRunner(EnvPoolBackend("ALE/Breakout-v5", 1, seed=0, training=True, terminal_on_life_loss=True))
    rng = np.random.default_rng(0)
    ends, total = 0, 0.0
    episodes = []
    for _ in range(3_000):
        t = runner.step(rng.integers(4, size=1))
        ends += int(t.terminated.sum())
        total += float(t.reward.sum())
        episodes += runner.pop_episodes()
        if episodes:
            break
    runner.close()
    assert ends == 5  # Breakout's five lives, each an episode's end for the learner
    assert len(episodes) == 1 and episodes[0].score > 0  # ... and one game scored
    gym_env = make_env("ALE/Breakout-v5", seed=0, training=True, terminal_on_life_loss=True)
    gym_env.reset(seed=0)
    for _ in range(3_000):
        _, _, terminated, truncated, info = gym_env.step(int(rng.integers(4)))
        if terminated or truncated:
            break
    assert terminated and info["lives"] == 4  # the first life lost ends Gymnasium's episode: a reset restarts the game
    gym_env.close()


def test_envpools_no_op_count_must_be_at_least_one():
    # EnvPool crashes the process (a segmentation fault) when asked for no no-ops: refused by name first.
    with pytest.raises(ConfigError) as e:
        EnvPoolBackend("ALE/Pong-v5", 1, seed=0, training=True, noop_max=0)
    assert e.value.field == "noop_max"


def test_auto_takes_envpool_for_atari_ids_only():
    with make_env_runner("ALE/Pong-v5", 2, seed=0, training=True) as runner:
        assert isinstance(runner.backend, EnvPoolBackend)
    with make_env_runner("CartPole-v1", 2, seed=0, training=True) as runner:
        assert not isinstance(runner.backend, EnvPoolBackend)
