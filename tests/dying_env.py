"""``dying_env:Dying-v0``, for a test that runs the ``gorila`` command on Ray: CartPole whose
process dies (``os._exit``) at its 300th step, once in all, the first process there writing the
file ``$GORILA_TEST_DYING_MARK`` as it goes; a test names the module on the command line
(``--env dying_env:Dying-v0``) with this directory on ``PYTHONPATH``."""

import os

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

DIES_AT = 300


class DyingCartPole(CartPoleEnv):
    """CartPole, but for the one process that dies at its :data:`DIES_AT`-th step."""

    steps_in_process = 0

    def step(self, action):
        DyingCartPole.steps_in_process += 1
        if DyingCartPole.steps_in_process == DIES_AT:
            try:  # O_EXCL: one process in all dies, the first to get here
                os.close(os.open(os.environ["GORILA_TEST_DYING_MARK"], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return super().step(action)
            os._exit(1)
        return super().step(action)


gym.register("Dying-v0", entry_point=DyingCartPole, max_episode_steps=500)
