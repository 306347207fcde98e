"""What the evaluation tests share: envs registered under a test id, a factory of a given env, and a
policy that keeps what it is shown (always action 0)."""

from collections.abc import Callable

import gymnasium as gym
import numpy as np


def registered(name: str, entry_point, **kwargs) -> str:
    """``gorila-test/NAME-v0``, registered once with ``entry_point`` and ``kwargs``."""
    env_id = f"gorila-test/{name}-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=entry_point, kwargs=kwargs)
    return env_id


def made(env: gym.Env) -> Callable[[], gym.Env]:
    """A factory that hands out ``env`` itself (an env runner's, for an env the test holds)."""
    return lambda: env


class Watching:
    """A policy (always action 0) that keeps every observation it is shown."""

    def __init__(self):
        self.seen = []

    def __call__(self, obs):
        self.seen.append(np.array(obs))
        return np.zeros(len(obs), np.int64)
