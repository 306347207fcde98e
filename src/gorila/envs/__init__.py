"""Environments: building them by id, stepping several at once, evaluation, and a test fake.

Importing this package registers ``gorila/Counting-v0`` (:class:`CountingEnv`, 5 steps per
episode), ``gorila/Flaky-v0`` (:class:`~gorila.envs.fake.FlakyEnv`, one that fails now and then)
``gorila/Hang-v0`` (:class:`~gorila.envs.fake.HangingEnv`, one whose process's 20th step never returns),
``gorila/Slow-v0`` (a :class:`CountingEnv` whose every step takes 0.2 s) and ``gorila/Slowing-v0``
(:class:`~gorila.envs.fake.SlowingEnv`, whose process's steps take 0.1 s after its first 2,000)
so that code which takes an id can be exercised without a real game; and two partially observed
tasks for recurrent policies (:mod:`gorila.envs.memory`): ``gorila/StatelessCartPole-v1`` (CartPole
without its velocities) and ``gorila/MemoryLength-v0`` (recall a cue seen 10 steps earlier).
"""

import gymnasium as gym

from gorila.envs.evaluation import dqn_normalized, evaluate, human_normalized
from gorila.envs.fake import CountingEnv
from gorila.envs.make import env_spaces, is_atari, is_minatar, make_env
from gorila.envs.vector import EnvRunner, make_env_runner

if "gorila/Counting-v0" not in gym.registry:
    gym.register("gorila/Counting-v0", entry_point="gorila.envs.fake:CountingEnv")
if "gorila/Flaky-v0" not in gym.registry:
    gym.register("gorila/Flaky-v0", entry_point="gorila.envs.fake:FlakyEnv")
if "gorila/Hang-v0" not in gym.registry:
    gym.register("gorila/Hang-v0", entry_point="gorila.envs.fake:HangingEnv")
if "gorila/Slow-v0" not in gym.registry:
    gym.register("gorila/Slow-v0", entry_point="gorila.envs.fake:CountingEnv", kwargs={"step_s": 0.2})
if "gorila/Slowing-v0" not in gym.registry:
    gym.register("gorila/Slowing-v0", entry_point="gorila.envs.fake:SlowingEnv")
if "gorila/StatelessCartPole-v1" not in gym.registry:
    gym.register("gorila/StatelessCartPole-v1", entry_point="gorila.envs.memory:StatelessCartPole",
                 max_episode_steps=500, reward_threshold=475.0)
if "gorila/MemoryLength-v0" not in gym.registry:
    gym.register("gorila/MemoryLength-v0", entry_point="gorila.envs.memory:MemoryLength", reward_threshold=1.0)

__all__ = ["CountingEnv", "EnvRunner", "dqn_normalized", "env_spaces", "evaluate",
           "human_normalized", "is_atari", "is_minatar", "make_env", "make_env_runner"]
