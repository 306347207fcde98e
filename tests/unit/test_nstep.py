"""n-step returns built at the actor: windows, episode ends inside them, and the order rows leave in."""

import numpy as np
import pytest

from gorila.actors.nstep import NStep
from gorila.types import Transitions

GAMMA = 0.5


def step(env, t, reward, terminated=False, truncated=False, version=0):
    """One step of env ``env``: obs = t, next_obs = t + 1."""
    return Transitions(np.array([[t]], np.float32), np.array([t % 2]), np.array([reward], np.float32),
                       np.array([[t + 1]], np.float32), np.array([terminated]), np.array([truncated]),
                       np.array([env]), policy_version=np.array([version]))


def rows_of(nstep, steps):
    out = [nstep.add(s) for s in steps]
    return Transitions.concatenate([r for r in out if r is not None])


def test_a_full_window_sums_n_discounted_rewards_and_bootstraps_n_steps_ahead():
    rows = rows_of(NStep(3, GAMMA), [step(0, t, reward=float(t + 1), version=10 + t) for t in range(5)])
    assert rows.obs[:, 0].tolist() == [0, 1, 2]            # rows leave once their window is full
    assert rows.next_obs[:, 0].tolist() == [3, 4, 5]
    assert rows.reward.tolist() == [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3 + 0.25 * 4, 3 + 0.5 * 4 + 0.25 * 5]
    assert rows.discount.tolist() == [GAMMA ** 3] * 3 and rows.steps.tolist() == [3, 3, 3]
    assert rows.policy_version.tolist() == [10, 11, 12]   # the version that chose the row's first action


def test_a_termination_inside_the_window_flushes_it_without_bootstrap():
    rows = rows_of(NStep(3, GAMMA),
                   [step(0, 0, 1.0), step(0, 1, 1.0), step(0, 2, 1.0), step(0, 3, 1.0, terminated=True)])
    assert rows.obs[:, 0].tolist() == [0, 1, 2, 3]
    assert rows.steps.tolist() == [3, 3, 2, 1]
    assert rows.reward.tolist() == [1.75, 1.75, 1.5, 1.0]
    assert rows.discount.tolist() == [GAMMA ** 3, 0.0, 0.0, 0.0]  # rows that reach the end bootstrap from nothing
    assert rows.next_obs[:, 0].tolist() == [3, 4, 4, 4]


def test_a_truncation_inside_the_window_bootstraps_from_where_the_episode_was_cut():
    rows = rows_of(NStep(3, GAMMA), [step(0, 0, 1.0), step(0, 1, 1.0, truncated=True)])
    assert rows.steps.tolist() == [2, 1] and rows.reward.tolist() == [1.5, 1.0]
    assert rows.discount.tolist() == [GAMMA ** 2, GAMMA]   # a time limit is not a terminal state
    assert rows.next_obs[:, 0].tolist() == [2, 2] and not rows.terminated.any() and rows.truncated.all()


def test_environments_keep_their_own_windows_and_a_new_episode_starts_clean():
    nstep = NStep(2, GAMMA)
    steps = [step(0, 0, 1.0), step(1, 100, 5.0), step(0, 1, 1.0, terminated=True), step(0, 7, 2.0),
             step(1, 101, 5.0), step(0, 8, 2.0)]
    rows = rows_of(nstep, steps)
    by_env = {e: rows.obs[rows.env_index == e, 0].tolist() for e in (0, 1)}
    assert by_env == {0: [0, 1, 7], 1: [100]}             # each env's rows in time order
    assert rows.reward[rows.obs[:, 0] == 7][0] == pytest.approx(2.0 + 0.5 * 2.0)  # nothing of the old episode


def test_one_step_rows_leave_at_once():
    rows = NStep(1, 0.9).add(step(0, 0, 1.0, terminated=True))
    assert rows is not None and rows.discount is not None and rows.steps is not None
    assert rows.discount.tolist() == [0.0] and rows.steps.tolist() == [1] and rows.reward.tolist() == [1.0]


def test_one_row_per_env_in_increasing_order_or_a_value_error():
    t = Transitions(np.zeros((2, 1), np.float32), np.zeros(2, np.int64), np.zeros(2, np.float32),
                    np.zeros((2, 1), np.float32), np.zeros(2, bool), np.zeros(2, bool), np.array([1, 1]))
    with pytest.raises(ValueError, match="one step per environment"):
        NStep(3, GAMMA).add(t)


def test_a_version_given_to_add_tags_every_row():
    nstep = NStep(2, GAMMA)
    nstep.add(step(0, 0, 1.0, version=3), policy_version=7)
    rows = nstep.add(step(0, 1, 1.0, version=3), policy_version=8)
    assert rows is not None and rows.policy_version is not None
    assert rows.policy_version.tolist() == [7]


def test_rows_equal_their_definition_over_random_episodes_of_several_envs():
    """Each env's window kept as a Python list, rows built by the formulas above, in NStep's order."""
    rng = np.random.default_rng(1)
    for n in (1, 2, 4):
        nstep, expected, got = NStep(n, 0.9), [], []
        windows: dict[int, list] = {}
        for s in range(400):
            envs = np.flatnonzero(rng.random(5) < 0.8)  # some envs skip a step (EnvPool's reset steps)
            k = len(envs)
            obs = rng.random((k, 1)).astype(np.float32)
            t = Transitions(obs, rng.integers(3, size=k), rng.standard_normal(k).astype(np.float32), obs + 1,
                            rng.random(k) < 0.1, rng.random(k) < 0.05, envs,
                            policy_version=np.full(k, s, np.int64))
            dropped = [int(e) for e in envs if rng.random() < 0.02]
            for env in dropped:
                nstep.drop(env)
                windows.pop(env, None)
            for i, env in enumerate(envs.tolist()):
                window = windows.setdefault(env, [])
                window.append((t.obs[i, 0], t.action[i], float(t.reward[i]), s))
                ended = bool(t.terminated[i] or t.truncated[i])
                while window and (ended or len(window) == n):
                    m = len(window)
                    ret = sum(0.9 ** j * r for j, (_, _, r, _) in enumerate(window))
                    discount = 0.0 if t.terminated[i] else 0.9 ** m
                    o, a, _, v = window.pop(0)
                    expected.append((o, a, np.float32(ret), t.next_obs[i, 0], m, np.float32(discount), env, v))
                    if not ended:
                        break
            rows = nstep.add(t)
            if rows is not None:
                assert rows.steps is not None and rows.discount is not None and rows.policy_version is not None
                got += list(zip(rows.obs[:, 0], rows.action, rows.reward, rows.next_obs[:, 0], rows.steps,
                                rows.discount, rows.env_index, rows.policy_version))
        assert len(got) == len(expected) > 300
        assert [tuple(map(float, r)) for r in got] == [tuple(map(float, r)) for r in expected]


def test_one_step_rows_share_read_only_columns_that_follow_the_version_and_the_row_count():
    nstep, envs = NStep(1, GAMMA), np.arange(3)
    envs.flags.writeable = False  # as the runner's rows of a step in which every env stepped

    def add(version, terminated=(False, False, False), env_index=envs):
        k = len(env_index)
        return nstep.add(Transitions(np.zeros((k, 1), np.float32), np.zeros(k, np.int64), np.ones(k, np.float32),
                                     np.zeros((k, 1), np.float32), np.array(terminated[:k]), np.zeros(k, bool),
                                     env_index), policy_version=version)

    first, second = add(7), add(7)
    assert second.policy_version is first.policy_version and not first.policy_version.flags.writeable
    assert add(8).policy_version.tolist() == [8, 8, 8] and first.policy_version.tolist() == [7, 7, 7]
    ended = add(8, terminated=(False, True, False))
    assert ended.discount.tolist() == [GAMMA, 0.0, GAMMA] and add(8).discount.tolist() == [GAMMA] * 3
    assert add(8, env_index=np.array([0, 2])).steps.tolist() == [1, 1]
    backwards = np.array([2, 0])
    backwards.flags.writeable = False
    with pytest.raises(ValueError, match="one step per environment"):
        add(8, env_index=backwards)
