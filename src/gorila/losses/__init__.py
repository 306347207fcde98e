"""The losses and targets several algorithms share, as pure functions of tensors (the TD loss of
the Q-learners, V-trace's targets); an algorithm's own loss lives in its folder of :mod:`gorila.agents`."""
