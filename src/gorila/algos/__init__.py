"""Algorithms assembled from gorila components: one subpackage (config, networks, builder) each.

``rl_config`` holds what the RL algorithms share (``RLConfig``: env, budget, evaluation, devices,
inference); ``kit`` the parts of a plan their builders compose (the policy evaluation, the inference
server, the Q-learner and Q-actors, actors → replay → learners).
"""
