"""Rows 10 and 11 of the fault matrix: environments that raise or return bad observations are
rebuilt, their partial episodes never reach replay, failures are counted, and too many fail the actor."""

import numpy as np
import pytest

from gorila.actors.nstep import NStep
from gorila.envs.fake import CountingEnv
from gorila.envs.faults import EnvFailures
from gorila.envs.vector import EnvRunner, GymnasiumBackend
from gorila.errors import EnvFailedError


class Faulty(CountingEnv):
    """A CountingEnv that goes wrong at step ``at`` of its ``fail_episodes``-th episodes (1-based,
    counted over every copy built from the same ``built`` list): it raises, or returns an
    observation of another shape, or one holding NaN, or a NaN reward."""

    def __init__(self, built, at=3, how="raise", fail_episodes=(1,), where="step"):
        super().__init__(episode_length=5)
        built.append(self)
        self.built, self.at, self.how, self.where = built, at, how, where
        self.fail_episodes, self.episode = fail_episodes, 0

    def _failing(self):
        return len(self.built) in self.fail_episodes or self.built.index(self) + 1 in self.fail_episodes

    def reset(self, **kw):
        self.episode += 1
        if self.where == "reset" and self._failing() and self.episode > 1:
            raise RuntimeError("emulator lost")
        return super().reset(**kw)

    def step(self, action):
        obs, r, term, trunc, info = super().step(action)
        if self.where == "step" and self._t == self.at and self.episode == 1 and self._failing():
            if self.how == "raise":
                raise RuntimeError("emulator lost")
            if self.how == "nan_reward":
                return obs, float("nan"), term, trunc, info
            obs = np.zeros(3, np.float32) if self.how == "shape" else np.array([np.nan], np.float32)
        return obs, r, term, trunc, info


def runner(built, failures=None, **faulty):
    return EnvRunner(GymnasiumBackend([lambda: CountingEnv(5), lambda: Faulty(built, **faulty)], "Faulty-v0",
                                      failures))


def play(r, nstep, steps):
    rows = []
    for _ in range(steps):
        t = r.step(np.zeros(2, np.int64))
        for env in r.dropped:
            nstep.drop(env)
        out = nstep.add(t)
        if out is not None:
            rows.append(out)
    return rows


@pytest.mark.parametrize("how", ["raise", "shape", "nan", "nan_reward"])
def test_row10_row11_a_failing_env_is_rebuilt_and_its_partial_episode_never_reaches_replay(how):
    """Row 10 (env raises in step) and row 11 (wrong shape, NaN observation, NaN reward): the env is
    rebuilt, the episode it was in is dropped (no row of it, no episode counted), the failure
    counted; the other env and the rebuilt one go on."""
    built: list[Faulty] = []
    r = runner(built, how=how)
    rows = play(r, NStep(n=3, gamma=0.5), 12)
    assert len(built) == 2 and r.env_failures == 1
    from_faulty = [row for t in rows for row in zip(t.obs[:, 0], t.next_obs[:, 0], t.env_index) if row[2] == 1]
    # The first episode of env 1 broke at step 3: none of its steps 0..2 reached a row; its rebuilt
    # copy's episode (steps 0..4, then the next one) did.
    starts = [int(obs) for obs, _, _ in from_faulty]
    assert starts[:5] == [0, 1, 2, 3, 4] and len(starts) >= 5
    assert all(np.isfinite(t.obs).all() and t.obs.shape[1:] == (1,) and np.isfinite(t.reward).all() for t in rows)
    # Env 0's two episodes (steps 1-5, 6-10) and, in between, the rebuilt env 1's first (steps 4-8):
    # five steps long, the three dropped ones not counted.
    assert [(e.env_index, e.length) for e in r.pop_episodes()] == [(0, 5), (1, 5), (0, 5)]


def test_row11_the_failure_names_the_env_id_and_the_shape():
    """Row 11: what is recorded (and raised once failures add up) names the env id and the shape."""
    built: list[Faulty] = []
    failures = EnvFailures(limit=1)
    with pytest.raises(EnvFailedError, match=r"the last: Faulty-v0 env 1 returned an observation of shape \(3,\); "
                                             r"its observation_space has \(1,\)"):
        play(runner(built, failures, how="shape"), NStep(1, 0.9), 5)


def test_row10_an_env_that_keeps_failing_fails_the_actor():
    """Row 10: R failures within the window (here in reset, on every episode) raise EnvFailedError,
    so the actor's process fails and is restarted like any crashed worker."""
    built: list[Faulty] = []
    r = runner(built, EnvFailures(limit=3, window_steps=100), where="reset", fail_episodes=range(1, 100))
    with pytest.raises(EnvFailedError, match=r"3 environment failures within 100 steps; the last: "
                                             r"Faulty-v0 env 1: RuntimeError in reset: emulator lost"):
        play(r, NStep(1, 0.9), 40)


def test_failures_outside_the_window_do_not_add_up():
    failures = EnvFailures(limit=2, window_steps=10)
    failures.record("a", step=1)
    failures.record("b", step=11)
    with pytest.raises(EnvFailedError, match="the last: c"):
        failures.record("c", step=15)
    assert failures.count == 3


def test_row11_a_nan_reward_is_recorded_naming_the_env():
    """Issue 32 item 4: a NaN reward is an env fault like a bad observation, named in the failure."""
    built: list[Faulty] = []
    with pytest.raises(EnvFailedError, match=r"the last: Faulty-v0 env 1 returned a reward of nan$"):
        play(runner(built, EnvFailures(limit=1), how="nan_reward"), NStep(1, 0.9), 5)
