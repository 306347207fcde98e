"""The names of the DQN losses and bootstrap targets (:mod:`gorila.losses.dqn`), without torch:
the config that offers them as ``--loss`` and ``--target`` choices is read before torch is loaded."""

LOSS_KINDS = ("huber", "mse")
TARGET_KINDS = ("double", "max")
