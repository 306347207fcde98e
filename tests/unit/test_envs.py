import itertools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from evaluation_fakes import made
from gorila.envs import (
    CountingEnv,
    EnvRunner,
    dqn_normalized,
    evaluate,
    human_normalized,
    is_atari,
    make_env,
    make_env_runner,
)
from gorila.envs.evaluation import EVAL_MAX_STEPS, NORMALIZATION_SOURCE, EvaluationEpisodes
from gorila.envs.make import SignReward
from gorila.envs.vector import GymnasiumBackend, envpool_supports
from gorila.errors import ConfigError


def runner_of(*envs) -> EnvRunner:
    return EnvRunner(GymnasiumBackend([made(e) for e in envs]))


def run(runner: EnvRunner, steps: int):
    rows = []
    for _ in range(steps):
        t = runner.step(np.zeros(runner.num_envs, np.int64))
        rows += [(int(t.env_index[i]), float(t.obs[i, 0]), float(t.next_obs[i, 0]), bool(t.terminated[i]),
                  bool(t.truncated[i]), float(t.reward[i])) for i in range(len(t))]
    return rows


def test_counting_env_observation_is_the_step_index():
    env = CountingEnv(episode_length=3)
    obs, _ = env.reset()
    assert obs.dtype == np.float32 and obs.shape == (1,) and obs[0] == 0
    results = [env.step(0) for _ in range(3)]
    assert [r[0][0] for r in results] == [1, 2, 3]
    assert [r[2] for r in results] == [False, False, True]
    assert all(r[1] == 1.0 and not r[3] for r in results)


def test_counting_env_can_truncate_instead_of_terminate():
    env = CountingEnv(episode_length=1, truncate=True)
    env.reset()
    _, _, terminated, truncated, _ = env.step(0)
    assert (terminated, truncated) == (False, True)


def test_runner_resets_in_the_step_that_ends_an_episode_so_every_step_is_a_transition():
    runner = runner_of(CountingEnv(3), CountingEnv(2))
    rows = run(runner, 12)
    # A transition across a reset would show up as (obs=L, next_obs=0); a real one has next_obs = obs + 1.
    assert all(next_obs == obs + 1 for _, obs, next_obs, *_ in rows)
    for env, length in ((0, 3), (1, 2)):
        mine = [(obs, nxt, term) for e, obs, nxt, term, *_ in rows if e == env]
        episode = [(float(t), float(t + 1), t + 1 == length) for t in range(length)]
        assert mine == (episode * 12)[:12]


class NextStepBackend(GymnasiumBackend):
    """Resets on the step after an episode ends, as EnvPool does (a step that only resets)."""

    same_step_reset = False

    def reset(self):
        self.done = [False] * self.num_envs
        return super().reset()

    def step(self, actions):
        rows: list[tuple[Any, ...]] = []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            if self.done[i]:
                rows.append((env.reset()[0], 0.0, False, False))
                self.done[i] = False
            else:
                stepped, reward, ended, cut, _ = env.step(action)
                rows.append((stepped, reward, ended, cut))
                self.done[i] = ended or cut
        obs, reward, terminated, truncated = (np.array(x) for x in zip(*rows))
        reward = reward.astype(np.float32)
        return obs.astype(np.float32), reward, reward, terminated, truncated, obs.astype(np.float32)


def test_runner_hides_the_reset_only_step_of_a_next_step_backend():
    runner = EnvRunner(NextStepBackend([lambda: CountingEnv(3), lambda: CountingEnv(2, truncate=True)]))
    rows = run(runner, 12)
    assert all(next_obs == obs + 1 for _, obs, next_obs, *_ in rows)
    for env, length in ((0, 3), (1, 2)):
        mine = [(obs, nxt) for e, obs, nxt, *_ in rows if e == env]
        # 12 vector steps, one of every (length + 1) spent resetting.
        assert mine == ([(float(t), float(t + 1)) for t in range(length)] * 12)[:12 - 12 // (length + 1)]
    episodes = runner.pop_episodes()
    assert sorted({(ep.env_index, ep.score, ep.length) for ep in episodes}) == [(0, 3.0, 3), (1, 2.0, 2)]
    assert len(episodes) == 12 // 4 + 12 // 3


def test_runner_final_next_obs_is_the_true_final_observation_and_episodes_are_counted():
    runner = runner_of(CountingEnv(4), CountingEnv(2, truncate=True))
    rows = run(runner, 10)
    ends = [(e, nxt, term, trunc) for e, _, nxt, term, trunc, _ in rows if term or trunc]
    assert (0, 4.0, True, False) in ends and (1, 2.0, False, True) in ends
    episodes = runner.pop_episodes()
    assert sorted({(ep.env_index, ep.score, ep.length) for ep in episodes}) == [(0, 4.0, 4), (1, 2.0, 2)]
    assert len(episodes) == len(ends)
    assert runner.pop_episodes() == []


def test_runner_keeps_raw_rewards_for_scores_while_training_rewards_are_clipped():
    runner = runner_of(SignReward(CountingEnv(3, reward=-2.5)))
    rows = run(runner, 3)
    assert [r[-1] for r in rows] == [-1.0, -1.0, -1.0]
    (episode,) = runner.pop_episodes()
    assert episode.score == pytest.approx(-7.5) and episode.length == 3


def test_make_env_runner_builds_registered_ids_with_distinct_seeds():
    with make_env_runner("CartPole-v1", 2, seed=3, training=True, backend="gymnasium") as runner:
        assert runner.observations.shape == (2, 4)
        assert not np.array_equal(runner.observations[0], runner.observations[1])
        t = runner.step(np.array([0, 1]))
        assert t.obs.shape == t.next_obs.shape == (2, 4) and t.reward.dtype == np.float32


def test_make_env_runner_rejects_bad_arguments():
    with pytest.raises(ConfigError) as e:
        make_env_runner("gorila/Counting-v0", 1, seed=0, training=True, backend="fast")
    assert e.value.field == "env_backend"
    with pytest.raises(ConfigError) as e:
        make_env_runner("gorila/Counting-v0", 0, seed=0, training=True)
    assert e.value.field == "num_envs"


def test_unknown_env_id_is_a_config_error_with_a_suggestion():
    with pytest.raises(ConfigError) as e:
        make_env("CartPol-v1", seed=0, training=True)
    assert e.value.field == "env" and "CartPole-v1" in e.value.message


def test_is_atari():
    assert is_atari("ALE/Pong-v5") and not is_atari("CartPole-v1")


def test_asking_for_envpool_for_an_id_it_lacks_is_a_config_error():
    # gorila's own fake env: EnvPool has no task for it whether it is installed or not
    with pytest.raises(ConfigError) as e:
        make_env_runner("gorila/Counting-v0", 2, seed=0, training=True, backend="envpool")
    assert e.value.field == "env_backend"


@pytest.mark.skipif(not envpool_supports("CartPole-v1"), reason="envpool is not installed (optional extra)")
def test_envpool_backend_produces_the_same_transition_format():
    runners = [make_env_runner("CartPole-v1", 3, seed=0, training=True, backend=b)
               for b in ("gymnasium", "envpool")]
    outputs = []
    for runner in runners:
        for _ in range(30):
            t = runner.step(np.zeros(3, np.int64))
        outputs.append(t)
        assert all(ep.length > 0 for ep in runner.pop_episodes())
        runner.close()
    for field in ("obs", "action", "reward", "next_obs", "terminated", "truncated", "env_index"):
        a, b = (getattr(t, field) for t in outputs)
        assert a.shape[1:] == b.shape[1:] and a.dtype == b.dtype, field


def test_evaluate_returns_unclipped_returns_after_null_op_starts():
    calls = []

    def greedy(obs_batch):
        calls.append(obs_batch.copy())
        return np.zeros(len(obs_batch), np.int64)

    returns = evaluate(greedy, "gorila/Counting-v0", episodes=4, epsilon=0.0, seed=0, noop_max=0)
    assert returns == [5.0] * 4
    # The episodes run side by side: one batched policy call per step.
    assert [c[:, 0].tolist() for c in calls] == [[t] * 4 for t in range(5)]

    calls.clear()
    returns = evaluate(greedy, "gorila/Counting-v0", episodes=20, epsilon=0.0, seed=0, noop_max=3)
    assert returns == [5.0] * 20  # no-op steps count toward the return
    decisions = np.concatenate(calls)[:, 0]
    assert 20 * 2 <= len(decisions) < 20 * 5  # ... and were not chosen by the policy
    assert (decisions == 0).sum() < 20  # some episodes began after a no-op


@pytest.fixture
def endless_env():
    """An env id whose episodes never end (no time limit, no terminal state), as MinAtar's games
    under a policy that idles somewhere safe."""
    env_id = "gorila-test/Endless-v0"
    gym.register(env_id, entry_point="gorila.envs.fake:CountingEnv", kwargs={"episode_length": 10**9})
    yield env_id
    del gym.registry[env_id]


def test_an_evaluation_episode_that_never_ends_is_cut_at_the_ale_cap_its_return_counting(endless_env):
    def greedy(obs_batch):
        return np.zeros(len(obs_batch), np.int64)

    assert evaluate(greedy, endless_env, episodes=2, epsilon=0.0, seed=0, noop_max=0) == [float(EVAL_MAX_STEPS)] * 2
    played = EvaluationEpisodes(endless_env, episodes=3, epsilon=0.0, seed=0, noop_max=2, max_steps=7)
    assert played.play(greedy) and played.returns == [7.0] * 3 and played.capped == 3  # no-ops count as steps
    shorter = EvaluationEpisodes("gorila/Counting-v0", episodes=3, epsilon=0.0, seed=0, max_steps=7)
    assert shorter.play(greedy) and shorter.returns == [5.0] * 3 and shorter.capped == 0  # ended on their own
    assert type(played.capped) is int  # it goes into summary.json


def test_evaluate_with_epsilon_one_never_asks_the_policy():
    def never(obs_batch):
        raise AssertionError("policy called")

    assert evaluate(never, "gorila/Counting-v0", episodes=2, epsilon=1.0, seed=1, noop_max=0) == [5.0, 5.0]


def test_human_normalized_uses_the_nature_dqn_table_gorila_normalized_against():
    # Mnih et al. 2015, Extended Data Table 2: Pong random -20.7, human 9.3; Breakout 1.7 and 31.8.
    assert human_normalized("ALE/Pong-v5", 9.3) == pytest.approx(100.0)
    assert human_normalized("Pong", -20.7) == pytest.approx(0.0)
    assert human_normalized("BreakoutNoFrameskip-v4", 31.8) == pytest.approx(100.0)
    assert "Nature" in NORMALIZATION_SOURCE
    assert human_normalized("ALE/SpaceInvaders-v5", 148.0) == pytest.approx(0.0)
    for game in ("Seaquest", "BeamRider", "Enduro", "Qbert", "space_invaders"):
        assert np.isfinite(human_normalized(game, 1000.0))
    with pytest.raises(ConfigError) as e:
        human_normalized("ALE/NotAGame-v5", 1.0)
    assert e.value.field == "env"


def test_dqn_normalized_puts_random_play_at_0_and_nature_dqn_at_100():
    # Extended Data Table 2's DQN column: Breakout 401.2, Pong 18.9; its last column, DQN as a
    # percentage of human, follows from the same three numbers (Breakout 1327 %, Pong 132 %).
    assert dqn_normalized("ALE/Breakout-v5", 401.2) == pytest.approx(100.0)
    assert dqn_normalized("Breakout", 1.7) == pytest.approx(0.0)
    assert dqn_normalized("ALE/Pong-v5", -0.9) == pytest.approx(50.0)
    assert round(human_normalized("Breakout", 401.2)) == 1327 and round(human_normalized("Pong", 18.9)) == 132
    assert np.isnan(dqn_normalized("MontezumaRevenge", 100.0))  # DQN scored 0, as random play did
    for game in ("Seaquest", "BeamRider", "VideoPinball", "UpNDown"):
        assert np.isfinite(dqn_normalized(game, 1000.0))


def test_an_evaluation_played_in_slices_scores_as_one_played_whole():
    calls = []

    def greedy(obs_batch):
        calls.append(len(obs_batch))
        return np.zeros(len(obs_batch), np.int64)

    whole = evaluate(greedy, "gorila/Counting-v0", episodes=6, epsilon=0.0, seed=4, noop_max=3)
    whole_calls, calls = calls, []
    ticks = itertools.count()
    played = EvaluationEpisodes("gorila/Counting-v0", episodes=6, epsilon=0.0, seed=4, noop_max=3)
    slices = 1
    while not played.play(greedy, seconds=0.5, clock=lambda: next(ticks)):  # a tick per read: one env step a slice
        slices += 1
    played.close()
    assert played.returns == whole
    assert calls == whole_calls and len(calls) > 1  # the same rounds, the same batches, however sliced
    assert slices == 6 * 5  # every env step of the 6 five-step episodes (no-ops included) a slice of its own


def test_a_video_needs_an_env_that_renders_frames(tmp_path):
    with pytest.raises(ConfigError) as refused:
        EvaluationEpisodes("gorila/Counting-v0", episodes=1, epsilon=0.0, seed=0, video_dir=tmp_path)
    assert refused.value.field == "video" and "rgb_array" in refused.value.message
