"""Gorila DQN: actors, learners, local or global replay, on the parameter server."""
