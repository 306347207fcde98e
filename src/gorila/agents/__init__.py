"""The algorithms, one folder each (its config, builder and what no other algorithm uses), and
what their builders share.

``rl_config`` holds what the RL algorithms share (``RLConfig``: env, budget, evaluation, devices,
inference); ``kit`` the parts of a plan their builders compose (the policy evaluation, the inference
server, the Q-learner and Q-actors, actors → replay → learners); ``registry`` the algorithms
``--algo`` knows; ``presets`` the settings a run gets unless the user gave them.
"""
