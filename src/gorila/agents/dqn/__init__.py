"""Gorila DQN: bundles or actors + global replay + learners, on the parameter server."""
